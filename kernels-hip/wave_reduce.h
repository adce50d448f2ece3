// Wavefront reductions for AMD, replacing the 32-lane warp helpers of kernels-cu/common.cuh
// (which it skips under RNN_HIP). Written for WARP_SIZE lanes (64 on CDNA, 32 on RDNA in wave32
// mode), with butterfly (xor) shuffles so every lane ends with the result; the block-level
// helpers in common.cuh call these and then index shared memory by lane and wave.

__device__ __forceinline__ float warp_reduce_sum(float v) {
    for (int off = WARP_SIZE / 2; off > 0; off >>= 1)
        v += __shfl_xor(v, off, WARP_SIZE);
    return v;
}

__device__ __forceinline__ float warp_reduce_max(float v) {
    for (int off = WARP_SIZE / 2; off > 0; off >>= 1)
        v = fmaxf(v, __shfl_xor(v, off, WARP_SIZE));
    return v;
}

// Arg-max over the wavefront; equal values keep the lower index (the op contract). The
// comparison is symmetric, so both partners of each butterfly step agree on the winner.
__device__ __forceinline__ void warp_reduce_argmax(float& v, int& idx) {
    for (int off = WARP_SIZE / 2; off > 0; off >>= 1) {
        const float ov = __shfl_xor(v, off, WARP_SIZE);
        const int oi = __shfl_xor(idx, off, WARP_SIZE);
        if (ov > v || (ov == v && oi < idx)) {
            v = ov;
            idx = oi;
        }
    }
}
