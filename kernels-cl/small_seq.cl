// Whole-sequence Elman, LSTM and GRU, forward and backward, in ONE launch each, for small hidden
// sizes (geometry B, docs/kernel-abi.md): the block-local kernels of kernels-cu/small_seq.cu,
// same names, arguments (the dynamic local memory last) and algorithm; read that file first.
// Groups never wait on each other, so every OpenCL device runs them (no persistent-grid
// condition); the host takes them only where W_hh and the staged rows fit the device's local
// memory (48 KB a group on NVIDIA: LSTM hidden <= 52, GRU <= 62, Elman <= 108 at one row a
// group). vload4 reads the float4s, which needs no 16-byte alignment.
//
// Each body is compiled three times (the entry macros of small_seq_{rnn,lstm,gru}.cl):
// `*_local` keeps W_hh in local memory as small_seq.cu does; `*_l1` reads it from global
// memory, already in the local layout (bl_pack_w, launched by the host before), so that
// consecutive work-items read consecutive float4s and W_hh stays in the L1 cache (one array
// with local memory on NVIDIA GPUs), while only the staged rows and the products take local
// memory; `*_local_regs` keeps it in private memory (registers), each product split `ks` ways
// along k, as small_seq.cu's BL_REGS. `w_place` (BL_SHARED, BL_GLOBAL, BL_REGS) is a literal
// in every entry, so each copy compiles to one path.

// Included by each small_seq family's module; once in the whole op set.
#ifndef RNN_SMALL_SEQ_CL
#define RNN_SMALL_SEQ_CL

inline uint bl_pad32(uint n) { return (n + 31u) & ~31u; }
inline uint bl_pad4(uint n) { return (n + 3u) & ~3u; }

// Where a kernel keeps W_hh, and the float4s a work-item of a BL_REGS kernel holds (small_seq.cu).
#define BL_SHARED 0
#define BL_GLOBAL 1
#define BL_REGS 2
#define BL_REG_CHUNKS 6

inline uint bl_ksplit(uint hp) { return (hp / 4 + BL_REG_CHUNKS - 1) / BL_REG_CHUNKS; }

// The group's tile (BlTile of small_seq.cu).
typedef struct {
    uint rows;
    uint row0;
    uint groups;
    uint per;
    uint slots;
    uint gh;
    uint hp;
    uint ks;
} BlTile;

inline BlTile bl_tile(uint batch, uint gates, uint hidden, int w_place) {
    BlTile t;
    t.rows = (batch + get_num_groups(0) - 1) / get_num_groups(0);
    t.row0 = get_group_id(0) * t.rows;
    t.gh = gates * hidden;
    t.hp = bl_pad4(hidden);
    t.ks = w_place == BL_REGS ? bl_ksplit(t.hp) : 1u;
    t.groups = max((uint)get_local_size(0) / bl_pad32(t.gh * t.ks), 1u);
    t.per = (t.rows + t.groups - 1) / t.groups;
    t.slots = t.groups * t.per;
    return t;
}

// W into local memory as the products' K x N operand in float4s along k (bl_load_w of
// small_seq.cu; `forward` uniform).
inline void bl_load_w(__global const float* W, BlTile t, uint hidden, int forward,
                      int w_place, __local float* ws) {
    // Nothing to copy where W is not kept in local memory; the barrier stays unconditional.
    int elsewhere = w_place != BL_SHARED;
    uint total = elsewhere ? 0u : t.gh * t.hp;
    for (uint e = get_local_id(0); e < total; e += get_local_size(0)) ws[e] = 0.0f;
    barrier(CLK_LOCAL_MEM_FENCE);
    uint n = elsewhere ? 0u : t.gh * hidden;
    for (uint e = get_local_id(0); e < n; e += get_local_size(0)) {
        uint row = e / hidden;
        uint col = e - row * hidden;
        uint at;
        if (forward) {
            at = ((col >> 2) * t.gh + row) * 4 + (col & 3);
        } else {
            uint s = row / hidden;
            uint k = s * t.hp + (row - s * hidden);
            at = ((k >> 2) * hidden + col) * 4 + (k & 3);
        }
        ws[at] = W[e];
    }
}

// bl_stage of small_seq.cu (`have` 0: no source, all zero).
inline void bl_stage(__global const float* a, int have, uint batch, uint blocks, uint hidden,
                     BlTile t, __local float* as) {
    uint ld = blocks * t.hp;
    uint n = t.slots * ld;
    for (uint e = get_local_id(0); e < n; e += get_local_size(0)) {
        uint r = e / ld;
        uint x = e - r * ld;
        uint s = x / t.hp;
        uint k = x - s * t.hp;
        uint row = t.row0 + r;
        int in = have && r < t.rows && row < batch && k < hidden;
        as[e] = in ? a[(ulong)row * blocks * hidden + s * hidden + k] : 0.0f;
    }
}

// bl_fma4 of small_seq.cu.
inline float bl_fma4(float4 x, float4 w, float acc) {
    acc = fma(x.x, w.x, acc);
    acc = fma(x.y, w.y, acc);
    acc = fma(x.z, w.z, acc);
    return fma(x.w, w.w, acc);
}

// bl_dot of small_seq.cu for 4, 2 and 1 rows; offsets in float4s from `a` and `w`, which is in
// address space SPACE (local, or global for the `_l1` entries).
#define BL_DOT(NAME, RB, SPACE)                                                                \
    inline void NAME(__local const float* a, uint lda4, SPACE const float* restrict w,        \
                     uint ldw4, uint n4, __local float* out, uint ldo) {                       \
        float acc[RB];                                                                         \
        for (int i = 0; i < RB; i++) acc[i] = 0.0f;                                            \
        for (uint k = 0; k < n4; k++) {                                                        \
            float4 wk = vload4(k * ldw4, w);                                                   \
            for (int i = 0; i < RB; i++) {                                                     \
                acc[i] = bl_fma4(vload4(i * lda4 + k, a), wk, acc[i]);                         \
            }                                                                                  \
        }                                                                                      \
        for (int i = 0; i < RB; i++) out[i * ldo] = acc[i];                                    \
    }
BL_DOT(bl_dot4, 4, __local)
BL_DOT(bl_dot2, 2, __local)
BL_DOT(bl_dot1, 1, __local)
BL_DOT(bl_dot4_global, 4, __global)
BL_DOT(bl_dot2_global, 2, __global)
BL_DOT(bl_dot1_global, 1, __global)

// The rows [r, end) of one product column: `a` the group's staged rows, `w` the column's W
// operand (bl_products).
#define BL_ROWS(NAME, SPACE, DOT4, DOT2, DOT1)                                                 \
    inline void NAME(__local const float* a, uint lda4, SPACE const float* w, uint ldw4,     \
                     uint n4, uint r, uint end, __local float* red, uint ldo) {                \
        for (; r + 4 <= end; r += 4) DOT4(a + 4 * r * lda4, lda4, w, ldw4, n4, red + r * ldo, ldo); \
        for (; r + 2 <= end; r += 2) DOT2(a + 4 * r * lda4, lda4, w, ldw4, n4, red + r * ldo, ldo); \
        if (r < end) DOT1(a + 4 * r * lda4, lda4, w, ldw4, n4, red + r * ldo, ldo);           \
    }
BL_ROWS(bl_rows_local, __local, bl_dot4, bl_dot2, bl_dot1)
BL_ROWS(bl_rows_global, __global, bl_dot4_global, bl_dot2_global, bl_dot1_global)

// bl_load_regs of small_seq.cu: this work-item's float4s of W for a BL_REGS kernel.
inline void bl_load_regs(__global const float* W, BlTile t, uint hidden, int forward,
                         float4* wr) {
    uint tid = get_local_id(0) % bl_pad32(t.gh * t.ks);
    uint p = tid / t.ks;
    uint q = tid - p * t.ks;
    uint s = p / hidden;
    uint j = p - s * hidden;
    // Unrolled, so that `wr` is indexed by constants and stays in registers.
#pragma unroll
    for (int c = 0; c < BL_REG_CHUNKS; c++) {
        float v[4];
#pragma unroll
        for (int e = 0; e < 4; e++) {
            uint k = 4 * (q + t.ks * c) + e;
            int in = p < t.gh && k < hidden;
            ulong at = forward ? (ulong)p * hidden + k : ((ulong)s * hidden + k) * hidden + j;
            v[e] = in ? W[at] : 0.0f;
        }
        wr[c] = (float4)(v[0], v[1], v[2], v[3]);
    }
}

// bl_dot_regs of small_seq.cu for 2 and 1 rows (offsets in floats from `a`).
#define BL_DOT_REGS(NAME, RB)                                                                  \
    inline void NAME(__local const float* a, uint lda4, const float4* wr, uint ks, uint reach, \
                     __local float* out, uint ldo) {                                           \
        float acc[RB];                                                                         \
        for (int i = 0; i < RB; i++) acc[i] = 0.0f;                                            \
        _Pragma("unroll") for (int c = 0; c < BL_REG_CHUNKS; c++) {                            \
            uint k = ks * c;                                                                   \
            if (k < reach) {                                                                   \
                float4 wk = wr[c];                                                             \
                _Pragma("unroll") for (int i = 0; i < RB; i++) {                               \
                    acc[i] = bl_fma4(vload4(i * lda4 + k, a), wk, acc[i]);                     \
                }                                                                              \
            }                                                                                  \
        }                                                                                      \
        for (int i = 0; i < RB; i++) out[i * ldo] = acc[i];                                    \
    }
BL_DOT_REGS(bl_dot2_regs, 2)
BL_DOT_REGS(bl_dot1_regs, 1)

// bl_products_regs of small_seq.cu: the partial products into `part` (`red` where ks is 1),
// a barrier, their sums into `red`, a barrier (the second one uniform: ks is).
inline void bl_products_regs(int forward, BlTile t, uint hidden, __local const float* as,
                             const float4* wr, __local float* red) {
    uint qp = bl_pad32(t.gh * t.ks);
    uint tid = get_local_id(0) % qp;
    uint grp = get_local_id(0) / qp;
    uint p = tid / t.ks;
    uint q = tid - p * t.ks;
    __local float* part = t.ks > 1 ? red + t.slots * t.gh : red;
    uint ldo = t.gh * t.ks;
    if (p < t.gh && grp < t.groups) {
        uint n4 = t.hp / 4;
        uint s = forward ? 0 : p / hidden;
        uint lda4 = forward ? n4 : t.gh / hidden * n4;
        __local const float* a = as + 4 * (s * n4 + q);
        __local float* out = part + tid;
        uint reach = n4 - q;
        uint r = grp * t.per;
        uint end = r + t.per;
        for (; r + 2 <= end; r += 2) {
            bl_dot2_regs(a + 4 * r * lda4, lda4, wr, t.ks, reach, out + r * ldo, ldo);
        }
        if (r < end) bl_dot1_regs(a + 4 * r * lda4, lda4, wr, t.ks, reach, out + r * ldo, ldo);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (t.ks > 1) {
        uint n = t.slots * t.gh;
        for (uint e = get_local_id(0); e < n; e += get_local_size(0)) {
            __local const float* x = part + e * t.ks;
            float sum = x[0];
            for (uint k = 1; k < t.ks; k++) sum += x[k];
            red[e] = sum;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
}

// bl_products of small_seq.cu; `forward` is uniform over the group, `w_place` a literal of
// the entry: W from `wl` (local memory), `wg` (global, packed) or `wr` (registers). Ends with
// the barrier.
inline void bl_products(int forward, BlTile t, uint hidden, __local const float* as,
                        __local const float* wl, __global const float* wg, const float4* wr,
                        int w_place, __local float* red) {
    if (w_place == BL_REGS) {
        bl_products_regs(forward, t, hidden, as, wr, red);
        return;
    }
    int w_global = w_place == BL_GLOBAL;
    uint qp = bl_pad32(t.gh);
    uint p = get_local_id(0) % qp;
    uint grp = get_local_id(0) / qp;
    if (p < t.gh && grp < t.groups) {
        uint n4 = t.hp / 4;
        uint s = forward ? 0 : p / hidden;
        uint col = forward ? p : p - s * hidden;
        uint lda4 = forward ? n4 : t.gh / hidden * n4;
        uint ldw4 = forward ? t.gh : hidden;
        __local const float* a = as + 4 * (s * n4);
        uint w0 = 4 * (s * n4 * ldw4 + col);
        uint r = grp * t.per;
        if (w_global) {
            bl_rows_global(a, lda4, wg + w0, ldw4, n4, r, r + t.per, red + p, t.gh);
        } else {
            bl_rows_local(a, lda4, wl + w0, ldw4, n4, r, r + t.per, red + p, t.gh);
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
}

// The cell element of this work-item (BlCell of small_seq.cu).
typedef struct {
    uint r;
    uint j;
    int store;
    ulong at;
} BlCell;

inline BlCell bl_cell(BlTile t, uint batch, uint hidden) {
    BlCell c;
    c.r = get_local_id(0) / hidden;
    c.j = get_local_id(0) - c.r * hidden;
    uint row = t.row0 + c.r;
    c.store = c.r < t.rows && row < batch;
    c.at = (ulong)row * hidden + c.j;
    return c;
}

// bl_start of small_seq.cu: the tile and cell element, W loaded (into local memory or `wr`)
// and the staged rows set (`forward`: from block 0 of `state`; else zero), then a barrier.
// `smem` is split into W (`*ws`; nothing unless BL_SHARED), the staged rows (`*as`) and the
// products (`*red`).
typedef struct {
    BlTile t;
    BlCell c;
} BlStart;

inline BlStart bl_start(__global const float* W, __global const float* state, int forward,
                        int w_place, uint gates, uint batch, uint hidden, __local float* smem,
                        __local float** ws, __local float** as, __local float** red,
                        float4* wr) {
    BlStart b;
    b.t = bl_tile(batch, gates, hidden, w_place);
    uint blocks = forward ? 1 : gates;
    *ws = smem;
    *as = smem + (w_place == BL_SHARED ? b.t.gh * b.t.hp : 0u);
    *red = *as + b.t.slots * blocks * b.t.hp;
    bl_load_w(W, b.t, hidden, forward, w_place, *ws);
    if (w_place == BL_REGS) bl_load_regs(W, b.t, hidden, forward, wr);
    bl_stage(state, forward, batch, blocks, hidden, b.t, *as);
    b.c = bl_cell(b.t, batch, hidden);
    barrier(CLK_LOCAL_MEM_FENCE);
    return b;
}

// bl_recurrent of small_seq.cu.
inline float bl_recurrent(__local const float* red, BlStart b, uint gates, ulong H, uint s) {
    __local const float* p = red + b.c.r * b.t.gh + b.c.j;
    float rec = 0.0f;
    for (uint k = 0; k < gates; k++) rec += s > 0 ? p[k * H] : 0.0f;
    return rec;
}

// The bodies: each entry runs one with `w_place` BL_SHARED (`*_local`), BL_GLOBAL (`*_l1`;
// `W` is then W_hh packed by bl_pack_w) or BL_REGS (`*_local_regs`).
inline void bl_rnn_forward(__global const float* pre, __global float* hs,
                           __global const float* W, __global const float* b_ih,
                           __global const float* b_hh, uint steps, uint batch, uint hidden,
                           uint act, float act_param, __local float* smem, int w_place) {
    __local float *ws, *as, *red;
    float4 wr[BL_REG_CHUNKS];
    BlStart b = bl_start(W, hs, 1, w_place, 1, batch, hidden, smem, &ws, &as, &red, wr);
    BlTile t = b.t;
    BlCell c = b.c;
    float bias = c.store ? b_ih[c.j] + b_hh[c.j] : 0.0f;
    ulong block = (ulong)batch * hidden;
    for (uint s = 0; s < steps; s++) {
        float x = c.store ? pre[s * block + c.at] : 0.0f;
        bl_products(1, t, hidden, as, ws, W, wr, w_place, red);
        if (c.store) {
            float h = act_forward(red[c.r * t.gh + c.j] + x + bias, act, act_param);
            hs[(s + 1) * block + c.at] = h;
            as[c.r * t.hp + c.j] = h;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
}

inline void bl_rnn_backward(__global const float* dh, __global const float* hs,
                            __global const float* W, __global float* dpre, uint steps,
                            uint batch, uint hidden, uint act, float act_param,
                            __local float* smem, int w_place) {
    __local float *ws, *as, *red;
    float4 wr[BL_REG_CHUNKS];
    BlStart b = bl_start(W, hs, 0, w_place, 1, batch, hidden, smem, &ws, &as, &red, wr);
    BlTile t = b.t;
    BlCell c = b.c;
    ulong block = (ulong)batch * hidden;
    for (uint s = 0; s < steps; s++) {
        uint step = steps - 1 - s;
        float y = c.store ? hs[((ulong)step + 1) * block + c.at] : 0.0f;
        float d = c.store ? dh[step * block + c.at] : 0.0f;
        // Also at the first step, whose products (of the zero staged rows) are not used: no
        // barrier under a condition (PoCL mishandles those).
        bl_products(0, t, hidden, as, ws, W, wr, w_place, red);
        if (c.store) {
            float acc = bl_recurrent(red, b, 1, hidden, s);
            float v = act_grad(0.0f, y, act, act_param) * (d + acc);
            dpre[step * block + c.at] = v;
            as[c.r * t.hp + c.j] = v;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
}

inline void bl_lstm_forward(__global float* gates, __global float* hs, __global float* cs,
                            __global const float* W, __global const float* b_ih,
                            __global const float* b_hh, uint steps, uint batch, uint hidden,
                            __local float* smem, int w_place) {
    __local float *ws, *as, *red;
    float4 wr[BL_REG_CHUNKS];
    BlStart b = bl_start(W, hs, 1, w_place, 4, batch, hidden, smem, &ws, &as, &red, wr);
    BlTile t = b.t;
    BlCell c = b.c;
    ulong H = hidden;
    float bias[4];
    for (int g = 0; g < 4; g++)
        bias[g] = c.store ? b_ih[g * H + c.j] + b_hh[g * H + c.j] : 0.0f;
    ulong block = (ulong)batch * H;
    float cell = c.store ? cs[c.at] : 0.0f;
    for (uint s = 0; s < steps; s++) {
        __global float* gr = gates + (ulong)s * 4 * block + (c.at - c.j) * 4 + c.j;
        float x[4];
        for (int g = 0; g < 4; g++) x[g] = c.store ? gr[g * H] : 0.0f;
        bl_products(1, t, hidden, as, ws, W, wr, w_place, red);
        if (c.store) {
            __local const float* p = red + c.r * t.gh + c.j;
            float h;
            RNN_LSTM_UNIT_FORWARD(p, H, x, bias, gr, H, cell, cell, h);
            cs[(s + 1) * block + c.at] = cell;
            hs[(s + 1) * block + c.at] = h;
            as[c.r * t.hp + c.j] = h;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
}

inline void bl_lstm_backward(__global const float* dh, __global const float* gates,
                             __global const float* cs, __global const float* W,
                             __global float* dgates, __global float* carry, uint steps,
                             uint batch, uint hidden, uint carry_in, __local float* smem,
                             int w_place) {
    __local float *ws, *as, *red;
    float4 wr[BL_REG_CHUNKS];
    BlStart b = bl_start(W, dh, 0, w_place, 4, batch, hidden, smem, &ws, &as, &red, wr);
    BlTile t = b.t;
    BlCell c = b.c;
    ulong H = hidden;
    ulong block = (ulong)batch * H;
    ulong ga = (c.at - c.j) * 4 + c.j;
    // dc_n from the caller where carry_in (kernels-cu/small_seq.cu).
    float dc = c.store && carry_in ? carry[c.at] : 0.0f;
    for (uint s = 0; s < steps; s++) {
        uint step = steps - 1 - s;
        __global const float* gr = gates + (ulong)step * 4 * block + ga;
        float gi = c.store ? gr[0] : 0.0f;
        float gf = c.store ? gr[H] : 0.0f;
        float gg = c.store ? gr[2 * H] : 0.0f;
        float go = c.store ? gr[3 * H] : 0.0f;
        float cn = c.store ? cs[((ulong)step + 1) * block + c.at] : 0.0f;
        float cp = c.store ? cs[step * block + c.at] : 0.0f;
        float d = c.store ? dh[step * block + c.at] : 0.0f;
        // Also at the first step, whose products (of the zero staged rows) are not used: no
        // barrier under a condition (PoCL mishandles those).
        bl_products(0, t, hidden, as, ws, W, wr, w_place, red);
        if (c.store) {
            float rec = bl_recurrent(red, b, 4, H, s);
            float tc = tanh(cn);
            float dht = d + rec;
            float out[4];
            RNN_LSTM_UNIT_BACKWARD(out, 0, 1, dc, dht, tc, cp, gi, gf, gg, go, dc);
            __global float* dg = dgates + (ulong)step * 4 * block + ga;
            __local float* next = as + c.r * 4 * t.hp + c.j;
            for (int g = 0; g < 4; g++) {
                dg[g * H] = out[g];
                next[g * t.hp] = out[g];
            }
            carry[c.at] = dc;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
}

inline void bl_gru_forward(__global const float* gx, __global float* hs, __global const float* W,
                           __global const float* b_ih, __global const float* b_hh,
                           __global float* cache, uint steps, uint batch, uint hidden,
                           __local float* smem, int w_place) {
    __local float *ws, *as, *red;
    float4 wr[BL_REG_CHUNKS];
    BlStart b = bl_start(W, hs, 1, w_place, 3, batch, hidden, smem, &ws, &as, &red, wr);
    BlTile t = b.t;
    BlCell c = b.c;
    ulong H = hidden;
    float bi[3], bh[3];
    for (int g = 0; g < 3; g++) {
        bi[g] = c.store ? b_ih[g * H + c.j] : 0.0f;
        bh[g] = c.store ? b_hh[g * H + c.j] : 0.0f;
    }
    ulong block = (ulong)batch * H;
    ulong g3 = (c.at - c.j) * 3 + c.j;
    ulong g4 = (c.at - c.j) * 4 + c.j;
    for (uint s = 0; s < steps; s++) {
        __global const float* xr = gx + (ulong)s * 3 * block + g3;
        float x[3];
        for (int g = 0; g < 3; g++) x[g] = c.store ? xr[g * H] + bi[g] : 0.0f;
        bl_products(1, t, hidden, as, ws, W, wr, w_place, red);
        if (c.store) {
            __local const float* p = red + c.r * t.gh + c.j;
            float ghr = p[0] + bh[0];
            float ghz = p[H] + bh[1];
            float ghn = p[2 * H] + bh[2];
            float rg = rnn_sigmoid(x[0] + ghr);
            float z = rnn_sigmoid(x[1] + ghz);
            float n = tanh(x[2] + rg * ghn);
            __local float* hp = as + c.r * t.hp + c.j;
            float h = (1.0f - z) * n + z * *hp;
            hs[(s + 1) * block + c.at] = h;
            *hp = h;
            __global float* kr = cache + (ulong)s * 4 * block + g4;
            kr[0] = rg;
            kr[H] = z;
            kr[2 * H] = n;
            kr[3 * H] = ghn;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
}

inline void bl_gru_backward(__global const float* dh, __global const float* hs,
                            __global const float* cache, __global const float* W,
                            __global float* dgx, __global float* dgh, __global float* carry,
                            uint steps, uint batch, uint hidden, __local float* smem,
                            int w_place) {
    __local float *ws, *as, *red;
    float4 wr[BL_REG_CHUNKS];
    BlStart b = bl_start(W, dh, 0, w_place, 3, batch, hidden, smem, &ws, &as, &red, wr);
    BlTile t = b.t;
    BlCell c = b.c;
    ulong H = hidden;
    ulong block = (ulong)batch * H;
    ulong g3 = (c.at - c.j) * 3 + c.j;
    ulong g4 = (c.at - c.j) * 4 + c.j;
    float cr = 0.0f;
    for (uint s = 0; s < steps; s++) {
        uint step = steps - 1 - s;
        __global const float* kr = cache + (ulong)step * 4 * block + g4;
        float rg = c.store ? kr[0] : 0.0f;
        float z = c.store ? kr[H] : 0.0f;
        float n = c.store ? kr[2 * H] : 0.0f;
        float ghn = c.store ? kr[3 * H] : 0.0f;
        float hp = c.store ? hs[step * block + c.at] : 0.0f;
        float d = c.store ? dh[step * block + c.at] : 0.0f;
        // Also at the first step, whose products (of the zero staged rows) are not used: no
        // barrier under a condition (PoCL mishandles those).
        bl_products(0, t, hidden, as, ws, W, wr, w_place, red);
        if (c.store) {
            float rec = bl_recurrent(red, b, 3, H, s);
            float dt = (d + rec) + cr;
            float ox[3], oh[3];
            RNN_GRU_UNIT_BACKWARD(ox, oh, 0, 1, dt, rg, z, n, ghn, hp, cr);
            ulong at3 = (ulong)step * 3 * block + g3;
            __local float* next = as + c.r * 3 * t.hp + c.j;
            for (int g = 0; g < 3; g++) {
                dgx[at3 + g * H] = ox[g];
                dgh[at3 + g * H] = oh[g];
                next[g * t.hp] = oh[g];
            }
            carry[c.at] = cr;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
}

// The entries of each cell's body, instantiated by small_seq_{rnn,lstm,gru}.cl and
// small_seq_regs.cl: `NAME` the entry, `WP` where W_hh is kept (BL_SHARED, BL_GLOBAL: `w_hh`
// is W_hh packed by bl_pack_w, BL_REGS).

#define BL_RNN_FORWARD(NAME, WP)                                                              \
    __kernel void NAME(__global const float* pre_base, ulong pre_off, __global float* hs_base, \
                       ulong hs_off, __global const float* w_hh_base, ulong w_hh_off,         \
                       __global const float* b_ih_base, ulong b_ih_off,                       \
                       __global const float* b_hh_base, ulong b_hh_off, uint steps,           \
                       uint batch, uint hidden, uint act, float act_param,                    \
                       __local float* smem) {                                                 \
        bl_rnn_forward(pre_base + pre_off, hs_base + hs_off, w_hh_base + w_hh_off,            \
                       b_ih_base + b_ih_off, b_hh_base + b_hh_off, steps, batch, hidden, act, \
                       act_param, smem, WP);                                                  \
    }

#define BL_RNN_BACKWARD(NAME, WP)                                                             \
    __kernel void NAME(__global const float* dh_base, ulong dh_off,                           \
                       __global const float* hs_base, ulong hs_off,                           \
                       __global const float* w_hh_base, ulong w_hh_off,                       \
                       __global float* dpre_base, ulong dpre_off, uint steps, uint batch,     \
                       uint hidden, uint act, float act_param, __local float* smem) {         \
        bl_rnn_backward(dh_base + dh_off, hs_base + hs_off, w_hh_base + w_hh_off,             \
                        dpre_base + dpre_off, steps, batch, hidden, act, act_param, smem,     \
                        WP);                                                                  \
    }

#define BL_LSTM_FORWARD(NAME, WP)                                                             \
    __kernel void NAME(__global float* gates_base, ulong gates_off, __global float* hs_base,  \
                       ulong hs_off, __global float* cs_base, ulong cs_off,                   \
                       __global const float* w_hh_base, ulong w_hh_off,                       \
                       __global const float* b_ih_base, ulong b_ih_off,                       \
                       __global const float* b_hh_base, ulong b_hh_off, uint steps,           \
                       uint batch, uint hidden, __local float* smem) {                        \
        bl_lstm_forward(gates_base + gates_off, hs_base + hs_off, cs_base + cs_off,           \
                        w_hh_base + w_hh_off, b_ih_base + b_ih_off, b_hh_base + b_hh_off,     \
                        steps, batch, hidden, smem, WP);                                      \
    }

#define BL_LSTM_BACKWARD(NAME, WP)                                                            \
    __kernel void NAME(__global const float* dh_base, ulong dh_off,                           \
                       __global const float* gates_base, ulong gates_off,                     \
                       __global const float* cs_base, ulong cs_off,                           \
                       __global const float* w_hh_base, ulong w_hh_off,                       \
                       __global float* dgates_base, ulong dgates_off,                         \
                       __global float* carry_base, ulong carry_off, uint steps, uint batch,   \
                       uint hidden, uint carry_in, __local float* smem) {                     \
        bl_lstm_backward(dh_base + dh_off, gates_base + gates_off, cs_base + cs_off,          \
                         w_hh_base + w_hh_off, dgates_base + dgates_off,                      \
                         carry_base + carry_off, steps, batch, hidden, carry_in, smem,        \
                         WP);                                                                 \
    }

#define BL_GRU_FORWARD(NAME, WP)                                                              \
    __kernel void NAME(__global const float* gx_base, ulong gx_off, __global float* hs_base,  \
                       ulong hs_off, __global const float* w_hh_base, ulong w_hh_off,         \
                       __global const float* b_ih_base, ulong b_ih_off,                       \
                       __global const float* b_hh_base, ulong b_hh_off,                       \
                       __global float* cache_base, ulong cache_off, uint steps, uint batch,   \
                       uint hidden, __local float* smem) {                                    \
        bl_gru_forward(gx_base + gx_off, hs_base + hs_off, w_hh_base + w_hh_off,              \
                       b_ih_base + b_ih_off, b_hh_base + b_hh_off, cache_base + cache_off,    \
                       steps, batch, hidden, smem, WP);                                       \
    }

#define BL_GRU_BACKWARD(NAME, WP)                                                             \
    __kernel void NAME(__global const float* dh_base, ulong dh_off,                           \
                       __global const float* hs_base, ulong hs_off,                           \
                       __global const float* cache_base, ulong cache_off,                     \
                       __global const float* w_hh_base, ulong w_hh_off,                       \
                       __global float* dgx_base, ulong dgx_off, __global float* dgh_base,     \
                       ulong dgh_off, __global float* carry_base, ulong carry_off,            \
                       uint steps, uint batch, uint hidden, __local float* smem) {            \
        bl_gru_backward(dh_base + dh_off, hs_base + hs_off, cache_base + cache_off,           \
                        w_hh_base + w_hh_off, dgx_base + dgx_off, dgh_base + dgh_off,         \
                        carry_base + carry_off, steps, batch, hidden, smem, WP);              \
    }

// The paired entries (small_seq_pair.cl): two independent sequences of one shape, the two
// directions of a bidirectional layer, in one launch of two work-groups along dimension 1,
// each taking its own buffers (the second set suffixed `2`) through the body above; the
// dimensions and the tail are shared (kernels-cu/small_seq.cu says why).
#define BL_PICK(x) (get_group_id(1) ? x##2 : x)

#define BL_RNN_FORWARD_PAIR(NAME, WP)                                                         \
    __kernel void NAME(__global const float* pre_base, ulong pre_off, __global float* hs_base, \
                       ulong hs_off, __global const float* w_hh_base, ulong w_hh_off,         \
                       __global const float* b_ih_base, ulong b_ih_off,                       \
                       __global const float* b_hh_base, ulong b_hh_off,                       \
                       __global const float* pre_base2, ulong pre_off2,                       \
                       __global float* hs_base2, ulong hs_off2,                               \
                       __global const float* w_hh_base2, ulong w_hh_off2,                     \
                       __global const float* b_ih_base2, ulong b_ih_off2,                     \
                       __global const float* b_hh_base2, ulong b_hh_off2, uint steps,         \
                       uint batch, uint hidden, uint act, float act_param,                    \
                       __local float* smem) {                                                 \
        bl_rnn_forward(BL_PICK(pre_base) + BL_PICK(pre_off),                                  \
                       BL_PICK(hs_base) + BL_PICK(hs_off),                                    \
                       BL_PICK(w_hh_base) + BL_PICK(w_hh_off),                                \
                       BL_PICK(b_ih_base) + BL_PICK(b_ih_off),                                \
                       BL_PICK(b_hh_base) + BL_PICK(b_hh_off), steps, batch, hidden, act,     \
                       act_param, smem, WP);                                                  \
    }

#define BL_RNN_BACKWARD_PAIR(NAME, WP)                                                        \
    __kernel void NAME(__global const float* dh_base, ulong dh_off,                           \
                       __global const float* hs_base, ulong hs_off,                           \
                       __global const float* w_hh_base, ulong w_hh_off,                       \
                       __global float* dpre_base, ulong dpre_off,                             \
                       __global const float* dh_base2, ulong dh_off2,                         \
                       __global const float* hs_base2, ulong hs_off2,                         \
                       __global const float* w_hh_base2, ulong w_hh_off2,                     \
                       __global float* dpre_base2, ulong dpre_off2, uint steps, uint batch,   \
                       uint hidden, uint act, float act_param, __local float* smem) {         \
        bl_rnn_backward(BL_PICK(dh_base) + BL_PICK(dh_off),                                   \
                        BL_PICK(hs_base) + BL_PICK(hs_off),                                   \
                        BL_PICK(w_hh_base) + BL_PICK(w_hh_off),                               \
                        BL_PICK(dpre_base) + BL_PICK(dpre_off), steps, batch, hidden, act,    \
                        act_param, smem, WP);                                                 \
    }

#define BL_LSTM_FORWARD_PAIR(NAME, WP)                                                        \
    __kernel void NAME(__global float* gates_base, ulong gates_off, __global float* hs_base,  \
                       ulong hs_off, __global float* cs_base, ulong cs_off,                   \
                       __global const float* w_hh_base, ulong w_hh_off,                       \
                       __global const float* b_ih_base, ulong b_ih_off,                       \
                       __global const float* b_hh_base, ulong b_hh_off,                       \
                       __global float* gates_base2, ulong gates_off2,                         \
                       __global float* hs_base2, ulong hs_off2,                               \
                       __global float* cs_base2, ulong cs_off2,                               \
                       __global const float* w_hh_base2, ulong w_hh_off2,                     \
                       __global const float* b_ih_base2, ulong b_ih_off2,                     \
                       __global const float* b_hh_base2, ulong b_hh_off2, uint steps,         \
                       uint batch, uint hidden, __local float* smem) {                        \
        bl_lstm_forward(BL_PICK(gates_base) + BL_PICK(gates_off),                             \
                        BL_PICK(hs_base) + BL_PICK(hs_off),                                   \
                        BL_PICK(cs_base) + BL_PICK(cs_off),                                   \
                        BL_PICK(w_hh_base) + BL_PICK(w_hh_off),                               \
                        BL_PICK(b_ih_base) + BL_PICK(b_ih_off),                               \
                        BL_PICK(b_hh_base) + BL_PICK(b_hh_off), steps, batch, hidden, smem,   \
                        WP);                                                                  \
    }

#define BL_LSTM_BACKWARD_PAIR(NAME, WP)                                                       \
    __kernel void NAME(__global const float* dh_base, ulong dh_off,                           \
                       __global const float* gates_base, ulong gates_off,                     \
                       __global const float* cs_base, ulong cs_off,                           \
                       __global const float* w_hh_base, ulong w_hh_off,                       \
                       __global float* dgates_base, ulong dgates_off,                         \
                       __global float* carry_base, ulong carry_off,                           \
                       __global const float* dh_base2, ulong dh_off2,                         \
                       __global const float* gates_base2, ulong gates_off2,                   \
                       __global const float* cs_base2, ulong cs_off2,                         \
                       __global const float* w_hh_base2, ulong w_hh_off2,                     \
                       __global float* dgates_base2, ulong dgates_off2,                       \
                       __global float* carry_base2, ulong carry_off2, uint steps, uint batch, \
                       uint hidden, uint carry_in, __local float* smem) {                     \
        bl_lstm_backward(BL_PICK(dh_base) + BL_PICK(dh_off),                                  \
                         BL_PICK(gates_base) + BL_PICK(gates_off),                            \
                         BL_PICK(cs_base) + BL_PICK(cs_off),                                  \
                         BL_PICK(w_hh_base) + BL_PICK(w_hh_off),                              \
                         BL_PICK(dgates_base) + BL_PICK(dgates_off),                          \
                         BL_PICK(carry_base) + BL_PICK(carry_off), steps, batch, hidden,      \
                         carry_in, smem, WP);                                                 \
    }

#define BL_GRU_FORWARD_PAIR(NAME, WP)                                                         \
    __kernel void NAME(__global const float* gx_base, ulong gx_off, __global float* hs_base,  \
                       ulong hs_off, __global const float* w_hh_base, ulong w_hh_off,         \
                       __global const float* b_ih_base, ulong b_ih_off,                       \
                       __global const float* b_hh_base, ulong b_hh_off,                       \
                       __global float* cache_base, ulong cache_off,                           \
                       __global const float* gx_base2, ulong gx_off2,                         \
                       __global float* hs_base2, ulong hs_off2,                               \
                       __global const float* w_hh_base2, ulong w_hh_off2,                     \
                       __global const float* b_ih_base2, ulong b_ih_off2,                     \
                       __global const float* b_hh_base2, ulong b_hh_off2,                     \
                       __global float* cache_base2, ulong cache_off2, uint steps, uint batch, \
                       uint hidden, __local float* smem) {                                    \
        bl_gru_forward(BL_PICK(gx_base) + BL_PICK(gx_off), BL_PICK(hs_base) + BL_PICK(hs_off), \
                       BL_PICK(w_hh_base) + BL_PICK(w_hh_off),                                \
                       BL_PICK(b_ih_base) + BL_PICK(b_ih_off),                                \
                       BL_PICK(b_hh_base) + BL_PICK(b_hh_off),                                \
                       BL_PICK(cache_base) + BL_PICK(cache_off), steps, batch, hidden, smem,  \
                       WP);                                                                   \
    }

#define BL_GRU_BACKWARD_PAIR(NAME, WP)                                                        \
    __kernel void NAME(__global const float* dh_base, ulong dh_off,                           \
                       __global const float* hs_base, ulong hs_off,                           \
                       __global const float* cache_base, ulong cache_off,                     \
                       __global const float* w_hh_base, ulong w_hh_off,                       \
                       __global float* dgx_base, ulong dgx_off, __global float* dgh_base,     \
                       ulong dgh_off, __global float* carry_base, ulong carry_off,            \
                       __global const float* dh_base2, ulong dh_off2,                         \
                       __global const float* hs_base2, ulong hs_off2,                         \
                       __global const float* cache_base2, ulong cache_off2,                   \
                       __global const float* w_hh_base2, ulong w_hh_off2,                     \
                       __global float* dgx_base2, ulong dgx_off2, __global float* dgh_base2,  \
                       ulong dgh_off2, __global float* carry_base2, ulong carry_off2,         \
                       uint steps, uint batch, uint hidden, __local float* smem) {            \
        bl_gru_backward(BL_PICK(dh_base) + BL_PICK(dh_off), BL_PICK(hs_base) + BL_PICK(hs_off), \
                        BL_PICK(cache_base) + BL_PICK(cache_off),                             \
                        BL_PICK(w_hh_base) + BL_PICK(w_hh_off),                               \
                        BL_PICK(dgx_base) + BL_PICK(dgx_off),                                 \
                        BL_PICK(dgh_base) + BL_PICK(dgh_off),                                 \
                        BL_PICK(carry_base) + BL_PICK(carry_off), steps, batch, hidden, smem, \
                        WP);                                                                  \
    }

#endif  // RNN_SMALL_SEQ_CL
