// The body of `sgemm_tier0`, the tier-0 stand-in for the f32 GEMMs (kernels-cu/tier0.cu,
// kernels-cl/tier0.cl; src/backend/gpu/tier0.rs), one text for every dialect (CUDA and HIP C++,
// OpenCL C): the tier-0 family's first file, after kernels-common/scalar_core.h.
//
// Row-major C = alpha * op(A) op(B) + beta * C over the whole k, C not read when beta is 0, in
// 64 x 64 tiles of 256 threads. One shared stage of 64 x 16 values of each operand, each thread
// 4 x 4 outputs 16 apart; loads follow the stored layout so that a warp reads consecutive
// addresses. No unrolled k loop and no variants: the point is the compile time.

#define T0_TILE 64
#define T0_BK 16
#define T0_THREADS 256

#ifdef __OPENCL_VERSION__
#define RNN_T0_GLOBAL __global
#define RNN_T0_LOCAL __local
#define RNN_T0_BARRIER() barrier(CLK_LOCAL_MEM_FENCE)
#define RNN_T0_FMA(a, b, c) fma(a, b, c)
#define RNN_T0_U64 ulong
#else
#define RNN_T0_GLOBAL
#define RNN_T0_LOCAL
#define RNN_T0_BARRIER() __syncthreads()
#define RNN_T0_FMA(a, b, c) fmaf(a, b, c)
#define RNN_T0_U64 unsigned long long
#endif

// Thread `t` of block (`block_x`, `block_y`), with the block's shared stages `As` and `Bs`.
RNN_DEVICE_FN void rnn_sgemm_tier0(RNN_T0_GLOBAL const float* A, RNN_T0_GLOBAL const float* B,
                                   RNN_T0_GLOBAL float* C, uint m, uint n, uint k, uint trans_a,
                                   uint trans_b, float alpha, float beta, uint t, uint block_x,
                                   uint block_y, RNN_T0_LOCAL float (*As)[T0_TILE + 1],
                                   RNN_T0_LOCAL float (*Bs)[T0_TILE + 1]) {
    const uint tx = t % 16, ty = t / 16;
    const uint row0 = block_y * T0_TILE, col0 = block_x * T0_TILE;
    float acc[4][4];
    for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) acc[i][j] = 0.0f;
    for (uint kb = 0; kb < k; kb += T0_BK) {
        for (uint e = t; e < T0_BK * T0_TILE; e += T0_THREADS) {
            // A: stored m x k (k contiguous) or, transposed, k x m.
            const uint ak = trans_a ? e / T0_TILE : e % T0_BK;
            const uint ar = trans_a ? e % T0_TILE : e / T0_BK;
            const uint gr = row0 + ar, gka = kb + ak;
            float va = 0.0f;
            if (gr < m && gka < k)
                va = trans_a ? A[(RNN_T0_U64)gka * m + gr] : A[(RNN_T0_U64)gr * k + gka];
            As[ak][ar] = va;
            // B: stored k x n (n contiguous) or, transposed, n x k.
            const uint bk = trans_b ? e % T0_BK : e / T0_TILE;
            const uint bc = trans_b ? e / T0_BK : e % T0_TILE;
            const uint gc = col0 + bc, gkb = kb + bk;
            float vb = 0.0f;
            if (gc < n && gkb < k)
                vb = trans_b ? B[(RNN_T0_U64)gc * k + gkb] : B[(RNN_T0_U64)gkb * n + gc];
            Bs[bk][bc] = vb;
        }
        RNN_T0_BARRIER();
        for (uint kk = 0; kk < T0_BK; ++kk) {
            float a[4], b[4];
            for (int i = 0; i < 4; ++i) a[i] = As[kk][ty + 16 * i];
            for (int j = 0; j < 4; ++j) b[j] = Bs[kk][tx + 16 * j];
            for (int i = 0; i < 4; ++i)
                for (int j = 0; j < 4; ++j) acc[i][j] = RNN_T0_FMA(a[i], b[j], acc[i][j]);
        }
        RNN_T0_BARRIER();
    }
    for (int i = 0; i < 4; ++i) {
        const uint r = row0 + ty + 16 * i;
        if (r >= m) continue;
        for (int j = 0; j < 4; ++j) {
            const uint c = col0 + tx + 16 * j;
            if (c >= n) continue;
            RNN_T0_GLOBAL float* p = C + (RNN_T0_U64)r * n + c;
            const float v = alpha * acc[i][j];
            *p = beta == 0.0f ? v : v + beta * *p;
        }
    }
}
