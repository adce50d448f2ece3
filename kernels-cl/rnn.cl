// Recurrent cell steps (gate order as in PyTorch). The LSTM and GRU cells run one work-item per
// (batch, hidden) element; the Elman steps use geometry S (below).

// ---- fused Elman steps (geometry S) --------------------------------------------------------
//
// The same algorithm as kernels-cu/rnn.cu: a group of RS_THREADS work-items computes an
// RS_BM x RS_BN tile (batch rows x hidden columns) of
//   forward:  h    = act(pre + h_prev W^T + b_ih + b_hh)
//   backward: dpre = act'(h) * (dh + dpre_next W)
// with K staged in RS_BK slices in double-buffered local memory, the next slice prefetched
// into registers while the current one is consumed. Work-item t owns column t % 32 and rows
// t / 32 + 4 i; row tiles beyond the number of groups in y are strided.

#define RS_BM 16
#define RS_BN 32
#define RS_BK 64
#define RS_THREADS 128
#define RS_ROWS 4
#define RS_LDK (RS_BK + 4)
#define RS_LDN (RS_BN + 4)
#define RS_A_STAGE (RS_BM * RS_LDK)
// One W stage holds either layout: RS_BN x RS_LDK (forward) or RS_BK x RS_LDN (backward).
#define RS_W_STAGE (RS_BK * RS_LDN > RS_BN * RS_LDK ? RS_BK * RS_LDN : RS_BN * RS_LDK)
#define RS_A_LOADS (RS_BM * RS_BK / 4 / RS_THREADS)
#define RS_W_LOADS (RS_BN * RS_BK / 4 / RS_THREADS)

// Four consecutive elements of row `row` from column `col`, zero outside (row_lim, col_lim).
// vload4 needs only float alignment, so any view offset takes the vector path.
inline float4 rs_load4(__global const float* base, uint row, uint row_lim, uint col,
                       uint col_lim, uint ld) {
    float4 v = (float4)(0.0f);
    if (row < row_lim) {
        __global const float* p = base + (ulong)row * ld + col;
        if (col + 3 < col_lim) {
            v = vload4(0, p);
        } else {
            if (col < col_lim) v.x = p[0];
            if (col + 1 < col_lim) v.y = p[1];
            if (col + 2 < col_lim) v.z = p[2];
        }
    }
    return v;
}

// The K slice from kb into registers; float4 j of work-item t is element t + j * RS_THREADS of
// the slice in row-major float4 order (A: RS_BM rows, `lda` apart, of RS_BK; W: RS_BN rows of
// RS_BK when trans_w, else RS_BK rows of RS_BN). K is `hidden`.
inline void rs_fetch(__global const float* A, __global const float* W, uint batch, uint hidden,
                     uint lda, uint bm, uint bn, uint kb, int trans_w, float4* a, float4* w) {
    uint t = get_local_id(0);
    for (int j = 0; j < RS_A_LOADS; j++) {
        uint e = t + j * RS_THREADS;
        a[j] = rs_load4(A, bm + e / (RS_BK / 4), batch, kb + (e % (RS_BK / 4)) * 4, hidden, lda);
    }
    for (int j = 0; j < RS_W_LOADS; j++) {
        uint e = t + j * RS_THREADS;
        if (trans_w)
            w[j] = rs_load4(W, bn + e / (RS_BK / 4), hidden, kb + (e % (RS_BK / 4)) * 4, hidden,
                            hidden);
        else
            w[j] = rs_load4(W, kb + e / (RS_BN / 4), hidden, bn + (e % (RS_BN / 4)) * 4, hidden,
                            hidden);
    }
}

inline void rs_stage(__local float* as, __local float* ws, int trans_w, const float4* a,
                     const float4* w) {
    uint t = get_local_id(0);
    for (int j = 0; j < RS_A_LOADS; j++) {
        uint e = t + j * RS_THREADS;
        vstore4(a[j], 0, as + (e / (RS_BK / 4)) * RS_LDK + (e % (RS_BK / 4)) * 4);
    }
    for (int j = 0; j < RS_W_LOADS; j++) {
        uint e = t + j * RS_THREADS;
        if (trans_w)
            vstore4(w[j], 0, ws + (e / (RS_BK / 4)) * RS_LDK + (e % (RS_BK / 4)) * 4);
        else
            vstore4(w[j], 0, ws + (e / (RS_BN / 4)) * RS_LDN + (e % (RS_BN / 4)) * 4);
    }
}

// acc[i] + acc[RS_ROWS + i] = row t / 32 + 4 i, column t % 32 of the tile (bm, bn) of
// A op(W); A is `batch x hidden` with rows `lda` apart, W is `hidden x hidden`, read transposed
// when trans_w (the forward step). Ends with a barrier, so the caller may run it again for
// another tile (or another gate).
inline void rs_tile_product(__global const float* A, __global const float* W, uint batch,
                            uint hidden, uint lda, uint bm, uint bn, int trans_w,
                            __local float* As, __local float* Ws, float* acc) {
    uint tc = get_local_id(0) % RS_BN;
    uint tr = get_local_id(0) / RS_BN;
    for (int i = 0; i < 2 * RS_ROWS; i++) acc[i] = 0.0f;
    uint ktiles = hidden / RS_BK + (hidden % RS_BK != 0);
    float4 a_next[RS_A_LOADS], w_next[RS_W_LOADS];
    rs_fetch(A, W, batch, hidden, lda, bm, bn, 0, trans_w, a_next, w_next);
    for (uint kt = 0; kt < ktiles; kt++) {
        __local float* as = As + (kt & 1) * RS_A_STAGE;
        __local float* ws = Ws + (kt & 1) * RS_W_STAGE;
        // This stage was last read two slices ago, before the previous barrier.
        rs_stage(as, ws, trans_w, a_next, w_next);
        barrier(CLK_LOCAL_MEM_FENCE);
        if (kt + 1 < ktiles)
            rs_fetch(A, W, batch, hidden, lda, bm, bn, (kt + 1) * RS_BK, trans_w, a_next,
                     w_next);
        for (uint kk = 0; kk < RS_BK; kk += 4) {
            float4 w;
            if (trans_w) {
                w = vload4(0, ws + tc * RS_LDK + kk);
            } else {
                w = (float4)(ws[kk * RS_LDN + tc], ws[(kk + 1) * RS_LDN + tc],
                             ws[(kk + 2) * RS_LDN + tc], ws[(kk + 3) * RS_LDN + tc]);
            }
            for (int i = 0; i < RS_ROWS; i++) {
                float4 a = vload4(0, as + (tr + 4 * i) * RS_LDK + kk);
                acc[i] = fma(a.x, w.x, acc[i]);
                acc[RS_ROWS + i] = fma(a.y, w.y, acc[RS_ROWS + i]);
                acc[i] = fma(a.z, w.z, acc[i]);
                acc[RS_ROWS + i] = fma(a.w, w.w, acc[RS_ROWS + i]);
            }
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
}

__kernel __attribute__((reqd_work_group_size(RS_THREADS, 1, 1)))
void rnn_step_forward(__global const float* pre_base, ulong pre_off,
                      __global const float* hp_base, ulong hp_off,
                      __global const float* w_base, ulong w_off,
                      __global const float* bi_base, ulong bi_off,
                      __global const float* bh_base, ulong bh_off, __global float* h_base,
                      ulong h_off, uint batch, uint hidden, uint act, float act_param) {
    __local float As[2 * RS_A_STAGE];
    __local float Ws[2 * RS_W_STAGE];
    __global const float* pre = pre_base + pre_off;
    __global const float* h_prev = hp_base + hp_off;
    __global const float* W = w_base + w_off;
    __global const float* b_ih = bi_base + bi_off;
    __global const float* b_hh = bh_base + bh_off;
    __global float* h = h_base + h_off;
    uint bn = get_group_id(0) * RS_BN;
    uint col = bn + get_local_id(0) % RS_BN;
    uint tr = get_local_id(0) / RS_BN;
    float bias = col < hidden ? b_ih[col] + b_hh[col] : 0.0f;
    uint row_tiles = batch / RS_BM + (batch % RS_BM != 0);
    for (uint tile = get_group_id(1); tile < row_tiles; tile += get_num_groups(1)) {
        uint bm = tile * RS_BM;
        float acc[2 * RS_ROWS];
        rs_tile_product(h_prev, W, batch, hidden, hidden, bm, bn, 1, As, Ws, acc);
        if (col >= hidden) continue;
        for (int i = 0; i < RS_ROWS; i++) {
            uint row = bm + tr + 4 * i;
            if (row < batch) {
                ulong at = (ulong)row * hidden + col;
                h[at] = act_forward(acc[i] + acc[RS_ROWS + i] + pre[at] + bias, act, act_param);
            }
        }
    }
}

// has_next == 0 (the last step): dpre_next is not read and the product is zero.
__kernel __attribute__((reqd_work_group_size(RS_THREADS, 1, 1)))
void rnn_step_backward(__global const float* dh_base, ulong dh_off,
                       __global const float* dn_base, ulong dn_off,
                       __global const float* w_base, ulong w_off,
                       __global const float* h_base, ulong h_off, __global float* dp_base,
                       ulong dp_off, uint batch, uint hidden, uint has_next, uint act,
                       float act_param) {
    __local float As[2 * RS_A_STAGE];
    __local float Ws[2 * RS_W_STAGE];
    __global const float* dh = dh_base + dh_off;
    __global const float* dnext = dn_base + dn_off;
    __global const float* W = w_base + w_off;
    __global const float* h = h_base + h_off;
    __global float* dpre = dp_base + dp_off;
    uint bn = get_group_id(0) * RS_BN;
    uint col = bn + get_local_id(0) % RS_BN;
    uint tr = get_local_id(0) / RS_BN;
    uint row_tiles = batch / RS_BM + (batch % RS_BM != 0);
    for (uint tile = get_group_id(1); tile < row_tiles; tile += get_num_groups(1)) {
        uint bm = tile * RS_BM;
        float acc[2 * RS_ROWS];
        if (has_next) {
            rs_tile_product(dnext, W, batch, hidden, hidden, bm, bn, 0, As, Ws, acc);
        } else {
            for (int i = 0; i < 2 * RS_ROWS; i++) acc[i] = 0.0f;
        }
        if (col >= hidden) continue;
        for (int i = 0; i < RS_ROWS; i++) {
            uint row = bm + tr + 4 * i;
            if (row < batch) {
                ulong at = (ulong)row * hidden + col;
                // act_grad(z, y): z is unused for relu and tanh.
                float g = dh[at] + acc[i] + acc[RS_ROWS + i];
                dpre[at] = act_grad(0.0f, h[at], act, act_param) * g;
            }
        }
    }
}

// The GEMM path's cells in Bf16/F16 precision (the `_lo` entries, src/backend/gpu/seq_gemm.rs)
// also write a copy of what the next product reads (h_t forward, the gate gradients backward)
// rounded to T (`kind`: RNN_KIND_BF16 or RNN_KIND_F16) into `lo`, next to their f32 outputs; a
// null `lo` is the f32 cell.
#define RNN_NO_LO ((__global ushort*)0)

inline void rnn_store_lo(__global ushort* lo, ulong at, float v, uint kind) {
    if (lo) lo[at] = rnn_f32_to_half(v, kind);
}

inline void lstm_cell_forward_body(__global float* gates, __global const float* c_prev,
                                   __global float* c, __global float* h, __global ushort* h_lo,
                                   uint kind, uint batch, uint hidden) {
    uint n = batch * hidden;
    RNN_GRID_LOOP(e, n) {
        uint b = e / hidden;
        uint j = e - b * hidden;
        ulong base = (ulong)b * 4 * hidden + j;
        float ig = rnn_sigmoid(gates[base]);
        float fg = rnn_sigmoid(gates[base + hidden]);
        float gg = tanh(gates[base + 2 * hidden]);
        float og = rnn_sigmoid(gates[base + 3 * hidden]);
        gates[base] = ig;
        gates[base + hidden] = fg;
        gates[base + 2 * hidden] = gg;
        gates[base + 3 * hidden] = og;
        float cv = fg * c_prev[e] + ig * gg;
        c[e] = cv;
        float hv = og * tanh(cv);
        h[e] = hv;
        rnn_store_lo(h_lo, e, hv, kind);
    }
}

__kernel void lstm_cell_forward(__global float* g_base, ulong g_off,
                                __global const float* cp_base, ulong cp_off,
                                __global float* c_base, ulong c_off, __global float* h_base,
                                ulong h_off, uint batch, uint hidden) {
    lstm_cell_forward_body(g_base + g_off, cp_base + cp_off, c_base + c_off, h_base + h_off,
                           RNN_NO_LO, 0u, batch, hidden);
}

// lstm_cell_forward writing h_t in T too.
__kernel void lstm_cell_forward_lo(__global float* g_base, ulong g_off,
                                   __global const float* cp_base, ulong cp_off,
                                   __global float* c_base, ulong c_off, __global float* h_base,
                                   ulong h_off, __global ushort* lo_base, ulong lo_off,
                                   uint batch, uint hidden, uint kind) {
    lstm_cell_forward_body(g_base + g_off, cp_base + cp_off, c_base + c_off, h_base + h_off,
                           lo_base + lo_off, kind, batch, hidden);
}

// The cell bodies below serve two kernels each: the cell op's, and the GEMM path's
// (src/backend/gpu/seq_gemm.rs), whose step is its GEMM and one cell launch. Those read unsummed
// what the cell ops take summed (the input projection and biases, the gradient from the step
// after) and add it themselves, in the order of the copies and bias adds they replace; a null
// pointer for such a part is the cell op.
#define RNN_NO_PART ((__global const float*)0)

// v[at], plus bias[j] where there is a bias.
inline float rnn_plus(__global const float* v, ulong at, __global const float* bias, ulong j) {
    return bias ? v[at] + bias[j] : v[at];
}

// The gradient reaching h_t is dh + dh_rec where dh_rec is given.
inline void lstm_cell_backward_body(__global const float* gates, __global const float* c_prev,
                                    __global const float* c, __global const float* dh,
                                    __global const float* dh_rec, __global float* dc,
                                    __global float* dgates, __global ushort* dgates_lo,
                                    uint kind, uint batch, uint hidden) {
    ulong n = (ulong)batch * hidden;
    RNN_GRID_LOOP(e, n) {
        ulong b = e / hidden;
        ulong j = e - b * hidden;
        ulong base = b * 4 * hidden + j;
        float ig = gates[base];
        float fg = gates[base + hidden];
        float gg = gates[base + 2 * hidden];
        float og = gates[base + 3 * hidden];
        float tc = tanh(c[e]);
        float dhe = rnn_plus(dh, e, dh_rec, e);
        RNN_LSTM_UNIT_BACKWARD(dgates, base, hidden, dc[e], dhe, tc, c_prev[e], ig, fg, gg, og, dc[e]);
        for (uint k = 0; k < 4; ++k) {
            ulong at = base + (ulong)k * hidden;
            rnn_store_lo(dgates_lo, at, dgates[at], kind);
        }
    }
}

__kernel void lstm_cell_backward(__global const float* g_base, ulong g_off,
                                 __global const float* cp_base, ulong cp_off,
                                 __global const float* c_base, ulong c_off,
                                 __global const float* dh_base, ulong dh_off,
                                 __global float* dc_base, ulong dc_off, __global float* dg_base,
                                 ulong dg_off, uint batch, uint hidden) {
    lstm_cell_backward_body(g_base + g_off, cp_base + cp_off, c_base + c_off, dh_base + dh_off,
                            RNN_NO_PART, dc_base + dc_off, dg_base + dg_off, RNN_NO_LO, 0u,
                            batch, hidden);
}

// lstm_cell_backward of the gradient dh + dh_rec (the recurrent product).
__kernel void lstm_cell_backward_sum(__global const float* g_base, ulong g_off,
                                     __global const float* cp_base, ulong cp_off,
                                     __global const float* c_base, ulong c_off,
                                     __global const float* dh_base, ulong dh_off,
                                     __global const float* dr_base, ulong dr_off,
                                     __global float* dc_base, ulong dc_off,
                                     __global float* dg_base, ulong dg_off, uint batch,
                                     uint hidden) {
    lstm_cell_backward_body(g_base + g_off, cp_base + cp_off, c_base + c_off, dh_base + dh_off,
                            dr_base + dr_off, dc_base + dc_off, dg_base + dg_off, RNN_NO_LO, 0u,
                            batch, hidden);
}

// lstm_cell_backward_sum writing the gate gradients in T too.
__kernel void lstm_cell_backward_sum_lo(__global const float* g_base, ulong g_off,
                                        __global const float* cp_base, ulong cp_off,
                                        __global const float* c_base, ulong c_off,
                                        __global const float* dh_base, ulong dh_off,
                                        __global const float* dr_base, ulong dr_off,
                                        __global float* dc_base, ulong dc_off,
                                        __global float* dg_base, ulong dg_off,
                                        __global ushort* lo_base, ulong lo_off, uint batch,
                                        uint hidden, uint kind) {
    lstm_cell_backward_body(g_base + g_off, cp_base + cp_off, c_base + c_off, dh_base + dh_off,
                            dr_base + dr_off, dc_base + dc_off, dg_base + dg_off,
                            lo_base + lo_off, kind, batch, hidden);
}

// The gate pre-activations are gx (+ b_ih) and gh (+ b_hh), each part summed first.
inline void gru_cell_forward_body(__global const float* gx, __global const float* b_ih,
                                  __global const float* gh, __global const float* b_hh,
                                  __global const float* h_prev, __global float* h,
                                  __global float* cache, __global ushort* h_lo, uint kind,
                                  uint batch, uint hidden) {
    ulong n = (ulong)batch * hidden;
    ulong H = hidden;
    RNN_GRID_LOOP(e, n) {
        ulong b = e / hidden;
        ulong j = e - b * hidden;
        ulong g3 = b * 3 * H + j;
        ulong g4 = b * 4 * H + j;
        float r = rnn_sigmoid(rnn_plus(gx, g3, b_ih, j) + rnn_plus(gh, g3, b_hh, j));
        float z =
            rnn_sigmoid(rnn_plus(gx, g3 + H, b_ih, j + H) + rnn_plus(gh, g3 + H, b_hh, j + H));
        float ghn = rnn_plus(gh, g3 + 2 * H, b_hh, j + 2 * H);
        float nn = tanh(rnn_plus(gx, g3 + 2 * H, b_ih, j + 2 * H) + r * ghn);
        float hv = (1.0f - z) * nn + z * h_prev[e];
        h[e] = hv;
        rnn_store_lo(h_lo, e, hv, kind);
        cache[g4] = r;
        cache[g4 + H] = z;
        cache[g4 + 2 * H] = nn;
        cache[g4 + 3 * H] = ghn;
    }
}

__kernel void gru_cell_forward(__global const float* gx_base, ulong gx_off,
                               __global const float* gh_base, ulong gh_off,
                               __global const float* hp_base, ulong hp_off,
                               __global float* h_base, ulong h_off, __global float* k_base,
                               ulong k_off, uint batch, uint hidden) {
    gru_cell_forward_body(gx_base + gx_off, RNN_NO_PART, gh_base + gh_off, RNN_NO_PART,
                          hp_base + hp_off, h_base + h_off, k_base + k_off, RNN_NO_LO, 0u, batch,
                          hidden);
}

// gru_cell_forward of gx_t + b_ih and gh + b_hh (gh = h_prev W_hh^T), biases 3 hidden.
__kernel void gru_cell_forward_bias(__global const float* gx_base, ulong gx_off,
                                    __global const float* bi_base, ulong bi_off,
                                    __global const float* gh_base, ulong gh_off,
                                    __global const float* bh_base, ulong bh_off,
                                    __global const float* hp_base, ulong hp_off,
                                    __global float* h_base, ulong h_off, __global float* k_base,
                                    ulong k_off, uint batch, uint hidden) {
    gru_cell_forward_body(gx_base + gx_off, bi_base + bi_off, gh_base + gh_off, bh_base + bh_off,
                          hp_base + hp_off, h_base + h_off, k_base + k_off, RNN_NO_LO, 0u, batch,
                          hidden);
}

// gru_cell_forward_bias writing h_t in T too.
__kernel void gru_cell_forward_bias_lo(__global const float* gx_base, ulong gx_off,
                                       __global const float* bi_base, ulong bi_off,
                                       __global const float* gh_base, ulong gh_off,
                                       __global const float* bh_base, ulong bh_off,
                                       __global const float* hp_base, ulong hp_off,
                                       __global float* h_base, ulong h_off,
                                       __global float* k_base, ulong k_off,
                                       __global ushort* lo_base, ulong lo_off, uint batch,
                                       uint hidden, uint kind) {
    gru_cell_forward_body(gx_base + gx_off, bi_base + bi_off, gh_base + gh_off, bh_base + bh_off,
                          hp_base + hp_off, h_base + h_off, k_base + k_off, lo_base + lo_off,
                          kind, batch, hidden);
}

// The gradient reaching h_t is dh + dh_rec where dh_rec is given; dh_rec may be dh_prev's own
// pointer (read before the element is written).
inline void gru_cell_backward_body(__global const float* cache, __global const float* h_prev,
                                   __global const float* dh, __global const float* dh_rec,
                                   __global float* dgx, __global float* dgh,
                                   __global float* dh_prev, __global ushort* dgh_lo, uint kind,
                                   uint batch, uint hidden) {
    ulong n = (ulong)batch * hidden;
    ulong H = hidden;
    RNN_GRID_LOOP(e, n) {
        ulong b = e / hidden;
        ulong j = e - b * hidden;
        ulong g3 = b * 3 * H + j;
        ulong g4 = b * 4 * H + j;
        float r = cache[g4];
        float z = cache[g4 + H];
        float nn = cache[g4 + 2 * H];
        float ghn = cache[g4 + 3 * H];
        float d = rnn_plus(dh, e, dh_rec, e);
        RNN_GRU_UNIT_BACKWARD(dgx, dgh, g3, H, d, r, z, nn, ghn, h_prev[e], dh_prev[e]);
        for (uint k = 0; k < 3; ++k) rnn_store_lo(dgh_lo, g3 + k * H, dgh[g3 + k * H], kind);
    }
}

__kernel void gru_cell_backward(__global const float* k_base, ulong k_off,
                                __global const float* hp_base, ulong hp_off,
                                __global const float* dh_base, ulong dh_off,
                                __global float* dgx_base, ulong dgx_off, __global float* dgh_base,
                                ulong dgh_off, __global float* dhp_base, ulong dhp_off, uint batch,
                                uint hidden) {
    gru_cell_backward_body(k_base + k_off, hp_base + hp_off, dh_base + dh_off, RNN_NO_PART,
                           dgx_base + dgx_off, dgh_base + dgh_off, dhp_base + dhp_off, RNN_NO_LO,
                           0u, batch, hidden);
}

// gru_cell_backward of the gradient dh + dh_prev: dh_prev holds what the later steps sent to
// h_t on entry and what flows on to h_{t-1} on exit.
__kernel void gru_cell_backward_carry(__global const float* k_base, ulong k_off,
                                      __global const float* hp_base, ulong hp_off,
                                      __global const float* dh_base, ulong dh_off,
                                      __global float* dgx_base, ulong dgx_off,
                                      __global float* dgh_base, ulong dgh_off,
                                      __global float* dhp_base, ulong dhp_off, uint batch,
                                      uint hidden) {
    __global float* dh_prev = dhp_base + dhp_off;
    gru_cell_backward_body(k_base + k_off, hp_base + hp_off, dh_base + dh_off, dh_prev,
                           dgx_base + dgx_off, dgh_base + dgh_off, dh_prev, RNN_NO_LO, 0u, batch,
                           hidden);
}

// gru_cell_backward_carry writing dgh in T too.
__kernel void gru_cell_backward_carry_lo(__global const float* k_base, ulong k_off,
                                         __global const float* hp_base, ulong hp_off,
                                         __global const float* dh_base, ulong dh_off,
                                         __global float* dgx_base, ulong dgx_off,
                                         __global float* dgh_base, ulong dgh_off,
                                         __global float* dhp_base, ulong dhp_off,
                                         __global ushort* lo_base, ulong lo_off, uint batch,
                                         uint hidden, uint kind) {
    __global float* dh_prev = dhp_base + dhp_off;
    gru_cell_backward_body(k_base + k_off, hp_base + hp_off, dh_base + dh_off, dh_prev,
                           dgx_base + dgx_off, dgh_base + dgh_off, dh_prev, lo_base + lo_off,
                           kind, batch, hidden);
}

// The Elman step after its product: h holds h_prev W_hh^T on entry and
// act(h_prev W_hh^T + pre + bias) on exit (bias: b_ih + b_hh).
inline void rnn_cell_forward_body(__global const float* pre, __global const float* bias,
                                  __global float* h, __global ushort* h_lo, uint kind,
                                  uint batch, uint hidden, uint act, float act_param) {
    ulong n = (ulong)batch * hidden;
    RNN_GRID_LOOP(e, n) {
        float hv = act_forward((h[e] + pre[e]) + bias[e % hidden], act, act_param);
        h[e] = hv;
        rnn_store_lo(h_lo, e, hv, kind);
    }
}

__kernel void rnn_cell_forward(__global const float* pre_base, ulong pre_off,
                               __global const float* bias_base, ulong bias_off,
                               __global float* h_base, ulong h_off, uint batch, uint hidden,
                               uint act, float act_param) {
    rnn_cell_forward_body(pre_base + pre_off, bias_base + bias_off, h_base + h_off, RNN_NO_LO, 0u,
                          batch, hidden, act, act_param);
}

// rnn_cell_forward writing h_t in T too.
__kernel void rnn_cell_forward_lo(__global const float* pre_base, ulong pre_off,
                                  __global const float* bias_base, ulong bias_off,
                                  __global float* h_base, ulong h_off, __global ushort* lo_base,
                                  ulong lo_off, uint batch, uint hidden, uint act, uint kind,
                                  float act_param) {
    rnn_cell_forward_body(pre_base + pre_off, bias_base + bias_off, h_base + h_off,
                          lo_base + lo_off, kind, batch, hidden, act, act_param);
}

// The Elman backward step after its product: dpre = (dh + dh_rec) act'(h), dh_rec the product
// dpre_{t+1} W_hh.
inline void rnn_cell_backward_body(__global const float* dh, __global const float* dh_rec,
                                   __global const float* h, __global float* dpre,
                                   __global ushort* dpre_lo, uint kind, uint batch, uint hidden,
                                   uint act, float act_param) {
    ulong n = (ulong)batch * hidden;
    RNN_GRID_LOOP(e, n) {
        float y = h[e];
        float d = (dh[e] + dh_rec[e]) * act_grad(y, y, act, act_param);
        dpre[e] = d;
        rnn_store_lo(dpre_lo, e, d, kind);
    }
}

__kernel void rnn_cell_backward(__global const float* dh_base, ulong dh_off,
                                __global const float* dr_base, ulong dr_off,
                                __global const float* h_base, ulong h_off,
                                __global float* dpre_base, ulong dpre_off, uint batch,
                                uint hidden, uint act, float act_param) {
    rnn_cell_backward_body(dh_base + dh_off, dr_base + dr_off, h_base + h_off,
                           dpre_base + dpre_off, RNN_NO_LO, 0u, batch, hidden, act, act_param);
}

// rnn_cell_backward writing dpre in T too.
__kernel void rnn_cell_backward_lo(__global const float* dh_base, ulong dh_off,
                                   __global const float* dr_base, ulong dr_off,
                                   __global const float* h_base, ulong h_off,
                                   __global float* dpre_base, ulong dpre_off,
                                   __global ushort* lo_base, ulong lo_off, uint batch,
                                   uint hidden, uint act, uint kind, float act_param) {
    rnn_cell_backward_body(dh_base + dh_off, dr_base + dr_off, h_base + h_off,
                           dpre_base + dpre_off, lo_base + lo_off, kind, batch, hidden, act,
                           act_param);
}
