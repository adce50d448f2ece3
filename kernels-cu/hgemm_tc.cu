// Tensor-core GEMM of bf16/f16 operands (geometry T, CUDA sm_80+ only): the `hgemm_*` and
// `hgemm_lo_*` contracts of hgemm.cu (same arguments, same epilogues, which it uses) on
// `mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}`, accumulating in f32 over the whole k.
//
// Block tile (WM*MT*16) x (WN*NT*8) x 32, WM*WN warps, each warp MT x NT mma tiles of 16 x 8.
// Operands move global -> shared with 16-byte cp.async copies (8 elements; zero-filled outside
// the matrix; gemm_common.cuh's), two stages; the host takes these kernels only where both operands' bases and
// leading dimensions are multiples of 8 elements (src/backend/gpu/half_gemm.rs), so every copy
// is aligned and a chunk along the contiguous dimension is wholly inside or outside. Shared
// tiles keep the operand's contiguous dimension, rows padded by 8 elements (16 bytes) so that
// the eight 16-byte row reads of an ldmatrix phase hit distinct banks. Fragments come from
// `ldmatrix.x4` (A of a k-contiguous operand and B stored n x k as they are, the others with
// `.trans`).
//
// HIP has no mma.sync/ldmatrix/cp.async: this file compiles only for CUDA at sm_80+, and the
// host picks these kernels only there; elsewhere hgemm.cu's portable kernels run.

#if !defined(RNN_HIP) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800

#define HT_BK 32
#define HT_PAD 8

// Four 8 x 8 matrices of 16-bit elements; lanes 8q .. 8q + 7 give the row addresses of matrix
// q, whose fragment lands in r[q] (TRANS: transposed).
template <bool TRANS>
__device__ __forceinline__ void ht_ldmatrix4(unsigned* r, const ushort* p) {
    if (TRANS) {
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(tc_smem_addr(p)));
    } else {
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(tc_smem_addr(p)));
    }
}

template <uint KIND>
__device__ __forceinline__ void ht_mma(float* c, const unsigned* a, const unsigned* b) {
    if (KIND == RNN_KIND_BF16) {
        asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
            "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
            : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    } else {
        asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, "
            "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
            : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    }
}

template <bool TA, bool TB, int WM, int WN, int MT, int NT>
struct HtTile {
    static constexpr int BM = WM * MT * 16;
    static constexpr int BN = WN * NT * 8;
    static constexpr int THREADS = WM * WN * 32;
    // A: m-major [BM][32] (TA = 0) or k-major [32][BM] (TA = 1); B: n-major [BN][32] (TB = 1)
    // or k-major [32][BN] (TB = 0); every row padded by HT_PAD.
    static constexpr int A_LD = TA ? BM + HT_PAD : HT_BK + HT_PAD;
    static constexpr int B_LD = TB ? HT_BK + HT_PAD : BN + HT_PAD;
    static constexpr int A_STAGE = TA ? HT_BK * A_LD : BM * A_LD;
    static constexpr int B_STAGE = TB ? BN * B_LD : HT_BK * B_LD;

    __device__ static void load(ushort* As, ushort* Bs, const ushort* __restrict__ A,
                                const ushort* __restrict__ B, uint m, uint n, uint k_end,
                                uint bm, uint bn, uint kb, uint lda, uint ldb) {
        if (TA) {
            tc_load_chunks<ushort, HT_BK, BM, THREADS>(As, A_LD, A, lda, kb, k_end, bm, m);
        } else {
            tc_load_chunks<ushort, BM, HT_BK, THREADS>(As, A_LD, A, lda, bm, m, kb, k_end);
        }
        if (TB) {
            tc_load_chunks<ushort, BN, HT_BK, THREADS>(Bs, B_LD, B, ldb, bn, n, kb, k_end);
        } else {
            tc_load_chunks<ushort, HT_BK, BN, THREADS>(Bs, B_LD, B, ldb, kb, k_end, bn, n);
        }
    }

    // The A fragment of the 16 x 16 block at (m0, k0): matrices (rows, k) 0-7 x 0-7,
    // 8-15 x 0-7, 0-7 x 8-15, 8-15 x 8-15 in r[0..3], as mma's a0..a3.
    __device__ static void a_frag(unsigned* r, const ushort* as, int m0, int k0, int lane) {
        if (TA) {
            ht_ldmatrix4<true>(r, as + (k0 + lane % 8 + (lane / 16) * 8) * A_LD + m0 +
                                      ((lane / 8) % 2) * 8);
        } else {
            ht_ldmatrix4<false>(r, as + (m0 + lane % 16) * A_LD + k0 + (lane / 16) * 8);
        }
    }

    // The B fragments of the two 8-wide tiles at n0 and n0 + 8, k0 .. k0 + 15: b0, b1 of the
    // first in r[0], r[1], of the second in r[2], r[3].
    __device__ static void b_frags(unsigned* r, const ushort* bs, int n0, int k0, int lane) {
        if (TB) {
            ht_ldmatrix4<false>(r, bs + (n0 + lane % 8 + (lane / 16) * 8) * B_LD + k0 +
                                       ((lane / 8) % 2) * 8);
        } else {
            ht_ldmatrix4<true>(r, bs + (k0 + lane % 8 + ((lane / 8) % 2) * 8) * B_LD + n0 +
                                      (lane / 16) * 8);
        }
    }
};

// acc[i][j][q] = Σ_{k in [k0, k_end)} op(A) op(B) over the warp's mma tile (i, j): q = 0, 1 at
// row g, columns 2t, 2t + 1 of the tile, q = 2, 3 at row g + 8 (g = lane / 4, t = lane % 4).
template <uint KIND, bool TA, bool TB, int WM, int WN, int MT, int NT>
__device__ __forceinline__ void ht_product(const ushort* __restrict__ A,
                                           const ushort* __restrict__ B, uint m, uint n, uint k,
                                           uint k0, uint k_end, float (&acc)[MT][NT][4],
                                           ushort* smem) {
    using T = HtTile<TA, TB, WM, WN, MT, NT>;
    static_assert(NT % 2 == 0, "B fragments come in pairs of tiles");
    const uint bm = blockIdx.y * T::BM;
    const uint bn = blockIdx.x * T::BN;
    const uint lda = TA ? m : k;
    const uint ldb = TB ? k : n;
    ushort* As = smem;
    ushort* Bs = smem + 2 * T::A_STAGE;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int wm0 = (warp / WN) * MT * 16;
    const int wn0 = (warp % WN) * NT * 8;

    const uint ktiles = k_end > k0 ? (k_end - k0 + HT_BK - 1) / HT_BK : 0;
    if (ktiles > 0) T::load(As, Bs, A, B, m, n, k_end, bm, bn, k0, lda, ldb);
    tc_commit();
    for (uint kt = 0; kt < ktiles; ++kt) {
        const uint cur = kt & 1;
        if (kt + 1 < ktiles) {
            T::load(As + (cur ^ 1) * T::A_STAGE, Bs + (cur ^ 1) * T::B_STAGE, A, B, m, n, k_end,
                    bm, bn, k0 + (kt + 1) * HT_BK, lda, ldb);
            tc_commit();
            tc_wait<1>();
        } else {
            tc_wait<0>();
        }
        __syncthreads();
        const ushort* as = As + cur * T::A_STAGE;
        const ushort* bs = Bs + cur * T::B_STAGE;
#pragma unroll
        for (int kk = 0; kk < HT_BK; kk += 16) {
            unsigned af[MT][4], bf[NT][2];
#pragma unroll
            for (int i = 0; i < MT; ++i) T::a_frag(af[i], as, wm0 + i * 16, kk, lane);
#pragma unroll
            for (int j = 0; j < NT; j += 2) {
                unsigned r[4];
                T::b_frags(r, bs, wn0 + j * 8, kk, lane);
                bf[j][0] = r[0];
                bf[j][1] = r[1];
                bf[j + 1][0] = r[2];
                bf[j + 1][1] = r[3];
            }
#pragma unroll
            for (int i = 0; i < MT; ++i)
#pragma unroll
                for (int j = 0; j < NT; ++j) ht_mma<KIND>(acc[i][j], af[i], bf[j]);
        }
        // The next iteration's copy overwrites the stage just read.
        __syncthreads();
    }
}

template <uint KIND, int WM, int WN, int MT, int NT>
__device__ __forceinline__ void ht_product_any(const ushort* A, const ushort* B, uint m, uint n,
                                               uint k, uint trans_a, uint trans_b, uint k0,
                                               uint k_end, float (&acc)[MT][NT][4],
                                               ushort* smem) {
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < NT; ++j)
#pragma unroll
            for (int q = 0; q < 4; ++q) acc[i][j][q] = 0.0f;
    if (trans_a) {
        if (trans_b) {
            ht_product<KIND, true, true, WM, WN, MT, NT>(A, B, m, n, k, k0, k_end, acc, smem);
        } else {
            ht_product<KIND, true, false, WM, WN, MT, NT>(A, B, m, n, k, k0, k_end, acc, smem);
        }
    } else {
        if (trans_b) {
            ht_product<KIND, false, true, WM, WN, MT, NT>(A, B, m, n, k, k0, k_end, acc, smem);
        } else {
            ht_product<KIND, false, false, WM, WN, MT, NT>(A, B, m, n, k, k0, k_end, acc, smem);
        }
    }
}

// Calls `store(row, col, v0, v1)` for each pair of the warp's results at columns col and
// col + 1 of a row inside the output's m rows (the columns may pass n: `store` checks them).
template <int WN, int MT, int NT, int BM, int BN, typename Store>
__device__ __forceinline__ void ht_each_pair(const float (&acc)[MT][NT][4], uint m, Store store) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const uint row0 = blockIdx.y * BM + (warp / WN) * MT * 16 + lane / 4;
    const uint col0 = blockIdx.x * BN + (warp % WN) * NT * 8 + (lane % 4) * 2;
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const uint row = row0 + i * 16 + h * 8;
            if (row >= m) continue;
#pragma unroll
            for (int j = 0; j < NT; ++j) {
                store(row, col0 + j * 8, acc[i][j][2 * h], acc[i][j][2 * h + 1]);
            }
        }
}

// The largest two-stage footprint over the four transpose cases, in bytes.
template <int WM, int WN, int MT, int NT>
struct HtSmem {
    static constexpr int stage(int side) {
        return (side * (HT_BK + HT_PAD) > HT_BK * (side + HT_PAD)) ? side * (HT_BK + HT_PAD)
                                                                   : HT_BK * (side + HT_PAD);
    }
    static constexpr int BYTES = 2 * 2 * (stage(WM * MT * 16) + stage(WN * NT * 8));
};

#define HT_F32_ENTRY(NAME, KIND, WM, WN, MT, NT)                                                \
    extern "C" __global__ void __launch_bounds__(WM * WN * 32)                                  \
        NAME(const ushort* a_base, u64 a_off, const ushort* b_base, u64 b_off, float* c_base,   \
             u64 c_off, float* part_base, u64 part_off, uint m, uint n, uint k, uint trans_a,   \
             uint trans_b, uint k_chunk, float alpha, float beta) {                             \
        __shared__ float4 smem4[HtSmem<WM, WN, MT, NT>::BYTES / 16];                            \
        const uint k0 = blockIdx.z * k_chunk;                                                   \
        float acc[MT][NT][4];                                                                   \
        ht_product_any<KIND, WM, WN, MT, NT>(a_base + a_off, b_base + b_off, m, n, k, trans_a,  \
                                             trans_b, k0, min(k, k0 + k_chunk), acc,            \
                                             reinterpret_cast<ushort*>(smem4));                 \
        const TcOut o = tc_out(c_base + c_off, part_base + part_off, m, n, alpha, beta);        \
        ht_each_pair<WN, MT, NT, WM * MT * 16, WN * NT * 8>(                                    \
            acc, m, [&](uint row, uint col, float v0, float v1) {                               \
                tc_store_pair(o.out + (u64)row * n + col, o.a_s * v0, o.a_s * v1, o.b_s, o.pair, \
                              col, n);                                                          \
            });                                                                                 \
    }

// Whether every T pointer of `o` starts at an even element (col and n even then keep each pair
// in one aligned word).
__device__ __forceinline__ bool ht_low_words(const HgLowOut& o, uint n) {
    const unsigned long long bits = (unsigned long long)o.c | (unsigned long long)o.aux |
                                    (unsigned long long)o.y;
    return (n % 2u) == 0u && (bits & 3ull) == 0ull;
}

#define HT_LOW_ENTRY(NAME, KIND, WM, WN, MT, NT)                                                \
    extern "C" __global__ void __launch_bounds__(WM * WN * 32)                                  \
        NAME(const ushort* a_base, u64 a_off, const ushort* b_base, u64 b_off, ushort* c_base,  \
             u64 c_off, const ushort* aux_base, u64 aux_off, ushort* y_base, u64 y_off, uint m, \
             uint n, uint k, uint trans_a, uint trans_b, uint epilogue, uint act, uint keep_z,  \
             float alpha, float beta, float act_param) {                                        \
        __shared__ float4 smem4[HtSmem<WM, WN, MT, NT>::BYTES / 16];                            \
        float acc[MT][NT][4];                                                                   \
        ht_product_any<KIND, WM, WN, MT, NT>(a_base + a_off, b_base + b_off, m, n, k, trans_a,  \
                                             trans_b, 0, k, acc,                                \
                                             reinterpret_cast<ushort*>(smem4));                 \
        const HgLowOut o = HG_LOW_OUT;                                                          \
        if (ht_low_words(o, n)) {                                                               \
            ht_each_pair<WN, MT, NT, WM * MT * 16, WN * NT * 8>(                                \
                acc, m, [&](uint row, uint col, float v0, float v1) {                           \
                    if (col < n) ht_store_low_pair<KIND>(o, (u64)row * n + col, col, v0, v1);   \
                });                                                                             \
            return;                                                                             \
        }                                                                                       \
        ht_each_pair<WN, MT, NT, WM * MT * 16, WN * NT * 8>(                                    \
            acc, m, [&](uint row, uint col, float v0, float v1) {                               \
                if (col < n) hg_store_low<KIND>(o, row, col, n, v0);                            \
                if (col + 1 < n) hg_store_low<KIND>(o, row, col + 1, n, v1);                    \
            });                                                                                 \
    }

// 128 x 128 tiles, 8 warps of 64 x 32; 64 x 64 tiles, 4 warps of 32 x 32.
HT_F32_ENTRY(hgemm_tc128_bf16, RNN_KIND_BF16, 2, 4, 4, 4)
HT_F32_ENTRY(hgemm_tc128_f16, RNN_KIND_F16, 2, 4, 4, 4)
HT_F32_ENTRY(hgemm_tc64_bf16, RNN_KIND_BF16, 2, 2, 2, 4)
HT_F32_ENTRY(hgemm_tc64_f16, RNN_KIND_F16, 2, 2, 2, 4)
HT_LOW_ENTRY(hgemm_lo_tc128_bf16, RNN_KIND_BF16, 2, 4, 4, 4)
HT_LOW_ENTRY(hgemm_lo_tc128_f16, RNN_KIND_F16, 2, 4, 4, 4)
HT_LOW_ENTRY(hgemm_lo_tc64_bf16, RNN_KIND_BF16, 2, 2, 2, 4)
HT_LOW_ENTRY(hgemm_lo_tc64_f16, RNN_KIND_F16, 2, 2, 2, 4)

#endif  // CUDA sm_80+
