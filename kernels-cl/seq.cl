// Whole-sequence Elman, LSTM and GRU recurrences in ONE launch each (geometry Q,
// docs/kernel-abi.md): the persistent kernels of kernels-cu/rnn_seq.cu and gated_seq.cu, same
// names, arguments and algorithm, for NVIDIA GPUs under OpenCL. Read those files first; this one
// only says where it differs.
//
// Compiled only where the host defines RNN_CL_NV_PERSISTENT (src/backend/opencl/device.rs):
// - OpenCL has no cooperative launch. The host launches at most one work-group per compute unit,
//   each small enough for one SM, on a driver known to start them all at once (NVIDIA's: its
//   in-order queue runs one kernel at a time, and a kernel whose groups each fit an SM runs
//   those groups concurrently when there are no more of them than SMs). Other OpenCL devices
//   loop the step kernels (rnn.cl, gated_step.cl).
// - The 32-wide butterflies need sub-group shuffles, which NVIDIA's OpenCL does not offer as
//   built-ins; its compiler takes inline PTX (shfl.sync, membar.gl), as CUDA code does.
//   Work-items of a 1-D group map to warps in order of local id, so lanes are local id % 32.
// - Local memory is 48 KB a group. The Elman tile is the CUDA one (RQ_UNITS 16; 16 KB at hidden
//   256 with the W slice in registers, the shared-memory slice up to hidden 384). The gated tiles own PQ_UNITS = 8 units instead of 16 (the CUDA forward W slice
//   is 64 KB for the LSTM), with 64 G work-items, so a W slice is 32 KB (LSTM) or 24 KB (GRU) at
//   hidden 256; and the backward reads the next step's gate gradient straight from global
//   memory instead of staging it (no group reads a row segment twice there).

#ifdef RNN_CL_NV_PERSISTENT

#define RQ_ROWS 8
#define RQ_UNITS 16
#define RQ_THREADS 256
#define RQ_GROUP_STRIDE 32
#define PQ_UNITS 8

inline float pq_shfl_xor(float v, uint mask) {
    float r;
    __asm__ __volatile__("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;" : "=f"(r) : "f"(v), "r"(mask));
    return r;
}

// `when` where `mask` is all ones, else `otherwise`: bit operations rather than `?:`, which a
// compiler may turn into a select between two addresses of the private array, moving the
// array to (off-chip) private memory.
inline float pq_pick(float when, float otherwise, uint mask) {
    return as_float((as_uint(when) & mask) | (as_uint(otherwise) & ~mask));
}

// A device-scope fence (fence.sc.gpu): cumulative, like CUDA's __threadfence.
inline void pq_fence(void) {
    __asm__ __volatile__("membar.gl;" ::: "memory");
}

// The row barrier of kernels-cu/rnn_seq.cu (rq_row_barrier): one 32-bit counter per group row,
// never reset, bit 31 flipping once per completed barrier. The host zeroes the counters once.
inline void pq_row_barrier(__global uint* counters) {
    barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
    if (get_local_id(0) == 0) {
        volatile __global uint* counter = counters + (ulong)get_group_id(1) * RQ_GROUP_STRIDE;
        uint add = get_group_id(0) == 0 ? 0x80000000u - ((uint)get_num_groups(0) - 1u) : 1u;
        pq_fence();
        uint old = atomic_add(counter, add);
        while (((old ^ *counter) & 0x80000000u) == 0u) {
        }
        pq_fence();
    }
    barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
}

// Rows r0 .. r0 + RQ_ROWS of the `batch x width` matrix `a` (written by other groups during the
// launch) into `as`, zero past batch; `threads` work-items.
inline void pq_stage_rows(__global const float* a, uint batch, uint width, uint r0,
                          __local float* as, uint threads) {
    uint rows = min((uint)RQ_ROWS, batch - r0);
    uint n = rows * width;
    __global const float* src = a + (ulong)r0 * width;
    for (uint e = get_local_id(0); e < n; e += threads) as[e] = rnn_load_coherent(src + e);
    for (uint e = n + get_local_id(0); e < RQ_ROWS * width; e += threads) as[e] = 0.0f;
}

// ---- Elman (rnn_seq_forward / rnn_seq_backward) ---------------------------------------------

// rq_load_w of rnn_seq.cu: W[j, :] (rows != 0) or W[:, j] for units j0 .. j0 + RQ_UNITS.
inline void rq_load_w(__global const float* W, uint hidden, uint j0, __local float* ws, int rows) {
    ulong n = (ulong)RQ_UNITS * hidden;
    for (ulong e = get_local_id(0); e < n; e += RQ_THREADS) {
        if (rows) {
            uint u = (uint)(e / hidden);
            uint k = (uint)(e % hidden);
            ws[e] = j0 + u < hidden ? W[(ulong)(j0 + u) * hidden + k] : 0.0f;
        } else {
            uint u = (uint)(e % RQ_UNITS);
            uint k = (uint)(e / RQ_UNITS);
            ws[(ulong)u * hidden + k] = j0 + u < hidden ? W[(ulong)k * hidden + j0 + u] : 0.0f;
        }
    }
}

// rq_fold<h> of rnn_seq.cu: partner across lane bit 2 h.
inline void rq_fold(float* v, uint h, uint lane) {
    uint upper = (lane & (2 * h)) != 0 ? 0xffffffffu : 0u;
#pragma unroll
    for (uint i = 0; i < h; i++) {
        float send = pq_pick(v[i], v[i + h], upper);
        float keep = pq_pick(v[i + h], v[i], upper);
        v[i] = keep + pq_shfl_xor(send, 2 * h);
    }
}

// rq_tile_dot of rnn_seq.cu.
inline float rq_tile_dot(__local const float* as, __local const float* ws, uint hidden) {
    uint lane = get_local_id(0) % 32;
    uint g = get_local_id(0) / 32;
    __local const float* a0 = as + (2 * (g % 4)) * hidden;
    __local const float* a1 = a0 + hidden;
    __local const float* w0 = ws + (8 * (g / 4)) * hidden;
    float v[16];
#pragma unroll
    for (int i = 0; i < 16; i++) v[i] = 0.0f;
    for (uint k = lane; k < hidden; k += 32) {
        float x0 = a0[k];
        float x1 = a1[k];
#pragma unroll
        for (int u = 0; u < 8; u++) {
            float w = w0[u * hidden + k];
            v[u] = fma(x0, w, v[u]);
            v[8 + u] = fma(x1, w, v[8 + u]);
        }
    }
    rq_fold(v, 8, lane);
    rq_fold(v, 4, lane);
    rq_fold(v, 2, lane);
    rq_fold(v, 1, lane);
    return v[0] + pq_shfl_xor(v[0], 1);
}

#define RQ_REG_K 256
#define RQ_POLL 8

// rq_load_w_regs of rnn_seq.cu (rows != 0: W[j, :], else W[:, j]).
__attribute__((always_inline)) inline void rq_load_w_regs(__global const float* W, uint hidden, uint j0, float w[8][RQ_REG_K / 32],
                           int rows) {
    uint lane = get_local_id(0) % 32;
    uint g = get_local_id(0) / 32;
#pragma unroll
    for (int u = 0; u < 8; u++) {
        uint j = j0 + 8 * (g / 4) + u;
#pragma unroll
        for (int i = 0; i < RQ_REG_K / 32; i++) {
            uint k = lane + 32 * i;
            bool in = j < hidden && k < hidden;
            w[u][i] = in ? (rows ? W[(ulong)j * hidden + k] : W[(ulong)k * hidden + j]) : 0.0f;
        }
    }
}

// rq_tile_dot_regs of rnn_seq.cu.
__attribute__((always_inline)) inline float rq_tile_dot_regs(__local const float* as, float w[8][RQ_REG_K / 32], uint hidden) {
    uint lane = get_local_id(0) % 32;
    uint g = get_local_id(0) / 32;
    __local const float* a0 = as + (2 * (g % 4)) * hidden;
    __local const float* a1 = a0 + hidden;
    float v[16];
#pragma unroll
    for (int i = 0; i < 16; i++) v[i] = 0.0f;
#pragma unroll
    for (int i = 0; i < RQ_REG_K / 32; i++) {
        uint k = lane + 32 * i;
        float x0 = k < hidden ? a0[k] : 0.0f;
        float x1 = k < hidden ? a1[k] : 0.0f;
#pragma unroll
        for (int u = 0; u < 8; u++) {
            v[u] = fma(x0, w[u][i], v[u]);
            v[8 + u] = fma(x1, w[u][i], v[8 + u]);
        }
    }
    rq_fold(v, 8, lane);
    rq_fold(v, 4, lane);
    rq_fold(v, 2, lane);
    rq_fold(v, 1, lane);
    return v[0] + pq_shfl_xor(v[0], 1);
}

// The exchange words of rnn_seq.cu: volatile 64-bit accesses (ld/st.volatile.global.u64 under
// NVIDIA's compiler: single-copy atomic, served by L2).
inline ulong rq_xload(__global const ulong* p) { return *(volatile __global const ulong*)p; }
inline void rq_xstore(__global ulong* p, float v, uint tag) {
    *(volatile __global ulong*)p = ((ulong)tag << 32) | as_uint(v);
}

// rq_stage_tagged of rnn_seq.cu.
inline void rq_stage_tagged(__global const ulong* x, uint batch, uint hidden, uint r0, uint tag,
                            __local float* as) {
    uint rows = min((uint)RQ_ROWS, batch - r0);
    uint n = rows * hidden;
    __global const ulong* src = x + (ulong)r0 * hidden;
    for (uint e0 = get_local_id(0); e0 < n; e0 += RQ_POLL * RQ_THREADS) {
        ulong v[RQ_POLL];
#pragma unroll
        for (int q = 0; q < RQ_POLL; q++) {
            uint e = e0 + q * RQ_THREADS;
            v[q] = e < n ? rq_xload(src + e) : (ulong)tag << 32;
        }
        for (;;) {
            bool all = true;
#pragma unroll
            for (int q = 0; q < RQ_POLL; q++) all = all && (uint)(v[q] >> 32) == tag;
            if (all) break;
#pragma unroll
            for (int q = 0; q < RQ_POLL; q++) {
                if ((uint)(v[q] >> 32) != tag) v[q] = rq_xload(src + e0 + q * RQ_THREADS);
            }
        }
#pragma unroll
        for (int q = 0; q < RQ_POLL; q++) {
            uint e = e0 + q * RQ_THREADS;
            if (e < n) as[e] = as_float((uint)v[q]);
        }
    }
    for (uint e = n + get_local_id(0); e < RQ_ROWS * hidden; e += RQ_THREADS) as[e] = 0.0f;
}

// rq_clear_exchange of rnn_seq.cu.
inline void rq_clear_exchange(__global ulong* xch, __global uint* counters, uint batch,
                              uint hidden, uint row_in_tile, uint col, bool writer) {
    pq_row_barrier(counters);
    ulong block = (ulong)batch * hidden;
    uint row_tiles = (batch + RQ_ROWS - 1) / RQ_ROWS;
    for (uint tile = get_group_id(1); tile < row_tiles; tile += get_num_groups(1)) {
        uint row = tile * RQ_ROWS + row_in_tile;
        if (writer && row < batch) {
            ulong at = (ulong)row * hidden + col;
            xch[at] = 0;
            xch[block + at] = 0;
        }
    }
}

// rq_forward of rnn_seq.cu; `regs` is a literal at each call, so each kernel keeps one path.
__attribute__((always_inline)) inline void rq_forward(__global const float* pre, __global float* hs, __global const float* w_hh,
                       __global const float* b_ih, __global const float* b_hh,
                       __global uint* counters, __global ulong* xch, uint steps, uint batch,
                       uint hidden, uint act, float act_param, __local float* smem, int regs) {
    __local float* staging = smem + (regs ? 0 : RQ_UNITS * hidden);
    uint j0 = get_group_id(0) * RQ_UNITS;
    float w[8][RQ_REG_K / 32];
    if (regs) {
        rq_load_w_regs(w_hh, hidden, j0, w, 1);
    } else {
        rq_load_w(w_hh, hidden, j0, smem, 1);
    }

    uint lane = get_local_id(0) % 32;
    uint g = get_local_id(0) / 32;
    uint row_in_tile = 2 * (g % 4) + ((lane >> 4) & 1);
    uint col = j0 + 8 * (g / 4) + ((lane >> 1) & 7);
    bool writer = (lane & 1) == 0 && col < hidden;
    float bias = writer ? b_ih[col] + b_hh[col] : 0.0f;
    ulong block = (ulong)batch * hidden;
    uint row_tiles = (batch + RQ_ROWS - 1) / RQ_ROWS;
    uint turn = 0;
    for (uint t = 0; t < steps; t++) {
        __global float* h = hs + (t + 1) * block;
        for (uint tile = get_group_id(1); tile < row_tiles; tile += get_num_groups(1)) {
            __local float* as = staging + (turn++ & 1) * RQ_ROWS * hidden;
            uint r0 = tile * RQ_ROWS;
            uint row = r0 + row_in_tile;
            bool store = writer && row < batch;
            ulong at = (ulong)row * hidden + col;
            float p = store ? pre[t * block + at] : 0.0f;
            if (t == 0) {
                pq_stage_rows(hs, batch, hidden, r0, as, RQ_THREADS);
            } else {
                rq_stage_tagged(xch + (t & 1) * block, batch, hidden, r0, t, as);
            }
            barrier(CLK_LOCAL_MEM_FENCE);
            float acc = regs ? rq_tile_dot_regs(as, w, hidden) : rq_tile_dot(as, smem, hidden);
            float v = act_forward(acc + p + bias, act, act_param);
            if (store) {
                h[at] = v;
                if (t + 1 < steps) rq_xstore(xch + ((t + 1) & 1) * block + at, v, t + 1);
            }
        }
    }
    rq_clear_exchange(xch, counters, batch, hidden, row_in_tile, col, writer);
}

// rq_backward of rnn_seq.cu.
__attribute__((always_inline)) inline void rq_backward(__global const float* dh, __global const float* hs,
                        __global const float* w_hh, __global float* dpre,
                        __global uint* counters, __global ulong* xch, uint steps, uint batch,
                        uint hidden, uint act, float act_param, __local float* smem, int regs) {
    __local float* staging = smem + (regs ? 0 : RQ_UNITS * hidden);
    uint j0 = get_group_id(0) * RQ_UNITS;
    float w[8][RQ_REG_K / 32];
    if (regs) {
        rq_load_w_regs(w_hh, hidden, j0, w, 0);
    } else {
        rq_load_w(w_hh, hidden, j0, smem, 0);
    }

    uint lane = get_local_id(0) % 32;
    uint g = get_local_id(0) / 32;
    uint row_in_tile = 2 * (g % 4) + ((lane >> 4) & 1);
    uint col = j0 + 8 * (g / 4) + ((lane >> 1) & 7);
    bool writer = (lane & 1) == 0 && col < hidden;
    ulong block = (ulong)batch * hidden;
    uint row_tiles = (batch + RQ_ROWS - 1) / RQ_ROWS;
    uint turn = 0;
    for (uint s = 0; s < steps; s++) {
        uint t = steps - 1 - s;
        __global float* out = dpre + t * block;
        for (uint tile = get_group_id(1); tile < row_tiles; tile += get_num_groups(1)) {
            __local float* as = staging + (turn++ & 1) * RQ_ROWS * hidden;
            uint r0 = tile * RQ_ROWS;
            uint row = r0 + row_in_tile;
            bool store = writer && row < batch;
            ulong at = (ulong)row * hidden + col;
            float y = store ? hs[(t + 1) * block + at] : 0.0f;
            float d = store ? dh[t * block + at] : 0.0f;
            float acc = 0.0f;
            // Uniform over the grid: every work-item reaches the barrier, every lane the
            // shuffles.
            if (s > 0) {
                rq_stage_tagged(xch + (s & 1) * block, batch, hidden, r0, s, as);
                barrier(CLK_LOCAL_MEM_FENCE);
                acc = regs ? rq_tile_dot_regs(as, w, hidden) : rq_tile_dot(as, smem, hidden);
            }
            // act_grad(z, y): the sequence ops take only activations whose
            // derivative follows from y.
            float v = act_grad(0.0f, y, act, act_param) * (d + acc);
            if (store) {
                out[at] = v;
                if (s + 1 < steps) rq_xstore(xch + ((s + 1) & 1) * block + at, v, s + 1);
            }
        }
    }
    rq_clear_exchange(xch, counters, batch, hidden, row_in_tile, col, writer);
}

// Entries as in rnn_seq.cu: `_regs` for hidden <= RQ_REG_K. `xch` comes as floats, 8-byte
// aligned.
#define RQ_FORWARD_ENTRY(NAME, REGS)                                                            \
    __kernel __attribute__((reqd_work_group_size(RQ_THREADS, 1, 1))) void NAME(                \
        __global const float* pre_base, ulong pre_off, __global float* hs_base, ulong hs_off,   \
        __global const float* w_hh_base, ulong w_hh_off, __global const float* b_ih_base,       \
        ulong b_ih_off, __global const float* b_hh_base, ulong b_hh_off,                        \
        __global uint* barrier_base, ulong barrier_off, __global float* xch_base,               \
        ulong xch_off, uint steps, uint batch, uint hidden, uint act, float act_param,          \
        __local float* smem) {                                                                  \
        rq_forward(pre_base + pre_off, hs_base + hs_off, w_hh_base + w_hh_off,                  \
                   b_ih_base + b_ih_off, b_hh_base + b_hh_off, barrier_base + barrier_off,      \
                   (__global ulong*)(xch_base + xch_off), steps, batch, hidden, act, act_param, \
                   smem, REGS);                                                                 \
    }
RQ_FORWARD_ENTRY(rnn_seq_forward, 0)
RQ_FORWARD_ENTRY(rnn_seq_forward_regs, 1)

#define RQ_BACKWARD_ENTRY(NAME, REGS)                                                           \
    __kernel __attribute__((reqd_work_group_size(RQ_THREADS, 1, 1))) void NAME(                \
        __global const float* dh_base, ulong dh_off, __global const float* hs_base,             \
        ulong hs_off, __global const float* w_hh_base, ulong w_hh_off,                          \
        __global float* dpre_base, ulong dpre_off, __global uint* barrier_base,                 \
        ulong barrier_off, __global float* xch_base, ulong xch_off, uint steps, uint batch,     \
        uint hidden, uint act, float act_param, __local float* smem) {                          \
        rq_backward(dh_base + dh_off, hs_base + hs_off, w_hh_base + w_hh_off,                   \
                    dpre_base + dpre_off, barrier_base + barrier_off,                           \
                    (__global ulong*)(xch_base + xch_off), steps, batch, hidden, act,           \
                    act_param, smem, REGS);                                                     \
    }
RQ_BACKWARD_ENTRY(rnn_seq_backward, 0)
RQ_BACKWARD_ENTRY(rnn_seq_backward_regs, 1)

// ---- LSTM and GRU (lstm_seq_*, gru_seq_*) ---------------------------------------------------
//
// Group (bx, by) owns units j0 = PQ_UNITS bx .. j0 + PQ_UNITS for all G gates, with 64 G
// work-items (2 G warps). Products, as gq_tile_dot of gated_seq.cu: warp w computes a 4 x 8
// tile (4 batch rows x 8 outputs) over a k range, lane l accumulating k = k0 + l, k0 + l + 32,
// ...; a butterfly leaves entry (l >> 3, l & 7) in lane l.
//   forward:  G PQ_UNITS outputs (q = g PQ_UNITS + u), K = H; warp w: rows 4 (w % 2), outputs
//             8 (w / 2), i.e. gate w / 2.
//   backward: PQ_UNITS outputs, K = G H in G slices of H; warp w: rows 4 (w % 2), slice w / 2.
// Local memory in floats: G PQ_UNITS H (W slice) + RQ_ROWS H (forward: staged h_t) +
// G RQ_ROWS PQ_UNITS (partials).

// The forward W slice: ws[q H + k] = W[(g H + j0 + u) H + k], q = g PQ_UNITS + u.
inline void gq_load_w_rows(__global const float* W, uint gates, uint hidden, uint j0,
                           __local float* ws) {
    uint n = gates * PQ_UNITS * hidden;
    for (uint e = get_local_id(0); e < n; e += 64 * gates) {
        uint q = e / hidden;
        uint k = e - q * hidden;
        uint g = q / PQ_UNITS;
        uint u = q - g * PQ_UNITS;
        ws[e] = j0 + u < hidden ? W[((ulong)g * hidden + j0 + u) * hidden + k] : 0.0f;
    }
}

// The backward W slice: ws[u G H + k] = W[k H + j0 + u].
inline void gq_load_w_cols(__global const float* W, uint gates, uint hidden, uint j0,
                           __local float* ws) {
    uint gh = gates * hidden;
    uint n = PQ_UNITS * gh;
    for (uint e = get_local_id(0); e < n; e += 64 * gates) {
        uint k = e / PQ_UNITS;
        uint u = e - k * PQ_UNITS;
        ws[u * gh + k] = j0 + u < hidden ? W[(ulong)k * hidden + j0 + u] : 0.0f;
    }
}

// gq_fold<h> of gated_seq.cu: partner across lane bit h.
inline void gq_fold(float* v, uint h, uint lane) {
    uint upper = (lane & h) != 0 ? 0xffffffffu : 0u;
#pragma unroll
    for (uint i = 0; i < h; i++) {
        float send = pq_pick(v[i], v[i + h], upper);
        float keep = pq_pick(v[i + h], v[i], upper);
        v[i] = keep + pq_shfl_xor(send, h);
    }
}

// The butterfly over the 32 values of gq_tile_dot; returns entry `lane`.
inline float gq_reduce32(float* v, uint lane) {
    gq_fold(v, 16, lane);
    gq_fold(v, 8, lane);
    gq_fold(v, 4, lane);
    gq_fold(v, 2, lane);
    gq_fold(v, 1, lane);
    return v[0];
}

// Forward: sum over k < hidden of a[r lda + k] w[q hidden + k], r < 4, q < 8, both local.
inline float gq_tile_dot_local(__local const float* a, uint lda, __local const float* w,
                               uint hidden) {
    uint lane = get_local_id(0) % 32;
    float v[32];
#pragma unroll
    for (int i = 0; i < 32; i++) v[i] = 0.0f;
    for (uint k = lane; k < hidden; k += 32) {
        float x[4];
#pragma unroll
        for (int r = 0; r < 4; r++) x[r] = a[r * lda + k];
#pragma unroll
        for (int q = 0; q < 8; q++) {
            float wq = w[q * hidden + k];
#pragma unroll
            for (int r = 0; r < 4; r++) v[r * 8 + q] = fma(x[r], wq, v[r * 8 + q]);
        }
    }
    return gq_reduce32(v, lane);
}

// Backward: sum over k in [k0, k1) of a[r lda + k] w[u ldw + k] for r < `rows` (rows past it
// count as zero), u < 8; `a` in global memory, written by other groups during the launch.
inline float gq_tile_dot_global(__global const float* a, uint lda, uint rows,
                                __local const float* w, uint ldw, uint k0, uint k1) {
    uint lane = get_local_id(0) % 32;
    float v[32];
#pragma unroll
    for (int i = 0; i < 32; i++) v[i] = 0.0f;
    for (uint k = k0 + lane; k < k1; k += 32) {
        float x[4];
#pragma unroll
        for (uint r = 0; r < 4; r++) x[r] = r < rows ? rnn_load_coherent(a + r * lda + k) : 0.0f;
#pragma unroll
        for (int q = 0; q < 8; q++) {
            float wq = w[q * ldw + k];
#pragma unroll
            for (int r = 0; r < 4; r++) v[r * 8 + q] = fma(x[r], wq, v[r * 8 + q]);
        }
    }
    return gq_reduce32(v, lane);
}

// Forward products of the tile at r0 into red[r G PQ_UNITS + q]; ends with a barrier (`red`
// complete, `as` untouched until the caller's next barrier).
inline void gq_forward_products(__global const float* h_prev, uint gates, uint batch,
                                uint hidden, uint r0, __local const float* ws,
                                __local float* as, __local float* red) {
    barrier(CLK_LOCAL_MEM_FENCE);
    pq_stage_rows(h_prev, batch, hidden, r0, as, 64 * gates);
    barrier(CLK_LOCAL_MEM_FENCE);
    uint w = get_local_id(0) / 32;
    uint lane = get_local_id(0) % 32;
    uint wr = w % 2;
    uint wq = w / 2;
    float s = gq_tile_dot_local(as + 4 * wr * hidden, hidden, ws + 8 * wq * hidden, hidden);
    red[(4 * wr + (lane >> 3)) * (gates * PQ_UNITS) + 8 * wq + (lane & 7)] = s;
    barrier(CLK_LOCAL_MEM_FENCE);
}

// Backward partial products of the tile at r0 from `dnext` (`batch x G H`):
// red[(s RQ_ROWS + r) PQ_UNITS + u] = sum over k in gate block s of dnext[r0 + r, k] ws[u, k].
// Starts and ends with a barrier.
inline void gq_backward_products(__global const float* dnext, uint gates, uint batch,
                                 uint hidden, uint r0, __local const float* ws,
                                 __local float* red) {
    uint gh = gates * hidden;
    uint w = get_local_id(0) / 32;
    uint lane = get_local_id(0) % 32;
    uint wr = w % 2;
    uint s = w / 2;
    uint first = r0 + 4 * wr;
    uint rows = first < batch ? min(4u, batch - first) : 0u;
    barrier(CLK_LOCAL_MEM_FENCE);
    float v = gq_tile_dot_global(dnext + (ulong)first * gh, gh, rows, ws, gh, s * hidden,
                                 (s + 1) * hidden);
    red[(s * RQ_ROWS + 4 * wr + (lane >> 3)) * PQ_UNITS + (lane & 7)] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
}

// With `low` (lstm_seq_forward_low), h_t is also stored rounded to the bf16/f16 `kind`
// (half_convert.h) into low[t] (`steps * batch x H`): the T copy of the output sequence that a
// bf16/f16 network's next layer reads, without a cast pass over hs.
inline void lstm_seq_forward_body(__global float* gates_base, ulong gates_off,
                                  __global float* hs_base, ulong hs_off, __global float* cs_base,
                                  ulong cs_off, __global const float* w_hh_base, ulong w_hh_off,
                                  __global const float* b_ih_base, ulong b_ih_off,
                                  __global const float* b_hh_base, ulong b_hh_off,
                                  __global uint* barrier_base, ulong barrier_off,
                                  __global ushort* low, uint steps, uint batch, uint hidden,
                                  uint kind, __local float* smem) {
    __local float* ws = smem;
    __local float* as = ws + 4 * PQ_UNITS * hidden;
    __local float* red = as + RQ_ROWS * hidden;
    __global float* gates = gates_base + gates_off;
    __global float* hs = hs_base + hs_off;
    __global float* cs = cs_base + cs_off;
    __global uint* counters = barrier_base + barrier_off;
    uint j0 = get_group_id(0) * PQ_UNITS;
    gq_load_w_rows(w_hh_base + w_hh_off, 4, hidden, j0, ws);

    ulong H = hidden;
    uint r = get_local_id(0) / PQ_UNITS;
    uint u = get_local_id(0) % PQ_UNITS;
    uint j = j0 + u;
    bool cell = get_local_id(0) < RQ_ROWS * PQ_UNITS && j < hidden;
    float bias[4];
    for (int g = 0; g < 4; g++)
        bias[g] = cell ? b_ih_base[b_ih_off + g * H + j] + b_hh_base[b_hh_off + g * H + j] : 0.0f;
    ulong block = (ulong)batch * H;
    uint row_tiles = (batch + RQ_ROWS - 1) / RQ_ROWS;
    for (uint t = 0; t < steps; t++) {
        __global const float* h_prev = hs + t * block;
        __global float* h = hs + (t + 1) * block;
        __global const float* c_prev = cs + t * block;
        __global float* c = cs + (t + 1) * block;
        __global float* gt = gates + (ulong)t * 4 * block;
        for (uint tile = get_group_id(1); tile < row_tiles; tile += get_num_groups(1)) {
            uint row = tile * RQ_ROWS + r;
            bool store = cell && row < batch;
            ulong at = (ulong)row * H + j;
            __global float* gr = gt + (ulong)row * 4 * H + j;
            float x[4];
            for (int g = 0; g < 4; g++) x[g] = store ? gr[g * H] : 0.0f;
            float cp = store ? c_prev[at] : 0.0f;
            gq_forward_products(h_prev, 4, batch, hidden, tile * RQ_ROWS, ws, as, red);
            if (store) {
                __local const float* p = red + r * (4 * PQ_UNITS) + u;
                float ct, ht;
                RNN_LSTM_UNIT_FORWARD(p, PQ_UNITS, x, bias, gr, H, cp, ct, ht);
                c[at] = ct;
                h[at] = ht;
                if (low) low[(ulong)t * block + at] = rnn_f32_to_half(ht, kind);
            }
        }
        if (t + 1 < steps) pq_row_barrier(counters);
    }
}

__kernel __attribute__((reqd_work_group_size(256, 1, 1)))
void lstm_seq_forward(__global float* gates_base, ulong gates_off, __global float* hs_base,
                      ulong hs_off, __global float* cs_base, ulong cs_off,
                      __global const float* w_hh_base, ulong w_hh_off,
                      __global const float* b_ih_base, ulong b_ih_off,
                      __global const float* b_hh_base, ulong b_hh_off,
                      __global uint* barrier_base, ulong barrier_off, uint steps, uint batch,
                      uint hidden, __local float* smem) {
    lstm_seq_forward_body(gates_base, gates_off, hs_base, hs_off, cs_base, cs_off, w_hh_base,
                          w_hh_off, b_ih_base, b_ih_off, b_hh_base, b_hh_off, barrier_base,
                          barrier_off, 0, steps, batch, hidden, 0u, smem);
}

__kernel __attribute__((reqd_work_group_size(256, 1, 1)))
void lstm_seq_forward_low(__global float* gates_base, ulong gates_off, __global float* hs_base,
                          ulong hs_off, __global float* cs_base, ulong cs_off,
                          __global const float* w_hh_base, ulong w_hh_off,
                          __global const float* b_ih_base, ulong b_ih_off,
                          __global const float* b_hh_base, ulong b_hh_off,
                          __global uint* barrier_base, ulong barrier_off,
                          __global ushort* low_base, ulong low_off, uint steps, uint batch,
                          uint hidden, uint kind, __local float* smem) {
    lstm_seq_forward_body(gates_base, gates_off, hs_base, hs_off, cs_base, cs_off, w_hh_base,
                          w_hh_off, b_ih_base, b_ih_off, b_hh_base, b_hh_off, barrier_base,
                          barrier_off, low_base + low_off, steps, batch, hidden, kind, smem);
}

__kernel __attribute__((reqd_work_group_size(256, 1, 1)))
void lstm_seq_backward(__global const float* dh_base, ulong dh_off,
                       __global const float* gates_base, ulong gates_off,
                       __global const float* cs_base, ulong cs_off,
                       __global const float* w_hh_base, ulong w_hh_off,
                       __global float* dgates_base, ulong dgates_off, __global float* carry_base,
                       ulong carry_off, __global uint* barrier_base, ulong barrier_off,
                       uint steps, uint batch, uint hidden, uint carry_in,
                       __local float* smem) {
    __local float* ws = smem;
    __local float* red = ws + 4 * PQ_UNITS * hidden;
    __global const float* dh = dh_base + dh_off;
    __global const float* gates = gates_base + gates_off;
    __global const float* cs = cs_base + cs_off;
    __global float* dgates = dgates_base + dgates_off;
    __global float* carry = carry_base + carry_off;
    __global uint* counters = barrier_base + barrier_off;
    uint j0 = get_group_id(0) * PQ_UNITS;
    gq_load_w_cols(w_hh_base + w_hh_off, 4, hidden, j0, ws);

    ulong H = hidden;
    uint r = get_local_id(0) / PQ_UNITS;
    uint u = get_local_id(0) % PQ_UNITS;
    uint j = j0 + u;
    bool cell = get_local_id(0) < RQ_ROWS * PQ_UNITS && j < hidden;
    ulong block = (ulong)batch * H;
    uint row_tiles = (batch + RQ_ROWS - 1) / RQ_ROWS;
    for (uint s = 0; s < steps; s++) {
        uint t = steps - 1 - s;
        __global const float* dg_next = dgates + ((ulong)t + 1) * 4 * block;
        __global float* dg = dgates + (ulong)t * 4 * block;
        for (uint tile = get_group_id(1); tile < row_tiles; tile += get_num_groups(1)) {
            uint row = tile * RQ_ROWS + r;
            bool store = cell && row < batch;
            ulong at = (ulong)row * H + j;
            ulong ga = (ulong)row * 4 * H + j;
            __global const float* gr = gates + (ulong)t * 4 * block + ga;
            float gi = store ? gr[0] : 0.0f;
            float gf = store ? gr[H] : 0.0f;
            float gg = store ? gr[2 * H] : 0.0f;
            float go = store ? gr[3 * H] : 0.0f;
            float c = store ? cs[(t + 1) * block + at] : 0.0f;
            float cp = store ? cs[t * block + at] : 0.0f;
            float d = store ? dh[t * block + at] : 0.0f;
            // At the last step `carry` holds the gradient reaching c_n from outside when
            // carry_in (kernels-cu/gated_seq.cu).
            float dc = store && (s > 0 || carry_in) ? carry[at] : 0.0f;
            float rec = 0.0f;
            // Uniform over the grid: every work-item reaches the barriers, every lane the
            // shuffles.
            if (s > 0) {
                gq_backward_products(dg_next, 4, batch, hidden, tile * RQ_ROWS, ws, red);
                if (r < RQ_ROWS)
                    for (int k = 0; k < 4; k++) rec += red[(k * RQ_ROWS + r) * PQ_UNITS + u];
            }
            if (store) {
                float tc = tanh(c);
                float dht = d + rec;
                RNN_LSTM_UNIT_BACKWARD(dg, ga, H, dc, dht, tc, cp, gi, gf, gg, go, carry[at]);
            }
        }
        if (s + 1 < steps) pq_row_barrier(counters);
    }
}

// With `low` (gru_seq_forward_low), h_t also goes to low[t] as in lstm_seq_forward_low.
inline void gru_seq_forward_body(__global const float* gx_base, ulong gx_off,
                                 __global float* hs_base, ulong hs_off,
                                 __global const float* w_hh_base, ulong w_hh_off,
                                 __global const float* b_ih_base, ulong b_ih_off,
                                 __global const float* b_hh_base, ulong b_hh_off,
                                 __global float* cache_base, ulong cache_off,
                                 __global uint* barrier_base, ulong barrier_off,
                                 __global ushort* low, uint steps, uint batch, uint hidden,
                                 uint kind, __local float* smem) {
    __local float* ws = smem;
    __local float* as = ws + 3 * PQ_UNITS * hidden;
    __local float* red = as + RQ_ROWS * hidden;
    __global const float* gx = gx_base + gx_off;
    __global float* hs = hs_base + hs_off;
    __global float* cache = cache_base + cache_off;
    __global uint* counters = barrier_base + barrier_off;
    uint j0 = get_group_id(0) * PQ_UNITS;
    gq_load_w_rows(w_hh_base + w_hh_off, 3, hidden, j0, ws);

    ulong H = hidden;
    uint r = get_local_id(0) / PQ_UNITS;
    uint u = get_local_id(0) % PQ_UNITS;
    uint j = j0 + u;
    bool cell = get_local_id(0) < RQ_ROWS * PQ_UNITS && j < hidden;
    float bi[3], bh[3];
    for (int g = 0; g < 3; g++) {
        bi[g] = cell ? b_ih_base[b_ih_off + g * H + j] : 0.0f;
        bh[g] = cell ? b_hh_base[b_hh_off + g * H + j] : 0.0f;
    }
    ulong block = (ulong)batch * H;
    uint row_tiles = (batch + RQ_ROWS - 1) / RQ_ROWS;
    for (uint t = 0; t < steps; t++) {
        __global const float* h_prev = hs + t * block;
        __global float* h = hs + (t + 1) * block;
        for (uint tile = get_group_id(1); tile < row_tiles; tile += get_num_groups(1)) {
            uint row = tile * RQ_ROWS + r;
            bool store = cell && row < batch;
            ulong g3 = (ulong)row * 3 * H + j;
            __global const float* xr = gx + (ulong)t * 3 * block + g3;
            float x[3];
            for (int g = 0; g < 3; g++) x[g] = store ? xr[g * H] + bi[g] : 0.0f;
            gq_forward_products(h_prev, 3, batch, hidden, tile * RQ_ROWS, ws, as, red);
            if (store) {
                __local const float* p = red + r * (3 * PQ_UNITS) + u;
                float ghr = p[0] + bh[0];
                float ghz = p[PQ_UNITS] + bh[1];
                float ghn = p[2 * PQ_UNITS] + bh[2];
                float rg = rnn_sigmoid(x[0] + ghr);
                float z = rnn_sigmoid(x[1] + ghz);
                float n = tanh(x[2] + rg * ghn);
                // h_t of this row and unit, as staged for the products.
                float hp = as[r * hidden + j];
                float ht = (1.0f - z) * n + z * hp;
                h[(ulong)row * H + j] = ht;
                if (low) low[(ulong)t * block + (ulong)row * H + j] = rnn_f32_to_half(ht, kind);
                __global float* kr = cache + (ulong)t * 4 * block + (ulong)row * 4 * H + j;
                kr[0] = rg;
                kr[H] = z;
                kr[2 * H] = n;
                kr[3 * H] = ghn;
            }
        }
        if (t + 1 < steps) pq_row_barrier(counters);
    }
}

__kernel __attribute__((reqd_work_group_size(192, 1, 1)))
void gru_seq_forward(__global const float* gx_base, ulong gx_off, __global float* hs_base,
                     ulong hs_off, __global const float* w_hh_base, ulong w_hh_off,
                     __global const float* b_ih_base, ulong b_ih_off,
                     __global const float* b_hh_base, ulong b_hh_off, __global float* cache_base,
                     ulong cache_off, __global uint* barrier_base, ulong barrier_off, uint steps,
                     uint batch, uint hidden, __local float* smem) {
    gru_seq_forward_body(gx_base, gx_off, hs_base, hs_off, w_hh_base, w_hh_off, b_ih_base,
                         b_ih_off, b_hh_base, b_hh_off, cache_base, cache_off, barrier_base,
                         barrier_off, 0, steps, batch, hidden, 0u, smem);
}

__kernel __attribute__((reqd_work_group_size(192, 1, 1)))
void gru_seq_forward_low(__global const float* gx_base, ulong gx_off, __global float* hs_base,
                         ulong hs_off, __global const float* w_hh_base, ulong w_hh_off,
                         __global const float* b_ih_base, ulong b_ih_off,
                         __global const float* b_hh_base, ulong b_hh_off,
                         __global float* cache_base, ulong cache_off,
                         __global uint* barrier_base, ulong barrier_off,
                         __global ushort* low_base, ulong low_off, uint steps, uint batch,
                         uint hidden, uint kind, __local float* smem) {
    gru_seq_forward_body(gx_base, gx_off, hs_base, hs_off, w_hh_base, w_hh_off, b_ih_base,
                         b_ih_off, b_hh_base, b_hh_off, cache_base, cache_off, barrier_base,
                         barrier_off, low_base + low_off, steps, batch, hidden, kind, smem);
}

__kernel __attribute__((reqd_work_group_size(192, 1, 1)))
void gru_seq_backward(__global const float* dh_base, ulong dh_off, __global const float* hs_base,
                      ulong hs_off, __global const float* cache_base, ulong cache_off,
                      __global const float* w_hh_base, ulong w_hh_off, __global float* dgx_base,
                      ulong dgx_off, __global float* dgh_base, ulong dgh_off,
                      __global float* carry_base, ulong carry_off, __global uint* barrier_base,
                      ulong barrier_off, uint steps, uint batch, uint hidden,
                      __local float* smem) {
    __local float* ws = smem;
    __local float* red = ws + 3 * PQ_UNITS * hidden;
    __global const float* dh = dh_base + dh_off;
    __global const float* hs = hs_base + hs_off;
    __global const float* cache = cache_base + cache_off;
    __global float* dgx = dgx_base + dgx_off;
    __global float* dgh = dgh_base + dgh_off;
    __global float* carry = carry_base + carry_off;
    __global uint* counters = barrier_base + barrier_off;
    uint j0 = get_group_id(0) * PQ_UNITS;
    gq_load_w_cols(w_hh_base + w_hh_off, 3, hidden, j0, ws);

    ulong H = hidden;
    uint r = get_local_id(0) / PQ_UNITS;
    uint u = get_local_id(0) % PQ_UNITS;
    uint j = j0 + u;
    bool cell = get_local_id(0) < RQ_ROWS * PQ_UNITS && j < hidden;
    ulong block = (ulong)batch * H;
    uint row_tiles = (batch + RQ_ROWS - 1) / RQ_ROWS;
    for (uint s = 0; s < steps; s++) {
        uint t = steps - 1 - s;
        __global const float* dgh_next = dgh + ((ulong)t + 1) * 3 * block;
        for (uint tile = get_group_id(1); tile < row_tiles; tile += get_num_groups(1)) {
            uint row = tile * RQ_ROWS + r;
            bool store = cell && row < batch;
            ulong at = (ulong)row * H + j;
            __global const float* kr = cache + (ulong)t * 4 * block + (ulong)row * 4 * H + j;
            float rg = store ? kr[0] : 0.0f;
            float z = store ? kr[H] : 0.0f;
            float n = store ? kr[2 * H] : 0.0f;
            float ghn = store ? kr[3 * H] : 0.0f;
            float hp = store ? hs[t * block + at] : 0.0f;
            float d = store ? dh[t * block + at] : 0.0f;
            float cr = store && s > 0 ? carry[at] : 0.0f;
            float rec = 0.0f;
            // Uniform over the grid, as in lstm_seq_backward.
            if (s > 0) {
                gq_backward_products(dgh_next, 3, batch, hidden, tile * RQ_ROWS, ws, red);
                if (r < RQ_ROWS)
                    for (int k = 0; k < 3; k++) rec += red[(k * RQ_ROWS + r) * PQ_UNITS + u];
            }
            if (store) {
                float dt = (d + rec) + cr;
                ulong g3 = (ulong)t * 3 * block + (ulong)row * 3 * H + j;
                RNN_GRU_UNIT_BACKWARD(dgx, dgh, g3, H, dt, rg, z, n, ghn, hp, carry[at]);
            }
        }
        if (s + 1 < steps) pq_row_barrier(counters);
    }
}

#endif  // RNN_CL_NV_PERSISTENT
