// Row kernels (geometry R: one block per row, grid-stride over rows), column sums (C) and the
// two-pass reductions (P).

// Row and column counters are 64-bit so that `+= stride` cannot wrap for sizes near 2^32.
#define RNN_ROW_LOOP(row, rows) \
    for (u64 row = blockIdx.x; row < (u64)(rows); row += gridDim.x)
#define RNN_COL_LOOP(c, cols) for (u64 c = threadIdx.x; c < (u64)(cols); c += blockDim.x)

// softmax (LOG false) or log_softmax (LOG true) of each row: one pass for the max, one for
// the sum of exp(x - max), one to write.
template <bool LOG>
__device__ __forceinline__ void softmax_rows(const float* x_base, u64 x_off, float* y_base,
                                             u64 y_off, uint rows, uint cols) {
    __shared__ float sh[RNN_MAX_WARPS];
    RNN_ROW_LOOP(row, rows) {
        const float* x = x_base + x_off + (u64)row * cols;
        float* y = y_base + y_off + (u64)row * cols;
        float mx = -RNN_INF;
        RNN_COL_LOOP(c, cols) mx = fmaxf(mx, x[c]);
        mx = block_reduce_max(mx, sh);
        float s = 0.0f;
        RNN_COL_LOOP(c, cols) s += expf(x[c] - mx);
        s = block_reduce_sum(s, sh);
        if (LOG) {
            const float lse = mx + logf(s);
            RNN_COL_LOOP(c, cols) y[c] = x[c] - lse;
        } else {
            const float inv = 1.0f / s;
            RNN_COL_LOOP(c, cols) y[c] = expf(x[c] - mx) * inv;
        }
    }
}

#ifndef RNN_TIER0_COPIES  // not among tier 0's copies (kernel.rs TIER0_COPIES)
extern "C" __global__ void softmax(const float* x_base, u64 x_off, float* y_base, u64 y_off,
                                   uint rows, uint cols) {
    softmax_rows<false>(x_base, x_off, y_base, y_off, rows, cols);
}

extern "C" __global__ void log_softmax(const float* x_base, u64 x_off, float* y_base, u64 y_off,
                                       uint rows, uint cols) {
    softmax_rows<true>(x_base, x_off, y_base, y_off, rows, cols);
}
#endif

// Adds this block's partial `(a, b)` to the launch totals `totals[0] += sum a`,
// `totals[1] += sum b` (b only when `two`) through the last-arrival reduction (geometry L):
// partials go to `part[2 * block]`, and the last block sums them in block order. `a`/`b` are
// the block's values in thread 0.
__device__ __forceinline__ void rnn_add_totals(float a, float b, bool two, float* totals,
                                               float* part, uint* ticket) {
    __shared__ float sh[RNN_MAX_WARPS];
    if (threadIdx.x == 0) {
        part[2 * blockIdx.x] = a;
        part[2 * blockIdx.x + 1] = b;
        __threadfence();
    }
    if (!rnn_last_arrival(ticket, gridDim.x)) return;
    float sa = 0.0f, sb = 0.0f;
    for (uint j = threadIdx.x; j < gridDim.x; j += blockDim.x) {
        sa += rnn_load_coherent(part + 2 * j);
        sb += rnn_load_coherent(part + 2 * j + 1);
    }
    sa = block_reduce_sum(sa, sh);
    sb = block_reduce_sum(sb, sh);
    if (threadIdx.x == 0) {
        totals[0] += sa;
        if (two) totals[1] += sb;
    }
}

// Columns a lane of softmax_xent keeps in registers: rows of up to XENT_SLOTS warps' width of
// classes (128 on CUDA) are read from memory once and each exponential computed once; wider
// rows take three passes over the row (L1 hits after the first).
#define XENT_SLOTS 4

// One row of softmax_xent on one warp (see the kernel): its gradient stored, its loss and
// correctness returned in lane 0's `loss`/`correct`. CACHED (cols <= XENT_SLOTS * WARP_SIZE):
// lane l's columns l, l + WARP_SIZE, ... held in registers. Either way each lane visits its
// columns in the same order and computes the same values, so the results do not depend on it.
template <bool CACHED>
__device__ __forceinline__ void xent_row(const float* x, float* dx, uint cols, uint l,
                                         float grad_scale, uint lane, float& loss,
                                         float& correct) {
    const bool valid = rnn_valid_index(l, cols);
    const int label = valid ? (int)l : -1;
    float xv[XENT_SLOTS], ev[XENT_SLOTS];
    float mx = -RNN_INF;
    int arg = 0x7fffffff;
    if (CACHED) {
#pragma unroll
        for (uint j = 0; j < XENT_SLOTS; ++j) {
            const uint c = lane + j * WARP_SIZE;
            xv[j] = c < cols ? x[c] : 0.0f;
        }
#pragma unroll
        for (uint j = 0; j < XENT_SLOTS; ++j) {
            const uint c = lane + j * WARP_SIZE;
            if (c < cols && (xv[j] > mx || (xv[j] == mx && (int)c < arg))) {
                mx = xv[j];
                arg = (int)c;
            }
        }
    } else {
        for (u64 c = lane; c < cols; c += WARP_SIZE) {
            const float v = x[c];
            if (v > mx || (v == mx && (int)c < arg)) {
                mx = v;
                arg = (int)c;
            }
        }
    }
    warp_reduce_argmax(mx, arg);
    // The other classes' share is summed apart: p_label - 1 = -others / s, and a confident
    // row's loss is log1p(others). Both cancel when formed from p_label.
    float s = 0.0f, others = 0.0f;
    if (CACHED) {
#pragma unroll
        for (uint j = 0; j < XENT_SLOTS; ++j) {
            const uint c = lane + j * WARP_SIZE;
            ev[j] = c < cols ? expf(xv[j] - mx) : 0.0f;
            s += ev[j];
            others += ((int)c == label) ? 0.0f : ev[j];
        }
    } else {
        for (u64 c = lane; c < cols; c += WARP_SIZE) {
            const float e = expf(x[c] - mx);
            s += e;
            others += ((int)c == label) ? 0.0f : e;
        }
    }
    s = warp_reduce_sum(s);
    others = warp_reduce_sum(others);
    const float inv = 1.0f / s;
    if (CACHED) {
#pragma unroll
        for (uint j = 0; j < XENT_SLOTS; ++j) {
            const uint c = lane + j * WARP_SIZE;
            if (c < cols) dx[c] = grad_scale * (((int)c == label) ? -others : ev[j]) * inv;
        }
    } else {
        for (u64 c = lane; c < cols; c += WARP_SIZE)
            dx[c] = grad_scale * (((int)c == label) ? -others : expf(x[c] - mx)) * inv;
    }
    if (lane == 0) {
        loss = !valid            ? RNN_NAN
               : x[label] == mx ? log1pf(others)
                                : (mx + logf(s)) - x[label];
        correct = (valid && arg == label) ? 1.0f : 0.0f;
    }
}

// Loss, correctness and gradient in one pass, one warp per row (geometry W: rows are mostly
// narrow, 10 or 96 classes, so a block per row would leave most threads idle). dlogits never
// overlaps logits (the host rejects that). With `with_totals`, the summed loss and correct
// count of all rows are also added to totals[0] and totals[1] (geometry L).
extern "C" __global__ void softmax_xent(const float* logits_base, u64 logits_off,
                                        const uint* labels_base, u64 labels_off,
                                        float* dlogits_base, u64 dlogits_off,
                                        float* row_loss_base, u64 row_loss_off,
                                        float* row_correct_base, u64 row_correct_off,
                                        float* totals_base, u64 totals_off, float* part_base,
                                        u64 part_off, uint* ticket_base, u64 ticket_off,
                                        uint rows, uint cols, float grad_scale,
                                        uint with_totals) {
    __shared__ float sh_loss[RNN_MAX_WARPS];
    __shared__ float sh_correct[RNN_MAX_WARPS];
    const uint* labels = labels_base + labels_off;
    float* row_loss = row_loss_base + row_loss_off;
    float* row_correct = row_correct_base + row_correct_off;
    const uint lane = threadIdx.x % WARP_SIZE;
    const uint wid = threadIdx.x / WARP_SIZE;
    const uint warps = blockDim.x / WARP_SIZE;
    const bool cached = cols <= XENT_SLOTS * WARP_SIZE;
    float my_loss = 0.0f, my_correct = 0.0f;
    for (u64 row = (u64)blockIdx.x * warps + wid; row < rows; row += (u64)gridDim.x * warps) {
        const float* x = logits_base + logits_off + row * cols;
        float* dx = dlogits_base + dlogits_off + row * cols;
        float loss = 0.0f, correct = 0.0f;
        if (cached) {
            xent_row<true>(x, dx, cols, labels[row], grad_scale, lane, loss, correct);
        } else {
            xent_row<false>(x, dx, cols, labels[row], grad_scale, lane, loss, correct);
        }
        if (lane == 0) {
            row_loss[row] = loss;
            row_correct[row] = correct;
            my_loss += loss;
            my_correct += correct;
        }
    }
    if (!with_totals) return;
    if (lane == 0) {
        sh_loss[wid] = my_loss;
        sh_correct[wid] = my_correct;
    }
    __syncthreads();
    float a = 0.0f, b = 0.0f;
    if (threadIdx.x == 0)
        for (uint w = 0; w < warps; ++w) {
            a += sh_loss[w];
            b += sh_correct[w];
        }
    rnn_add_totals(a, b, true, totals_base + totals_off, part_base + part_off,
                   ticket_base + ticket_off);
}

#ifndef RNN_TIER0_COPIES  // not among tier 0's copies (kernel.rs TIER0_COPIES)
// Mean squared error, one warp per row (geometry W); with `with_totals`, the summed row losses
// are added to totals[0] (geometry L).
extern "C" __global__ void mse(const float* pred_base, u64 pred_off, const float* target_base,
                               u64 target_off, float* dpred_base, u64 dpred_off,
                               float* row_loss_base, u64 row_loss_off, float* totals_base,
                               u64 totals_off, float* part_base, u64 part_off,
                               uint* ticket_base, u64 ticket_off, uint rows, uint cols,
                               float grad_scale, uint with_totals) {
    __shared__ float sh_loss[RNN_MAX_WARPS];
    float* row_loss = row_loss_base + row_loss_off;
    const float inv_cols = 1.0f / (float)cols;
    const uint lane = threadIdx.x % WARP_SIZE;
    const uint wid = threadIdx.x / WARP_SIZE;
    const uint warps = blockDim.x / WARP_SIZE;
    float my_loss = 0.0f;
    for (u64 row = (u64)blockIdx.x * warps + wid; row < rows; row += (u64)gridDim.x * warps) {
        const float* p = pred_base + pred_off + row * cols;
        const float* t = target_base + target_off + row * cols;
        float* dp = dpred_base + dpred_off + row * cols;
        float s = 0.0f;
        for (u64 c = lane; c < cols; c += WARP_SIZE) {
            const float d = p[c] - t[c];
            s += d * d;
            dp[c] = grad_scale * 2.0f * d * inv_cols;
        }
        s = warp_reduce_sum(s);
        if (lane == 0) {
            row_loss[row] = s * inv_cols;
            my_loss += s * inv_cols;
        }
    }
    if (!with_totals) return;
    if (lane == 0) sh_loss[wid] = my_loss;
    __syncthreads();
    float a = 0.0f;
    if (threadIdx.x == 0)
        for (uint w = 0; w < warps; ++w) a += sh_loss[w];
    rnn_add_totals(a, 0.0f, false, totals_base + totals_off, part_base + part_off,
                   ticket_base + ticket_off);
}
#endif

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

// Three blocks an SM (at most 85 registers), as when each activation had a loop of its own:
// around the out-of-line activation call the compiler would otherwise take 94 registers (two
// blocks).
extern "C" __global__ void __launch_bounds__(256, 3)
bias_act_backward(const float* dy_base, u64 dy_off, const float* z_base, u64 z_off,
                  const float* y_base, u64 y_off, float* dz_base, u64 dz_off, float* out_base,
                  u64 out_off, float* part_base, u64 part_off, uint* ticket_base,
                  u64 ticket_off, uint rows, uint cols, uint chunk_rows, uint act,
                  uint write_dz, uint quad, float act_param, float beta) {
    const float* act_in = (act == ACT_GELU || act == ACT_LEAKY) ? z_base + z_off : y_base + y_off;
    bab_body(dy_base + dy_off, nullptr, nullptr, 0, act_in, dz_base + dz_off, out_base + out_off,
             part_base + part_off, ticket_base + ticket_off, rows, cols, chunk_rows, act,
             write_dz, quad, act_param, beta);
}

// bias_act_backward with dy = g w (g rows x k, w k x cols, 0 < k <= 16) formed in the pass and
// never stored; dz always written. `a_base` is z for GELU and leaky ReLU, y otherwise.
extern "C" __global__ void bias_act_backward_product(
    const float* g_base, u64 g_off, const float* w_base, u64 w_off, const float* a_base, u64 a_off,
    float* dz_base, u64 dz_off, float* out_base, u64 out_off, float* part_base, u64 part_off,
    uint* ticket_base, u64 ticket_off, uint rows, uint cols, uint k, uint chunk_rows, uint act,
    uint quad, float act_param) {
    bab_body(nullptr, g_base + g_off, w_base + w_off, k, a_base + a_off, dz_base + dz_off,
             out_base + out_off, part_base + part_off, ticket_base + ticket_off, rows, cols,
             chunk_rows, act, 1, quad, act_param, 0.0f);
}

#ifndef RNN_TIER0_COPIES  // not among tier 0's copies (kernel.rs TIER0_COPIES)
extern "C" __global__ void sum_cols(const float* x_base, u64 x_off, float* out_base, u64 out_off,
                                    uint rows, uint cols, float beta) {
    __shared__ float sh[RNN_MAX_WARPS];
    float* out = out_base + out_off;
    RNN_ROW_LOOP(row, rows) {
        const float* x = x_base + x_off + (u64)row * cols;
        float s = 0.0f;
        RNN_COL_LOOP(c, cols) s += x[c];
        s = block_reduce_sum(s, sh);
        if (threadIdx.x == 0) out[row] = (beta == 0.0f) ? s : beta * out[row] + s;
    }
}
#endif

extern "C" __global__ void sum_partial(const float* x_base, u64 x_off, float* partial_base,
                                       u64 partial_off, uint n, uint square) {
    __shared__ float sh[RNN_MAX_WARPS];
    const float* x = x_base + x_off;
    float s = 0.0f;
    RNN_GRID_LOOP(i, n) {
        const float v = x[i];
        s += square ? v * v : v;
    }
    s = block_reduce_sum(s, sh);
    if (threadIdx.x == 0) partial_base[partial_off + blockIdx.x] = s;
}

#ifndef RNN_TIER0_COPIES  // not among tier 0's copies (kernel.rs TIER0_COPIES)
extern "C" __global__ void sum_final(const float* partial_base, u64 partial_off, float* out_base,
                                     u64 out_off, uint g, float beta) {
    __shared__ float sh[RNN_MAX_WARPS];
    const float* partial = partial_base + partial_off;
    float s = 0.0f;
    RNN_COL_LOOP(j, g) s += partial[j];
    s = block_reduce_sum(s, sh);
    if (threadIdx.x == 0) {
        float* out = out_base + out_off;
        out[0] = (beta == 0.0f) ? s : beta * out[0] + s;
    }
}
#endif

extern "C" __global__ void clip_final(const float* partial_base, u64 partial_off,
                                      float* norm_base, u64 norm_off, uint g) {
    __shared__ float sh[RNN_MAX_WARPS];
    const float* partial = partial_base + partial_off;
    float s = 0.0f;
    RNN_COL_LOOP(j, g) s += partial[j];
    s = block_reduce_sum(s, sh);
    if (threadIdx.x == 0) norm_base[norm_off] = sqrtf(s);
}
