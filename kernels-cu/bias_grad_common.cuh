// The body of the bias-activation backward, shared by its two entries' families (bias_grad.cu,
// bias_grad_product.cu): each is a module of its own, so that NVRTC builds them side by side
// (a cold start's first step waits for both). Include-guarded: the whole op set has it once.
#ifndef RNN_BIAS_GRAD_COMMON_CUH
#define RNN_BIAS_GRAD_COMMON_CUH

// Column sums (geometry C) of g = dy * act'(z) over a rows x cols matrix, with g also stored
// in dz when `write_dz` (dz may be dy): the backward of bias_act_forward, the bias gradient and
// the pre-activation gradient in one pass. `sum_rows` is this kernel with act = identity and
// no dz. Block (32, 8) over a strip of 32 column groups and a chunk of `chunk_rows` rows
// (blockIdx.y); with `quad` a group is 4 columns moved as float4s (every pointer 16-byte
// aligned, cols % 4 == 0), else one column. threadIdx.y strides the chunk's rows, BAB_ROWS of
// them loaded before any is stored, so several loads are in flight while dz may alias dy. With
// one chunk the block writes `out`; otherwise it stores its column sums in
// `part[chunk * cols + col]` and the last block of the strip to arrive (one ticket per strip,
// geometry L) adds the chunks in order.
#define BAB_ROWS 4

// A column group's values: one float, or a float4 of 4 columns.
template <int W> struct BabVec { typedef float T; };
template <> struct BabVec<4> { typedef float4 T; };

// The upstream gradient of rows r, r + step, ... (BAB_ROWS of them, those below r1) of column
// group `col`: read from dy, or with pk > 0 formed as the product of those rows of pg (rows x
// pk) and columns col.. of pw (pk x cols), the input gradient of a thin layer after this one
// (bias_act_backward_product), each in k order. The rows share each load of pw, so one loop
// over k keeps BAB_ROWS independent sums in flight.
template <int W>
__device__ __forceinline__ void bab_dy(const float* dy, const float* pg, const float* pw,
                                       uint pk, u64 r, uint step, u64 r1, u64 col, uint cols,
                                       typename BabVec<W>::T (&g)[BAB_ROWS]) {
    typedef typename BabVec<W>::T V;
    if (pk == 0) {
#pragma unroll
        for (int u = 0; u < BAB_ROWS; ++u) {
            const u64 rr = r + (u64)step * u;
            if (rr < r1) g[u] = *reinterpret_cast<const V*>(dy + rr * cols + col);
        }
        return;
    }
    // Rows past r1 multiply row r (r < r1) instead, so the loop has no branch; their sums are
    // never stored.
    const float* gr[BAB_ROWS];
    float o[BAB_ROWS][W];
#pragma unroll
    for (int u = 0; u < BAB_ROWS; ++u) {
        const u64 rr = r + (u64)step * u;
        gr[u] = pg + (rr < r1 ? rr : r) * pk;
#pragma unroll
        for (int q = 0; q < W; ++q) o[u][q] = 0.0f;
    }
    // Unrolled twice (two rows of pw in flight): four times took 90 registers, two blocks an SM.
#pragma unroll 2
    for (uint j = 0; j < pk; ++j) {
        const V wj = *reinterpret_cast<const V*>(pw + (u64)j * cols + col);
        const float* wi = reinterpret_cast<const float*>(&wj);
#pragma unroll
        for (int u = 0; u < BAB_ROWS; ++u) {
            const float gj = gr[u][j];
#pragma unroll
            for (int q = 0; q < W; ++q) o[u][q] = fmaf(gj, wi[q], o[u][q]);
        }
    }
#pragma unroll
    for (int u = 0; u < BAB_ROWS; ++u) {
        float* gu = reinterpret_cast<float*>(&g[u]);
#pragma unroll
        for (int q = 0; q < W; ++q) gu[q] = o[u][q];
    }
}

// act'(a) of a column group (stream.cuh's out-of-line activations).
__device__ __forceinline__ float bab_act_grad(float a, uint act, float p) {
    return rnn_act_grad1(a, a, act, p);
}
__device__ __forceinline__ float4 bab_act_grad(float4 a, uint act, float p) {
    return rnn_act_grad4(a, a, act, p);
}

// Rows first, first + step, ... below r1 of column group `col`. With ACT the gradient is
// multiplied by act'(a) of the runtime activation `act`; without, `a` is never read (identity,
// and the plain column sums of sum_rows).
template <bool ACT, int W>
__device__ __forceinline__ void bab_rows(const float* dy, const float* pg, const float* pw,
                                         uint pk, const float* act_in, float* dz,
                                         bool write_dz, uint act, float p, u64 first,
                                         uint step, u64 r1, u64 col, uint cols,
                                         float (&s)[4]) {
    typedef typename BabVec<W>::T V;
    for (u64 r = first; r < r1; r += (u64)step * BAB_ROWS) {
        V g[BAB_ROWS], a[BAB_ROWS];
        if (ACT)
#pragma unroll
            for (int u = 0; u < BAB_ROWS; ++u) {
                const u64 rr = r + (u64)step * u;
                if (rr < r1) a[u] = *reinterpret_cast<const V*>(act_in + rr * cols + col);
            }
        bab_dy<W>(dy, pg, pw, pk, r, step, r1, col, cols, g);
#pragma unroll
        for (int u = 0; u < BAB_ROWS; ++u) {
            const u64 rr = r + (u64)step * u;
            if (rr >= r1) continue;
            // `a` is z for gelu and leaky relu, y otherwise (act_grad reads only that one).
            V d;
            if (ACT) d = bab_act_grad(a[u], act, p);
            const float* gi = reinterpret_cast<const float*>(&g[u]);
            const float* di = reinterpret_cast<const float*>(&d);
            V out;
            float* oi = reinterpret_cast<float*>(&out);
#pragma unroll
            for (int q = 0; q < W; ++q) {
                oi[q] = ACT ? gi[q] * di[q] : gi[q];
                s[q] += oi[q];
            }
            if (write_dz) *reinterpret_cast<V*>(dz + rr * cols + col) = out;
        }
    }
}

// The body of both entries: dy from `dy`, or with pk > 0 from the product of pg and pw.
__device__ __forceinline__ void bab_body(const float* dy, const float* pg, const float* pw,
                                         uint pk, const float* act_in, float* dz, float* out,
                                         float* part, uint* tickets, uint rows, uint cols,
                                         uint chunk_rows, uint act, uint write_dz, uint quad,
                                         float act_param, float beta) {
    __shared__ float sh[8][4 * 32 + 1];
    const uint w = quad ? 4 : 1;
    // This thread's column group in the final sums; `col` below is the one it streams.
    const u64 own_col = ((u64)blockIdx.x * 32 + threadIdx.x) * w;
    // Fewer than 32 single columns: the lanes fold into `fold` rows of `cols` lanes, so a warp
    // covers `fold` rows a step instead of leaving most lanes idle.
    const uint fold = (!quad && cols < 32) ? 32 / cols : 1;
    const u64 col = fold > 1 ? (threadIdx.x < fold * cols ? threadIdx.x % cols : cols) : own_col;
    const u64 r0 = (u64)blockIdx.y * chunk_rows;
    const u64 r1 = min((u64)rows, r0 + chunk_rows);
    const u64 first = r0 + (u64)threadIdx.y * fold + (fold > 1 ? threadIdx.x / cols : 0);
    float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    if (col < cols) {
        // Unknown codes act as identity, as in act_grad.
        const bool id = act == ACT_IDENTITY || act > ACT_LEAKY;
#define RNN_BAB_ROWS(ACT, W, STEP)                                                            \
    bab_rows<ACT, W>(dy, pg, pw, pk, act_in, dz, write_dz, act, act_param, first, STEP, r1, \
                     col, cols, s)
        if (quad) {
            if (id) RNN_BAB_ROWS(false, 4, 8);
            else RNN_BAB_ROWS(true, 4, 8);
        } else {
            if (id) RNN_BAB_ROWS(false, 1, 8 * fold);
            else RNN_BAB_ROWS(true, 1, 8 * fold);
        }
#undef RNN_BAB_ROWS
    }
    // Thread e < 32 w of the block owns column `strip + e` (strip = 32 w blockIdx.x) in what
    // follows: it adds the 8 rows' sums of it in row order.
    const uint e = threadIdx.y * 32 + threadIdx.x;
    const u64 strip = (u64)blockIdx.x * 32 * w;
#pragma unroll
    for (int q = 0; q < 4; ++q)
        if (q < (int)w) sh[threadIdx.y][threadIdx.x * w + q] = s[q];
    __syncthreads();
    const bool owner = e < 32 * w && strip + e < cols;
    float t = 0.0f;
    if (owner)
        for (uint j = 0; j < 8; ++j)
            for (uint q = 0; q < fold; ++q) t += sh[j][e + q * cols];
    if (gridDim.y == 1) {
        if (owner) out[strip + e] = (beta == 0.0f) ? t : beta * out[strip + e] + t;
        return;
    }
    if (owner) {
        part[(u64)blockIdx.y * cols + strip + e] = t;
        __threadfence();
    }
    if (!rnn_last_arrival(tickets + blockIdx.x, gridDim.y)) return;
    // Thread (x, y) adds chunks y, y + 8, ... of its column group; the 8 sums are then added
    // in y order.
    float u[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    if (own_col < cols)
#pragma unroll 4
        for (uint j = threadIdx.y; j < gridDim.y; j += 8)
#pragma unroll
            for (int q = 0; q < 4; ++q)
                if (q < (int)w) u[q] += rnn_load_coherent(part + (u64)j * cols + own_col + q);
    __syncthreads();  // every owner has read sh above
#pragma unroll
    for (int q = 0; q < 4; ++q)
        if (q < (int)w) sh[threadIdx.y][threadIdx.x * w + q] = u[q];
    __syncthreads();
    if (owner) {
        float v = 0.0f;
        for (uint j = 0; j < 8; ++j) v += sh[j][e];
        out[strip + e] = (beta == 0.0f) ? v : beta * out[strip + e] + v;
    }
}

#endif  // RNN_BIAS_GRAD_COMMON_CUH
