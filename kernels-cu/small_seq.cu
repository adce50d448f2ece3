// Whole-sequence Elman, LSTM and GRU, forward and backward, in ONE plain launch each, for small
// hidden sizes (geometry B, docs/kernel-abi.md): the block-local variant of the persistent
// kernels of rnn_seq.cu and gated_seq.cu, with their arguments less the barrier and exchange
// buffers, and their outputs.
//
// Each block owns a tile of batch rows and ALL hidden units, so no block ever reads what another
// wrote: a step needs only __syncthreads, no inter-block barrier and no global round trip of the
// state, and the launch needs no co-residency (any grid, any device with the shared memory).
// The block keeps the whole W_hh (G H x H, G = 4 LSTM, 3 GRU, 1 Elman) in dynamic shared memory
// and the state rows of its tile there too; it still writes every output the persistent kernels
// write (hs, cs, gates, cache, dgates, ...), so the weight-gradient GEMMs are unchanged.
//
// Geometry: gridDim.x blocks of R = ceil(batch / gridDim.x) rows (block b: rows b R ..); the
// block's threads are `groups` row groups of bl_pad32(G H) threads (groups = blockDim.x / that),
// a group owning `per` = ceil(R / groups) consecutive rows of the tile. Thread p of a group
// forms, for each of its rows, one product of the step:
//   forward:  output p = g H + j of row r: sum over k < H of h[r, k] W[p, k];
//   backward: for p = s H + j, the part of dh[r, j] from gate block s: sum over k < H of
//             dnext[r, s H + k] W[s H + k, j];
// into red[r G H + p]. W sits in shared memory as the K x N operand of these products in
// float4s along k (bl_load_w): consecutive threads read consecutive 16-byte words (no bank
// conflicts), four k at a time, and the staged rows are float4 broadcasts; k is padded with
// zeros to hp, H rounded up to 4, in W and in the staged rows, per gate block. After a
// __syncthreads, thread e < R H applies the cell math of row e / H, unit e % H (the host makes
// blockDim.x >= R H): it adds the G products of its unit (forward: one per gate; backward: the
// G partial sums), writes the outputs, and puts the row's next state (h forward; the gate
// gradients dgates / dgh / dpre backward) in the staging rows that the next step's products
// read. A second __syncthreads ends the step.
//
// Dynamic shared memory, in floats: G H hp (W) + S A (staged rows, A = hp forward, G hp
// backward) + S G H (products), S = groups * per rows. The host sizes it for its R; the
// kernel's R (from gridDim.x) is never larger.
//
// Each body is compiled three times (the entry macros of small_seq_{rnn,lstm,gru}.cu):
// `*_local` (BL_SHARED) as described; `*_l1` (BL_GLOBAL), where `w_hh` is W_hh already in that
// layout in global memory (bl_pack_w, launched by the host before), read through the read-only
// L1 path (__ldg), and the shared memory holds only the staged rows and products (devices whose
// blocks cannot hold W_hh; measuring elsewhere). The third, `*_local_regs` (BL_REGS), keeps
// W_hh in registers: each product is split `ks` ways along k (ks = ceil(hp / 4 /
// BL_REG_CHUNKS)), thread q of a product's ks holding the float4s k4 = q + ks c (c <
// BL_REG_CHUNKS) of its W column, loaded once from W_hh as it is (no packing). A step reads
// only the staged rows from shared memory (the threads of one q read the same float4, a
// broadcast; consecutive q consecutive float4s) and adds the ks partial products of each
// output in a second pass (a third barrier a step where ks > 1). Groups are bl_pad32(G H ks)
// threads; shared memory holds the staged rows, the products and, where ks > 1, the S G H ks
// partial products after them. W_hh in registers spares the shared-memory bandwidth the other
// two spend reading all of W every step; it fits where G H ks <= 1024.
//
// The backward's carry (the LSTM's dc f, the GRU's dh z from step t + 1 to t) lives in the
// register of the thread that owns the element, and is written to `carry` (batch x hidden) every
// step as the persistent kernels do; as there it is not read at the first processed step (the
// last time step), where it is zero.

// Included by each small_seq family's module; once in the whole op set.
#ifndef RNN_SMALL_SEQ_CU
#define RNN_SMALL_SEQ_CU

__device__ __forceinline__ uint bl_pad32(uint n) { return (n + 31u) & ~31u; }
__device__ __forceinline__ uint bl_pad4(uint n) { return (n + 3u) & ~3u; }

// Where a kernel keeps W_hh (the file comment): shared memory, global memory (packed), registers.
#define BL_SHARED 0
#define BL_GLOBAL 1
#define BL_REGS 2
// Float4s of W_hh a thread of a BL_REGS kernel holds (24 registers: more spill beside the
// LSTM and GRU cell state under the 64 registers of a 1024-thread block).
#define BL_REG_CHUNKS 6

// The ways a BL_REGS product is split along k for a row of hp floats.
__device__ __forceinline__ uint bl_ksplit(uint hp) {
    return (hp / 4 + BL_REG_CHUNKS - 1) / BL_REG_CHUNKS;
}

// The tile of a block: `rows` batch rows from `row0`; `groups` row groups of `per` rows each
// (`slots` = groups * per staged rows); `gh` = G H products per row; `hp` = H padded to 4;
// `ks` the threads of a product (1 but with W_hh in registers).
struct BlTile {
    uint rows;
    uint row0;
    uint groups;
    uint per;
    uint slots;
    uint gh;
    uint hp;
    uint ks;
};

__device__ __forceinline__ BlTile bl_tile(uint batch, uint gates, uint hidden, int wp) {
    BlTile t;
    t.rows = (batch + gridDim.x - 1) / gridDim.x;
    t.row0 = blockIdx.x * t.rows;
    t.gh = gates * hidden;
    t.hp = bl_pad4(hidden);
    t.ks = wp == BL_REGS ? bl_ksplit(t.hp) : 1u;
    t.groups = max(blockDim.x / bl_pad32(t.gh * t.ks), 1u);
    t.per = (t.rows + t.groups - 1) / t.groups;
    t.slots = t.groups * t.per;
    return t;
}

// W (G H x H, row-major) into shared memory as the K x N operand of the products, in float4s
// along k: element (k, n) at ((k / 4) N + n) 4 + k % 4, each gate block's k padded with zeros
// to hp (a multiple of 4):
//   forward:  K = hp, N = G H, (k, q) = W[q, k];
//   backward: K = G hp, N = H, (s hp + k, j) = W[s H + k, j].
// Read along W's rows.
template <bool FORWARD>
__device__ __forceinline__ void bl_load_w(const float* W, const BlTile& t, uint hidden,
                                          float* ws) {
    const uint total = t.gh * t.hp;
    for (uint e = threadIdx.x; e < total; e += blockDim.x) ws[e] = 0.0f;
    __syncthreads();
    const uint n = t.gh * hidden;
    for (uint e = threadIdx.x; e < n; e += blockDim.x) {
        const uint row = e / hidden;
        const uint col = e - row * hidden;
        uint at;
        if (FORWARD) {
            at = ((col >> 2) * t.gh + row) * 4 + (col & 3);
        } else {
            const uint s = row / hidden;
            const uint k = s * t.hp + (row - s * hidden);
            at = ((k >> 2) * hidden + col) * 4 + (k & 3);
        }
        ws[at] = W[e];
    }
}

// The tile's rows of `a` (batch rows of `blocks` blocks of `hidden`) into `as` (t.slots rows
// of `blocks` blocks of t.hp, the padding zero), zero past the tile or the batch; zero
// everywhere without `a`.
__device__ __forceinline__ void bl_stage(const float* a, uint batch, uint blocks, uint hidden,
                                         const BlTile& t, float* as) {
    const uint ld = blocks * t.hp;
    const uint n = t.slots * ld;
    for (uint e = threadIdx.x; e < n; e += blockDim.x) {
        const uint r = e / ld;
        const uint x = e - r * ld;
        const uint s = x / t.hp;
        const uint k = x - s * t.hp;
        const uint row = t.row0 + r;
        const bool in = a != nullptr && r < t.rows && row < batch && k < hidden;
        as[e] = in ? a[(u64)row * blocks * hidden + s * hidden + k] : 0.0f;
    }
}

// acc + x . w, in the order of the components.
__device__ __forceinline__ float bl_fma4(float4 x, float4 w, float acc) {
    acc = fmaf(x.x, w.x, acc);
    acc = fmaf(x.y, w.y, acc);
    acc = fmaf(x.z, w.z, acc);
    return fmaf(x.w, w.w, acc);
}

// This thread's part of W for a BL_REGS kernel: thread q of product p (thread p ks + q of its
// group) holds the float4s k4 = q + ks c of the product's W operand (the layout of bl_load_w,
// one column), zero past hidden:
//   forward:  (k, p) = W[p, k];
//   backward: p = s H + j, (k, p) = W[s H + k, j].
// W_hh is read as it is, once per launch.
template <bool FORWARD>
__device__ __forceinline__ void bl_load_regs(const float* W, const BlTile& t, uint hidden,
                                             float4* wr) {
    const uint tid = threadIdx.x % bl_pad32(t.gh * t.ks);
    const uint p = tid / t.ks;
    const uint q = tid - p * t.ks;
    const uint s = p / hidden;
    const uint j = p - s * hidden;
#pragma unroll
    for (int c = 0; c < BL_REG_CHUNKS; ++c) {
        float v[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const uint k = 4 * (q + t.ks * c) + e;
            const bool in = p < t.gh && k < hidden;
            const u64 at = FORWARD ? (u64)p * hidden + k : ((u64)s * hidden + k) * hidden + j;
            v[e] = in ? W[at] : 0.0f;
        }
        wr[c] = make_float4(v[0], v[1], v[2], v[3]);
    }
}

// bl_dot with W in registers: out[i ldo] = sum over c of a[i][q + ks c] wr[c] for RB rows,
// float4s of `a` from this thread's q on, n4 - q of them in reach (k4 < n4).
template <int RB>
__device__ __forceinline__ void bl_dot_regs(const float4* a, uint lda4, const float4* wr,
                                            uint ks, uint reach, float* out, uint ldo) {
    float acc[RB];
#pragma unroll
    for (int i = 0; i < RB; ++i) acc[i] = 0.0f;
#pragma unroll
    for (int c = 0; c < BL_REG_CHUNKS; ++c) {
        const uint k = ks * c;
        if (k < reach) {
            const float4 wk = wr[c];
#pragma unroll
            for (int i = 0; i < RB; ++i) {
                acc[i] = bl_fma4(a[i * lda4 + k], wk, acc[i]);
            }
        }
    }
#pragma unroll
    for (int i = 0; i < RB; ++i) out[i * ldo] = acc[i];
}

// The products of a step with W in registers (bl_products): thread q of product p writes its
// partial sums to `part` (row r: r G H ks + p ks + q; straight into `red` where ks is 1), and
// after a barrier every product's ks partial sums are added in order of q into `red`.
template <bool FORWARD>
__device__ __forceinline__ void bl_products_regs(const BlTile& t, uint hidden, const float* as,
                                                 const float4* wr, float* red) {
    const uint qp = bl_pad32(t.gh * t.ks);
    const uint tid = threadIdx.x % qp;
    const uint grp = threadIdx.x / qp;
    const uint p = tid / t.ks;
    const uint q = tid - p * t.ks;
    float* part = t.ks > 1 ? red + t.slots * t.gh : red;
    const uint ldo = t.gh * t.ks;
    if (p < t.gh && grp < t.groups) {
        const uint n4 = t.hp / 4;
        const uint s = FORWARD ? 0 : p / hidden;
        const uint lda4 = FORWARD ? n4 : t.gh / hidden * n4;
        const float4* a = reinterpret_cast<const float4*>(as) + s * n4 + q;
        float* out = part + tid;
        const uint reach = n4 - q;
        uint r = grp * t.per;
        const uint end = r + t.per;
        // Rows in pairs at most: beside W's registers, more accumulators would spill under the
        // 64 registers of a 1024-thread block.
        for (; r + 2 <= end; r += 2) {
            bl_dot_regs<2>(a + r * lda4, lda4, wr, t.ks, reach, out + r * ldo, ldo);
        }
        if (r < end) {
            bl_dot_regs<1>(a + r * lda4, lda4, wr, t.ks, reach, out + r * ldo, ldo);
        }
    }
    __syncthreads();
    if (t.ks > 1) {
        const uint n = t.slots * t.gh;
        for (uint e = threadIdx.x; e < n; e += blockDim.x) {
            const float* x = part + e * t.ks;
            float sum = x[0];
            for (uint k = 1; k < t.ks; ++k) sum += x[k];
            red[e] = sum;
        }
        __syncthreads();
    }
}

// out[i ldo] = sum over k < 4 n4 of a[i][k] w[k] for RB rows: a in float4s with row stride
// lda4, w the float4s of one column with stride ldw4 (the layout of bl_load_w).
template <int RB, bool W_GLOBAL>
__device__ __forceinline__ void bl_dot(const float4* a, uint lda4, const float4* w, uint ldw4,
                                       uint n4, float* out, uint ldo) {
    float acc[RB];
#pragma unroll
    for (int i = 0; i < RB; ++i) acc[i] = 0.0f;
#pragma unroll 2
    for (uint k = 0; k < n4; ++k) {
        const float4 wk = W_GLOBAL ? __ldg(w + k * ldw4) : w[k * ldw4];
#pragma unroll
        for (int i = 0; i < RB; ++i) {
            acc[i] = bl_fma4(a[i * lda4 + k], wk, acc[i]);
        }
    }
#pragma unroll
    for (int i = 0; i < RB; ++i) out[i * ldo] = acc[i];
}

// The products of a step (see the file comment) from the staged rows `as` into `red`; ends
// with the barrier after which `red` is complete. W in `ws` (BL_SHARED, BL_GLOBAL) or `wr`.
template <bool FORWARD, int WP>
__device__ __forceinline__ void bl_products(const BlTile& t, uint hidden, const float* as,
                                            const float* ws, const float4* wr, float* red) {
    if (WP == BL_REGS) {
        bl_products_regs<FORWARD>(t, hidden, as, wr, red);
        return;
    }
    constexpr bool W_GLOBAL = WP == BL_GLOBAL;
    const uint qp = bl_pad32(t.gh);
    const uint p = threadIdx.x % qp;
    const uint grp = threadIdx.x / qp;
    if (p < t.gh && grp < t.groups) {
        const uint n4 = t.hp / 4;
        const uint s = FORWARD ? 0 : p / hidden;
        const uint col = FORWARD ? p : p - s * hidden;
        const uint lda4 = FORWARD ? n4 : t.gh / hidden * n4;
        const uint ldw4 = FORWARD ? t.gh : hidden;
        const float4* a = reinterpret_cast<const float4*>(as) + s * n4;
        const float4* w = reinterpret_cast<const float4*>(ws) + s * n4 * ldw4 + col;
        // The rows of this group in blocks of 4, 2 and 1 (each W word read once per block).
        uint r = grp * t.per;
        const uint end = r + t.per;
        for (; r + 4 <= end; r += 4) {
            bl_dot<4, W_GLOBAL>(a + r * lda4, lda4, w, ldw4, n4, red + r * t.gh + p, t.gh);
        }
        for (; r + 2 <= end; r += 2) {
            bl_dot<2, W_GLOBAL>(a + r * lda4, lda4, w, ldw4, n4, red + r * t.gh + p, t.gh);
        }
        if (r < end) {
            bl_dot<1, W_GLOBAL>(a + r * lda4, lda4, w, ldw4, n4, red + r * t.gh + p, t.gh);
        }
    }
    __syncthreads();
}

// The cell element of this thread: row r of the tile, unit j; `store` where it is a batch row.
struct BlCell {
    uint r;
    uint j;
    bool store;
    u64 at;  // row * hidden + j
};

__device__ __forceinline__ BlCell bl_cell(const BlTile& t, uint batch, uint hidden) {
    BlCell c;
    c.r = threadIdx.x / hidden;
    c.j = threadIdx.x - c.r * hidden;
    const uint row = t.row0 + c.r;
    c.store = c.r < t.rows && row < batch;
    c.at = (u64)row * hidden + c.j;
    return c;
}

// A kernel's W operand (shared memory, or the packed W_hh in global memory) and its shared
// memory: the staged rows (`blocks` blocks of hp), the products.
struct BlSmem {
    const float* ws;
    float* as;
    float* red;
};

// A kernel's start: its tile, shared memory and cell element, W loaded (into shared memory or
// registers) and the staged rows set (forward from block 0 of `state`; backward zero), then a
// barrier.
// `wr`: this thread's part of W_hh where it is kept in registers (BL_REGS; unused otherwise).
struct BlStart {
    BlTile t;
    BlSmem m;
    BlCell c;
    float4 wr[BL_REG_CHUNKS];
};

template <bool FORWARD, int WP>
__device__ __forceinline__ BlStart bl_start(const float* W, const float* state, uint gates,
                                            uint batch, uint hidden) {
    // float4: the products read W and the staged rows as float4s.
    extern __shared__ float4 bl_shared[];
    BlStart b;
    b.t = bl_tile(batch, gates, hidden, WP);
    const uint blocks = FORWARD ? 1 : gates;
    float* shared = reinterpret_cast<float*>(bl_shared);
    b.m.ws = WP == BL_GLOBAL ? W : shared;
    b.m.as = shared + (WP == BL_SHARED ? b.t.gh * b.t.hp : 0u);
    b.m.red = b.m.as + b.t.slots * blocks * b.t.hp;
    // Uniform (a template argument): every thread reaches the barrier inside or none does.
    if (WP == BL_SHARED) bl_load_w<FORWARD>(W, b.t, hidden, shared);
    if (WP == BL_REGS) bl_load_regs<FORWARD>(W, b.t, hidden, b.wr);
    bl_stage(FORWARD ? state : nullptr, batch, blocks, hidden, b.t, b.m.as);
    b.c = bl_cell(b.t, batch, hidden);
    __syncthreads();
    return b;
}

// The backward's recurrent gradient of this thread's element: the G partial products in gate
// order, zero at the first step (`s` 0), whose products are not used.
template <int G>
__device__ __forceinline__ float bl_recurrent(const BlStart& b, u64 H, uint s) {
    const float* p = b.m.red + b.c.r * b.t.gh + b.c.j;
    float rec = 0.0f;
#pragma unroll
    for (int k = 0; k < G; ++k) rec += s > 0 ? p[k * H] : 0.0f;
    return rec;
}

// hs[t + 1] = act(pre[t] + hs[t] W^T + b_ih + b_hh) for t = 0 .. steps - 1; hs[0] is read.
template <int WP>
__device__ __forceinline__ void bl_rnn_forward(const float* pre_base, u64 pre_off, float* hs_base,
    u64 hs_off, const float* w_hh_base, u64 w_hh_off, const float* b_ih_base, u64 b_ih_off,
    const float* b_hh_base, u64 b_hh_off, uint steps, uint batch, uint hidden, uint act,
    float act_param) {
    const float* pre = pre_base + pre_off;
    float* hs = hs_base + hs_off;
    const BlStart b = bl_start<true, WP>(w_hh_base + w_hh_off, hs, 1, batch, hidden);
    const BlTile& t = b.t;
    const BlSmem& m = b.m;
    const BlCell& c = b.c;
    const float bias = c.store ? b_ih_base[b_ih_off + c.j] + b_hh_base[b_hh_off + c.j] : 0.0f;
    const u64 block = (u64)batch * hidden;
    for (uint s = 0; s < steps; ++s) {
        // Read-only input, issued before the products so its latency overlaps them.
        const float x = c.store ? pre[s * block + c.at] : 0.0f;
        bl_products<true, WP>(t, hidden, m.as, m.ws, b.wr, m.red);
        if (c.store) {
            const float h = act_forward(m.red[c.r * t.gh + c.j] + x + bias, act, act_param);
            hs[(s + 1) * block + c.at] = h;
            m.as[c.r * t.hp + c.j] = h;
        }
        __syncthreads();
    }
}

// dpre[t] = act'(hs[t + 1]) * (dh[t] + dpre[t + 1] W) for t = steps - 1 .. 0, the product
// absent at t = steps - 1.
template <int WP>
__device__ __forceinline__ void bl_rnn_backward(const float* dh_base, u64 dh_off,
    const float* hs_base, u64 hs_off, const float* w_hh_base, u64 w_hh_off, float* dpre_base,
    u64 dpre_off, uint steps, uint batch, uint hidden, uint act, float act_param) {
    const float* dh = dh_base + dh_off;
    const float* hs = hs_base + hs_off;
    float* dpre = dpre_base + dpre_off;
    const BlStart b = bl_start<false, WP>(w_hh_base + w_hh_off, nullptr, 1, batch, hidden);
    const BlTile& t = b.t;
    const BlSmem& m = b.m;
    const BlCell& c = b.c;
    const u64 block = (u64)batch * hidden;
    for (uint s = 0; s < steps; ++s) {
        const uint step = steps - 1 - s;
        const float y = c.store ? hs[((u64)step + 1) * block + c.at] : 0.0f;
        const float d = c.store ? dh[step * block + c.at] : 0.0f;
        // Uniform over the block: every thread reaches the barrier inside.
        // Also at the first step, whose products (of the zero staged rows) are not used: no
        // barrier under a condition (PoCL mishandles those).
        bl_products<false, WP>(t, hidden, m.as, m.ws, b.wr, m.red);
        if (c.store) {
            const float acc = bl_recurrent<1>(b, hidden, s);
            const float v = act_grad(0.0f, y, act, act_param) * (d + acc);
            dpre[step * block + c.at] = v;
            m.as[c.r * t.hp + c.j] = v;
        }
        __syncthreads();
    }
}

// lstm_seq_forward of gated_seq.cu: gates[t] (x_t W_ih^T on entry) becomes the activated gates
// of gates[t] + b_ih + b_hh + hs[t] W_hh^T; cs[t + 1] = f cs[t] + i g;
// hs[t + 1] = o tanh(cs[t + 1]).
template <int WP>
__device__ __forceinline__ void bl_lstm_forward(float* gates_base, u64 gates_off, float* hs_base,
    u64 hs_off, float* cs_base, u64 cs_off, const float* w_hh_base, u64 w_hh_off,
    const float* b_ih_base, u64 b_ih_off, const float* b_hh_base, u64 b_hh_off, uint steps,
    uint batch, uint hidden) {
    float* gates = gates_base + gates_off;
    float* hs = hs_base + hs_off;
    float* cs = cs_base + cs_off;
    const BlStart b = bl_start<true, WP>(w_hh_base + w_hh_off, hs, 4, batch, hidden);
    const BlTile& t = b.t;
    const BlSmem& m = b.m;
    const BlCell& c = b.c;
    const u64 H = hidden;
    float bias[4];
#pragma unroll
    for (int g = 0; g < 4; ++g) {
        bias[g] = c.store ? b_ih_base[b_ih_off + g * H + c.j] + b_hh_base[b_hh_off + g * H + c.j]
                          : 0.0f;
    }
    const u64 block = (u64)batch * H;
    float cell = c.store ? cs[c.at] : 0.0f;
    for (uint s = 0; s < steps; ++s) {
        float* gr = gates + (u64)s * 4 * block + (c.at - c.j) * 4 + c.j;
        float x[4];
#pragma unroll
        for (int g = 0; g < 4; ++g) x[g] = c.store ? gr[g * H] : 0.0f;
        bl_products<true, WP>(t, hidden, m.as, m.ws, b.wr, m.red);
        if (c.store) {
            const float* p = m.red + c.r * t.gh + c.j;
            float h;
            RNN_LSTM_UNIT_FORWARD(p, H, x, bias, gr, H, cell, cell, h);
            cs[(s + 1) * block + c.at] = cell;
            hs[(s + 1) * block + c.at] = h;
            m.as[c.r * t.hp + c.j] = h;
        }
        __syncthreads();
    }
}

// lstm_seq_backward of gated_seq.cu: for t = steps - 1 .. 0, dh_t = dh[t] + dgates[t + 1] W_hh
// (absent at t = steps - 1); dgates[t] and carry = dc_t f_t by RNN_LSTM_UNIT_BACKWARD; carry
// read first when carry_in, as there.
template <int WP>
__device__ __forceinline__ void bl_lstm_backward(const float* dh_base, u64 dh_off,
    const float* gates_base, u64 gates_off, const float* cs_base, u64 cs_off,
    const float* w_hh_base, u64 w_hh_off, float* dgates_base, u64 dgates_off, float* carry_base,
    u64 carry_off, uint steps, uint batch, uint hidden, uint carry_in) {
    const float* dh = dh_base + dh_off;
    const float* gates = gates_base + gates_off;
    const float* cs = cs_base + cs_off;
    float* dgates = dgates_base + dgates_off;
    float* carry = carry_base + carry_off;
    const BlStart b = bl_start<false, WP>(w_hh_base + w_hh_off, nullptr, 4, batch, hidden);
    const BlTile& t = b.t;
    const BlSmem& m = b.m;
    const BlCell& c = b.c;
    const u64 H = hidden;
    const u64 block = (u64)batch * H;
    const u64 ga = (c.at - c.j) * 4 + c.j;
    // The gradient reaching the last cell state from outside (dc_n) where carry_in says the
    // caller put it in `carry`, else zero.
    float dc = c.store && carry_in ? carry[c.at] : 0.0f;
    for (uint s = 0; s < steps; ++s) {
        const uint step = steps - 1 - s;
        // Inputs of the forward, issued before the products.
        const float* gr = gates + (u64)step * 4 * block + ga;
        const float gi = c.store ? gr[0] : 0.0f;
        const float gf = c.store ? gr[H] : 0.0f;
        const float gg = c.store ? gr[2 * H] : 0.0f;
        const float go = c.store ? gr[3 * H] : 0.0f;
        const float cn = c.store ? cs[((u64)step + 1) * block + c.at] : 0.0f;
        const float cp = c.store ? cs[step * block + c.at] : 0.0f;
        const float d = c.store ? dh[step * block + c.at] : 0.0f;
        // Also at the first step, whose products (of the zero staged rows) are not used: no
        // barrier under a condition (PoCL mishandles those).
        bl_products<false, WP>(t, hidden, m.as, m.ws, b.wr, m.red);
        if (c.store) {
            const float rec = bl_recurrent<4>(b, H, s);
            const float tc = tanhf(cn);
            const float dht = d + rec;
            float out[4];
            RNN_LSTM_UNIT_BACKWARD(out, 0, 1, dc, dht, tc, cp, gi, gf, gg, go, dc);
            float* dg = dgates + (u64)step * 4 * block + ga;
            float* next = m.as + c.r * 4 * t.hp + c.j;
#pragma unroll
            for (int g = 0; g < 4; ++g) {
                dg[g * H] = out[g];
                next[g * t.hp] = out[g];
            }
            carry[c.at] = dc;
        }
        __syncthreads();
    }
}

// gru_seq_forward of gated_seq.cu: gh = hs[t] W_hh^T + b_hh; r, z, n; hs[t + 1] = (1 - z) n +
// z hs[t]; cache[t] = [r, z, n, gh_n].
template <int WP>
__device__ __forceinline__ void bl_gru_forward(const float* gx_base, u64 gx_off, float* hs_base,
    u64 hs_off, const float* w_hh_base, u64 w_hh_off, const float* b_ih_base, u64 b_ih_off,
    const float* b_hh_base, u64 b_hh_off, float* cache_base, u64 cache_off, uint steps, uint batch,
    uint hidden) {
    const float* gx = gx_base + gx_off;
    float* hs = hs_base + hs_off;
    float* cache = cache_base + cache_off;
    const BlStart b = bl_start<true, WP>(w_hh_base + w_hh_off, hs, 3, batch, hidden);
    const BlTile& t = b.t;
    const BlSmem& m = b.m;
    const BlCell& c = b.c;
    const u64 H = hidden;
    float bi[3], bh[3];
#pragma unroll
    for (int g = 0; g < 3; ++g) {
        bi[g] = c.store ? b_ih_base[b_ih_off + g * H + c.j] : 0.0f;
        bh[g] = c.store ? b_hh_base[b_hh_off + g * H + c.j] : 0.0f;
    }
    const u64 block = (u64)batch * H;
    const u64 g3 = (c.at - c.j) * 3 + c.j;
    const u64 g4 = (c.at - c.j) * 4 + c.j;
    for (uint s = 0; s < steps; ++s) {
        const float* xr = gx + (u64)s * 3 * block + g3;
        float x[3];
#pragma unroll
        for (int g = 0; g < 3; ++g) x[g] = c.store ? xr[g * H] + bi[g] : 0.0f;
        bl_products<true, WP>(t, hidden, m.as, m.ws, b.wr, m.red);
        if (c.store) {
            const float* p = m.red + c.r * t.gh + c.j;
            const float ghr = p[0] + bh[0];
            const float ghz = p[H] + bh[1];
            const float ghn = p[2 * H] + bh[2];
            const float rg = rnn_sigmoid(x[0] + ghr);
            const float z = rnn_sigmoid(x[1] + ghz);
            const float n = tanhf(x[2] + rg * ghn);
            float* hp = m.as + c.r * t.hp + c.j;
            const float h = (1.0f - z) * n + z * *hp;
            hs[(s + 1) * block + c.at] = h;
            *hp = h;
            float* kr = cache + (u64)s * 4 * block + g4;
            kr[0] = rg;
            kr[H] = z;
            kr[2 * H] = n;
            kr[3 * H] = ghn;
        }
        __syncthreads();
    }
}

// gru_seq_backward of gated_seq.cu: for t = steps - 1 .. 0, dh_t = dh[t] + dgh[t + 1] W_hh +
// carry (product and carry absent at t = steps - 1); dgx[t], dgh[t] and carry = dh_t z by
// RNN_GRU_UNIT_BACKWARD.
template <int WP>
__device__ __forceinline__ void bl_gru_backward(const float* dh_base, u64 dh_off,
    const float* hs_base, u64 hs_off, const float* cache_base, u64 cache_off,
    const float* w_hh_base, u64 w_hh_off, float* dgx_base, u64 dgx_off, float* dgh_base,
    u64 dgh_off, float* carry_base, u64 carry_off, uint steps, uint batch, uint hidden) {
    const float* dh = dh_base + dh_off;
    const float* hs = hs_base + hs_off;
    const float* cache = cache_base + cache_off;
    float* dgx = dgx_base + dgx_off;
    float* dgh = dgh_base + dgh_off;
    float* carry = carry_base + carry_off;
    const BlStart b = bl_start<false, WP>(w_hh_base + w_hh_off, nullptr, 3, batch, hidden);
    const BlTile& t = b.t;
    const BlSmem& m = b.m;
    const BlCell& c = b.c;
    const u64 H = hidden;
    const u64 block = (u64)batch * H;
    const u64 g3 = (c.at - c.j) * 3 + c.j;
    const u64 g4 = (c.at - c.j) * 4 + c.j;
    float cr = 0.0f;
    for (uint s = 0; s < steps; ++s) {
        const uint step = steps - 1 - s;
        const float* kr = cache + (u64)step * 4 * block + g4;
        const float rg = c.store ? kr[0] : 0.0f;
        const float z = c.store ? kr[H] : 0.0f;
        const float n = c.store ? kr[2 * H] : 0.0f;
        const float ghn = c.store ? kr[3 * H] : 0.0f;
        const float hp = c.store ? hs[step * block + c.at] : 0.0f;
        const float d = c.store ? dh[step * block + c.at] : 0.0f;
        // Also at the first step, whose products (of the zero staged rows) are not used: no
        // barrier under a condition (PoCL mishandles those).
        bl_products<false, WP>(t, hidden, m.as, m.ws, b.wr, m.red);
        if (c.store) {
            const float rec = bl_recurrent<3>(b, H, s);
            const float dt = (d + rec) + cr;
            float ox[3], oh[3];
            RNN_GRU_UNIT_BACKWARD(ox, oh, 0, 1, dt, rg, z, n, ghn, hp, cr);
            const u64 at3 = (u64)step * 3 * block + g3;
            float* next = m.as + c.r * 3 * t.hp + c.j;
#pragma unroll
            for (int g = 0; g < 3; ++g) {
                dgx[at3 + g * H] = ox[g];
                dgh[at3 + g * H] = oh[g];
                next[g * t.hp] = oh[g];
            }
            carry[c.at] = cr;
        }
        __syncthreads();
    }
}

// The entries of each cell's body, instantiated by small_seq_{rnn,lstm,gru}.cu and
// small_seq_regs.cu: `NAME` the entry, `WP` where W_hh is kept (BL_SHARED, BL_GLOBAL: `w_hh`
// is W_hh packed by bl_pack_w, BL_REGS).

#define BL_RNN_FORWARD(NAME, WP)                                                                   \
    extern "C" __global__ void __launch_bounds__(1024) NAME(                                       \
        const float* pre_base, u64 pre_off, float* hs_base, u64 hs_off, const float* w_hh_base,    \
        u64 w_hh_off, const float* b_ih_base, u64 b_ih_off, const float* b_hh_base,                \
        u64 b_hh_off, uint steps, uint batch, uint hidden, uint act, float act_param) {            \
        bl_rnn_forward<WP>(pre_base, pre_off, hs_base, hs_off, w_hh_base, w_hh_off,                \
            b_ih_base, b_ih_off, b_hh_base, b_hh_off, steps, batch, hidden, act, act_param);       \
    }

#define BL_RNN_BACKWARD(NAME, WP)                                                                  \
    extern "C" __global__ void __launch_bounds__(1024) NAME(                                       \
        const float* dh_base, u64 dh_off, const float* hs_base, u64 hs_off,                        \
        const float* w_hh_base, u64 w_hh_off, float* dpre_base, u64 dpre_off, uint steps,          \
        uint batch, uint hidden, uint act, float act_param) {                                      \
        bl_rnn_backward<WP>(dh_base, dh_off, hs_base, hs_off, w_hh_base, w_hh_off,                 \
            dpre_base, dpre_off, steps, batch, hidden, act, act_param);                            \
    }

#define BL_LSTM_FORWARD(NAME, WP)                                                                  \
    extern "C" __global__ void __launch_bounds__(1024) NAME(                                       \
        float* gates_base, u64 gates_off, float* hs_base, u64 hs_off, float* cs_base,              \
        u64 cs_off, const float* w_hh_base, u64 w_hh_off, const float* b_ih_base, u64 b_ih_off,    \
        const float* b_hh_base, u64 b_hh_off, uint steps, uint batch, uint hidden) {               \
        bl_lstm_forward<WP>(gates_base, gates_off, hs_base, hs_off, cs_base, cs_off,               \
            w_hh_base, w_hh_off, b_ih_base, b_ih_off, b_hh_base, b_hh_off, steps, batch,           \
            hidden);                                                                               \
    }

#define BL_LSTM_BACKWARD(NAME, WP)                                                                 \
    extern "C" __global__ void __launch_bounds__(1024) NAME(                                       \
        const float* dh_base, u64 dh_off, const float* gates_base, u64 gates_off,                  \
        const float* cs_base, u64 cs_off, const float* w_hh_base, u64 w_hh_off,                    \
        float* dgates_base, u64 dgates_off, float* carry_base, u64 carry_off, uint steps,          \
        uint batch, uint hidden, uint carry_in) {                                                  \
        bl_lstm_backward<WP>(dh_base, dh_off, gates_base, gates_off, cs_base, cs_off,              \
            w_hh_base, w_hh_off, dgates_base, dgates_off, carry_base, carry_off, steps, batch,     \
            hidden, carry_in);                                                                     \
    }

#define BL_GRU_FORWARD(NAME, WP)                                                                   \
    extern "C" __global__ void __launch_bounds__(1024) NAME(                                       \
        const float* gx_base, u64 gx_off, float* hs_base, u64 hs_off, const float* w_hh_base,      \
        u64 w_hh_off, const float* b_ih_base, u64 b_ih_off, const float* b_hh_base,                \
        u64 b_hh_off, float* cache_base, u64 cache_off, uint steps, uint batch, uint hidden) {     \
        bl_gru_forward<WP>(gx_base, gx_off, hs_base, hs_off, w_hh_base, w_hh_off,                  \
            b_ih_base, b_ih_off, b_hh_base, b_hh_off, cache_base, cache_off, steps, batch,         \
            hidden);                                                                               \
    }

#define BL_GRU_BACKWARD(NAME, WP)                                                                  \
    extern "C" __global__ void __launch_bounds__(1024) NAME(                                       \
        const float* dh_base, u64 dh_off, const float* hs_base, u64 hs_off,                        \
        const float* cache_base, u64 cache_off, const float* w_hh_base, u64 w_hh_off,              \
        float* dgx_base, u64 dgx_off, float* dgh_base, u64 dgh_off, float* carry_base,             \
        u64 carry_off, uint steps, uint batch, uint hidden) {                                      \
        bl_gru_backward<WP>(dh_base, dh_off, hs_base, hs_off, cache_base, cache_off,               \
            w_hh_base, w_hh_off, dgx_base, dgx_off, dgh_base, dgh_off, carry_base, carry_off,      \
            steps, batch, hidden);                                                                 \
    }

// The paired entries (small_seq_pair.cu): two independent sequences of one shape, the two
// directions of a bidirectional layer, in one launch of gridDim.y = 2, each y taking its own
// buffers (the second set suffixed `2`) and running the body above unchanged; the dimensions
// and the tail are shared. Two launches of `batch / rows` blocks each would run one after the
// other (the stream is in order), so at small batches, where a launch fills few SMs, pairing
// halves the time of the two sequences.
#define BL_PICK(x) (blockIdx.y ? x##2 : x)

#define BL_RNN_FORWARD_PAIR(NAME, WP)                                                              \
    extern "C" __global__ void __launch_bounds__(1024) NAME(                                       \
        const float* pre_base, u64 pre_off, float* hs_base, u64 hs_off, const float* w_hh_base,    \
        u64 w_hh_off, const float* b_ih_base, u64 b_ih_off, const float* b_hh_base,                \
        u64 b_hh_off, const float* pre_base2, u64 pre_off2, float* hs_base2, u64 hs_off2,          \
        const float* w_hh_base2, u64 w_hh_off2, const float* b_ih_base2, u64 b_ih_off2,            \
        const float* b_hh_base2, u64 b_hh_off2, uint steps, uint batch, uint hidden, uint act,     \
        float act_param) {                                                                         \
        bl_rnn_forward<WP>(BL_PICK(pre_base), BL_PICK(pre_off), BL_PICK(hs_base),                  \
            BL_PICK(hs_off), BL_PICK(w_hh_base), BL_PICK(w_hh_off), BL_PICK(b_ih_base),            \
            BL_PICK(b_ih_off), BL_PICK(b_hh_base), BL_PICK(b_hh_off), steps, batch, hidden, act,   \
            act_param);                                                                            \
    }

#define BL_RNN_BACKWARD_PAIR(NAME, WP)                                                             \
    extern "C" __global__ void __launch_bounds__(1024) NAME(                                       \
        const float* dh_base, u64 dh_off, const float* hs_base, u64 hs_off,                        \
        const float* w_hh_base, u64 w_hh_off, float* dpre_base, u64 dpre_off,                      \
        const float* dh_base2, u64 dh_off2, const float* hs_base2, u64 hs_off2,                    \
        const float* w_hh_base2, u64 w_hh_off2, float* dpre_base2, u64 dpre_off2, uint steps,      \
        uint batch, uint hidden, uint act, float act_param) {                                      \
        bl_rnn_backward<WP>(BL_PICK(dh_base), BL_PICK(dh_off), BL_PICK(hs_base),                   \
            BL_PICK(hs_off), BL_PICK(w_hh_base), BL_PICK(w_hh_off), BL_PICK(dpre_base),            \
            BL_PICK(dpre_off), steps, batch, hidden, act, act_param);                              \
    }

#define BL_LSTM_FORWARD_PAIR(NAME, WP)                                                             \
    extern "C" __global__ void __launch_bounds__(1024) NAME(                                       \
        float* gates_base, u64 gates_off, float* hs_base, u64 hs_off, float* cs_base,              \
        u64 cs_off, const float* w_hh_base, u64 w_hh_off, const float* b_ih_base, u64 b_ih_off,    \
        const float* b_hh_base, u64 b_hh_off, float* gates_base2, u64 gates_off2,                  \
        float* hs_base2, u64 hs_off2, float* cs_base2, u64 cs_off2, const float* w_hh_base2,       \
        u64 w_hh_off2, const float* b_ih_base2, u64 b_ih_off2, const float* b_hh_base2,            \
        u64 b_hh_off2, uint steps, uint batch, uint hidden) {                                      \
        bl_lstm_forward<WP>(BL_PICK(gates_base), BL_PICK(gates_off), BL_PICK(hs_base),             \
            BL_PICK(hs_off), BL_PICK(cs_base), BL_PICK(cs_off), BL_PICK(w_hh_base),                \
            BL_PICK(w_hh_off), BL_PICK(b_ih_base), BL_PICK(b_ih_off), BL_PICK(b_hh_base),          \
            BL_PICK(b_hh_off), steps, batch, hidden);                                              \
    }

#define BL_LSTM_BACKWARD_PAIR(NAME, WP)                                                            \
    extern "C" __global__ void __launch_bounds__(1024) NAME(                                       \
        const float* dh_base, u64 dh_off, const float* gates_base, u64 gates_off,                  \
        const float* cs_base, u64 cs_off, const float* w_hh_base, u64 w_hh_off,                    \
        float* dgates_base, u64 dgates_off, float* carry_base, u64 carry_off,                      \
        const float* dh_base2, u64 dh_off2, const float* gates_base2, u64 gates_off2,              \
        const float* cs_base2, u64 cs_off2, const float* w_hh_base2, u64 w_hh_off2,                \
        float* dgates_base2, u64 dgates_off2, float* carry_base2, u64 carry_off2, uint steps,      \
        uint batch, uint hidden, uint carry_in) {                                                  \
        bl_lstm_backward<WP>(BL_PICK(dh_base), BL_PICK(dh_off), BL_PICK(gates_base),               \
            BL_PICK(gates_off), BL_PICK(cs_base), BL_PICK(cs_off), BL_PICK(w_hh_base),             \
            BL_PICK(w_hh_off), BL_PICK(dgates_base), BL_PICK(dgates_off), BL_PICK(carry_base),     \
            BL_PICK(carry_off), steps, batch, hidden, carry_in);                                   \
    }

#define BL_GRU_FORWARD_PAIR(NAME, WP)                                                              \
    extern "C" __global__ void __launch_bounds__(1024) NAME(                                       \
        const float* gx_base, u64 gx_off, float* hs_base, u64 hs_off, const float* w_hh_base,      \
        u64 w_hh_off, const float* b_ih_base, u64 b_ih_off, const float* b_hh_base,                \
        u64 b_hh_off, float* cache_base, u64 cache_off, const float* gx_base2, u64 gx_off2,        \
        float* hs_base2, u64 hs_off2, const float* w_hh_base2, u64 w_hh_off2,                      \
        const float* b_ih_base2, u64 b_ih_off2, const float* b_hh_base2, u64 b_hh_off2,            \
        float* cache_base2, u64 cache_off2, uint steps, uint batch, uint hidden) {                 \
        bl_gru_forward<WP>(BL_PICK(gx_base), BL_PICK(gx_off), BL_PICK(hs_base),                    \
            BL_PICK(hs_off), BL_PICK(w_hh_base), BL_PICK(w_hh_off), BL_PICK(b_ih_base),            \
            BL_PICK(b_ih_off), BL_PICK(b_hh_base), BL_PICK(b_hh_off), BL_PICK(cache_base),         \
            BL_PICK(cache_off), steps, batch, hidden);                                             \
    }

#define BL_GRU_BACKWARD_PAIR(NAME, WP)                                                             \
    extern "C" __global__ void __launch_bounds__(1024) NAME(                                       \
        const float* dh_base, u64 dh_off, const float* hs_base, u64 hs_off,                        \
        const float* cache_base, u64 cache_off, const float* w_hh_base, u64 w_hh_off,              \
        float* dgx_base, u64 dgx_off, float* dgh_base, u64 dgh_off, float* carry_base,             \
        u64 carry_off, const float* dh_base2, u64 dh_off2, const float* hs_base2, u64 hs_off2,     \
        const float* cache_base2, u64 cache_off2, const float* w_hh_base2, u64 w_hh_off2,          \
        float* dgx_base2, u64 dgx_off2, float* dgh_base2, u64 dgh_off2, float* carry_base2,        \
        u64 carry_off2, uint steps, uint batch, uint hidden) {                                     \
        bl_gru_backward<WP>(BL_PICK(dh_base), BL_PICK(dh_off), BL_PICK(hs_base),                   \
            BL_PICK(hs_off), BL_PICK(cache_base), BL_PICK(cache_off), BL_PICK(w_hh_base),          \
            BL_PICK(w_hh_off), BL_PICK(dgx_base), BL_PICK(dgx_off), BL_PICK(dgh_base),             \
            BL_PICK(dgh_off), BL_PICK(carry_base), BL_PICK(carry_off), steps, batch, hidden);      \
    }

#endif  // RNN_SMALL_SEQ_CU
