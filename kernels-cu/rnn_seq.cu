// Whole-sequence Elman forward and backward in ONE launch each (geometry Q, docs/kernel-abi.md):
// a persistent kernel whose blocks step through time together. Only correct when every block of
// the grid is resident at once, which the host guarantees with a cooperative launch
// (cuLaunchCooperativeKernel) sized by the occupancy calculator; devices without one loop the
// step kernels of rnn.cu instead.
//
// Block tile: RQ_ROWS batch rows x RQ_UNITS hidden units with RQ_THREADS threads. Block
// (bx, by) owns units [bx * RQ_UNITS, +RQ_UNITS) for the whole sequence and keeps the matching
// slice of W_hh, k-contiguous (forward rows W[j, :], backward columns W[:, j]): in registers when
// hidden <= RQ_REG_K (the `_regs` entries), else in dynamic shared memory. Its row tiles are by,
// by + gridDim.y, ... Every step it stages the RQ_ROWS rows of the previous state it needs (h_t
// forward, dpre_{t+1} backward, written by the other blocks of its row in the step before) into
// shared memory, computes its outputs with the fused epilogue and writes them.
//
// The state crosses blocks as tagged words, not behind a barrier: next to each output (stored
// as usual, for the ops that follow) a block stores the 64-bit word `value bits | tag << 32` into
// the exchange buffer `xch` (2 slots of batch x hidden words, by step parity), tag = the 1-based
// number of the step that produced it. A consumer polls the words it needs until each carries
// the tag it wants; the value travels in the same single-copy-atomic 64-bit access as its tag,
// so no fence orders them. Against a barrier between steps (fence, atomic arrival, polling the
// counter, then loading the state) a step waits for one L2 round trip instead of three
// (docs/performance.md, recurrent kernels).
// - A slot is rewritten two steps later. A block writes step s + 2's outputs only after it read
//   every output of step s + 1 of its row, and each of those was computed (data dependence)
//   from the reads of step s's slot by the block that wrote it: no one still reads a word when
//   it is overwritten. A word can thus hold only the wanted tag or an older one.
// - Between launches every word is 0 (no tag): the host zeroes the buffer once, when it allocates
//   it, and after its last step each block meets its row at the barrier below (no one reads
//   any more) and zeroes the words it wrote. A launch of another shape, which reads the same
//   words at other positions, then never sees a stale tag.
//
// Dynamic shared memory: 2 RQ_ROWS hidden floats of staged state (double buffered, so one
// __syncthreads a step suffices), plus the RQ_UNITS hidden floats of the W slice when it is not
// in registers.
//
// Inside a tile, 32-lane group g (of 8) owns rows 2 (g % 4) + {0, 1} and units 8 (g / 4) + {0..8}:
// lane l accumulates those 16 dot products over k = l, l + 32, ... (consecutive lanes read
// consecutive words: no bank conflicts), then a transposing butterfly (16 shuffles instead of
// 80) leaves the full sum of pair (l >> 1) in lanes l and l ^ 1; the even lane writes it.
// Shuffles are 32 wide with xor masks below 32, so 64-lane AMD wavefronts run two groups each.

#define RQ_ROWS 8
#define RQ_UNITS 16
#define RQ_THREADS 256
// Largest hidden size whose W slice a thread keeps in registers: 8 units x RQ_REG_K / 32 values.
#define RQ_REG_K 256

// Barrier of the blocks that share blockIdx.y: between the steps of the gated kernels
// (gated_seq.cu), once after the last step here. Block (bx, by) only reads state rows of its own
// row tiles (by, by + gridDim.y, ...), and only the gridDim.x blocks of row by write those, so a
// step needs no grid-wide barrier: each row of blocks meets on its own counter (RQ_GROUP_STRIDE
// words apart, so the rows do not share a cache line) and runs ahead of the others. Fewer
// arrivals per counter also means less serialization of the atomics in L2.
//
// Each counter is 32 bits and never reset. Every arrival adds 1 except block x == 0, which adds
// 0x80000000 - (gridDim.x - 1): one complete barrier adds exactly 2^31, so bit 31 flips once the
// last block of the row has arrived and the low 31 bits return to what they were. They start at
// 0 (the host zeroes the counters once, when it allocates them), so no partial sum can flip bit
// 31 early. A block waits until bit 31 differs from the value its own arrival saw; it cannot
// flip back before this block arrives at the next barrier.
//
// Memory order (the pattern of CUDA's cooperative-groups grid sync): __syncthreads makes the
// block's writes of this step happen-before thread 0's __threadfence, which is cumulative, so
// they are visible device-wide before its arrival is; after seeing the flip, thread 0's second
// fence orders every later load of the block (released by the final __syncthreads) after the
// other blocks' arrivals, and with them their writes.
#define RQ_GROUP_STRIDE 32
__device__ __forceinline__ void rq_row_barrier(uint* counters) {
    __syncthreads();
    if (threadIdx.x == 0) {
        uint* counter = counters + (u64)blockIdx.y * RQ_GROUP_STRIDE;
        const uint add = blockIdx.x == 0 ? 0x80000000u - (gridDim.x - 1u) : 1u;
        __threadfence();
        const uint old = atomicAdd(counter, add);
        while (((old ^ *(volatile uint*)counter) & 0x80000000u) == 0u) {
        }
        __threadfence();
    }
    __syncthreads();
}

// Loads this block's slice of W (units j0 .. j0 + RQ_UNITS) into `ws` as RQ_UNITS k-contiguous
// rows of `hidden`: W[j, :] (forward, ROWS) or W[:, j] (backward). Units past `hidden` are zero.
template <bool ROWS>
__device__ __forceinline__ void rq_load_w(const float* __restrict__ W, uint hidden, uint j0,
                                          float* ws) {
    const u64 n = (u64)RQ_UNITS * hidden;
    for (u64 e = threadIdx.x; e < n; e += RQ_THREADS) {
        if (ROWS) {
            // e runs along W's rows: coalesced reads of whole rows.
            const uint u = (uint)(e / hidden);
            const uint k = (uint)(e % hidden);
            ws[e] = j0 + u < hidden ? W[(u64)(j0 + u) * hidden + k] : 0.0f;
        } else {
            // e runs along the RQ_UNITS columns of one row of W: 64-byte segments.
            const uint u = (uint)(e % RQ_UNITS);
            const uint k = (uint)(e / RQ_UNITS);
            ws[(u64)u * hidden + k] = j0 + u < hidden ? W[(u64)k * hidden + j0 + u] : 0.0f;
        }
    }
}

// Stages rows r0 .. r0 + RQ_ROWS of the `batch x hidden` state `a` into `as` (zero past batch).
__device__ __forceinline__ void rq_stage_rows(const float* a, uint batch, uint hidden, uint r0,
                                              float* as) {
    const uint rows = min((uint)RQ_ROWS, batch - r0);
    const uint n = rows * hidden;
    for (uint e = threadIdx.x; e < n; e += RQ_THREADS) {
        as[e] = rnn_load_coherent(a + (u64)r0 * hidden + e);
    }
    for (uint e = n + threadIdx.x; e < RQ_ROWS * hidden; e += RQ_THREADS) as[e] = 0.0f;
}

// One butterfly stage over the first 2 H values with the partner lane across lane bit 2 H:
// keeps H values, each summed with the partner's. Stages H = 8, 4, 2, 1 use lane bits 4..1, so
// value i of lane l ends as entry (l >> 1) & 15 summed over lanes differing in bits 1..4.
template <int H>
__device__ __forceinline__ void rq_fold(float* v, uint lane) {
    const bool upper = (lane & (2 * H)) != 0;
#pragma unroll
    for (int i = 0; i < H; ++i) {
        const float send = upper ? v[i] : v[i + H];
        const float keep = upper ? v[i + H] : v[i];
        v[i] = keep + __shfl_xor_sync(0xffffffffu, send, 2 * H, 32);
    }
}

// The 16 dot products of this lane's group (see the file comment) over the staged rows `as` and
// the W slice `ws`; returns the full sum of pair (lane >> 1): row 2 (g % 4) + (lane >> 4 & 1),
// unit 8 (g / 4) + (lane >> 1 & 7).
__device__ __forceinline__ float rq_tile_dot(const float* as, const float* ws, uint hidden) {
    const uint lane = threadIdx.x % 32;
    const uint g = threadIdx.x / 32;
    const float* a0 = as + (2 * (g % 4)) * hidden;
    const float* a1 = a0 + hidden;
    const float* w0 = ws + (8 * (g / 4)) * hidden;
    float v[16];
#pragma unroll
    for (int i = 0; i < 16; ++i) v[i] = 0.0f;
    for (uint k = lane; k < hidden; k += 32) {
        const float x0 = a0[k];
        const float x1 = a1[k];
#pragma unroll
        for (int u = 0; u < 8; ++u) {
            const float w = w0[u * hidden + k];
            v[u] = fmaf(x0, w, v[u]);
            v[8 + u] = fmaf(x1, w, v[8 + u]);
        }
    }
    rq_fold<8>(v, lane);
    rq_fold<4>(v, lane);
    rq_fold<2>(v, lane);
    rq_fold<1>(v, lane);
    return v[0] + __shfl_xor_sync(0xffffffffu, v[0], 1, 32);
}

// This lane's W values for rq_tile_dot_regs: w[u][i] = W slice unit 8 (g / 4) + u at
// k = lane + 32 i (zero past `hidden`), read from global memory once per launch.
template <bool ROWS>
__device__ __forceinline__ void rq_load_w_regs(const float* __restrict__ W, uint hidden, uint j0,
                                               float (&w)[8][RQ_REG_K / 32]) {
    const uint lane = threadIdx.x % 32;
    const uint g = threadIdx.x / 32;
#pragma unroll
    for (int u = 0; u < 8; ++u) {
        const uint j = j0 + 8 * (g / 4) + u;
#pragma unroll
        for (int i = 0; i < RQ_REG_K / 32; ++i) {
            const uint k = lane + 32 * i;
            const bool in = j < hidden && k < hidden;
            w[u][i] = in ? (ROWS ? W[(u64)j * hidden + k] : W[(u64)k * hidden + j]) : 0.0f;
        }
    }
}

// rq_tile_dot with the W slice in registers (hidden <= RQ_REG_K).
__device__ __forceinline__ float rq_tile_dot_regs(const float* as,
                                                  const float (&w)[8][RQ_REG_K / 32],
                                                  uint hidden) {
    const uint lane = threadIdx.x % 32;
    const uint g = threadIdx.x / 32;
    const float* a0 = as + (2 * (g % 4)) * hidden;
    const float* a1 = a0 + hidden;
    float v[16];
#pragma unroll
    for (int i = 0; i < 16; ++i) v[i] = 0.0f;
#pragma unroll
    for (int i = 0; i < RQ_REG_K / 32; ++i) {
        const uint k = lane + 32 * i;
        const float x0 = k < hidden ? a0[k] : 0.0f;
        const float x1 = k < hidden ? a1[k] : 0.0f;
#pragma unroll
        for (int u = 0; u < 8; ++u) {
            v[u] = fmaf(x0, w[u][i], v[u]);
            v[8 + u] = fmaf(x1, w[u][i], v[8 + u]);
        }
    }
    rq_fold<8>(v, lane);
    rq_fold<4>(v, lane);
    rq_fold<2>(v, lane);
    rq_fold<1>(v, lane);
    return v[0] + __shfl_xor_sync(0xffffffffu, v[0], 1, 32);
}

// Exchange words (see the file comment): volatile 64-bit accesses, single-copy atomic and served
// by L2, never by a stale line of this SM's L1.
__device__ __forceinline__ u64 rq_xload(const u64* p) { return *(const volatile u64*)p; }
__device__ __forceinline__ void rq_xstore(u64* p, float v, uint tag) {
    *(volatile u64*)p = ((u64)tag << 32) | __float_as_uint(v);
}

// Polls rows r0 .. r0 + RQ_ROWS of the exchange slot `x` (batch x hidden words) until each
// carries `tag`, and stages their values into `as` (zero past batch). Each thread keeps
// RQ_POLL words in flight and reloads only those not there yet, all at once: a consumer waits
// one round trip after the last producer's store, not one per word.
#define RQ_POLL 8
__device__ __forceinline__ void rq_stage_tagged(const u64* x, uint batch, uint hidden, uint r0,
                                                uint tag, float* as) {
    const uint rows = min((uint)RQ_ROWS, batch - r0);
    const uint n = rows * hidden;
    const u64* src = x + (u64)r0 * hidden;
    for (uint e0 = threadIdx.x; e0 < n; e0 += RQ_POLL * RQ_THREADS) {
        u64 v[RQ_POLL];
#pragma unroll
        for (int q = 0; q < RQ_POLL; ++q) {
            const uint e = e0 + q * RQ_THREADS;
            v[q] = e < n ? rq_xload(src + e) : (u64)tag << 32;
        }
        for (;;) {
            bool all = true;
#pragma unroll
            for (int q = 0; q < RQ_POLL; ++q) all &= (uint)(v[q] >> 32) == tag;
            if (all) break;
#pragma unroll
            for (int q = 0; q < RQ_POLL; ++q) {
                if ((uint)(v[q] >> 32) != tag) v[q] = rq_xload(src + e0 + q * RQ_THREADS);
            }
        }
#pragma unroll
        for (int q = 0; q < RQ_POLL; ++q) {
            const uint e = e0 + q * RQ_THREADS;
            if (e < n) as[e] = __uint_as_float((uint)v[q]);
        }
    }
    for (uint e = n + threadIdx.x; e < RQ_ROWS * hidden; e += RQ_THREADS) as[e] = 0.0f;
}

// After the last step: once the block's row has met (no one reads the exchange any more), the
// writers zero their words in both slots, so the buffer holds no tag between launches.
__device__ __forceinline__ void rq_clear_exchange(u64* xch, uint* barrier, uint batch,
                                                  uint hidden, uint row_in_tile, uint col,
                                                  bool writer) {
    rq_row_barrier(barrier);
    const u64 block = (u64)batch * hidden;
    const uint row_tiles = (batch + RQ_ROWS - 1) / RQ_ROWS;
    for (uint tile = blockIdx.y; tile < row_tiles; tile += gridDim.y) {
        const uint row = tile * RQ_ROWS + row_in_tile;
        if (writer && row < batch) {
            const u64 at = (u64)row * hidden + col;
            xch[at] = 0;
            xch[block + at] = 0;
        }
    }
}

// The W slice of a block: in registers (REGS, hidden <= RQ_REG_K) or in shared memory.
// Specializations rather than `if constexpr`, which hiprtc's default C++ dialect lacks.
template <bool REGS>
struct RqSlice;

template <>
struct RqSlice<true> {
    float w[8][RQ_REG_K / 32];
    template <bool ROWS>
    __device__ __forceinline__ void load(const float* W, uint hidden, uint j0, float*) {
        rq_load_w_regs<ROWS>(W, hidden, j0, w);
    }
    __device__ __forceinline__ float dot(const float* as, uint hidden) const {
        return rq_tile_dot_regs(as, w, hidden);
    }
};

template <>
struct RqSlice<false> {
    const float* ws;
    template <bool ROWS>
    __device__ __forceinline__ void load(const float* W, uint hidden, uint j0, float* smem) {
        rq_load_w<ROWS>(W, hidden, j0, smem);
        ws = smem;
    }
    __device__ __forceinline__ float dot(const float* as, uint hidden) const {
        return rq_tile_dot(as, ws, hidden);
    }
};

// Shared-memory floats before the staging area: the W slice when it is not in registers.
template <bool REGS>
__device__ __forceinline__ u64 rq_slice_floats(uint hidden) {
    return REGS ? 0 : (u64)RQ_UNITS * hidden;
}

// A thread's place in the rq kernels' output tiles (RQ_ROWS rows by the block's RQ_UNITS
// columns from j0): its row in a tile and its column; `writer`: the even lane of a pair, on a
// column below `hidden`, which stores the pair's value.
struct RqPlace {
    uint row_in_tile;
    uint col;
    bool writer;

    // Sets `at` to this thread's element of the tile of rows from `r0` in a batch x hidden
    // block; whether the thread stores it (a writer, on a row below `batch`).
    __device__ __forceinline__ bool element(uint r0, uint batch, uint hidden, u64& at) const {
        const uint row = r0 + row_in_tile;
        const bool store = writer && row < batch;
        at = (u64)row * hidden + col;
        return store;
    }
};

__device__ __forceinline__ RqPlace rq_place(uint j0, uint hidden) {
    const uint lane = threadIdx.x % 32;
    const uint g = threadIdx.x / 32;
    RqPlace p;
    p.row_in_tile = 2 * (g % 4) + ((lane >> 4) & 1);
    p.col = j0 + 8 * (g / 4) + ((lane >> 1) & 7);
    p.writer = (lane & 1) == 0 && p.col < hidden;
    return p;
}

// hs[t + 1] = act(pre[t] + hs[t] W^T + b_ih + b_hh) for t = 0 .. steps - 1; hs[0] is read.
template <bool REGS>
__device__ __forceinline__ void rq_forward(const float* pre, float* hs, const float* w_hh,
                                           const float* b_ih, const float* b_hh, uint* barrier,
                                           u64* xch, uint steps, uint batch, uint hidden,
                                           uint act, float act_param) {
    extern __shared__ float rq_smem[];
    float* staging = rq_smem + rq_slice_floats<REGS>(hidden);
    const uint j0 = blockIdx.x * RQ_UNITS;
    RqSlice<REGS> slice;
    slice.template load<true>(w_hh, hidden, j0, rq_smem);

    const RqPlace place = rq_place(j0, hidden);
    const float bias = place.writer ? b_ih[place.col] + b_hh[place.col] : 0.0f;
    const u64 block = (u64)batch * hidden;
    const uint row_tiles = (batch + RQ_ROWS - 1) / RQ_ROWS;
    uint turn = 0;
    for (uint t = 0; t < steps; ++t) {
        float* h = hs + (t + 1) * block;
        for (uint tile = blockIdx.y; tile < row_tiles; tile += gridDim.y) {
            // Staging alternates between two areas, so one __syncthreads a tile suffices: a
            // thread rewrites an area only after passing the __syncthreads of the tile in
            // between, which every thread reaches after its last read of that area.
            float* as = staging + (turn++ & 1) * RQ_ROWS * hidden;
            const uint r0 = tile * RQ_ROWS;
            u64 at;
            const bool store = place.element(r0, batch, hidden, at);
            // Read-only input: issued before the staging so its latency overlaps.
            const float p = store ? pre[t * block + at] : 0.0f;
            if (t == 0) {
                // The W slice (when in shared memory) is loaded before this barrier.
                rq_stage_rows(hs, batch, hidden, r0, as);
            } else {
                rq_stage_tagged(xch + (t & 1) * block, batch, hidden, r0, t, as);
            }
            __syncthreads();
            const float v = act_forward(slice.dot(as, hidden) + p + bias, act, act_param);
            if (store) {
                h[at] = v;
                if (t + 1 < steps) rq_xstore(xch + ((t + 1) & 1) * block + at, v, t + 1);
            }
        }
    }
    rq_clear_exchange(xch, barrier, batch, hidden, place.row_in_tile, place.col, place.writer);
}

// dpre[t] = act'(hs[t + 1]) * (dh[t] + dpre[t + 1] W) for t = steps - 1 .. 0, the product
// absent at t = steps - 1. Step s = steps - 1 - t stores tag s + 1.
template <bool REGS>
__device__ __forceinline__ void rq_backward(const float* dh, const float* hs, const float* w_hh,
                                            float* dpre, uint* barrier, u64* xch, uint steps,
                                            uint batch, uint hidden, uint act, float act_param) {
    extern __shared__ float rq_smem[];
    float* staging = rq_smem + rq_slice_floats<REGS>(hidden);
    const uint j0 = blockIdx.x * RQ_UNITS;
    RqSlice<REGS> slice;
    slice.template load<false>(w_hh, hidden, j0, rq_smem);

    const RqPlace place = rq_place(j0, hidden);
    const u64 block = (u64)batch * hidden;
    const uint row_tiles = (batch + RQ_ROWS - 1) / RQ_ROWS;
    uint turn = 0;
    for (uint s = 0; s < steps; ++s) {
        const uint t = steps - 1 - s;
        float* out = dpre + t * block;
        for (uint tile = blockIdx.y; tile < row_tiles; tile += gridDim.y) {
            float* as = staging + (turn++ & 1) * RQ_ROWS * hidden;
            const uint r0 = tile * RQ_ROWS;
            u64 at;
            const bool store = place.element(r0, batch, hidden, at);
            const float y = store ? hs[(t + 1) * block + at] : 0.0f;
            const float d = store ? dh[t * block + at] : 0.0f;
            float acc = 0.0f;
            // The branch is uniform over the grid, so every lane reaches the shuffles. At s = 0
            // the W slice (when in shared memory) is first read after the barrier of s = 1.
            if (s > 0) {
                rq_stage_tagged(xch + (s & 1) * block, batch, hidden, r0, s, as);
                __syncthreads();
                acc = slice.dot(as, hidden);
            }
            const float v = act_grad(0.0f, y, act, act_param) * (d + acc);
            if (store) {
                out[at] = v;
                if (s + 1 < steps) rq_xstore(xch + ((s + 1) & 1) * block + at, v, s + 1);
            }
        }
    }
    rq_clear_exchange(xch, barrier, batch, hidden, place.row_in_tile, place.col, place.writer);
}

// Entries: `_regs` for hidden <= RQ_REG_K (the host picks), the shared-memory slice otherwise.
// `xch` is passed as floats (the buffers' element type) and must be 8-byte aligned there.
#define RQ_FORWARD_ENTRY(NAME, REGS)                                                           \
    extern "C" __global__ void __launch_bounds__(RQ_THREADS)                                   \
        NAME(const float* pre_base, u64 pre_off, float* hs_base, u64 hs_off,                   \
             const float* w_hh_base, u64 w_hh_off, const float* b_ih_base, u64 b_ih_off,       \
             const float* b_hh_base, u64 b_hh_off, uint* barrier_base, u64 barrier_off,        \
             float* xch_base, u64 xch_off, uint steps, uint batch, uint hidden, uint act,      \
             float act_param) {                                                                \
        rq_forward<REGS>(pre_base + pre_off, hs_base + hs_off, w_hh_base + w_hh_off,           \
                         b_ih_base + b_ih_off, b_hh_base + b_hh_off, barrier_base + barrier_off, \
                         (u64*)(xch_base + xch_off), steps, batch, hidden, act, act_param);    \
    }
RQ_FORWARD_ENTRY(rnn_seq_forward, false)
RQ_FORWARD_ENTRY(rnn_seq_forward_regs, true)

#define RQ_BACKWARD_ENTRY(NAME, REGS)                                                          \
    extern "C" __global__ void __launch_bounds__(RQ_THREADS)                                   \
        NAME(const float* dh_base, u64 dh_off, const float* hs_base, u64 hs_off,               \
             const float* w_hh_base, u64 w_hh_off, float* dpre_base, u64 dpre_off,             \
             uint* barrier_base, u64 barrier_off, float* xch_base, u64 xch_off, uint steps,    \
             uint batch, uint hidden, uint act, float act_param) {                             \
        rq_backward<REGS>(dh_base + dh_off, hs_base + hs_off, w_hh_base + w_hh_off,            \
                          dpre_base + dpre_off, barrier_base + barrier_off,                    \
                          (u64*)(xch_base + xch_off), steps, batch, hidden, act, act_param);   \
    }
RQ_BACKWARD_ENTRY(rnn_seq_backward, false)
RQ_BACKWARD_ENTRY(rnn_seq_backward_regs, true)
