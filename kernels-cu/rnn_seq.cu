// Whole-sequence Elman forward and backward in ONE launch each (geometry Q, docs/kernel-abi.md):
// a persistent kernel whose blocks step through time together, each row of blocks meeting at its
// own barrier between steps. Only correct when every block of the grid is resident at once, which the host
// guarantees with a cooperative launch (cuLaunchCooperativeKernel) sized by the occupancy
// calculator; devices without one loop the step kernels of rnn.cu instead.
//
// Block tile: RQ_ROWS batch rows x RQ_UNITS hidden units with RQ_THREADS threads. Block
// (bx, by) owns units [bx * RQ_UNITS, +RQ_UNITS) for the whole sequence and keeps the matching
// slice of W_hh in dynamic shared memory, k-contiguous: forward rows W[j, :], backward columns
// W[:, j]. Its row tiles are by, by + gridDim.y, ... Every step it stages the RQ_ROWS rows of the
// previous state it needs (h_t forward, dpre_{t+1} backward, written by other blocks in the step
// before) from L2 into shared memory, computes its outputs with the fused epilogue, writes them,
// and meets the other blocks of its row (same blockIdx.y) at that row's barrier.
//
// Dynamic shared memory: (RQ_UNITS + RQ_ROWS) * hidden floats (W slice, then the state rows).
//
// Inside a tile, 32-lane group g (of 8) owns rows 2 (g % 4) + {0, 1} and units 8 (g / 4) + {0..8}:
// lane l accumulates those 16 dot products over k = l, l + 32, ... (consecutive lanes read
// consecutive words: no bank conflicts), then a transposing butterfly (16 shuffles instead of
// 80) leaves the full sum of pair (l >> 1) in lanes l and l ^ 1; the even lane writes it.
// Shuffles are 32 wide with xor masks below 32, so 64-lane AMD wavefronts run two groups each.

#define RQ_ROWS 8
#define RQ_UNITS 16
#define RQ_THREADS 256

// Barrier of the blocks that share blockIdx.y. Block (bx, by) only reads state rows of its own
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

// hs[t + 1] = act(pre[t] + hs[t] W^T + b_ih + b_hh) for t = 0 .. steps - 1; hs[0] is read.
extern "C" __global__ void __launch_bounds__(RQ_THREADS)
    rnn_seq_forward(const float* pre_base, u64 pre_off, float* hs_base, u64 hs_off,
                    const float* w_hh_base, u64 w_hh_off, const float* b_ih_base, u64 b_ih_off,
                    const float* b_hh_base, u64 b_hh_off, uint* barrier_base, u64 barrier_off,
                    uint steps, uint batch, uint hidden, uint act, float act_param) {
    extern __shared__ float rq_smem[];
    float* ws = rq_smem;
    float* as = rq_smem + RQ_UNITS * hidden;
    const float* pre = pre_base + pre_off;
    float* hs = hs_base + hs_off;
    uint* barrier = barrier_base + barrier_off;
    const uint j0 = blockIdx.x * RQ_UNITS;
    rq_load_w<true>(w_hh_base + w_hh_off, hidden, j0, ws);

    const uint lane = threadIdx.x % 32;
    const uint g = threadIdx.x / 32;
    const uint row_in_tile = 2 * (g % 4) + ((lane >> 4) & 1);
    const uint col = j0 + 8 * (g / 4) + ((lane >> 1) & 7);
    const bool writer = (lane & 1) == 0 && col < hidden;
    const float bias = writer ? b_ih_base[b_ih_off + col] + b_hh_base[b_hh_off + col] : 0.0f;
    const u64 block = (u64)batch * hidden;
    const uint row_tiles = (batch + RQ_ROWS - 1) / RQ_ROWS;
    for (uint t = 0; t < steps; ++t) {
        const float* h_prev = hs + t * block;
        float* h = hs + (t + 1) * block;
        for (uint tile = blockIdx.y; tile < row_tiles; tile += gridDim.y) {
            const uint r0 = tile * RQ_ROWS;
            const uint row = r0 + row_in_tile;
            const bool store = writer && row < batch;
            const u64 at = (u64)row * hidden + col;
            // Read-only input: issued before the staging so its latency overlaps.
            const float p = store ? pre[t * block + at] : 0.0f;
            // The staging area is free: the W slice load or the last tile's reads finished
            // before the barrier or __syncthreads that precede this.
            rq_stage_rows(h_prev, batch, hidden, r0, as);
            __syncthreads();
            const float acc = rq_tile_dot(as, ws, hidden);
            if (store) h[at] = act_apply(acc + p + bias, act, act_param);
            __syncthreads();
        }
        if (t + 1 < steps) rq_row_barrier(barrier);
    }
}

// dpre[t] = act'(hs[t + 1]) * (dh[t] + dpre[t + 1] W) for t = steps - 1 .. 0, the product
// absent at t = steps - 1.
extern "C" __global__ void __launch_bounds__(RQ_THREADS)
    rnn_seq_backward(const float* dh_base, u64 dh_off, const float* hs_base, u64 hs_off,
                     const float* w_hh_base, u64 w_hh_off, float* dpre_base, u64 dpre_off,
                     uint* barrier_base, u64 barrier_off, uint steps, uint batch, uint hidden,
                     uint act, float act_param) {
    extern __shared__ float rq_smem[];
    float* ws = rq_smem;
    float* as = rq_smem + RQ_UNITS * hidden;
    const float* dh = dh_base + dh_off;
    const float* hs = hs_base + hs_off;
    float* dpre = dpre_base + dpre_off;
    uint* barrier = barrier_base + barrier_off;
    const uint j0 = blockIdx.x * RQ_UNITS;
    rq_load_w<false>(w_hh_base + w_hh_off, hidden, j0, ws);
    __syncthreads();

    const uint lane = threadIdx.x % 32;
    const uint g = threadIdx.x / 32;
    const uint row_in_tile = 2 * (g % 4) + ((lane >> 4) & 1);
    const uint col = j0 + 8 * (g / 4) + ((lane >> 1) & 7);
    const bool writer = (lane & 1) == 0 && col < hidden;
    const u64 block = (u64)batch * hidden;
    const uint row_tiles = (batch + RQ_ROWS - 1) / RQ_ROWS;
    for (uint s = 0; s < steps; ++s) {
        const uint t = steps - 1 - s;
        const float* next = dpre + (t + 1) * block;
        float* out = dpre + t * block;
        for (uint tile = blockIdx.y; tile < row_tiles; tile += gridDim.y) {
            const uint r0 = tile * RQ_ROWS;
            const uint row = r0 + row_in_tile;
            const bool store = writer && row < batch;
            const u64 at = (u64)row * hidden + col;
            const float y = store ? hs[(t + 1) * block + at] : 0.0f;
            const float d = store ? dh[t * block + at] : 0.0f;
            float acc = 0.0f;
            // The branch is uniform over the grid, so every lane reaches the shuffles.
            if (s > 0) {
                rq_stage_rows(next, batch, hidden, r0, as);
                __syncthreads();
                acc = rq_tile_dot(as, ws, hidden);
                __syncthreads();
            }
            if (store) out[at] = act_grad(0.0f, y, act, act_param) * (d + acc);
        }
        if (s + 1 < steps) rq_row_barrier(barrier);
    }
}
