// Tier 0 (src/backend/gpu/tier0.rs): a module that compiles in a fraction of a second, whose
// kernels a cold start launches in place of the f32 GEMM families' until those are built. Exact
// replacements: the same contract as the kernels they stand in for (docs/kernel-abi.md), none
// of their speed.
//
// sgemm_tier0 (geometry G with tiles of 64 x 64, 256 threads): `sgemm`'s contract, the body of
// kernels-common/sgemm_tier0.h.

extern "C" __global__ void __launch_bounds__(T0_THREADS)
    sgemm_tier0(const float* a_base, u64 a_off, const float* b_base, u64 b_off, float* c_base,
                u64 c_off, uint m, uint n, uint k, uint trans_a, uint trans_b, float alpha,
                float beta) {
    __shared__ float As[T0_BK][T0_TILE + 1];
    __shared__ float Bs[T0_BK][T0_TILE + 1];
    rnn_sgemm_tier0(a_base + a_off, b_base + b_off, c_base + c_off, m, n, k, trans_a, trans_b,
                    alpha, beta, threadIdx.x, blockIdx.x, blockIdx.y, As, Bs);
}
