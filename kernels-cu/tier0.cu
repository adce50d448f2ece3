// Tier 0 (src/backend/gpu/modules.rs): a module that compiles in a fraction of a second, whose
// kernels a cold start launches in place of the f32 GEMM families' until those are built. Exact
// replacements: the same contract as the kernels they stand in for (docs/kernel-abi.md), none
// of their speed.
//
// sgemm_tier0 (geometry G with tiles of 64 x 64, 256 threads): row-major
// C = alpha * op(A) op(B) + beta * C over the whole k, C not read when beta is 0. One shared
// stage of 64 x 16 values of each operand, each thread 4 x 4 outputs 16 apart; loads follow
// the stored layout so that a warp reads consecutive addresses. No unrolled k loop and no
// variants: the point is the compile time.

#define T0_TILE 64
#define T0_BK 16
#define T0_THREADS 256

extern "C" __global__ void __launch_bounds__(T0_THREADS)
    sgemm_tier0(const float* a_base, u64 a_off, const float* b_base, u64 b_off, float* c_base,
                u64 c_off, uint m, uint n, uint k, uint trans_a, uint trans_b, float alpha,
                float beta) {
    __shared__ float As[T0_BK][T0_TILE + 1];
    __shared__ float Bs[T0_BK][T0_TILE + 1];
    const float* A = a_base + a_off;
    const float* B = b_base + b_off;
    float* C = c_base + c_off;
    const uint t = threadIdx.x;
    const uint tx = t % 16, ty = t / 16;
    const uint row0 = blockIdx.y * T0_TILE, col0 = blockIdx.x * T0_TILE;
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
            if (gr < m && gk < k) va = trans_a ? A[(u64)gk * m + gr] : A[(u64)gr * k + gk];
            As[ak][ar] = va;
            // B: stored k x n (n contiguous) or, transposed, n x k.
            const uint bk = trans_b ? e % T0_BK : e / T0_TILE;
            const uint bc = trans_b ? e / T0_BK : e % T0_TILE;
            const uint gc = col0 + bc, gk2 = kb + bk;
            float vb = 0.0f;
            if (gc < n && gk2 < k) vb = trans_b ? B[(u64)gc * k + gk2] : B[(u64)gk2 * n + gc];
            Bs[bk][bc] = vb;
        }
        __syncthreads();
        for (uint kk = 0; kk < T0_BK; ++kk) {
            float a[4], b[4];
            for (int i = 0; i < 4; ++i) a[i] = As[kk][ty + 16 * i];
            for (int j = 0; j < 4; ++j) b[j] = Bs[kk][tx + 16 * j];
            for (int i = 0; i < 4; ++i)
                for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        __syncthreads();
    }
    for (int i = 0; i < 4; ++i) {
        const uint r = row0 + ty + 16 * i;
        if (r >= m) continue;
        for (int j = 0; j < 4; ++j) {
            const uint c = col0 + tx + 16 * j;
            if (c >= n) continue;
            float* p = C + (u64)r * n + c;
            const float v = alpha * acc[i][j];
            *p = beta == 0.0f ? v : v + beta * *p;
        }
    }
}
