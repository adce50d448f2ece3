// Recurrent cell steps. The LSTM and GRU cells use geometry E over batch*hidden; the Elman
// steps use geometry S (below). Gate blocks follow PyTorch: LSTM i, f, g, o; GRU r, z, n. Row b
// of a gate matrix holds the blocks side by side, each `hidden` wide.

// ---- fused Elman steps (geometry S) --------------------------------------------------------
//
// One launch per time step and direction. A block of RS_THREADS threads computes an
// RS_BM x RS_BN tile (batch rows x hidden columns) of
//   forward:  h    = act(pre + h_prev W^T + b_ih + b_hh)
//   backward: dpre = act'(h) * (dh + dpre_next W)
// where W = W_hh is hidden x hidden, row-major. Both products are C = A op(W) with A
// (h_prev or dpre_next) batch x hidden, contiguous along k. K advances in RS_BK slices staged
// in double-buffered shared memory, the next slice prefetched into registers while the current
// one is consumed (one barrier per slice; 64-wide slices halve the exposed load latencies of
// 32-wide ones). The W slice is reused by all RS_BM rows of the tile.
//
// Thread t owns column tc = t % 32 of the tile and rows tr + 4 i (tr = t / 32, i < 4): a warp
// shares its rows (A reads are broadcasts) and spans 32 consecutive columns (W reads are
// conflict-free, output stores coalesce). Row tiles beyond gridDim.y are strided.

#define RS_BM 16
#define RS_BN 32
#define RS_BK 64
#define RS_THREADS 128
#define RS_ROWS (RS_BM / (RS_THREADS / RS_BN))
// Row pitch of the k-contiguous tiles: 16-byte aligned rows, and float4 reads by 8 lanes with
// rows 68 words apart hit 8 disjoint groups of 4 banks.
#define RS_LDK (RS_BK + 4)
// Row pitch of the n-contiguous W tile of the backward step (16-byte aligned float4 stores).
#define RS_LDN (RS_BN + 4)
#define RS_A_STAGE (RS_BM * RS_LDK)
// One W stage holds either layout: RS_BN x RS_LDK (forward) or RS_BK x RS_LDN (backward).
#define RS_W_STAGE (RS_BK * RS_LDN > RS_BN * RS_LDK ? RS_BK * RS_LDN : RS_BN * RS_LDK)
// float4s per thread to stage one slice of A (RS_BM x RS_BK) and of W (RS_BN x RS_BK).
#define RS_A_LOADS (RS_BM * RS_BK / 4 / RS_THREADS)
#define RS_W_LOADS (RS_BN * RS_BK / 4 / RS_THREADS)

// The slice of K from kb into registers: float4 j of this thread is element
// (t + j * RS_THREADS) of the slice in row-major float4 order, so consecutive threads read
// consecutive addresses. A's slice is RS_BM rows (of pitch lda) of RS_BK; W's is RS_BN (hidden)
// rows of RS_BK (forward, TRANS_W) or RS_BK rows of RS_BN (backward). K is `hidden`.
template <bool TRANS_W>
__device__ __forceinline__ void rs_fetch(const float* __restrict__ A, const float* __restrict__ W,
                                         uint batch, uint hidden, uint lda, uint bm, uint bn,
                                         uint kb, bool a_vec, bool w_vec, float4* a, float4* w) {
    const uint t = threadIdx.x;
#pragma unroll
    for (int j = 0; j < RS_A_LOADS; ++j) {
        const uint e = t + j * RS_THREADS;
        a[j] = rnn_load4(A, bm + e / (RS_BK / 4), batch, kb + (e % (RS_BK / 4)) * 4, hidden, lda,
                         a_vec);
    }
#pragma unroll
    for (int j = 0; j < RS_W_LOADS; ++j) {
        const uint e = t + j * RS_THREADS;
        if (TRANS_W) {
            w[j] = rnn_load4(W, bn + e / (RS_BK / 4), hidden, kb + (e % (RS_BK / 4)) * 4, hidden,
                             hidden, w_vec);
        } else {
            w[j] = rnn_load4(W, kb + e / (RS_BN / 4), hidden, bn + (e % (RS_BN / 4)) * 4, hidden,
                             hidden, w_vec);
        }
    }
}

// Stores what rs_fetch loaded into one stage (8 consecutive lanes write 32 consecutive words).
template <bool TRANS_W>
__device__ __forceinline__ void rs_stage(float* as, float* ws, const float4* a, const float4* w) {
    const uint t = threadIdx.x;
#pragma unroll
    for (int j = 0; j < RS_A_LOADS; ++j) {
        const uint e = t + j * RS_THREADS;
        *reinterpret_cast<float4*>(&as[(e / (RS_BK / 4)) * RS_LDK + (e % (RS_BK / 4)) * 4]) = a[j];
    }
#pragma unroll
    for (int j = 0; j < RS_W_LOADS; ++j) {
        const uint e = t + j * RS_THREADS;
        if (TRANS_W) {
            *reinterpret_cast<float4*>(&ws[(e / (RS_BK / 4)) * RS_LDK + (e % (RS_BK / 4)) * 4]) =
                w[j];
        } else {
            *reinterpret_cast<float4*>(&ws[(e / (RS_BN / 4)) * RS_LDN + (e % (RS_BN / 4)) * 4]) =
                w[j];
        }
    }
}

// acc[i] + acc[RS_ROWS + i] (two chains for latency) = row tr + 4 i, column tc of the tile
// (bm, bn) of A op(W). A is `batch x hidden` with rows `lda` apart (the gated steps read one
// gate block of a wider gradient); W is `hidden x hidden`, read as W^T (forward, TRANS_W) or W.
// With `a_vec`, A and lda must be 16-byte aligned; with `w_vec`, W and hidden.
template <bool TRANS_W>
__device__ __forceinline__ void rs_tile_product(const float* __restrict__ A,
                                                const float* __restrict__ W, uint batch,
                                                uint hidden, uint lda, uint bm, uint bn,
                                                bool a_vec, bool w_vec, float* As, float* Ws,
                                                float acc[2 * RS_ROWS]) {
    const uint tc = threadIdx.x % RS_BN;
    const uint tr = threadIdx.x / RS_BN;
#pragma unroll
    for (int i = 0; i < 2 * RS_ROWS; ++i) acc[i] = 0.0f;

    const uint ktiles = hidden / RS_BK + (hidden % RS_BK != 0);
    float4 a_next[RS_A_LOADS], w_next[RS_W_LOADS];
    rs_fetch<TRANS_W>(A, W, batch, hidden, lda, bm, bn, 0, a_vec, w_vec, a_next, w_next);
    for (uint kt = 0; kt < ktiles; ++kt) {
        float* as = As + (kt & 1) * RS_A_STAGE;
        float* ws = Ws + (kt & 1) * RS_W_STAGE;
        // This stage was last read two slices ago, before the previous barrier.
        rs_stage<TRANS_W>(as, ws, a_next, w_next);
        __syncthreads();
        if (kt + 1 < ktiles) {
            rs_fetch<TRANS_W>(A, W, batch, hidden, lda, bm, bn, (kt + 1) * RS_BK, a_vec, w_vec,
                              a_next, w_next);
        }
#pragma unroll
        for (uint kk = 0; kk < RS_BK; kk += 4) {
            float4 w;
            if (TRANS_W) {
                w = *reinterpret_cast<const float4*>(&ws[tc * RS_LDK + kk]);
            } else {
                w = make_float4(ws[kk * RS_LDN + tc], ws[(kk + 1) * RS_LDN + tc],
                                ws[(kk + 2) * RS_LDN + tc], ws[(kk + 3) * RS_LDN + tc]);
            }
#pragma unroll
            for (int i = 0; i < RS_ROWS; ++i) {
                const float4 a =
                    *reinterpret_cast<const float4*>(&as[(tr + 4 * i) * RS_LDK + kk]);
                acc[i] = fmaf(a.x, w.x, acc[i]);
                acc[RS_ROWS + i] = fmaf(a.y, w.y, acc[RS_ROWS + i]);
                acc[i] = fmaf(a.z, w.z, acc[i]);
                acc[RS_ROWS + i] = fmaf(a.w, w.w, acc[RS_ROWS + i]);
            }
        }
    }
    // The next row tile (if any) overwrites stage 0, which the last slice may have read.
    __syncthreads();
}

extern "C" __global__ void __launch_bounds__(RS_THREADS)
    rnn_step_forward(const float* pre_base, u64 pre_off, const float* h_prev_base,
                     u64 h_prev_off, const float* w_hh_base, u64 w_hh_off,
                     const float* b_ih_base, u64 b_ih_off, const float* b_hh_base, u64 b_hh_off,
                     float* h_base, u64 h_off, uint batch, uint hidden, uint act,
                     float act_param) {
    __shared__ float4 as4[2 * RS_A_STAGE / 4];
    __shared__ float4 ws4[2 * RS_W_STAGE / 4];
    const float* pre = pre_base + pre_off;
    const float* h_prev = h_prev_base + h_prev_off;
    const float* W = w_hh_base + w_hh_off;
    const float* b_ih = b_ih_base + b_ih_off;
    const float* b_hh = b_hh_base + b_hh_off;
    float* h = h_base + h_off;
    const bool a_vec = ((u64)h_prev % 16 == 0) && (hidden % 4 == 0);
    const bool w_vec = ((u64)W % 16 == 0) && (hidden % 4 == 0);
    const uint bn = blockIdx.x * RS_BN;
    const uint col = bn + threadIdx.x % RS_BN;
    const uint tr = threadIdx.x / RS_BN;
    const float bias = col < hidden ? b_ih[col] + b_hh[col] : 0.0f;
    const uint row_tiles = batch / RS_BM + (batch % RS_BM != 0);
    for (uint tile = blockIdx.y; tile < row_tiles; tile += gridDim.y) {
        const uint bm = tile * RS_BM;
        float acc[2 * RS_ROWS];
        rs_tile_product<true>(h_prev, W, batch, hidden, hidden, bm, bn, a_vec, w_vec,
                              reinterpret_cast<float*>(as4), reinterpret_cast<float*>(ws4), acc);
        if (col >= hidden) continue;
#pragma unroll
        for (int i = 0; i < RS_ROWS; ++i) {
            const uint row = bm + tr + 4 * i;
            if (row < batch) {
                const u64 at = (u64)row * hidden + col;
                h[at] = act_forward(acc[i] + acc[RS_ROWS + i] + pre[at] + bias, act, act_param);
            }
        }
    }
}

// has_next == 0 (the last step): dpre_next is not read and the product is zero.
extern "C" __global__ void __launch_bounds__(RS_THREADS)
    rnn_step_backward(const float* dh_base, u64 dh_off, const float* dpre_next_base,
                      u64 dpre_next_off, const float* w_hh_base, u64 w_hh_off,
                      const float* h_base, u64 h_off, float* dpre_base, u64 dpre_off,
                      uint batch, uint hidden, uint has_next, uint act, float act_param) {
    __shared__ float4 as4[2 * RS_A_STAGE / 4];
    __shared__ float4 ws4[2 * RS_W_STAGE / 4];
    const float* dh = dh_base + dh_off;
    const float* dnext = dpre_next_base + dpre_next_off;
    const float* W = w_hh_base + w_hh_off;
    const float* h = h_base + h_off;
    float* dpre = dpre_base + dpre_off;
    const bool a_vec = ((u64)dnext % 16 == 0) && (hidden % 4 == 0);
    const bool w_vec = ((u64)W % 16 == 0) && (hidden % 4 == 0);
    const uint bn = blockIdx.x * RS_BN;
    const uint col = bn + threadIdx.x % RS_BN;
    const uint tr = threadIdx.x / RS_BN;
    const uint row_tiles = batch / RS_BM + (batch % RS_BM != 0);
    for (uint tile = blockIdx.y; tile < row_tiles; tile += gridDim.y) {
        const uint bm = tile * RS_BM;
        float acc[2 * RS_ROWS];
        if (has_next) {
            rs_tile_product<false>(dnext, W, batch, hidden, hidden, bm, bn, a_vec, w_vec,
                                   reinterpret_cast<float*>(as4), reinterpret_cast<float*>(ws4),
                                   acc);
        } else {
#pragma unroll
            for (int i = 0; i < 2 * RS_ROWS; ++i) acc[i] = 0.0f;
        }
        if (col >= hidden) continue;
#pragma unroll
        for (int i = 0; i < RS_ROWS; ++i) {
            const uint row = bm + tr + 4 * i;
            if (row < batch) {
                const u64 at = (u64)row * hidden + col;
                const float y = h[at];
                const float g = dh[at] + acc[i] + acc[RS_ROWS + i];
                dpre[at] = act_grad(0.0f, y, act, act_param) * g;
            }
        }
    }
}

// The GEMM path's cells in Bf16/F16 precision (the `_lo` entries, src/backend/gpu/seq_gemm.rs)
// also write a copy of what the next product reads (h_t forward, the gate gradients backward)
// rounded to T (`kind`: RNN_KIND_BF16 or RNN_KIND_F16) into `lo`, next to their f32 outputs; a
// null `lo` is the f32 cell.
__device__ __forceinline__ void rnn_store_lo(ushort* lo, u64 at, float v, uint kind) {
    if (lo) lo[at] = rnn_f32_to_half(v, kind);
}

__device__ __forceinline__ void lstm_cell_forward_body(float* gates, const float* c_prev,
                                                       float* c, float* h, ushort* h_lo,
                                                       uint kind, uint batch, uint hidden) {
    const u64 n = (u64)batch * hidden;
    RNN_GRID_LOOP(i, n) {
        const u64 b = i / hidden;
        const u64 j = i - b * hidden;
        float* g = gates + b * 4 * hidden + j;
        const float gi = rnn_sigmoid(g[0]);
        const float gf = rnn_sigmoid(g[hidden]);
        const float gg = tanhf(g[2 * (u64)hidden]);
        const float go = rnn_sigmoid(g[3 * (u64)hidden]);
        g[0] = gi;
        g[hidden] = gf;
        g[2 * (u64)hidden] = gg;
        g[3 * (u64)hidden] = go;
        const float ct = gf * c_prev[i] + gi * gg;
        c[i] = ct;
        const float ht = go * tanhf(ct);
        h[i] = ht;
        rnn_store_lo(h_lo, i, ht, kind);
    }
}

extern "C" __global__ void lstm_cell_forward(float* gates_base, u64 gates_off,
                                             const float* c_prev_base, u64 c_prev_off,
                                             float* c_base, u64 c_off, float* h_base, u64 h_off,
                                             uint batch, uint hidden) {
    lstm_cell_forward_body(gates_base + gates_off, c_prev_base + c_prev_off, c_base + c_off,
                           h_base + h_off, nullptr, 0, batch, hidden);
}

// lstm_cell_forward writing h_t in T too.
extern "C" __global__ void lstm_cell_forward_lo(float* gates_base, u64 gates_off,
                                                const float* c_prev_base, u64 c_prev_off,
                                                float* c_base, u64 c_off, float* h_base,
                                                u64 h_off, ushort* h_lo_base, u64 h_lo_off,
                                                uint batch, uint hidden, uint kind) {
    lstm_cell_forward_body(gates_base + gates_off, c_prev_base + c_prev_off, c_base + c_off,
                           h_base + h_off, h_lo_base + h_lo_off, kind, batch, hidden);
}

// The cell bodies below serve two kernels each: the cell op's, and the GEMM path's
// (src/backend/gpu/seq_gemm.rs), whose step is its GEMM and one cell launch. Those read unsummed
// what the cell ops take summed (the input projection and biases, the gradient from the step
// after) and add it themselves, in the order of the copies and bias adds they replace; a null
// pointer for such a part is the cell op.

// v[at], plus bias[j] where there is a bias.
__device__ __forceinline__ float rnn_plus(const float* v, u64 at, const float* bias, u64 j) {
    return bias ? v[at] + bias[j] : v[at];
}

// The gradient reaching h_t is dh + dh_rec where dh_rec is given.
__device__ __forceinline__ void lstm_cell_backward_body(
    const float* gates, const float* c_prev, const float* c, const float* dh,
    const float* dh_rec, float* dc, float* dgates, ushort* dgates_lo, uint kind, uint batch,
    uint hidden) {
    const u64 n = (u64)batch * hidden;
    RNN_GRID_LOOP(i, n) {
        const u64 b = i / hidden;
        const u64 j = i - b * hidden;
        const u64 base = b * 4 * hidden + j;
        const float gi = gates[base];
        const float gf = gates[base + hidden];
        const float gg = gates[base + 2 * (u64)hidden];
        const float go = gates[base + 3 * (u64)hidden];
        const float tc = tanhf(c[i]);
        const float dhi = rnn_plus(dh, i, dh_rec, i);
        RNN_LSTM_UNIT_BACKWARD(dgates, base, (u64)hidden, dc[i], dhi, tc, c_prev[i], gi, gf, gg, go, dc[i]);
        for (uint k = 0; k < 4; ++k) {
            const u64 at = base + k * (u64)hidden;
            rnn_store_lo(dgates_lo, at, dgates[at], kind);
        }
    }
}

extern "C" __global__ void lstm_cell_backward(const float* gates_base, u64 gates_off,
                                              const float* c_prev_base, u64 c_prev_off,
                                              const float* c_base, u64 c_off,
                                              const float* dh_base, u64 dh_off, float* dc_base,
                                              u64 dc_off, float* dgates_base, u64 dgates_off,
                                              uint batch, uint hidden) {
    lstm_cell_backward_body(gates_base + gates_off, c_prev_base + c_prev_off, c_base + c_off,
                            dh_base + dh_off, nullptr, dc_base + dc_off,
                            dgates_base + dgates_off, nullptr, 0, batch, hidden);
}

// lstm_cell_backward of the gradient dh + dh_rec (the recurrent product).
extern "C" __global__ void lstm_cell_backward_sum(const float* gates_base, u64 gates_off,
                                                  const float* c_prev_base, u64 c_prev_off,
                                                  const float* c_base, u64 c_off,
                                                  const float* dh_base, u64 dh_off,
                                                  const float* dh_rec_base, u64 dh_rec_off,
                                                  float* dc_base, u64 dc_off, float* dgates_base,
                                                  u64 dgates_off, uint batch, uint hidden) {
    lstm_cell_backward_body(gates_base + gates_off, c_prev_base + c_prev_off, c_base + c_off,
                            dh_base + dh_off, dh_rec_base + dh_rec_off, dc_base + dc_off,
                            dgates_base + dgates_off, nullptr, 0, batch, hidden);
}

// lstm_cell_backward_sum writing the gate gradients in T too.
extern "C" __global__ void lstm_cell_backward_sum_lo(
    const float* gates_base, u64 gates_off, const float* c_prev_base, u64 c_prev_off,
    const float* c_base, u64 c_off, const float* dh_base, u64 dh_off, const float* dh_rec_base,
    u64 dh_rec_off, float* dc_base, u64 dc_off, float* dgates_base, u64 dgates_off,
    ushort* dgates_lo_base, u64 dgates_lo_off, uint batch, uint hidden, uint kind) {
    lstm_cell_backward_body(gates_base + gates_off, c_prev_base + c_prev_off, c_base + c_off,
                            dh_base + dh_off, dh_rec_base + dh_rec_off, dc_base + dc_off,
                            dgates_base + dgates_off, dgates_lo_base + dgates_lo_off, kind, batch,
                            hidden);
}

// The gate pre-activations are gx (+ b_ih) and gh (+ b_hh), each part summed first.
__device__ __forceinline__ void gru_cell_forward_body(const float* gx, const float* b_ih,
                                                      const float* gh, const float* b_hh,
                                                      const float* h_prev, float* h,
                                                      float* cache, ushort* h_lo, uint kind,
                                                      uint batch, uint hidden) {
    const u64 n = (u64)batch * hidden;
    const u64 H = hidden;
    RNN_GRID_LOOP(i, n) {
        const u64 b = i / hidden;
        const u64 j = i - b * hidden;
        const u64 g3 = b * 3 * H + j;
        const float r = rnn_sigmoid(rnn_plus(gx, g3, b_ih, j) + rnn_plus(gh, g3, b_hh, j));
        const float z =
            rnn_sigmoid(rnn_plus(gx, g3 + H, b_ih, j + H) + rnn_plus(gh, g3 + H, b_hh, j + H));
        const float ghn = rnn_plus(gh, g3 + 2 * H, b_hh, j + 2 * H);
        const float nn = tanhf(rnn_plus(gx, g3 + 2 * H, b_ih, j + 2 * H) + r * ghn);
        const float hp = h_prev[i];
        const float ht = (1.0f - z) * nn + z * hp;
        h[i] = ht;
        rnn_store_lo(h_lo, i, ht, kind);
        const u64 g4 = b * 4 * H + j;
        cache[g4] = r;
        cache[g4 + H] = z;
        cache[g4 + 2 * H] = nn;
        cache[g4 + 3 * H] = ghn;
    }
}

extern "C" __global__ void gru_cell_forward(const float* gx_base, u64 gx_off, const float* gh_base,
                                            u64 gh_off, const float* h_prev_base, u64 h_prev_off,
                                            float* h_base, u64 h_off, float* cache_base,
                                            u64 cache_off, uint batch, uint hidden) {
    gru_cell_forward_body(gx_base + gx_off, nullptr, gh_base + gh_off, nullptr,
                          h_prev_base + h_prev_off, h_base + h_off, cache_base + cache_off, nullptr,
                          0, batch, hidden);
}

// gru_cell_forward of gx_t + b_ih and gh + b_hh (gh = h_prev W_hh^T), biases 3 hidden.
extern "C" __global__ void gru_cell_forward_bias(const float* gx_base, u64 gx_off,
                                                 const float* b_ih_base, u64 b_ih_off,
                                                 const float* gh_base, u64 gh_off,
                                                 const float* b_hh_base, u64 b_hh_off,
                                                 const float* h_prev_base, u64 h_prev_off,
                                                 float* h_base, u64 h_off, float* cache_base,
                                                 u64 cache_off, uint batch, uint hidden) {
    gru_cell_forward_body(gx_base + gx_off, b_ih_base + b_ih_off, gh_base + gh_off,
                          b_hh_base + b_hh_off, h_prev_base + h_prev_off, h_base + h_off,
                          cache_base + cache_off, nullptr, 0, batch, hidden);
}

// gru_cell_forward_bias writing h_t in T too.
extern "C" __global__ void gru_cell_forward_bias_lo(
    const float* gx_base, u64 gx_off, const float* b_ih_base, u64 b_ih_off, const float* gh_base,
    u64 gh_off, const float* b_hh_base, u64 b_hh_off, const float* h_prev_base, u64 h_prev_off,
    float* h_base, u64 h_off, float* cache_base, u64 cache_off, ushort* h_lo_base, u64 h_lo_off,
    uint batch, uint hidden, uint kind) {
    gru_cell_forward_body(gx_base + gx_off, b_ih_base + b_ih_off, gh_base + gh_off,
                          b_hh_base + b_hh_off, h_prev_base + h_prev_off, h_base + h_off,
                          cache_base + cache_off, h_lo_base + h_lo_off, kind, batch, hidden);
}

// The gradient reaching h_t is dh + dh_rec where dh_rec is given; dh_rec may be dh_prev's own
// pointer (read before the element is written).
__device__ __forceinline__ void gru_cell_backward_body(const float* cache, const float* h_prev,
                                                       const float* dh, const float* dh_rec,
                                                       float* dgx, float* dgh, float* dh_prev,
                                                       ushort* dgh_lo, uint kind, uint batch,
                                                       uint hidden) {
    const u64 n = (u64)batch * hidden;
    const u64 H = hidden;
    RNN_GRID_LOOP(i, n) {
        const u64 b = i / hidden;
        const u64 j = i - b * hidden;
        const u64 g4 = b * 4 * H + j;
        const float r = cache[g4];
        const float z = cache[g4 + H];
        const float nn = cache[g4 + 2 * H];
        const float ghn = cache[g4 + 3 * H];
        const float d = rnn_plus(dh, i, dh_rec, i);
        const u64 g3 = b * 3 * H + j;
        RNN_GRU_UNIT_BACKWARD(dgx, dgh, g3, H, d, r, z, nn, ghn, h_prev[i], dh_prev[i]);
        for (uint k = 0; k < 3; ++k) rnn_store_lo(dgh_lo, g3 + k * H, dgh[g3 + k * H], kind);
    }
}

extern "C" __global__ void gru_cell_backward(const float* cache_base, u64 cache_off,
                                             const float* h_prev_base, u64 h_prev_off,
                                             const float* dh_base, u64 dh_off, float* dgx_base,
                                             u64 dgx_off, float* dgh_base, u64 dgh_off,
                                             float* dh_prev_base, u64 dh_prev_off, uint batch,
                                             uint hidden) {
    gru_cell_backward_body(cache_base + cache_off, h_prev_base + h_prev_off, dh_base + dh_off,
                           nullptr, dgx_base + dgx_off, dgh_base + dgh_off,
                           dh_prev_base + dh_prev_off, nullptr, 0, batch, hidden);
}

// gru_cell_backward of the gradient dh + dh_prev: dh_prev holds what the later steps sent to
// h_t on entry and what flows on to h_{t-1} on exit.
extern "C" __global__ void gru_cell_backward_carry(const float* cache_base, u64 cache_off,
                                                   const float* h_prev_base, u64 h_prev_off,
                                                   const float* dh_base, u64 dh_off,
                                                   float* dgx_base, u64 dgx_off, float* dgh_base,
                                                   u64 dgh_off, float* dh_prev_base,
                                                   u64 dh_prev_off, uint batch, uint hidden) {
    float* dh_prev = dh_prev_base + dh_prev_off;
    gru_cell_backward_body(cache_base + cache_off, h_prev_base + h_prev_off, dh_base + dh_off,
                           dh_prev, dgx_base + dgx_off, dgh_base + dgh_off, dh_prev, nullptr, 0,
                           batch, hidden);
}

// gru_cell_backward_carry writing dgh in T too.
extern "C" __global__ void gru_cell_backward_carry_lo(
    const float* cache_base, u64 cache_off, const float* h_prev_base, u64 h_prev_off,
    const float* dh_base, u64 dh_off, float* dgx_base, u64 dgx_off, float* dgh_base, u64 dgh_off,
    float* dh_prev_base, u64 dh_prev_off, ushort* dgh_lo_base, u64 dgh_lo_off, uint batch,
    uint hidden, uint kind) {
    float* dh_prev = dh_prev_base + dh_prev_off;
    gru_cell_backward_body(cache_base + cache_off, h_prev_base + h_prev_off, dh_base + dh_off,
                           dh_prev, dgx_base + dgx_off, dgh_base + dgh_off, dh_prev,
                           dgh_lo_base + dgh_lo_off, kind, batch, hidden);
}

// The Elman step after its product: h holds h_prev W_hh^T on entry and
// act(h_prev W_hh^T + pre + bias) on exit (bias: b_ih + b_hh).
__device__ __forceinline__ void rnn_cell_forward_body(const float* pre, const float* bias,
                                                      float* h, ushort* h_lo, uint kind,
                                                      uint batch, uint hidden, uint act,
                                                      float act_param) {
    const u64 n = (u64)batch * hidden;
    RNN_GRID_LOOP(i, n) {
        const float ht = act_forward((h[i] + pre[i]) + bias[i % hidden], act, act_param);
        h[i] = ht;
        rnn_store_lo(h_lo, i, ht, kind);
    }
}

extern "C" __global__ void rnn_cell_forward(const float* pre_base, u64 pre_off,
                                            const float* bias_base, u64 bias_off, float* h_base,
                                            u64 h_off, uint batch, uint hidden, uint act,
                                            float act_param) {
    rnn_cell_forward_body(pre_base + pre_off, bias_base + bias_off, h_base + h_off, nullptr, 0,
                          batch, hidden, act, act_param);
}

// rnn_cell_forward writing h_t in T too.
extern "C" __global__ void rnn_cell_forward_lo(const float* pre_base, u64 pre_off,
                                               const float* bias_base, u64 bias_off,
                                               float* h_base, u64 h_off, ushort* h_lo_base,
                                               u64 h_lo_off, uint batch, uint hidden, uint act,
                                               uint kind, float act_param) {
    rnn_cell_forward_body(pre_base + pre_off, bias_base + bias_off, h_base + h_off,
                          h_lo_base + h_lo_off, kind, batch, hidden, act, act_param);
}

// The Elman backward step after its product: dpre = (dh + dh_rec) act'(h), dh_rec the product
// dpre_{t+1} W_hh.
__device__ __forceinline__ void rnn_cell_backward_body(const float* dh, const float* dh_rec,
                                                       const float* h, float* dpre,
                                                       ushort* dpre_lo, uint kind, uint batch,
                                                       uint hidden, uint act, float act_param) {
    const u64 n = (u64)batch * hidden;
    RNN_GRID_LOOP(i, n) {
        const float y = h[i];
        const float d = (dh[i] + dh_rec[i]) * act_grad(y, y, act, act_param);
        dpre[i] = d;
        rnn_store_lo(dpre_lo, i, d, kind);
    }
}

extern "C" __global__ void rnn_cell_backward(const float* dh_base, u64 dh_off,
                                             const float* dh_rec_base, u64 dh_rec_off,
                                             const float* h_base, u64 h_off, float* dpre_base,
                                             u64 dpre_off, uint batch, uint hidden, uint act,
                                             float act_param) {
    rnn_cell_backward_body(dh_base + dh_off, dh_rec_base + dh_rec_off, h_base + h_off,
                           dpre_base + dpre_off, nullptr, 0, batch, hidden, act, act_param);
}

// rnn_cell_backward writing dpre in T too.
extern "C" __global__ void rnn_cell_backward_lo(const float* dh_base, u64 dh_off,
                                                const float* dh_rec_base, u64 dh_rec_off,
                                                const float* h_base, u64 h_off,
                                                float* dpre_base, u64 dpre_off,
                                                ushort* dpre_lo_base, u64 dpre_lo_off,
                                                uint batch, uint hidden, uint act, uint kind,
                                                float act_param) {
    rnn_cell_backward_body(dh_base + dh_off, dh_rec_base + dh_rec_off, h_base + h_off,
                           dpre_base + dpre_off, dpre_lo_base + dpre_lo_off, kind, batch, hidden,
                           act, act_param);
}
