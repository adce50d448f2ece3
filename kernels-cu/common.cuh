// Shared helpers of the CUDA op set. This file is first in the translation unit.
//
// Portability contract with the HIP dialect (kernels-hip/): everything below that depends on the
// warp width or on NVIDIA-only spellings sits inside `#ifndef RNN_HIP`. The HIP vendor header
// defines RNN_HIP and provides its own WARP_SIZE, warp_reduce_sum, warp_reduce_max and
// warp_reduce_argmax (64-wide wavefronts); the block-level helpers further down are written over
// those and need no change.

typedef unsigned int uint;
typedef unsigned long long u64;

#ifndef RNN_HIP
#define WARP_SIZE 32

// Butterfly (xor) reductions: every lane ends with the result, as the HIP wavefront versions do,
// so kernels that give a row to a warp need no broadcast.
__device__ __forceinline__ float warp_reduce_sum(float v) {
    for (int off = WARP_SIZE / 2; off > 0; off >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

__device__ __forceinline__ float warp_reduce_max(float v) {
    for (int off = WARP_SIZE / 2; off > 0; off >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
    return v;
}

// Arg-max over a warp; on equal values the lower index wins (the op contract). The comparison
// is symmetric, so both partners of each butterfly step agree on the winner.
__device__ __forceinline__ void warp_reduce_argmax(float& v, int& idx) {
    for (int off = WARP_SIZE / 2; off > 0; off >>= 1) {
        float ov = __shfl_xor_sync(0xffffffffu, v, off);
        int oi = __shfl_xor_sync(0xffffffffu, idx, off);
        if (ov > v || (ov == v && oi < idx)) {
            v = ov;
            idx = oi;
        }
    }
}
#endif  // RNN_HIP

#define RNN_INF (__int_as_float(0x7f800000))
#define RNN_NAN (__int_as_float(0x7fffffff))

// Four consecutive elements of row `row` (of pitch `ld`) of a row-major operand from column
// `col` (a multiple of 4), zero-filled outside (row_lim, col_lim): the GEMM and recurrent tile
// loads. With `vec` (16-byte aligned base and ld % 4 == 0) the float4 access is aligned.
__device__ __forceinline__ float4 rnn_load4(const float* __restrict__ base, uint row,
                                            uint row_lim, uint col, uint col_lim, uint ld,
                                            bool vec) {
    float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (row < row_lim) {
        const float* p = base + (u64)row * ld + col;
        if (vec && col + 3 < col_lim) {
            v = *reinterpret_cast<const float4*>(p);
        } else {
            if (col < col_lim) v.x = p[0];
            if (col + 1 < col_lim) v.y = p[1];
            if (col + 2 < col_lim) v.z = p[2];
            if (col + 3 < col_lim) v.w = p[3];
        }
    }
    return v;
}

// Partial results of one block: one slot per warp (at most 1024 / 32 warps).
#define RNN_MAX_WARPS 32

// Sum over the whole block; every thread gets the result. `sh` holds RNN_MAX_WARPS floats.
// Must be reached by all threads of the block (it synchronizes).
__device__ __forceinline__ float block_reduce_sum(float v, float* sh) {
    const int lane = threadIdx.x % WARP_SIZE;
    const int wid = threadIdx.x / WARP_SIZE;
    const int nwarps = (blockDim.x + WARP_SIZE - 1) / WARP_SIZE;
    v = warp_reduce_sum(v);
    __syncthreads();  // `sh` may still be read from the previous reduction
    if (lane == 0) sh[wid] = v;
    __syncthreads();
    if (wid == 0) {
        v = (lane < nwarps) ? sh[lane] : 0.0f;
        v = warp_reduce_sum(v);
        if (lane == 0) sh[0] = v;
    }
    __syncthreads();
    return sh[0];
}

__device__ __forceinline__ float block_reduce_max(float v, float* sh) {
    const int lane = threadIdx.x % WARP_SIZE;
    const int wid = threadIdx.x / WARP_SIZE;
    const int nwarps = (blockDim.x + WARP_SIZE - 1) / WARP_SIZE;
    v = warp_reduce_max(v);
    __syncthreads();
    if (lane == 0) sh[wid] = v;
    __syncthreads();
    if (wid == 0) {
        v = (lane < nwarps) ? sh[lane] : -RNN_INF;
        v = warp_reduce_max(v);
        if (lane == 0) sh[0] = v;
    }
    __syncthreads();
    return sh[0];
}

// Block-wide arg-max (lowest index on ties); `shv`/`shi` hold RNN_MAX_WARPS entries each.
__device__ __forceinline__ int block_reduce_argmax(float v, int idx, float* shv, int* shi) {
    const int lane = threadIdx.x % WARP_SIZE;
    const int wid = threadIdx.x / WARP_SIZE;
    const int nwarps = (blockDim.x + WARP_SIZE - 1) / WARP_SIZE;
    warp_reduce_argmax(v, idx);
    __syncthreads();
    if (lane == 0) {
        shv[wid] = v;
        shi[wid] = idx;
    }
    __syncthreads();
    if (wid == 0) {
        v = (lane < nwarps) ? shv[lane] : -RNN_INF;
        idx = (lane < nwarps) ? shi[lane] : 0x7fffffff;
        warp_reduce_argmax(v, idx);
        if (lane == 0) shi[0] = idx;
    }
    __syncthreads();
    return shi[0];
}

// Loads of data that other blocks wrote during this launch (grid-wide reductions, persistent
// kernels) must come from the coherent level (L2), never a stale line of this SM's L1.
#ifdef RNN_HIP
__device__ __forceinline__ float rnn_load_coherent(const float* p) {
    return *(const volatile float*)p;
}
#else
__device__ __forceinline__ float rnn_load_coherent(const float* p) { return __ldcg(p); }
#endif

// The "last block" step of a deterministic one-launch grid reduction (geometry L of
// docs/kernel-abi.md). Every block first stores its partial results, and each thread that
// stored one has executed __threadfence() (so the partial is visible device-wide before the
// arrival below). Then all threads of the block call this: thread 0 takes a ticket from
// `ticket` (a counter at 0 between launches) and the block that takes ticket `arrivals - 1`
// gets true, resets the counter for the next launch, and may read every partial (with
// rnn_load_coherent) in a fixed order, so the result does not depend on which block came last.
__device__ __forceinline__ bool rnn_last_arrival(uint* ticket, uint arrivals) {
    __shared__ bool last;
    __syncthreads();
    if (threadIdx.x == 0 && threadIdx.y == 0) {
        last = atomicAdd(ticket, 1u) == arrivals - 1u;
        if (last) *ticket = 0u;
    }
    __syncthreads();
    if (last) __threadfence();
    return last;
}

// Grid-stride loop over n elements (1-D launches). The counter is 64-bit so that `i + stride`
// cannot wrap for n near 2^32.
#define RNN_GRID_LOOP(i, n)                                                         \
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < (u64)(n);           \
         i += (u64)gridDim.x * blockDim.x)
