// SGEMM (geometry G): row-major C = alpha * op(A) op(B) + beta * C.
//
// Block tile 128 x 128 x 8, 256 threads, 8 x 8 register block per thread, shared memory double
// buffered (one barrier per k-step), float4 global loads where the operand's address and leading
// dimension allow it. The register block is split into four 4 x 4 quadrants 64 apart so that the
// float4 shared-memory reads of a warp do not conflict. Host geometry: Device::sgemm_kernel() =
// (128, 128, 256), grid (ceil(n / 128), ceil(m / 128)).

#define SG_BM 128
#define SG_BN 128
#define SG_BK 8
#define SG_PAD 4
#define SG_LD (SG_BM + SG_PAD)
#define SG_THREADS 256

// The k-tile `kb` of one operand (128 x 8 values of op(A), or 8 x 128 of op(B)) as four values
// per thread. `rows` is m for A, n for B, and `b0` the block's first of them. K_CONTIG: the
// operand is stored rows x k (A, or B transposed), and the thread reads 4 consecutive k of row
// t / 2; else it is stored k x rows, and the thread reads 4 consecutive rows of k-row t / 32.
template <bool K_CONTIG>
__device__ __forceinline__ float4 sg_load_tile(const float* __restrict__ X, uint rows, uint k,
                                               uint b0, uint kb, bool vec) {
    const uint t = threadIdx.x;
    if (K_CONTIG) {
        return rnn_load4(X, b0 + t / 2, rows, kb + (t % 2) * 4, k, k, vec);
    } else {
        return rnn_load4(X, kb + t / 32, k, b0 + (t % 32) * 4, rows, rows, vec);
    }
}

// Stores a thread's values from sg_load_tile<K_CONTIG> into the k-major shared tile `Xs`.
template <bool K_CONTIG>
__device__ __forceinline__ void sg_store_tile(float* __restrict__ Xs, float4 v) {
    const uint t = threadIdx.x;
    if (K_CONTIG) {
        const uint r = t / 2, kk = (t % 2) * 4;
        Xs[(kk + 0) * SG_LD + r] = v.x;
        Xs[(kk + 1) * SG_LD + r] = v.y;
        Xs[(kk + 2) * SG_LD + r] = v.z;
        Xs[(kk + 3) * SG_LD + r] = v.w;
    } else {
        *reinterpret_cast<float4*>(&Xs[(t / 32) * SG_LD + (t % 32) * 4]) = v;
    }
}

template <bool TA, bool TB>
__device__ __forceinline__ void sgemm_body(const float* __restrict__ A, const float* __restrict__ B,
                                           float* __restrict__ C, uint m, uint n, uint k,
                                           float alpha, float beta, float* As, float* Bs) {
    const uint bm = blockIdx.y * SG_BM;
    const uint bn = blockIdx.x * SG_BN;
    const uint tx = threadIdx.x % 16;
    const uint ty = threadIdx.x / 16;
    const uint lda = TA ? m : k;
    const uint ldb = TB ? k : n;
    const bool a_vec = ((u64)A % 16 == 0) && (lda % 4 == 0);
    const bool b_vec = ((u64)B % 16 == 0) && (ldb % 4 == 0);
    const bool c_vec = ((u64)C % 16 == 0) && (n % 4 == 0);

    float acc[8][8];
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = 0.0f;

    const uint ktiles = (uint)(((u64)k + SG_BK - 1) / SG_BK);  // k + SG_BK - 1 may wrap a uint
    const uint stage = SG_BK * SG_LD;
    if (ktiles > 0) {
        sg_store_tile<!TA>(As, sg_load_tile<!TA>(A, m, k, bm, 0, a_vec));
        sg_store_tile<TB>(Bs, sg_load_tile<TB>(B, n, k, bn, 0, b_vec));
    }
    __syncthreads();
    for (uint kt = 0; kt < ktiles; ++kt) {
        const uint cur = (kt & 1) * stage;
        const uint nxt = stage - cur;
        const bool more = kt + 1 < ktiles;
        float4 a_next, b_next;
        if (more) {
            a_next = sg_load_tile<!TA>(A, m, k, bm, (kt + 1) * SG_BK, a_vec);
            b_next = sg_load_tile<TB>(B, n, k, bn, (kt + 1) * SG_BK, b_vec);
        }
#pragma unroll
        for (uint p = 0; p < SG_BK; ++p) {
            const float* ar = As + cur + p * SG_LD;
            const float* br = Bs + cur + p * SG_LD;
            const float4 a0 = *reinterpret_cast<const float4*>(ar + ty * 4);
            const float4 a1 = *reinterpret_cast<const float4*>(ar + 64 + ty * 4);
            const float4 b0 = *reinterpret_cast<const float4*>(br + tx * 4);
            const float4 b1 = *reinterpret_cast<const float4*>(br + 64 + tx * 4);
            const float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
            const float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
            for (int i = 0; i < 8; ++i)
#pragma unroll
                for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        if (more) {
            sg_store_tile<!TA>(As + nxt, a_next);
            sg_store_tile<TB>(Bs + nxt, b_next);
        }
        __syncthreads();
    }

#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const uint row = bm + (i < 4 ? ty * 4 + i : 64 + ty * 4 + (i - 4));
        sg_store_c(C, row, bn + tx * 4, m, n, &acc[i][0], alpha, beta, c_vec);
        sg_store_c(C, row, bn + 64 + tx * 4, m, n, &acc[i][4], alpha, beta, c_vec);
    }
}

extern "C" __global__ void __launch_bounds__(SG_THREADS)
    sgemm(const float* a_base, u64 a_off, const float* b_base, u64 b_off, float* c_base,
          u64 c_off, uint m, uint n, uint k, uint trans_a, uint trans_b, float alpha, float beta) {
    // float4 element type: the stages are 16-byte aligned without vendor alignment attributes.
    __shared__ float4 as4[2 * SG_BK * SG_LD / 4];
    __shared__ float4 bs4[2 * SG_BK * SG_LD / 4];
    float* As = reinterpret_cast<float*>(as4);
    float* Bs = reinterpret_cast<float*>(bs4);
    const float* A = a_base + a_off;
    const float* B = b_base + b_off;
    float* C = c_base + c_off;
    if (trans_a) {
        if (trans_b) sgemm_body<true, true>(A, B, C, m, n, k, alpha, beta, As, Bs);
        else sgemm_body<true, false>(A, B, C, m, n, k, alpha, beta, As, Bs);
    } else {
        if (trans_b) sgemm_body<false, true>(A, B, C, m, n, k, alpha, beta, As, Bs);
        else sgemm_body<false, false>(A, B, C, m, n, k, alpha, beta, As, Bs);
    }
}
