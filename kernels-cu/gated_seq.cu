// Whole-sequence LSTM and GRU, forward and backward, in ONE launch each (geometry Q,
// docs/kernel-abi.md): the persistent scheme of rnn_seq.cu, whose rq_row_barrier this file
// uses (it comes after rnn_seq.cu in the translation unit), with common.cuh's
// rnn_load_coherent for what other blocks wrote during the launch. Only
// correct when every block of the grid is resident at once (a cooperative launch sized by the
// occupancy calculator); elsewhere the step kernels of gated_step.cu run once per step.
//
// G gates: 4 for the LSTM (i, f, g, o), 3 for the GRU (r, z, n), stacked as in PyTorch: gate g
// of unit j is row g*H + j of W_hh (G*H x H) and column g*H + j of a gate matrix.
//
// Block (bx, by) owns hidden units j0 = GQ_UNITS bx .. j0 + GQ_UNITS for ALL gates, so the cell
// update of those units is local to the block, and the row tiles (GQ_ROWS batch rows) by,
// by + gridDim.y, ... It keeps its slice of W_hh in dynamic shared memory, k-contiguous:
//   forward:  the G*GQ_UNITS rows, q = g*GQ_UNITS + u holding row g*H + j0 + u;
//   backward: the GQ_UNITS columns, u holding column j0 + u (all G*H rows).
// Units past H get zero rows/columns. Every step, for each of its tiles, it stages the GQ_ROWS
// rows of the previous state it needs, written by other blocks in the step before (h_t
// forward; the gate gradients of step t+1 backward, G*H wide) from L2 into shared memory, forms
// the products, and GQ_ROWS * GQ_UNITS threads (thread e: row e / GQ_UNITS, unit e % GQ_UNITS)
// apply the fused cell math and write the results. Then the blocks of its row (same
// blockIdx.y: the only writers of the rows it reads next) meet at that row's barrier.
//
// Products: 32-lane group (warp) w computes a 4 x 8 tile (4 batch rows x 8 outputs) over a
// range of k: lane l accumulates the 32 dot products over k = k0 + l, k0 + l + 32, ...
// (consecutive lanes read consecutive words: no bank conflicts; 12 shared loads per 32 FMAs),
// then a transposing butterfly (31 shuffles) leaves the full sum of entry l (row l >> 3,
// output l & 7) in lane l, which stores it to the partial area `red`.
//   forward:  G*GQ_UNITS outputs, K = H; group w: rows 4 (w % 2), outputs 8 (w / 2).
//   backward: GQ_UNITS outputs, K = G*H in G slices of H (one per gate block of the gradient);
//             group w: rows 4 (w % 2), units 8 ((w / 2) % 2), slice w / 4. The epilogue adds
//             the G partials in slice order.
// Either way 4 G groups: GQ_THREADS = 128 G threads (LSTM 512, GRU 384).
//
// Dynamic shared memory, in floats: G*GQ_UNITS*H (W slice) + GQ_ROWS*K (staged rows) +
// G*GQ_ROWS*GQ_UNITS (partials), K = H forward and G*H backward.
//
// The backward carries one value per (row, unit) from step t+1 to step t (the LSTM's dc f, the
// GRU's dh z) in `carry` (batch x hidden): the thread that owns an element in every step (same
// block, same tile, same thread) writes and later reads it, so plain loads see it, however many
// tiles a block strides over. It is not read in the first step of the launch (the last time
// step), where it is zero, unless the LSTM's carry_in says it holds the gradient reaching the
// last cell state from outside; after the last step (t = 0) it holds the gradient for the
// initial cell state (LSTM) or the direct part of that for the initial hidden state (GRU).
//
// Shuffles are 32 wide with xor masks below 32, so 64-lane AMD wavefronts run two groups each.

#define GQ_ROWS 8
#define GQ_UNITS 16

// Rows r0 .. r0 + GQ_ROWS of the `batch x width` matrix `a` (written by other blocks during the
// launch) into `as`, zero past batch. NT threads.
template <int NT>
__device__ __forceinline__ void gq_stage_rows(const float* a, uint batch, uint width, uint r0,
                                              float* as) {
    const uint rows = min((uint)GQ_ROWS, batch - r0);
    const uint n = rows * width;
    const float* src = a + (u64)r0 * width;
    for (uint e = threadIdx.x; e < n; e += NT) as[e] = rnn_load_coherent(src + e);
    for (uint e = n + threadIdx.x; e < GQ_ROWS * width; e += NT) as[e] = 0.0f;
}

// The forward W slice: ws[q * H + k] = W[(g H + j0 + u) H + k], q = g GQ_UNITS + u, read along
// W's rows. Indices fit 32 bits: the slice fits shared memory (the host checked).
template <int G>
__device__ __forceinline__ void gq_load_w_rows(const float* W, uint hidden, uint j0, float* ws) {
    const uint n = G * GQ_UNITS * hidden;
    for (uint e = threadIdx.x; e < n; e += 128 * G) {
        const uint q = e / hidden;
        const uint k = e - q * hidden;
        const uint g = q / GQ_UNITS;
        const uint u = q - g * GQ_UNITS;
        ws[e] = j0 + u < hidden ? W[((u64)g * hidden + j0 + u) * hidden + k] : 0.0f;
    }
}

// The backward W slice: ws[u * G H + k] = W[k H + j0 + u], read in 64-byte row segments.
template <int G>
__device__ __forceinline__ void gq_load_w_cols(const float* W, uint hidden, uint j0, float* ws) {
    const uint gh = G * hidden;
    const uint n = GQ_UNITS * gh;
    for (uint e = threadIdx.x; e < n; e += 128 * G) {
        const uint k = e / GQ_UNITS;
        const uint u = e - k * GQ_UNITS;
        ws[u * gh + k] = j0 + u < hidden ? W[(u64)k * hidden + j0 + u] : 0.0f;
    }
}

// One butterfly stage over the first 2 H values with the partner lane across lane bit H: keeps
// H values, each summed with the partner's. After stages 16, 8, 4, 2, 1, value 0 of lane l is
// entry l summed over all 32 lanes.
template <int H>
__device__ __forceinline__ void gq_fold(float* v, uint lane) {
    const bool upper = (lane & H) != 0;
#pragma unroll
    for (int i = 0; i < H; ++i) {
        const float send = upper ? v[i] : v[i + H];
        const float keep = upper ? v[i + H] : v[i];
        v[i] = keep + __shfl_xor_sync(0xffffffffu, send, H, 32);
    }
}

// The 4 x 8 tile of this lane's group: sum over k in [k0, k1) of a[r lda + k] w[q ldw + k] for
// r < 4, q < 8 (both in shared memory). Returns entry (lane >> 3, lane & 7). Every lane of the
// group must call it (the shuffles follow the loop, whose trip count may differ by lane).
__device__ __forceinline__ float gq_tile_dot(const float* a, uint lda, const float* w, uint ldw,
                                             uint k0, uint k1) {
    const uint lane = threadIdx.x % 32;
    float v[32];
#pragma unroll
    for (int i = 0; i < 32; ++i) v[i] = 0.0f;
#pragma unroll 2
    for (uint k = k0 + lane; k < k1; k += 32) {
        float x[4];
#pragma unroll
        for (int r = 0; r < 4; ++r) x[r] = a[r * lda + k];
#pragma unroll
        for (int q = 0; q < 8; ++q) {
            const float wq = w[q * ldw + k];
#pragma unroll
            for (int r = 0; r < 4; ++r) v[r * 8 + q] = fmaf(x[r], wq, v[r * 8 + q]);
        }
    }
    gq_fold<16>(v, lane);
    gq_fold<8>(v, lane);
    gq_fold<4>(v, lane);
    gq_fold<2>(v, lane);
    gq_fold<1>(v, lane);
    return v[0];
}

// Forward products of the tile at row r0: red[r G GQ_UNITS + q] = sum_k h[r0 + r, k] ws[q, k].
// Ends with a barrier: `red` is complete, and `as` stays untouched until the caller's next
// barrier.
template <int G>
__device__ __forceinline__ void gq_forward_products(const float* h_prev, uint batch, uint hidden,
                                                    uint r0, const float* ws, float* as,
                                                    float* red) {
    // `as` is free: its last readers finished before the barrier that precedes this call.
    gq_stage_rows<128 * G>(h_prev, batch, hidden, r0, as);
    __syncthreads();
    const uint w = threadIdx.x / 32;
    const uint lane = threadIdx.x % 32;
    const uint wr = w % 2;
    const uint wq = w / 2;
    const float s = gq_tile_dot(as + 4 * wr * hidden, hidden, ws + 8 * wq * hidden, hidden, 0,
                                hidden);
    red[(4 * wr + (lane >> 3)) * (G * GQ_UNITS) + 8 * wq + (lane & 7)] = s;
    __syncthreads();
}

// Backward partial products of the tile at row r0 from the next step's gate gradient `dnext`
// (`batch x G H`): red[(s GQ_ROWS + r) GQ_UNITS + u] = sum over k in gate block s of
// dnext[r0 + r, k] ws[u, k]. Ends with a barrier, as gq_forward_products.
template <int G>
__device__ __forceinline__ void gq_backward_products(const float* dnext, uint batch, uint hidden,
                                                     uint r0, const float* ws, float* as,
                                                     float* red) {
    const uint gh = G * hidden;
    gq_stage_rows<128 * G>(dnext, batch, gh, r0, as);
    __syncthreads();
    const uint w = threadIdx.x / 32;
    const uint lane = threadIdx.x % 32;
    const uint wr = w % 2;
    const uint wu = (w / 2) % 2;
    const uint s = w / 4;
    const float v = gq_tile_dot(as + 4 * wr * gh, gh, ws + 8 * wu * gh, gh, s * hidden,
                                (s + 1) * hidden);
    red[(s * GQ_ROWS + 4 * wr + (lane >> 3)) * GQ_UNITS + 8 * wu + (lane & 7)] = v;
    __syncthreads();
}

// gates[t] (x_t W_ih^T on entry) becomes the activated gates of
// gates[t] + b_ih + b_hh + hs[t] W_hh^T (sigmoid i, f, o; tanh g); cs[t + 1] = f cs[t] + i g;
// hs[t + 1] = o tanh(cs[t + 1]); for t = 0 .. steps - 1. Blocks 0 of hs and cs are read.
//
// With LOW (lstm_seq_forward_low), h_t is also stored rounded to the bf16/f16 `kind`
// (half_convert.h) into low[t] (`steps * batch x H`, time-major): the T copy of the output
// sequence that a bf16/f16 network's next layer reads, without a cast pass over hs.
template <bool LOW>
__device__ __forceinline__ void lstm_seq_forward_body(
    float* gates_base, u64 gates_off, float* hs_base, u64 hs_off, float* cs_base, u64 cs_off,
    const float* w_hh_base, u64 w_hh_off, const float* b_ih_base, u64 b_ih_off,
    const float* b_hh_base, u64 b_hh_off, uint* barrier_base, u64 barrier_off, ushort* low,
    uint steps, uint batch, uint hidden, uint kind) {
    extern __shared__ float gq_smem[];
    float* ws = gq_smem;
    float* as = ws + 4 * GQ_UNITS * hidden;
    float* red = as + GQ_ROWS * hidden;
    float* gates = gates_base + gates_off;
    float* hs = hs_base + hs_off;
    float* cs = cs_base + cs_off;
    uint* barrier = barrier_base + barrier_off;
    const uint j0 = blockIdx.x * GQ_UNITS;
    gq_load_w_rows<4>(w_hh_base + w_hh_off, hidden, j0, ws);

    const u64 H = hidden;
    const uint r = threadIdx.x / GQ_UNITS;
    const uint u = threadIdx.x % GQ_UNITS;
    const uint j = j0 + u;
    const bool cell = threadIdx.x < GQ_ROWS * GQ_UNITS && j < hidden;
    float bias[4];
#pragma unroll
    for (int g = 0; g < 4; ++g) {
        bias[g] = cell ? b_ih_base[b_ih_off + g * H + j] + b_hh_base[b_hh_off + g * H + j] : 0.0f;
    }
    const u64 block = (u64)batch * H;
    const uint row_tiles = (batch + GQ_ROWS - 1) / GQ_ROWS;
    for (uint t = 0; t < steps; ++t) {
        const float* h_prev = hs + t * block;
        float* h = hs + (t + 1) * block;
        const float* c_prev = cs + t * block;
        float* c = cs + (t + 1) * block;
        float* gt = gates + (u64)t * 4 * block;
        for (uint tile = blockIdx.y; tile < row_tiles; tile += gridDim.y) {
            const uint row = tile * GQ_ROWS + r;
            const bool store = cell && row < batch;
            const u64 at = (u64)row * H + j;
            float* gr = gt + (u64)row * 4 * H + j;
            // Only this thread reads or writes these (c_prev: its own store of the step before),
            // so they are issued before the staging and their latency overlaps it.
            float x[4];
#pragma unroll
            for (int g = 0; g < 4; ++g) x[g] = store ? gr[g * H] : 0.0f;
            const float cp = store ? c_prev[at] : 0.0f;
            gq_forward_products<4>(h_prev, batch, hidden, tile * GQ_ROWS, ws, as, red);
            if (store) {
                const float* p = red + r * (4 * GQ_UNITS) + u;
                float ct, ht;
                RNN_LSTM_UNIT_FORWARD(p, GQ_UNITS, x, bias, gr, H, cp, ct, ht);
                c[at] = ct;
                h[at] = ht;
                if (LOW) low[(u64)t * block + at] = rnn_f32_to_half(ht, kind);
            }
            // The next tile restages `as` and rewrites `red`, which this one just read.
            __syncthreads();
        }
        if (t + 1 < steps) rq_row_barrier(barrier);
    }
}

extern "C" __global__ void __launch_bounds__(512)
    lstm_seq_forward(float* gates_base, u64 gates_off, float* hs_base, u64 hs_off,
                     float* cs_base, u64 cs_off, const float* w_hh_base, u64 w_hh_off,
                     const float* b_ih_base, u64 b_ih_off, const float* b_hh_base, u64 b_hh_off,
                     uint* barrier_base, u64 barrier_off, uint steps, uint batch, uint hidden) {
    lstm_seq_forward_body<false>(gates_base, gates_off, hs_base, hs_off, cs_base, cs_off,
                                 w_hh_base, w_hh_off, b_ih_base, b_ih_off, b_hh_base, b_hh_off,
                                 barrier_base, barrier_off, nullptr, steps, batch, hidden, 0u);
}

extern "C" __global__ void __launch_bounds__(512)
    lstm_seq_forward_low(float* gates_base, u64 gates_off, float* hs_base, u64 hs_off,
                         float* cs_base, u64 cs_off, const float* w_hh_base, u64 w_hh_off,
                         const float* b_ih_base, u64 b_ih_off, const float* b_hh_base,
                         u64 b_hh_off, uint* barrier_base, u64 barrier_off, ushort* low_base,
                         u64 low_off, uint steps, uint batch, uint hidden, uint kind) {
    lstm_seq_forward_body<true>(gates_base, gates_off, hs_base, hs_off, cs_base, cs_off,
                                w_hh_base, w_hh_off, b_ih_base, b_ih_off, b_hh_base, b_hh_off,
                                barrier_base, barrier_off, low_base + low_off, steps, batch,
                                hidden, kind);
}

// For t = steps - 1 .. 0: dh_t = dh[t] + dgates[t + 1] W_hh (absent at t = steps - 1);
// dc_t = carry + dh_t o (1 - tanh^2 cs[t + 1]) (carry = dc_{t+1} f_{t+1}; at the last step
// the gradient reaching the last cell state from outside when carry_in, else zero); dgates[t]
// from the activated gates, cs[t] and cs[t + 1]; carry = dc_t f_t, so on return it holds the
// gradient for the initial cell state.
extern "C" __global__ void __launch_bounds__(512)
    lstm_seq_backward(const float* dh_base, u64 dh_off, const float* gates_base, u64 gates_off,
                      const float* cs_base, u64 cs_off, const float* w_hh_base, u64 w_hh_off,
                      float* dgates_base, u64 dgates_off, float* carry_base, u64 carry_off,
                      uint* barrier_base, u64 barrier_off, uint steps, uint batch,
                      uint hidden, uint carry_in) {
    extern __shared__ float gq_smem[];
    float* ws = gq_smem;
    float* as = ws + 4 * GQ_UNITS * hidden;
    float* red = as + GQ_ROWS * 4 * hidden;
    const float* dh = dh_base + dh_off;
    const float* gates = gates_base + gates_off;
    const float* cs = cs_base + cs_off;
    float* dgates = dgates_base + dgates_off;
    float* carry = carry_base + carry_off;
    uint* barrier = barrier_base + barrier_off;
    const uint j0 = blockIdx.x * GQ_UNITS;
    gq_load_w_cols<4>(w_hh_base + w_hh_off, hidden, j0, ws);
    __syncthreads();

    const u64 H = hidden;
    const uint r = threadIdx.x / GQ_UNITS;
    const uint u = threadIdx.x % GQ_UNITS;
    const uint j = j0 + u;
    const bool cell = threadIdx.x < GQ_ROWS * GQ_UNITS && j < hidden;
    const u64 block = (u64)batch * H;
    const uint row_tiles = (batch + GQ_ROWS - 1) / GQ_ROWS;
    for (uint s = 0; s < steps; ++s) {
        const uint t = steps - 1 - s;
        const float* dg_next = dgates + ((u64)t + 1) * 4 * block;
        float* dg = dgates + (u64)t * 4 * block;
        for (uint tile = blockIdx.y; tile < row_tiles; tile += gridDim.y) {
            const uint row = tile * GQ_ROWS + r;
            const bool store = cell && row < batch;
            const u64 at = (u64)row * H + j;
            const u64 ga = (u64)row * 4 * H + j;
            // Inputs of the forward (read-only here) and this thread's own carry, issued before
            // the staging.
            const float* gr = gates + (u64)t * 4 * block + ga;
            const float gi = store ? gr[0] : 0.0f;
            const float gf = store ? gr[H] : 0.0f;
            const float gg = store ? gr[2 * H] : 0.0f;
            const float go = store ? gr[3 * H] : 0.0f;
            const float c = store ? cs[(t + 1) * block + at] : 0.0f;
            const float cp = store ? cs[t * block + at] : 0.0f;
            const float d = store ? dh[t * block + at] : 0.0f;
            const float dc = store && (s > 0 || carry_in) ? carry[at] : 0.0f;
            float rec = 0.0f;
            // The branch is uniform over the grid, so every thread reaches the barriers and
            // every lane the shuffles.
            if (s > 0) {
                gq_backward_products<4>(dg_next, batch, hidden, tile * GQ_ROWS, ws, as, red);
                // Only the cell threads' rows exist in `red`.
                if (r < GQ_ROWS) {
#pragma unroll
                    for (int k = 0; k < 4; ++k) rec += red[(k * GQ_ROWS + r) * GQ_UNITS + u];
                }
            }
            if (store) {
                const float tc = tanhf(c);
                const float dht = d + rec;
                RNN_LSTM_UNIT_BACKWARD(dg, ga, H, dc, dht, tc, cp, gi, gf, gg, go, carry[at]);
            }
            __syncthreads();
        }
        if (s + 1 < steps) rq_row_barrier(barrier);
    }
}

// gh = hs[t] W_hh^T + b_hh; r = σ(gx_r + b_ih_r + gh_r), z = σ(gx_z + b_ih_z + gh_z),
// n = tanh(gx_n + b_ih_n + r gh_n); hs[t + 1] = (1 - z) n + z hs[t]; cache[t] = [r, z, n, gh_n]
// (4H wide); for t = 0 .. steps - 1. Block 0 of hs is read.
// With LOW (gru_seq_forward_low), h_t also goes to low[t] as lstm_seq_forward_low's does.
template <bool LOW>
__device__ __forceinline__ void gru_seq_forward_body(
    const float* gx_base, u64 gx_off, float* hs_base, u64 hs_off, const float* w_hh_base,
    u64 w_hh_off, const float* b_ih_base, u64 b_ih_off, const float* b_hh_base, u64 b_hh_off,
    float* cache_base, u64 cache_off, uint* barrier_base, u64 barrier_off, ushort* low,
    uint steps, uint batch, uint hidden, uint kind) {
    extern __shared__ float gq_smem[];
    float* ws = gq_smem;
    float* as = ws + 3 * GQ_UNITS * hidden;
    float* red = as + GQ_ROWS * hidden;
    const float* gx = gx_base + gx_off;
    float* hs = hs_base + hs_off;
    float* cache = cache_base + cache_off;
    uint* barrier = barrier_base + barrier_off;
    const uint j0 = blockIdx.x * GQ_UNITS;
    gq_load_w_rows<3>(w_hh_base + w_hh_off, hidden, j0, ws);

    const u64 H = hidden;
    const uint r = threadIdx.x / GQ_UNITS;
    const uint u = threadIdx.x % GQ_UNITS;
    const uint j = j0 + u;
    const bool cell = threadIdx.x < GQ_ROWS * GQ_UNITS && j < hidden;
    float bi[3], bh[3];
#pragma unroll
    for (int g = 0; g < 3; ++g) {
        bi[g] = cell ? b_ih_base[b_ih_off + g * H + j] : 0.0f;
        bh[g] = cell ? b_hh_base[b_hh_off + g * H + j] : 0.0f;
    }
    const u64 block = (u64)batch * H;
    const uint row_tiles = (batch + GQ_ROWS - 1) / GQ_ROWS;
    for (uint t = 0; t < steps; ++t) {
        const float* h_prev = hs + t * block;
        float* h = hs + (t + 1) * block;
        for (uint tile = blockIdx.y; tile < row_tiles; tile += gridDim.y) {
            const uint row = tile * GQ_ROWS + r;
            const bool store = cell && row < batch;
            const u64 g3 = (u64)row * 3 * H + j;
            const float* xr = gx + (u64)t * 3 * block + g3;
            float x[3];
#pragma unroll
            for (int g = 0; g < 3; ++g) x[g] = store ? xr[g * H] + bi[g] : 0.0f;
            gq_forward_products<3>(h_prev, batch, hidden, tile * GQ_ROWS, ws, as, red);
            if (store) {
                const float* p = red + r * (3 * GQ_UNITS) + u;
                const float ghr = p[0] + bh[0];
                const float ghz = p[GQ_UNITS] + bh[1];
                const float ghn = p[2 * GQ_UNITS] + bh[2];
                const float rg = rnn_sigmoid(x[0] + ghr);
                const float z = rnn_sigmoid(x[1] + ghz);
                const float n = tanhf(x[2] + rg * ghn);
                // h_t of this row and unit, as staged for the products.
                const float hp = as[r * hidden + j];
                const float ht = (1.0f - z) * n + z * hp;
                h[(u64)row * H + j] = ht;
                if (LOW) low[(u64)t * block + (u64)row * H + j] = rnn_f32_to_half(ht, kind);
                float* kr = cache + (u64)t * 4 * block + (u64)row * 4 * H + j;
                kr[0] = rg;
                kr[H] = z;
                kr[2 * H] = n;
                kr[3 * H] = ghn;
            }
            // The next tile restages `as` (read just above) and rewrites `red`.
            __syncthreads();
        }
        if (t + 1 < steps) rq_row_barrier(barrier);
    }
}

extern "C" __global__ void __launch_bounds__(384)
    gru_seq_forward(const float* gx_base, u64 gx_off, float* hs_base, u64 hs_off,
                    const float* w_hh_base, u64 w_hh_off, const float* b_ih_base, u64 b_ih_off,
                    const float* b_hh_base, u64 b_hh_off, float* cache_base, u64 cache_off,
                    uint* barrier_base, u64 barrier_off, uint steps, uint batch, uint hidden) {
    gru_seq_forward_body<false>(gx_base, gx_off, hs_base, hs_off, w_hh_base, w_hh_off, b_ih_base,
                                b_ih_off, b_hh_base, b_hh_off, cache_base, cache_off,
                                barrier_base, barrier_off, nullptr, steps, batch, hidden, 0u);
}

extern "C" __global__ void __launch_bounds__(384)
    gru_seq_forward_low(const float* gx_base, u64 gx_off, float* hs_base, u64 hs_off,
                        const float* w_hh_base, u64 w_hh_off, const float* b_ih_base,
                        u64 b_ih_off, const float* b_hh_base, u64 b_hh_off, float* cache_base,
                        u64 cache_off, uint* barrier_base, u64 barrier_off, ushort* low_base,
                        u64 low_off, uint steps, uint batch, uint hidden, uint kind) {
    gru_seq_forward_body<true>(gx_base, gx_off, hs_base, hs_off, w_hh_base, w_hh_off, b_ih_base,
                               b_ih_off, b_hh_base, b_hh_off, cache_base, cache_off,
                               barrier_base, barrier_off, low_base + low_off, steps, batch,
                               hidden, kind);
}

// For t = steps - 1 .. 0: dh_t = dh[t] + dgh[t + 1] W_hh + carry (product and carry absent at
// t = steps - 1); with r, z, n, gh_n from cache[t] and h_prev = hs[t]:
// dn = dh_t (1 - z)(1 - n^2), dz = dh_t (h_prev - n) z (1 - z), dr = dn gh_n r (1 - r);
// dgx[t] = [dr, dz, dn], dgh[t] = [dr, dz, dn r]; carry = dh_t z.
extern "C" __global__ void __launch_bounds__(384)
    gru_seq_backward(const float* dh_base, u64 dh_off, const float* hs_base, u64 hs_off,
                     const float* cache_base, u64 cache_off, const float* w_hh_base,
                     u64 w_hh_off, float* dgx_base, u64 dgx_off, float* dgh_base, u64 dgh_off,
                     float* carry_base, u64 carry_off, uint* barrier_base, u64 barrier_off,
                     uint steps, uint batch, uint hidden) {
    extern __shared__ float gq_smem[];
    float* ws = gq_smem;
    float* as = ws + 3 * GQ_UNITS * hidden;
    float* red = as + GQ_ROWS * 3 * hidden;
    const float* dh = dh_base + dh_off;
    const float* hs = hs_base + hs_off;
    const float* cache = cache_base + cache_off;
    float* dgx = dgx_base + dgx_off;
    float* dgh = dgh_base + dgh_off;
    float* carry = carry_base + carry_off;
    uint* barrier = barrier_base + barrier_off;
    const uint j0 = blockIdx.x * GQ_UNITS;
    gq_load_w_cols<3>(w_hh_base + w_hh_off, hidden, j0, ws);
    __syncthreads();

    const u64 H = hidden;
    const uint r = threadIdx.x / GQ_UNITS;
    const uint u = threadIdx.x % GQ_UNITS;
    const uint j = j0 + u;
    const bool cell = threadIdx.x < GQ_ROWS * GQ_UNITS && j < hidden;
    const u64 block = (u64)batch * H;
    const uint row_tiles = (batch + GQ_ROWS - 1) / GQ_ROWS;
    for (uint s = 0; s < steps; ++s) {
        const uint t = steps - 1 - s;
        const float* dgh_next = dgh + ((u64)t + 1) * 3 * block;
        for (uint tile = blockIdx.y; tile < row_tiles; tile += gridDim.y) {
            const uint row = tile * GQ_ROWS + r;
            const bool store = cell && row < batch;
            const u64 at = (u64)row * H + j;
            const float* kr = cache + (u64)t * 4 * block + (u64)row * 4 * H + j;
            const float rg = store ? kr[0] : 0.0f;
            const float z = store ? kr[H] : 0.0f;
            const float n = store ? kr[2 * H] : 0.0f;
            const float ghn = store ? kr[3 * H] : 0.0f;
            const float hp = store ? hs[t * block + at] : 0.0f;
            const float d = store ? dh[t * block + at] : 0.0f;
            const float cr = store && s > 0 ? carry[at] : 0.0f;
            float rec = 0.0f;
            // Uniform over the grid, as in lstm_seq_backward.
            if (s > 0) {
                gq_backward_products<3>(dgh_next, batch, hidden, tile * GQ_ROWS, ws, as, red);
                // Only the cell threads' rows exist in `red`.
                if (r < GQ_ROWS) {
#pragma unroll
                    for (int k = 0; k < 3; ++k) rec += red[(k * GQ_ROWS + r) * GQ_UNITS + u];
                }
            }
            if (store) {
                const float dt = (d + rec) + cr;
                const u64 g3 = (u64)t * 3 * block + (u64)row * 3 * H + j;
                RNN_GRU_UNIT_BACKWARD(dgx, dgh, g3, H, dt, rg, z, n, ghn, hp, carry[at]);
            }
            __syncthreads();
        }
        if (s + 1 < steps) rq_row_barrier(barrier);
    }
}
