// Tier 0 (src/backend/gpu/modules.rs): a program that builds in a fraction of the op set's
// time, whose kernels a cold start launches in place of the f32 GEMM families' until those are
// built. Exact replacements: the same contract as the kernels they stand in for
// (docs/kernel-abi.md), none of their speed. The design of kernels-cu/tier0.cu.
//
// sgemm_tier0 (geometry G with tiles of 64 x 64, 256 work-items): row-major
// C = alpha * op(A) op(B) + beta * C over the whole k, C not read when beta is 0.

#define T0_TILE 64
#define T0_BK 16
#define T0_THREADS 256

__kernel __attribute__((reqd_work_group_size(T0_THREADS, 1, 1)))
void sgemm_tier0(__global const float* a_base, ulong a_off, __global const float* b_base,
                 ulong b_off, __global float* c_base, ulong c_off, uint m, uint n, uint k,
                 uint trans_a, uint trans_b, float alpha, float beta) {
    __local float As[T0_BK][T0_TILE + 1];
    __local float Bs[T0_BK][T0_TILE + 1];
    __global const float* A = a_base + a_off;
    __global const float* B = b_base + b_off;
    __global float* C = c_base + c_off;
    const uint t = get_local_id(0);
    const uint tx = t % 16, ty = t / 16;
    const uint row0 = get_group_id(1) * T0_TILE, col0 = get_group_id(0) * T0_TILE;
    float acc[4][4];
    for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) acc[i][j] = 0.0f;
    for (uint kb = 0; kb < k; kb += T0_BK) {
        for (uint e = t; e < T0_BK * T0_TILE; e += T0_THREADS) {
            // A: stored m x k (k contiguous) or, transposed, k x m.
            const uint ak = trans_a ? e / T0_TILE : e % T0_BK;
            const uint ar = trans_a ? e % T0_TILE : e / T0_BK;
            const uint gr = row0 + ar, gk = kb + ak;
            float va = 0.0f;
            if (gr < m && gk < k) va = trans_a ? A[(ulong)gk * m + gr] : A[(ulong)gr * k + gk];
            As[ak][ar] = va;
            // B: stored k x n (n contiguous) or, transposed, n x k.
            const uint bk = trans_b ? e % T0_BK : e / T0_TILE;
            const uint bc = trans_b ? e / T0_BK : e % T0_TILE;
            const uint gc = col0 + bc, gk2 = kb + bk;
            float vb = 0.0f;
            if (gc < n && gk2 < k) vb = trans_b ? B[(ulong)gc * k + gk2] : B[(ulong)gk2 * n + gc];
            Bs[bk][bc] = vb;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (uint kk = 0; kk < T0_BK; ++kk) {
            float a[4], b[4];
            for (int i = 0; i < 4; ++i) a[i] = As[kk][ty + 16 * i];
            for (int j = 0; j < 4; ++j) b[j] = Bs[kk][tx + 16 * j];
            for (int i = 0; i < 4; ++i)
                for (int j = 0; j < 4; ++j) acc[i][j] = fma(a[i], b[j], acc[i][j]);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    for (int i = 0; i < 4; ++i) {
        const uint r = row0 + ty + 16 * i;
        if (r >= m) continue;
        for (int j = 0; j < 4; ++j) {
            const uint c = col0 + tx + 16 * j;
            if (c >= n) continue;
            __global float* p = C + (ulong)r * n + c;
            const float v = alpha * acc[i][j];
            *p = beta == 0.0f ? v : v + beta * *p;
        }
    }
}
