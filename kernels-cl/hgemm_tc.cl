// Tensor-core GEMM of bf16/f16 operands on NVIDIA's OpenCL (geometry T): kernels-cu/hgemm_tc.cu
// in OpenCL C with inline PTX, built only with RNN_CL_NV_TC defined (src/backend/opencl/sgemm.rs:
// NVIDIA's OpenCL platform on an sm_80+ GPU, whose compiler takes inline PTX). Same entries,
// arguments, tiles, epilogues and numerics as the CUDA file (described there): block tile
// (WM*MT*16) x (WN*NT*8) x 32 of WM*WN warps, `mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}`
// accumulating in f32 over the whole k, fragments from `ldmatrix.x4` (`.trans` for the operands
// stored k-major), operands global -> local memory by 16-byte `cp.async` copies (zero-filled
// outside the matrix) in two stages, rows padded by 8 elements. The host takes these kernels
// only where both operands' offsets and leading dimensions are multiples of 8 elements
// (src/backend/gpu/half_gemm.rs), so every copy is aligned and wholly inside or outside.
//
// OpenCL C has no templates: every helper is inlined where it is called with the geometry,
// transposes and type as literals, which the compiler folds as C++ templates would (as
// gemm_tc.cl does). The PTX takes a local-memory address as `(uint)(size_t)` of the `__local`
// pointer (its shared-window address under NVIDIA's OpenCL, which gemm_wg.cl's descriptors rely
// on). After hgemm.cl in the module: its HgLowOut and hg_store_low are the per-element epilogue.

#ifdef RNN_CL_NV_TC

#define HTL_INLINE RNN_DEVICE_FN __attribute__((always_inline))
#define HTL_BK 32
#define HTL_PAD 8
// The most mma tiles of a warp along m and along n.
#define HTL_MAX_T 4

HTL_INLINE uint htl_addr(__local const void* p) { return (uint)(size_t)p; }

// 16 bytes global -> local, or 16 zero bytes when !in (no global read then).
HTL_INLINE void htl_copy16(__local ushort* dst, __global const ushort* src, bool in) {
    __asm__ volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(htl_addr(dst)),
                     "l"(src), "r"(in ? 16u : 0u));
}

HTL_INLINE void htl_commit(void) { __asm__ volatile("cp.async.commit_group;" ::); }

// Waits until at most `pending` (0 or 1) committed copy groups are in flight.
HTL_INLINE void htl_wait(const uint pending) {
    if (pending == 0) {
        __asm__ volatile("cp.async.wait_group 0;" ::);
    } else {
        __asm__ volatile("cp.async.wait_group 1;" ::);
    }
}

// A ROWS x COLS tile of a row-major operand (leading dimension ld, rows [row0, row_lim), columns
// [col0, col_lim)) into local memory rows `sld` elements apart, zero outside, in chunks of 8
// elements along the rows (whole chunks per work-item for both geometries below).
HTL_INLINE void htl_load_chunks(__local ushort* dst, uint sld, __global const ushort* src, uint ld,
                                uint row0, uint row_lim, uint col0, uint col_lim,
                                const uint ROWS, const uint COLS, const uint THREADS) {
#pragma unroll
    for (uint j = 0; j < ROWS * COLS / 8 / THREADS; ++j) {
        const uint c = get_local_id(0) + j * THREADS;
        const uint r = c / (COLS / 8), cc = (c % (COLS / 8)) * 8;
        const uint gr = row0 + r, gc = col0 + cc;
        const bool in = gr < row_lim && gc < col_lim;
        htl_copy16(dst + r * sld + cc, in ? src + (ulong)gr * ld + gc : src, in);
    }
}

// Four 8 x 8 matrices of 16-bit elements; lanes 8q .. 8q + 7 give the row addresses of matrix
// q, whose fragment lands in r[q] (TRANS: transposed).
HTL_INLINE void htl_ldmatrix4(uint* r, __local const ushort* p, const bool TRANS) {
    if (TRANS) {
        __asm__ volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                         : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                         : "r"(htl_addr(p)));
    } else {
        __asm__ volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                         : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                         : "r"(htl_addr(p)));
    }
}

// c += a b for one m16n8k16 tile of T = KIND.
HTL_INLINE void htl_mma(float* c, const uint* a, const uint* b, const uint KIND) {
    if (KIND == RNN_KIND_BF16) {
        __asm__("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
                "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    } else {
        __asm__("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, "
                "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    }
}

// Local-memory row strides: A m-major [BM][32] (TA = 0) or k-major [32][BM] (TA = 1), B n-major
// [BN][32] (TB = 1) or k-major [32][BN] (TB = 0); every row padded by HTL_PAD.
HTL_INLINE uint htl_ld(const bool k_major, const uint side) {
    return k_major ? side + HTL_PAD : HTL_BK + HTL_PAD;
}

// One stage of both operands' k-tiles at kb, as copies in flight.
HTL_INLINE void htl_load(__local ushort* As, __local ushort* Bs, __global const ushort* A,
                         __global const ushort* B, uint m, uint n, uint k_end, uint bm, uint bn,
                         uint kb, uint lda, uint ldb, const bool TA, const bool TB,
                         const uint BM, const uint BN, const uint THREADS) {
    if (TA) {
        htl_load_chunks(As, htl_ld(true, BM), A, lda, kb, k_end, bm, m, HTL_BK, BM, THREADS);
    } else {
        htl_load_chunks(As, htl_ld(false, BM), A, lda, bm, m, kb, k_end, BM, HTL_BK, THREADS);
    }
    if (TB) {
        htl_load_chunks(Bs, htl_ld(false, BN), B, ldb, bn, n, kb, k_end, BN, HTL_BK, THREADS);
    } else {
        htl_load_chunks(Bs, htl_ld(true, BN), B, ldb, kb, k_end, bn, n, HTL_BK, BN, THREADS);
    }
}

// The A fragment of the 16 x 16 block at (m0, k0): matrices (rows, k) 0-7 x 0-7, 8-15 x 0-7,
// 0-7 x 8-15, 8-15 x 8-15 in r[0..3], as mma's a0..a3.
HTL_INLINE void htl_a_frag(uint* r, __local const ushort* as, uint m0, uint k0, uint lane,
                           const bool TA, const uint BM) {
    const uint ld = htl_ld(TA, BM);
    if (TA) {
        htl_ldmatrix4(r, as + (k0 + lane % 8 + (lane / 16) * 8) * ld + m0 + ((lane / 8) % 2) * 8,
                      true);
    } else {
        htl_ldmatrix4(r, as + (m0 + lane % 16) * ld + k0 + (lane / 16) * 8, false);
    }
}

// The B fragments of the two 8-wide tiles at n0 and n0 + 8, k0 .. k0 + 15: b0, b1 of the first
// in r[0], r[1], of the second in r[2], r[3].
HTL_INLINE void htl_b_frags(uint* r, __local const ushort* bs, uint n0, uint k0, uint lane,
                            const bool TB, const uint BN) {
    const uint ld = htl_ld(!TB, BN);
    if (TB) {
        htl_ldmatrix4(r, bs + (n0 + lane % 8 + (lane / 16) * 8) * ld + k0 + ((lane / 8) % 2) * 8,
                      false);
    } else {
        htl_ldmatrix4(r, bs + (k0 + lane % 8 + ((lane / 8) % 2) * 8) * ld + n0 + (lane / 16) * 8,
                      true);
    }
}

// acc[i][j][q] = Σ_{k in [k0, k_end)} op(A) op(B) over the warp's mma tile (i, j): q = 0, 1 at
// row g, columns 2t, 2t + 1 of the tile, q = 2, 3 at row g + 8 (g = lane / 4, t = lane % 4).
// acc starts at zero (htl_product_any).
HTL_INLINE void htl_product(__global const ushort* restrict A, __global const ushort* restrict B,
                            uint m, uint n, uint k, uint k0, uint k_end,
                            float acc[HTL_MAX_T][HTL_MAX_T][4], __local ushort* smem,
                            const uint KIND, const bool TA, const bool TB, const uint WM,
                            const uint WN, const uint MT, const uint NT) {
    const uint BM = WM * MT * 16, BN = WN * NT * 8, THREADS = WM * WN * 32;
    const uint A_STAGE = TA ? HTL_BK * htl_ld(true, BM) : BM * htl_ld(false, BM);
    const uint B_STAGE = TB ? BN * htl_ld(false, BN) : HTL_BK * htl_ld(true, BN);
    const uint bm = get_group_id(1) * BM;
    const uint bn = get_group_id(0) * BN;
    const uint lda = TA ? m : k;
    const uint ldb = TB ? k : n;
    __local ushort* As = smem;
    __local ushort* Bs = smem + 2 * A_STAGE;
    const uint warp = get_local_id(0) / 32, lane = get_local_id(0) % 32;
    const uint wm0 = (warp / WN) * MT * 16;
    const uint wn0 = (warp % WN) * NT * 8;

    const uint ktiles = k_end > k0 ? (k_end - k0 + HTL_BK - 1) / HTL_BK : 0;
    if (ktiles > 0) {
        htl_load(As, Bs, A, B, m, n, k_end, bm, bn, k0, lda, ldb, TA, TB, BM, BN, THREADS);
    }
    htl_commit();
    for (uint kt = 0; kt < ktiles; ++kt) {
        const uint cur = kt & 1;
        if (kt + 1 < ktiles) {
            htl_load(As + (cur ^ 1) * A_STAGE, Bs + (cur ^ 1) * B_STAGE, A, B, m, n, k_end, bm,
                     bn, k0 + (kt + 1) * HTL_BK, lda, ldb, TA, TB, BM, BN, THREADS);
            htl_commit();
            htl_wait(1);
        } else {
            htl_wait(0);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        __local const ushort* as = As + cur * A_STAGE;
        __local const ushort* bs = Bs + cur * B_STAGE;
#pragma unroll
        for (uint kk = 0; kk < HTL_BK; kk += 16) {
            uint af[HTL_MAX_T][4], bf[HTL_MAX_T][2];
#pragma unroll
            for (uint i = 0; i < MT; ++i) htl_a_frag(af[i], as, wm0 + i * 16, kk, lane, TA, BM);
#pragma unroll
            for (uint j = 0; j < NT; j += 2) {
                uint r[4];
                htl_b_frags(r, bs, wn0 + j * 8, kk, lane, TB, BN);
                bf[j][0] = r[0];
                bf[j][1] = r[1];
                bf[j + 1][0] = r[2];
                bf[j + 1][1] = r[3];
            }
#pragma unroll
            for (uint i = 0; i < MT; ++i)
#pragma unroll
                for (uint j = 0; j < NT; ++j) htl_mma(acc[i][j], af[i], bf[j], KIND);
        }
        // The next iteration's copy overwrites the stage just read.
        barrier(CLK_LOCAL_MEM_FENCE);
    }
}

// htl_product for the launch's transposes, each a specialised inline copy.
HTL_INLINE void htl_product_any(__global const ushort* A, __global const ushort* B, uint m,
                                uint n, uint k, uint trans_a, uint trans_b, uint k0, uint k_end,
                                float acc[HTL_MAX_T][HTL_MAX_T][4], __local ushort* smem,
                                const uint KIND, const uint WM, const uint WN, const uint MT,
                                const uint NT) {
#pragma unroll
    for (uint i = 0; i < MT; ++i)
#pragma unroll
        for (uint j = 0; j < NT; ++j)
#pragma unroll
            for (uint q = 0; q < 4; ++q) acc[i][j][q] = 0.0f;
#define HTL_PRODUCT(TA, TB)                                                                     \
    htl_product(A, B, m, n, k, k0, k_end, acc, smem, KIND, TA, TB, WM, WN, MT, NT)
    if (trans_a) {
        if (trans_b) {
            HTL_PRODUCT(true, true);
        } else {
            HTL_PRODUCT(true, false);
        }
    } else {
        if (trans_b) {
            HTL_PRODUCT(false, true);
        } else {
            HTL_PRODUCT(false, false);
        }
    }
#undef HTL_PRODUCT
}

// Where a group's f32 results go: C, scaled by alpha and beta; with a k split (grid z > 1) the
// group's own slice of `part`, unscaled (sgemm_split_sum adds and scales the slices). `pair`:
// `out` takes float2 stores (8-byte aligned, n even). kernels-cu/gemm_common.cuh's TcOut.
typedef struct {
    __global float* out;
    float a_s;
    float b_s;
    bool pair;
} HtlF32Out;

HTL_INLINE HtlF32Out htl_f32_out(__global float* C, __global float* part, uint m, uint n,
                                 float alpha, float beta) {
    const bool split = get_num_groups(2) > 1;
    HtlF32Out o;
    o.out = split ? part + (ulong)get_group_id(2) * m * n : C;
    o.a_s = split ? 1.0f : alpha;
    o.b_s = split ? 0.0f : beta;
    o.pair = ((ulong)o.out % 8 == 0) && (n % 2 == 0);
    return o;
}

// The results v0, v1 at columns col, col + 1 of `row` into `o` (beta = 0: not read, so it may
// hold NaN), one float2 where the output allows.
HTL_INLINE void htl_store_f32_pair(const HtlF32Out* o, uint row, uint col, uint n, float v0,
                                   float v1) {
    __global float* p = o->out + (ulong)row * n + col;
    v0 *= o->a_s;
    v1 *= o->a_s;
    if (o->pair && col + 1 < n) {
        if (o->b_s != 0.0f) {
            v0 += o->b_s * p[0];
            v1 += o->b_s * p[1];
        }
        float2 w;
        w.x = v0;
        w.y = v1;
        *(__global float2*)p = w;
    } else {
        if (col < n) p[0] = (o->b_s != 0.0f) ? v0 + o->b_s * p[0] : v0;
        if (col + 1 < n) p[1] = (o->b_s != 0.0f) ? v1 + o->b_s * p[1] : v1;
    }
}

// Two f32 values rounded to nearest even into a packed pair of T, `lo` in the low half (the
// lower column), with sm_80's conversion instruction (kernels-cu/hgemm_tc.cu's ht_pack2).
HTL_INLINE uint htl_pack2(float lo, float hi, const uint KIND) {
    uint r;
    if (KIND == RNN_KIND_BF16) {
        __asm__("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    } else {
        __asm__("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    }
    return r;
}

// The low (`hi` false) or high half of a packed pair of T as f32 (exact). The f16 conversion
// splits the pair inside the PTX, so that only 32-bit operands cross the asm boundary.
HTL_INLINE float htl_unpack(uint pair, bool hi, const uint KIND) {
    if (KIND == RNN_KIND_BF16) return RNN_BITS_F32(hi ? pair & 0xffff0000u : pair << 16);
    float f;
    if (hi) {
        __asm__("{.reg .b16 l, h; mov.b32 {l, h}, %1; cvt.f32.f16 %0, h;}" : "=f"(f) : "r"(pair));
    } else {
        __asm__("{.reg .b16 l, h; mov.b32 {l, h}, %1; cvt.f32.f16 %0, l;}" : "=f"(f) : "r"(pair));
    }
    return f;
}

// The pair of T at elements i, i + 1 of `p` (i even, p 4-byte aligned), as one word.
HTL_INLINE uint htl_load2(__global const ushort* p, ulong i) {
    return *(__global const uint*)(p + i);
}

HTL_INLINE void htl_store2(__global ushort* p, ulong i, uint pair) {
    *(__global uint*)(p + i) = pair;
}

// hg_store_low's epilogues on a pair of results at columns col, col + 1 of a row (element i),
// both inside the output, every pointer at an even element: one load, conversion and store per
// pair.
HTL_INLINE void htl_store_low_pair(const HgLowOut* o, ulong i, uint col, float v0, float v1,
                                   const uint KIND) {
    if (o->epilogue == HG_EPI_DENSE) {
        const uint b = htl_load2(o->aux, col);
        const uint z = htl_pack2(v0 + htl_unpack(b, false, KIND), v1 + htl_unpack(b, true, KIND),
                                 KIND);
        if (o->keep_z) htl_store2(o->c, i, z);
        const float y0 = act_forward(htl_unpack(z, false, KIND), o->act, o->act_param);
        const float y1 = act_forward(htl_unpack(z, true, KIND), o->act, o->act_param);
        htl_store2(o->y, i, htl_pack2(y0, y1, KIND));
    } else if (o->epilogue == HG_EPI_ACT_GRAD) {
        const uint z = htl_load2(o->aux, i), y = htl_load2(o->y, i);
        const float d0 = act_grad(htl_unpack(z, false, KIND), htl_unpack(y, false, KIND), o->act,
                                  o->act_param);
        const float d1 = act_grad(htl_unpack(z, true, KIND), htl_unpack(y, true, KIND), o->act,
                                  o->act_param);
        htl_store2(o->c, i, htl_pack2(v0 * d0, v1 * d1, KIND));
    } else {
        float r0 = o->alpha * v0, r1 = o->alpha * v1;
        if (o->beta != 0.0f) {
            const uint c = htl_load2(o->c, i);
            r0 += o->beta * htl_unpack(c, false, KIND);
            r1 += o->beta * htl_unpack(c, true, KIND);
        }
        htl_store2(o->c, i, htl_pack2(r0, r1, KIND));
    }
}

// Whether every T pointer of `o` starts at an even element and n is even: each pair of
// columns is then one aligned word.
HTL_INLINE bool htl_low_words(const HgLowOut* o, uint n) {
    const ulong bits = (ulong)o->c | (ulong)o->aux | (ulong)o->y;
    return (n % 2u) == 0u && (bits & 3ul) == 0ul;
}

// The warp's results a pair of columns at a time (htl_product's layout), rows inside the
// output's m: with `low` null into `f32` (htl_store_f32_pair), else through `low`'s epilogue, a
// pair at a time where `words` (htl_low_words), else one element at a time (hg_store_low). The
// entries pass `low` and `f32` as literals, so each inlined copy keeps one of the three.
HTL_INLINE void htl_store(float acc[HTL_MAX_T][HTL_MAX_T][4], uint m, uint n,
                          const HtlF32Out* f32, const HgLowOut* low, bool words, const uint KIND,
                          const uint WM, const uint WN, const uint MT, const uint NT) {
    const uint warp = get_local_id(0) / 32, lane = get_local_id(0) % 32;
    const uint row0 = get_group_id(1) * WM * MT * 16 + (warp / WN) * MT * 16 + lane / 4;
    const uint col0 = get_group_id(0) * WN * NT * 8 + (warp % WN) * NT * 8 + (lane % 4) * 2;
#pragma unroll
    for (uint i = 0; i < MT; ++i)
#pragma unroll
        for (uint h = 0; h < 2; ++h) {
            const uint row = row0 + i * 16 + h * 8;
            if (row >= m) continue;
#pragma unroll
            for (uint j = 0; j < NT; ++j) {
                const uint col = col0 + j * 8;
                const float v0 = acc[i][j][2 * h], v1 = acc[i][j][2 * h + 1];
                if (low == 0) {
                    htl_store_f32_pair(f32, row, col, n, v0, v1);
                } else if (words) {
                    if (col < n) htl_store_low_pair(low, (ulong)row * n + col, col, v0, v1, KIND);
                } else {
                    if (col < n) hg_store_low(low, row, col, n, v0, KIND);
                    if (col + 1 < n) hg_store_low(low, row, col + 1, n, v1, KIND);
                }
            }
        }
}

// Two stages of the larger of an operand's two layouts, in elements: a side-wide operand takes
// max(side * 40, 32 * (side + 8)) elements a stage.
#define HTL_STAGE(S)                                                                            \
    ((S) * (HTL_BK + HTL_PAD) > HTL_BK * ((S) + HTL_PAD) ? (S) * (HTL_BK + HTL_PAD)             \
                                                         : HTL_BK * ((S) + HTL_PAD))
// The local memory of a geometry, in 16-byte units.
#define HTL_SMEM16(WM, WN, MT, NT) (2 * (HTL_STAGE(WM * MT * 16) + HTL_STAGE(WN * NT * 8)) / 8)

#define HTL_F32_ENTRY(NAME, KIND, WM, WN, MT, NT)                                               \
    __kernel __attribute__((reqd_work_group_size(WM * WN * 32, 1, 1))) void NAME(               \
        __global const ushort* a_base, ulong a_off, __global const ushort* b_base, ulong b_off, \
        __global float* c_base, ulong c_off, __global float* part_base, ulong part_off, uint m, \
        uint n, uint k, uint trans_a, uint trans_b, uint k_chunk, float alpha, float beta) {    \
        __local uint4 smem16[HTL_SMEM16(WM, WN, MT, NT)];                                       \
        const uint k0 = get_group_id(2) * k_chunk;                                              \
        float acc[HTL_MAX_T][HTL_MAX_T][4];                                                     \
        htl_product_any(a_base + a_off, b_base + b_off, m, n, k, trans_a, trans_b, k0,          \
                        min(k, k0 + k_chunk), acc, (__local ushort*)smem16, KIND, WM, WN, MT,   \
                        NT);                                                                    \
        const HtlF32Out o = htl_f32_out(c_base + c_off, part_base + part_off, m, n, alpha, beta); \
        htl_store(acc, m, n, &o, 0, false, KIND, WM, WN, MT, NT);                               \
    }

#define HTL_LOW_ENTRY(NAME, KIND, WM, WN, MT, NT)                                               \
    __kernel __attribute__((reqd_work_group_size(WM * WN * 32, 1, 1))) void NAME(               \
        __global const ushort* a_base, ulong a_off, __global const ushort* b_base, ulong b_off, \
        __global ushort* c_base, ulong c_off, __global const ushort* aux_base, ulong aux_off,   \
        __global ushort* y_base, ulong y_off, uint m, uint n, uint k, uint trans_a,             \
        uint trans_b, uint epilogue, uint act, uint keep_z, float alpha, float beta,            \
        float act_param) {                                                                      \
        __local uint4 smem16[HTL_SMEM16(WM, WN, MT, NT)];                                       \
        float acc[HTL_MAX_T][HTL_MAX_T][4];                                                     \
        htl_product_any(a_base + a_off, b_base + b_off, m, n, k, trans_a, trans_b, 0, k, acc,   \
                        (__local ushort*)smem16, KIND, WM, WN, MT, NT);                         \
        const HgLowOut o = HG_LOW_OUT;                                                          \
        if (htl_low_words(&o, n)) {                                                             \
            htl_store(acc, m, n, 0, &o, true, KIND, WM, WN, MT, NT);                            \
        } else {                                                                                \
            htl_store(acc, m, n, 0, &o, false, KIND, WM, WN, MT, NT);                           \
        }                                                                                       \
    }

// 128 x 128 tiles, 8 warps of 64 x 32 (40 KB of local memory); 64 x 64 tiles, 4 warps of
// 32 x 32 (20 KB).
HTL_F32_ENTRY(hgemm_tc128_bf16, RNN_KIND_BF16, 2, 4, 4, 4)
HTL_F32_ENTRY(hgemm_tc128_f16, RNN_KIND_F16, 2, 4, 4, 4)
HTL_F32_ENTRY(hgemm_tc64_bf16, RNN_KIND_BF16, 2, 2, 2, 4)
HTL_F32_ENTRY(hgemm_tc64_f16, RNN_KIND_F16, 2, 2, 2, 4)
HTL_LOW_ENTRY(hgemm_lo_tc128_bf16, RNN_KIND_BF16, 2, 4, 4, 4)
HTL_LOW_ENTRY(hgemm_lo_tc128_f16, RNN_KIND_F16, 2, 4, 4, 4)
HTL_LOW_ENTRY(hgemm_lo_tc64_bf16, RNN_KIND_BF16, 2, 2, 2, 4)
HTL_LOW_ENTRY(hgemm_lo_tc64_f16, RNN_KIND_F16, 2, 2, 2, 4)

#endif  // RNN_CL_NV_TC
