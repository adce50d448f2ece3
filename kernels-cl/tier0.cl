// Tier 0 (src/backend/gpu/tier0.rs): a program that builds in a fraction of the op set's time,
// whose kernels a cold start launches in place of the f32 GEMM families' until those are built.
// Exact replacements: the same contract as the kernels they stand in for (docs/kernel-abi.md),
// none of their speed.
//
// sgemm_tier0 (geometry G with tiles of 64 x 64, 256 work-items): `sgemm`'s contract, the body
// of kernels-common/sgemm_tier0.h.

__kernel __attribute__((reqd_work_group_size(T0_THREADS, 1, 1)))
void sgemm_tier0(__global const float* a_base, ulong a_off, __global const float* b_base,
                 ulong b_off, __global float* c_base, ulong c_off, uint m, uint n, uint k,
                 uint trans_a, uint trans_b, float alpha, float beta) {
    __local float As[T0_BK][T0_TILE + 1];
    __local float Bs[T0_BK][T0_TILE + 1];
    rnn_sgemm_tier0(a_base + a_off, b_base + b_off, c_base + c_off, m, n, k, trans_a, trans_b,
                    alpha, beta, get_local_id(0), get_group_id(0), get_group_id(1), As, Bs);
}
