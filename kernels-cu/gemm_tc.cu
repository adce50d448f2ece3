// Tensor-core SGEMM (geometry T, CUDA sm_80+ only): row-major C = alpha op(A) op(B) + beta C
// with f32 accuracy on the TF32 tensor cores.
//
// Why not plain TF32: a TF32 product keeps 11 significant bits of each operand, which changes
// training numerics. Here each operand x is split into hi = tf32(x) and lo = tf32(x - hi) and
// three products hi*hi + hi*lo + lo*hi are accumulated in f32 ("3xTF32"). hi + lo carries 22 of
// x's 24 bits and the dropped lo*lo term is ~2^-22 of the product, so the error is that of an f32
// GEMM; three tensor-core products still cost far less than one f32 FMA pipe product.
//
// Block tile (WM*MT*16) x (WN*NT*8) x 16, WM*WN warps, each warp MT x NT mma tiles of 16 x 8.
// Operands move global -> shared with cp.async (16-byte copies where the operand's base and
// leading dimension allow, else 4-byte ones; zero-filled outside the matrix), two stages.
// Shared layouts keep the contiguous dimension of the global operand and pad the row so that the
// fragment reads of a warp hit 32 distinct banks (rows of 20 floats when 16 wide, of tile+8 when
// 16 deep). With gridDim.z > 1 the k range is split: block z sums k in [z*k_chunk, (z+1)*k_chunk)
// and stores the raw sum in part[z] (m x n); sgemm_split_sum adds the parts into C.
//
// HIP has no mma.sync/cp.async: this file compiles only for CUDA (RNN_HIP unset) at sm_80+, and
// the host picks these kernels only there (src/backend/cuda/kernels.rs). The asynchronous copies
// and the stores are gemm_common.cuh's.

#if !defined(RNN_HIP) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800

#define TC_BK 16
#define TC_PAD_WIDE 4  // rows 16 floats wide: stride 20
#define TC_PAD_DEEP 8  // rows a tile wide (64 or 128): stride = tile + 8

__device__ __forceinline__ void tc_copy4(float* dst, const float* src, bool in) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(tc_smem_addr(dst)),
                 "l"(src), "r"(in ? 4 : 0));
}

// x = hi + lo with both parts TF32 (round to nearest, ties away: cvt.rna).
__device__ __forceinline__ void tc_split(float x, unsigned& hi, unsigned& lo) {
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(hi) : "f"(x));
    const float rest = x - __uint_as_float(hi);
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(lo) : "f"(rest));
}

__device__ __forceinline__ void tc_mma(float* c, const unsigned* a, const unsigned* b) {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// Copies a ROWS x COLS tile of a row-major matrix (leading dimension ld, rows [row0, row_lim),
// columns [col0, col_lim)) into shared memory with row stride `sld`, zero outside.
template <int ROWS, int COLS, int THREADS>
__device__ __forceinline__ void tc_load_tile(float* dst, int sld, const float* __restrict__ src,
                                             uint ld, uint row0, uint row_lim, uint col0,
                                             uint col_lim, bool vec) {
    if (vec) {
        // col_lim is a multiple of 4 here (it is ld, or a k bound that is a multiple of 16), so
        // a 4-wide chunk is wholly inside or wholly outside.
        tc_load_chunks<float, ROWS, COLS, THREADS>(dst, sld, src, ld, row0, row_lim, col0,
                                                   col_lim);
    } else {
        static_assert(ROWS * COLS % THREADS == 0, "whole elements per thread");
#pragma unroll
        for (int j = 0; j < ROWS * COLS / THREADS; ++j) {
            const int e = threadIdx.x + j * THREADS;
            const uint r = e / COLS, cc = e % COLS;
            const uint gr = row0 + r, gc = col0 + cc;
            const bool in = gr < row_lim && gc < col_lim;
            tc_copy4(dst + r * sld + cc, in ? src + (u64)gr * ld + gc : src, in);
        }
    }
}

template <bool TA, bool TB, int WM, int WN, int MT, int NT>
struct TcTile {
    static constexpr int BM = WM * MT * 16;
    static constexpr int BN = WN * NT * 8;
    static constexpr int THREADS = WM * WN * 32;
    // A: m-major [BM][16] (TA = 0) or k-major [16][BM] (TA = 1); B: k-major [16][BN] (TB = 0)
    // or n-major [BN][16] (TB = 1).
    static constexpr int A_LD = TA ? BM + TC_PAD_DEEP : TC_BK + TC_PAD_WIDE;
    static constexpr int B_LD = TB ? TC_BK + TC_PAD_WIDE : BN + TC_PAD_DEEP;
    static constexpr int A_STAGE = TA ? TC_BK * A_LD : BM * A_LD;
    static constexpr int B_STAGE = TB ? BN * B_LD : TC_BK * B_LD;

    __device__ static float a_at(const float* As, int m, int k) {
        return TA ? As[k * A_LD + m] : As[m * A_LD + k];
    }
    __device__ static float b_at(const float* Bs, int k, int n) {
        return TB ? Bs[n * B_LD + k] : Bs[k * B_LD + n];
    }

    __device__ static void load(float* As, float* Bs, const float* __restrict__ A,
                                const float* __restrict__ B, uint m, uint n, uint k_end,
                                uint bm, uint bn, uint kb, uint lda, uint ldb, bool a_vec,
                                bool b_vec) {
        if (TA) {
            tc_load_tile<TC_BK, BM, THREADS>(As, A_LD, A, lda, kb, k_end, bm, m, a_vec);
        } else {
            tc_load_tile<BM, TC_BK, THREADS>(As, A_LD, A, lda, bm, m, kb, k_end, a_vec);
        }
        if (TB) {
            tc_load_tile<BN, TC_BK, THREADS>(Bs, B_LD, B, ldb, bn, n, kb, k_end, b_vec);
        } else {
            tc_load_tile<TC_BK, BN, THREADS>(Bs, B_LD, B, ldb, kb, k_end, bn, n, b_vec);
        }
    }
};

template <bool TA, bool TB, int WM, int WN, int MT, int NT>
__device__ __forceinline__ void sgemm_tc_body(const float* __restrict__ A,
                                              const float* __restrict__ B, float* __restrict__ C,
                                              float* __restrict__ part, uint m, uint n, uint k,
                                              uint k_chunk, float alpha, float beta,
                                              float* smem) {
    using T = TcTile<TA, TB, WM, WN, MT, NT>;
    const uint bm = blockIdx.y * T::BM;
    const uint bn = blockIdx.x * T::BN;
    const uint k0 = blockIdx.z * k_chunk;
    const uint k_end = min(k, k0 + k_chunk);
    const uint lda = TA ? m : k;
    const uint ldb = TB ? k : n;
    // A 4-wide chunk along the contiguous dimension needs a 16-byte aligned address: aligned
    // bases, leading dimensions and (for the k-contiguous operands) k bounds that are multiples
    // of 4 (k_chunk is a multiple of 16).
    const bool a_vec = ((u64)A % 16 == 0) && (lda % 4 == 0);
    const bool b_vec = ((u64)B % 16 == 0) && (ldb % 4 == 0);

    float* As = smem;
    float* Bs = smem + 2 * T::A_STAGE;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int g = lane / 4, t = lane % 4;
    const int wm0 = (warp / WN) * MT * 16;
    const int wn0 = (warp % WN) * NT * 8;

    float acc[MT][NT][4];
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < NT; ++j)
#pragma unroll
            for (int q = 0; q < 4; ++q) acc[i][j][q] = 0.0f;

    const uint ktiles = k_end > k0 ? (k_end - k0 + TC_BK - 1) / TC_BK : 0;
    if (ktiles > 0) {
        T::load(As, Bs, A, B, m, n, k_end, bm, bn, k0, lda, ldb, a_vec, b_vec);
    }
    tc_commit();
    for (uint kt = 0; kt < ktiles; ++kt) {
        const uint cur = kt & 1;
        if (kt + 1 < ktiles) {
            T::load(As + (cur ^ 1) * T::A_STAGE, Bs + (cur ^ 1) * T::B_STAGE, A, B, m, n, k_end,
                    bm, bn, k0 + (kt + 1) * TC_BK, lda, ldb, a_vec, b_vec);
            tc_commit();
            tc_wait<1>();
        } else {
            tc_wait<0>();
        }
        __syncthreads();
        const float* as = As + cur * T::A_STAGE;
        const float* bs = Bs + cur * T::B_STAGE;
        // B fragments of both 8-deep halves of the k-step, split once and reused by every i.
        unsigned bhi[NT][2][2], blo[NT][2][2];
#pragma unroll
        for (int j = 0; j < NT; ++j) {
            const int c = wn0 + j * 8 + g;
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                tc_split(T::b_at(bs, 8 * h + t, c), bhi[j][h][0], blo[j][h][0]);
                tc_split(T::b_at(bs, 8 * h + t + 4, c), bhi[j][h][1], blo[j][h][1]);
            }
        }
#pragma unroll
        for (int i = 0; i < MT; ++i) {
            const int r = wm0 + i * 16 + g;
            unsigned ahi[2][4], alo[2][4];
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                tc_split(T::a_at(as, r, 8 * h + t), ahi[h][0], alo[h][0]);
                tc_split(T::a_at(as, r + 8, 8 * h + t), ahi[h][1], alo[h][1]);
                tc_split(T::a_at(as, r, 8 * h + t + 4), ahi[h][2], alo[h][2]);
                tc_split(T::a_at(as, r + 8, 8 * h + t + 4), ahi[h][3], alo[h][3]);
            }
#pragma unroll
            for (int j = 0; j < NT; ++j) {
                // The tensor cores add with truncation, so a long run of their sums drifts
                // well past cuBLAS f32's error (docs/performance.md, GEMM): they sum only this
                // 16-deep k-step's six products (small terms first), and the accumulator takes
                // that with an IEEE f32 add.
                float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    tc_mma(d, alo[h], bhi[j][h]);
                    tc_mma(d, ahi[h], blo[j][h]);
                }
#pragma unroll
                for (int h = 0; h < 2; ++h) tc_mma(d, ahi[h], bhi[j][h]);
#pragma unroll
                for (int q = 0; q < 4; ++q) acc[i][j][q] += d[q];
            }
        }
        // The next iteration's copy overwrites the stage just read.
        __syncthreads();
    }

    const TcOut o = tc_out(C, part, m, n, alpha, beta);
#pragma unroll
    for (int i = 0; i < MT; ++i) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const uint row = bm + wm0 + i * 16 + g + h * 8;
            if (row >= m) continue;
#pragma unroll
            for (int j = 0; j < NT; ++j) {
                const uint col = bn + wn0 + j * 8 + t * 2;
                tc_store_pair(o.out + (u64)row * n + col, o.a_s * acc[i][j][2 * h],
                              o.a_s * acc[i][j][2 * h + 1], o.b_s, o.pair, col, n);
            }
        }
    }
}

template <int WM, int WN, int MT, int NT>
__device__ __forceinline__ void sgemm_tc_dispatch(const float* A, const float* B, float* C,
                                                  float* part, uint m, uint n, uint k,
                                                  uint trans_a, uint trans_b, uint k_chunk,
                                                  float alpha, float beta, float* smem) {
    if (trans_a) {
        if (trans_b) {
            sgemm_tc_body<true, true, WM, WN, MT, NT>(A, B, C, part, m, n, k, k_chunk, alpha,
                                                      beta, smem);
        } else {
            sgemm_tc_body<true, false, WM, WN, MT, NT>(A, B, C, part, m, n, k, k_chunk, alpha,
                                                       beta, smem);
        }
    } else {
        if (trans_b) {
            sgemm_tc_body<false, true, WM, WN, MT, NT>(A, B, C, part, m, n, k, k_chunk, alpha,
                                                       beta, smem);
        } else {
            sgemm_tc_body<false, false, WM, WN, MT, NT>(A, B, C, part, m, n, k, k_chunk, alpha,
                                                        beta, smem);
        }
    }
}

// The largest two-stage footprint over the four transpose cases, in floats.
template <int WM, int WN, int MT, int NT>
struct TcSmem {
    static constexpr int a(int bm) {
        return (bm * (TC_BK + TC_PAD_WIDE) > TC_BK * (bm + TC_PAD_DEEP))
                   ? bm * (TC_BK + TC_PAD_WIDE)
                   : TC_BK * (bm + TC_PAD_DEEP);
    }
    static constexpr int FLOATS = 2 * (a(WM * MT * 16) + a(WN * NT * 8));
};

#define TC_ENTRY(NAME, WM, WN, MT, NT)                                                          \
    extern "C" __global__ void __launch_bounds__(WM * WN * 32) NAME(                            \
        const float* a_base, u64 a_off, const float* b_base, u64 b_off, float* c_base,          \
        u64 c_off, float* part_base, u64 part_off, uint m, uint n, uint k, uint trans_a,        \
        uint trans_b, uint k_chunk, float alpha, float beta) {                                  \
        __shared__ float4 smem4[TcSmem<WM, WN, MT, NT>::FLOATS / 4];                            \
        sgemm_tc_dispatch<WM, WN, MT, NT>(a_base + a_off, b_base + b_off, c_base + c_off,       \
                                          part_base + part_off, m, n, k, trans_a, trans_b,      \
                                          k_chunk, alpha, beta,                                 \
                                          reinterpret_cast<float*>(smem4));                     \
    }

// 128 x 128 tiles, 8 warps of 64 x 32; 64 x 64 tiles, 4 warps of 32 x 32.
TC_ENTRY(sgemm_tc128, 2, 4, 4, 4)
TC_ENTRY(sgemm_tc64, 2, 2, 2, 4)

#endif  // CUDA sm_80+
