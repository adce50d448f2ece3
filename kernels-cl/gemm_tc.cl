// Tensor-core SGEMM on NVIDIA's OpenCL (geometry T): the design of kernels-cu/gemm_tc.cu in
// OpenCL C with inline PTX, built only with RNN_CL_NV_TC defined (src/backend/opencl/sgemm.rs:
// NVIDIA's OpenCL platform on an sm_80+ GPU, whose compiler takes inline PTX `mma.sync`). Same
// entry names, tiles and numerics (3xTF32: each operand split into a TF32 high part and a TF32
// residual, three products lo*hi + hi*lo + hi*hi per 16-deep k-step summed by the tensor cores
// and added to the f32 accumulator with an IEEE add). Two differences:
// - A k-tile travels global -> registers -> local memory, not by cp.async: each work-item
//   fetches its float4 chunks of the next k-tile into registers before the mma of the current
//   one (the loads are in flight during the products) and stores them into the other local
//   stage after; one barrier per k-step. (cp.async would take (uint)(size_t) of a 16-byte
//   aligned __local pointer; using it here is an open lead for the sm_80/sm_89 GPUs that run
//   this kernel, as Hopper runs gemm_wg.cl.)
// - A split grid adds its k splits itself (the last group of a tile to arrive, geometry L), so
//   the entries take the strip tickets after `part` and no sgemm_split_sum launch follows.

#ifdef RNN_CL_NV_TC

// Every helper is inlined where it is called: the geometry and transpose arguments are literals
// at the entries, and only inlining turns them into constants (array sizes, unrolled trip counts,
// layouts) as C++ templates do in kernels-cu/gemm_tc.cu.
#define TCL_INLINE inline __attribute__((always_inline))
#define TCL_BK 16
#define TCL_PAD_WIDE 4  // rows 16 floats wide: stride 20
#define TCL_PAD_DEEP 8  // rows a tile wide (64 or 128): stride = tile + 8
// The most float4 chunks of one operand's k-tile a work-item moves: a BM x 16 tile over
// WM * WN * 32 work-items is 2 for both geometries below.
#define TCL_MAX_CHUNKS 2
// The most mma tiles of a warp along m and along n.
#define TCL_MAX_T 4

// x = hi + lo, both TF32 (10 explicit mantissa bits, the low 13 bits zero), each rounded to
// nearest with ties away from zero, as cvt.rna.tf32.f32 rounds, in two integer operations:
// adding half a TF32 unit to the magnitude's bits and clearing the low 13 rounds; a carry into
// the exponent is the correct round-up. Infinities and NaNs keep their bits (the add would turn
// an infinity into a NaN). lo = x - hi is exact in f32. (Cheaper in the k loop than cvt.rna,
// with the same GEMM error.)
TCL_INLINE uint tcl_round_tf32(uint b) { return (b + 0x1000u) & 0xffffe000u; }

TCL_INLINE uint2 tcl_split(float x) {
    const uint b = as_uint(x);
    const uint hi = ((b & 0x7f800000u) == 0x7f800000u) ? b : tcl_round_tf32(b);
    return (uint2)(hi, tcl_round_tf32(as_uint(x - as_float(hi))));
}

// d += a b for one m16n8k8 TF32 tile: a holds the four A registers, b the two B registers.
#define TCL_MMA(d, a0, a1, a2, a3, b0, b1)                                                      \
    __asm__("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, "               \
            "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"                                           \
            : "+f"((d)[0]), "+f"((d)[1]), "+f"((d)[2]), "+f"((d)[3])                           \
            : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1))

// Chunk c (4 consecutive floats along the contiguous dimension) of a rows x cols tile of a
// row-major operand (leading dimension ld) whose first element is (row0, col0), zero outside
// (row_lim, col_lim).
TCL_INLINE float4 tcl_fetch(__global const float* src, uint ld, uint row0, uint row_lim, uint col0,
                            uint col_lim, uint cols, uint c, bool vec) {
    const uint r = c / (cols / 4);
    const uint cc = (c % (cols / 4)) * 4;
    return sg_load4(src, row0 + r, row_lim, col0 + cc, col_lim, ld, vec);
}

// Chunk c of a rows x cols tile into local memory rows `sld` floats apart (sld and the chunk's
// column are multiples of 4, so the float4 store is aligned).
TCL_INLINE void tcl_put(__local float* dst, uint sld, uint cols, uint c, float4 v) {
    const uint r = c / (cols / 4);
    const uint cc = (c % (cols / 4)) * 4;
    *(__local float4*)(dst + r * sld + cc) = v;
}

// Local-memory row strides of A's and B's stages: A is m-major [BM][16] (TA = 0) or k-major
// [16][BM] (TA = 1), B k-major [16][BN] (TB = 0) or n-major [BN][16] (TB = 1).
TCL_INLINE uint tcl_a_ld(bool TA, uint BM) {
    return TA ? BM + TCL_PAD_DEEP : TCL_BK + TCL_PAD_WIDE;
}
TCL_INLINE uint tcl_b_ld(bool TB, uint BN) {
    return TB ? TCL_BK + TCL_PAD_WIDE : BN + TCL_PAD_DEEP;
}

// The work-item's chunks of the k-tile at kb of both operands, into registers.
TCL_INLINE void tcl_fetch_tiles(float4* a_next, float4* b_next, __global const float* A,
                                __global const float* B, uint m, uint n, uint k_end, uint bm,
                                uint bn, uint kb, uint lda, uint ldb, bool a_vec, bool b_vec,
                                uint tid, const bool TA, const bool TB, const uint BM,
                                const uint BN, const uint THREADS) {
#pragma unroll
    for (uint j = 0; j < BM * TCL_BK / 4 / THREADS; ++j) {
        const uint c = tid + j * THREADS;
        a_next[j] = TA ? tcl_fetch(A, lda, kb, k_end, bm, m, BM, c, a_vec)
                       : tcl_fetch(A, lda, bm, m, kb, k_end, TCL_BK, c, a_vec);
    }
#pragma unroll
    for (uint j = 0; j < BN * TCL_BK / 4 / THREADS; ++j) {
        const uint c = tid + j * THREADS;
        b_next[j] = TB ? tcl_fetch(B, ldb, bn, n, kb, k_end, TCL_BK, c, b_vec)
                       : tcl_fetch(B, ldb, kb, k_end, bn, n, BN, c, b_vec);
    }
}

// The registers of tcl_fetch_tiles into one stage (As, Bs) of local memory.
TCL_INLINE void tcl_put_tiles(__local float* As, __local float* Bs, const float4* a_next,
                              const float4* b_next, uint tid, const bool TA, const bool TB,
                              const uint BM, const uint BN, const uint THREADS) {
#pragma unroll
    for (uint j = 0; j < BM * TCL_BK / 4 / THREADS; ++j) {
        tcl_put(As, tcl_a_ld(TA, BM), TA ? BM : TCL_BK, tid + j * THREADS, a_next[j]);
    }
#pragma unroll
    for (uint j = 0; j < BN * TCL_BK / 4 / THREADS; ++j) {
        tcl_put(Bs, tcl_b_ld(TB, BN), TB ? TCL_BK : BN, tid + j * THREADS, b_next[j]);
    }
}

// A load from L2 (ld.global.cg), past this SM's L1: for data other groups wrote in this launch.
TCL_INLINE float tcl_load_l2(__global const float* p) {
    float v;
    __asm__ volatile("ld.global.cg.f32 %0, [%1];" : "=f"(v) : "l"(p));
    return v;
}

// v0 and v1 into p[0] and p[1], columns col and col + 1 of an n-wide row, plus beta times what
// is there (beta = 0: p is not read, so it may hold NaN). `pair`: p may be written as one
// float2 (8-byte aligned, n even).
TCL_INLINE void tcl_store_pair(__global float* p, float v0, float v1, float beta, bool pair,
                               uint col, uint n) {
    if (pair && col + 1 < n) {
        if (beta != 0.0f) {
            const float2 o = *(__global const float2*)p;
            v0 += beta * o.x;
            v1 += beta * o.y;
        }
        *(__global float2*)p = (float2)(v0, v1);
    } else {
        if (col < n) p[0] = (beta != 0.0f) ? v0 + beta * p[0] : v0;
        if (col + 1 < n) p[1] = (beta != 0.0f) ? v1 + beta * p[1] : v1;
    }
}

// A warp's MT x NT fragment tiles (tcl_store_tile's layout) set to zero.
TCL_INLINE void tcl_zero(float v[TCL_MAX_T][TCL_MAX_T][4], const uint MT, const uint NT) {
#pragma unroll
    for (uint i = 0; i < MT; ++i)
#pragma unroll
        for (uint j = 0; j < NT; ++j)
#pragma unroll
            for (uint q = 0; q < 4; ++q) v[i][j][q] = 0.0f;
}

// A warp's MT x NT mma tiles of accumulators (fragment layout: v[i][j][q] is row
// row0 + 16 i + g + 8 (q / 2), column col0 + 8 j + 2 t + q % 2) into out, an m x n matrix, as
// alpha v + beta out (beta = 0: out is not read).
TCL_INLINE void tcl_store_tile(__global float* out, float v[TCL_MAX_T][TCL_MAX_T][4],
                               float alpha, float beta, uint m, uint n, uint row0, uint col0,
                               uint g, uint t, const uint MT, const uint NT) {
    const bool pair = ((ulong)out % 8 == 0) && (n % 2 == 0);
#pragma unroll
    for (uint i = 0; i < MT; ++i) {
#pragma unroll
        for (uint h = 0; h < 2; ++h) {
            const uint row = row0 + i * 16 + g + h * 8;
            if (row >= m) continue;
#pragma unroll
            for (uint j = 0; j < NT; ++j) {
                const uint col = col0 + j * 8 + t * 2;
                tcl_store_pair(out + (ulong)row * n + col, alpha * v[i][j][2 * h],
                               alpha * v[i][j][2 * h + 1], beta, pair, col, n);
            }
        }
    }
}

// The split-k reduction inside the launch (geometry L), run by the last of a tile's `splits`
// groups to arrive: C = alpha * (the parts added in z order) + beta * C over the elements of
// a warp's MT x NT fragment tiles v (tcl_store_tile's layout), as sgemm_split_sum would add
// them (the same sums, one launch fewer: NVIDIA's OpenCL spends several microseconds on any
// kernel). Its own split z comes from the registers, the others from L2; z is the outer loop,
// so the loads of all of them are in flight at once.
TCL_INLINE void tcl_add_splits(__global float* C, __global const float* part,
                               float v[TCL_MAX_T][TCL_MAX_T][4], uint z, uint splits,
                               float alpha, float beta, uint m, uint n, uint row0, uint col0,
                               uint g, uint t, const uint MT, const uint NT) {
    const ulong mn = (ulong)m * n;
    float sum[TCL_MAX_T][TCL_MAX_T][4];
    tcl_zero(sum, MT, NT);
    for (uint zz = 0; zz < splits; ++zz) {
        __global const float* pz = part + zz * mn;
#pragma unroll
        for (uint i = 0; i < MT; ++i) {
#pragma unroll
            for (uint q = 0; q < 4; ++q) {
                const uint row = row0 + i * 16 + g + (q / 2) * 8;
#pragma unroll
                for (uint j = 0; j < NT; ++j) {
                    const uint col = col0 + j * 8 + t * 2 + q % 2;
                    float x = v[i][j][q];
                    if (zz != z) {
                        x = (row < m && col < n) ? tcl_load_l2(pz + (ulong)row * n + col) : 0.0f;
                    }
                    sum[i][j][q] += x;
                }
            }
        }
    }
    tcl_store_tile(C, sum, alpha, beta, m, n, row0, col0, g, t, MT, NT);
}

// The block tile (WM * MT * 16) x (WN * NT * 8) of group (x, y) summed over k in [k0, k_end):
// alpha * sum + beta * C, or with a split grid the raw sum into part[z] and, by the tile's last
// group to arrive, the splits' total into C. Every geometry and transpose argument is a literal
// at the call site (tcl_dispatch), so the compiler specialises each inlined copy as C++
// templates would.
TCL_INLINE void tcl_body(__global const float* restrict A, __global const float* restrict B,
                         __global float* restrict C, __global float* restrict part,
                         __global uint* tickets, uint m, uint n, uint k, uint k0, uint k_end,
                         float alpha, float beta, __local float* smem, __local uint* flag,
                         const bool TA, const bool TB, const uint WM, const uint WN,
                         const uint MT, const uint NT) {
    const uint BM = WM * MT * 16;
    const uint BN = WN * NT * 8;
    const uint THREADS = WM * WN * 32;
    const uint A_LD = tcl_a_ld(TA, BM);
    const uint B_LD = tcl_b_ld(TB, BN);
    const uint A_STAGE = TA ? TCL_BK * A_LD : BM * A_LD;
    const uint B_STAGE = TB ? BN * B_LD : TCL_BK * B_LD;

    const uint bm = get_group_id(1) * BM;
    const uint bn = get_group_id(0) * BN;
    const uint lda = TA ? m : k;
    const uint ldb = TB ? k : n;
    const bool a_vec = ((ulong)A % 16 == 0) && (lda % 4 == 0);
    const bool b_vec = ((ulong)B % 16 == 0) && (ldb % 4 == 0);

    __local float* As = smem;
    __local float* Bs = smem + 2 * A_STAGE;
    const uint tid = get_local_id(0);
    const uint warp = tid / 32, lane = tid % 32;
    const uint g = lane / 4, t = lane % 4;
    const uint wm0 = (warp / WN) * MT * 16;
    const uint wn0 = (warp % WN) * NT * 8;

    float acc[TCL_MAX_T][TCL_MAX_T][4];
    tcl_zero(acc, MT, NT);

    // Registers of the next k-tile, between its fetch and its put.
    float4 a_next[TCL_MAX_CHUNKS], b_next[TCL_MAX_CHUNKS];

    const uint ktiles = k_end > k0 ? (k_end - k0 + TCL_BK - 1) / TCL_BK : 0;
    if (ktiles > 0) {
        tcl_fetch_tiles(a_next, b_next, A, B, m, n, k_end, bm, bn, k0, lda, ldb, a_vec, b_vec,
                        tid, TA, TB, BM, BN, THREADS);
        tcl_put_tiles(As, Bs, a_next, b_next, tid, TA, TB, BM, BN, THREADS);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint kt = 0; kt < ktiles; ++kt) {
        const uint cur = kt & 1;
        const bool more = kt + 1 < ktiles;
        if (more) {
            tcl_fetch_tiles(a_next, b_next, A, B, m, n, k_end, bm, bn, k0 + (kt + 1) * TCL_BK,
                            lda, ldb, a_vec, b_vec, tid, TA, TB, BM, BN, THREADS);
        }
        __local const float* as = As + cur * A_STAGE;
        __local const float* bs = Bs + cur * B_STAGE;
        // B fragments of both 8-deep halves of the k-step, split once and reused by every i.
        uint2 bf[TCL_MAX_T][2][2];
#pragma unroll
        for (uint j = 0; j < NT; ++j) {
            const uint c = wn0 + j * 8 + g;
#pragma unroll
            for (uint h = 0; h < 2; ++h) {
                const uint k_a = 8 * h + t, k_b = 8 * h + t + 4;
                bf[j][h][0] = tcl_split(TB ? bs[c * B_LD + k_a] : bs[k_a * B_LD + c]);
                bf[j][h][1] = tcl_split(TB ? bs[c * B_LD + k_b] : bs[k_b * B_LD + c]);
            }
        }
#pragma unroll
        for (uint i = 0; i < MT; ++i) {
            const uint r = wm0 + i * 16 + g;
            // af[h][q]: A register q of half h ((r, 8h + t), (r + 8, 8h + t), (r, 8h + t + 4),
            // (r + 8, 8h + t + 4)), as (hi, lo).
            uint2 af[2][4];
#pragma unroll
            for (uint h = 0; h < 2; ++h) {
#pragma unroll
                for (uint q = 0; q < 4; ++q) {
                    const uint rr = r + (q % 2) * 8;
                    const uint kk = 8 * h + t + (q / 2) * 4;
                    af[h][q] = tcl_split(TA ? as[kk * A_LD + rr] : as[rr * A_LD + kk]);
                }
            }
#pragma unroll
            for (uint j = 0; j < NT; ++j) {
                // Only this k-step's six products are summed by the tensor cores (which add
                // with truncation), small terms first; the accumulator takes the result with an
                // IEEE f32 add (see kernels-cu/gemm_tc.cu).
                float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
                for (uint h = 0; h < 2; ++h) {
                    TCL_MMA(d, af[h][0].y, af[h][1].y, af[h][2].y, af[h][3].y, bf[j][h][0].x,
                            bf[j][h][1].x);
                    TCL_MMA(d, af[h][0].x, af[h][1].x, af[h][2].x, af[h][3].x, bf[j][h][0].y,
                            bf[j][h][1].y);
                }
#pragma unroll
                for (uint h = 0; h < 2; ++h) {
                    TCL_MMA(d, af[h][0].x, af[h][1].x, af[h][2].x, af[h][3].x, bf[j][h][0].x,
                            bf[j][h][1].x);
                }
#pragma unroll
                for (uint q = 0; q < 4; ++q) acc[i][j][q] += d[q];
            }
        }
        // The other stage was last read before the previous barrier.
        if (more) {
            tcl_put_tiles(As + (cur ^ 1) * A_STAGE, Bs + (cur ^ 1) * B_STAGE, a_next, b_next,
                          tid, TA, TB, BM, BN, THREADS);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }

    // Unsplit: C = alpha acc + beta C. Split: part[z] = acc, then the tile's last group to
    // arrive adds the splits into C.
    const uint splits = get_num_groups(2);
    const uint z = get_group_id(2);
    const ulong mn = (ulong)m * n;
    if (splits == 1) {
        tcl_store_tile(C, acc, alpha, beta, m, n, bm + wm0, bn + wn0, g, t, MT, NT);
        return;
    }
    tcl_store_tile(part + z * mn, acc, 1.0f, 0.0f, m, n, bm + wm0, bn + wn0, g, t, MT, NT);

    mem_fence(CLK_GLOBAL_MEM_FENCE);
    const uint tile = get_group_id(1) * get_num_groups(0) + get_group_id(0);
    if (!rnn_last_arrival(tickets + tile, splits, flag)) return;
    tcl_add_splits(C, part, acc, z, splits, alpha, beta, m, n, bm + wm0, bn + wn0, g, t, MT, NT);
}

// BODY(TA, TB) for the launch's transposes, with TA and TB literals: four specialised inline
// copies of the body (gemm_wg.cl's entry uses it too).
#define TCL_TRANSPOSES(BODY, trans_a, trans_b)                                                 \
    if (trans_a) {                                                                             \
        if (trans_b) {                                                                         \
            BODY(true, true);                                                                  \
        } else {                                                                               \
            BODY(true, false);                                                                 \
        }                                                                                      \
    } else {                                                                                   \
        if (trans_b) {                                                                         \
            BODY(false, true);                                                                 \
        } else {                                                                               \
            BODY(false, false);                                                                \
        }                                                                                      \
    }

// The four transposes of one geometry, each a specialised inline copy of tcl_body.
TCL_INLINE void tcl_dispatch(__global const float* A, __global const float* B, __global float* C,
                             __global float* part, __global uint* tickets, uint m, uint n,
                             uint k, uint k0, uint k1, uint trans_a, uint trans_b, float alpha,
                             float beta, __local float* smem, __local uint* flag, const uint WM,
                             const uint WN, const uint MT, const uint NT) {
#define TCL_BODY(TA, TB)                                                                       \
    tcl_body(A, B, C, part, tickets, m, n, k, k0, k1, alpha, beta, smem, flag, TA, TB, WM, WN,  \
             MT, NT)
    TCL_TRANSPOSES(TCL_BODY, trans_a, trans_b)
#undef TCL_BODY
}

// Two stages of the larger of A's two layouts plus two of B's, in floats: a BM-wide operand
// takes max(BM * 20, 16 * (BM + 8)) floats a stage.
#define TCL_STAGE(BM) ((BM) * 20 > 16 * ((BM) + 8) ? (BM) * 20 : 16 * ((BM) + 8))
// The `T` arguments plus `tickets` (zero between launches, STRIP_TICKETS of them) after part:
// with grid z > 1 the groups of a tile add their splits into C themselves (end of tcl_body).
#define TCL_ENTRY(NAME, WM, WN, MT, NT)                                                         \
    __kernel __attribute__((reqd_work_group_size(WM * WN * 32, 1, 1))) void NAME(              \
        __global const float* restrict a_base, ulong a_off,                                     \
        __global const float* restrict b_base, ulong b_off, __global float* restrict c_base,   \
        ulong c_off, __global float* restrict part_base, ulong part_off,                        \
        __global uint* ticket_base, ulong ticket_off, uint m, uint n, uint k, uint trans_a,     \
        uint trans_b, uint k_chunk, float alpha, float beta) {                                  \
        __local float4 smem4[2 * (TCL_STAGE(WM * MT * 16) + TCL_STAGE(WN * NT * 8)) / 4];       \
        __local uint flag;                                                                      \
        const uint k0 = (uint)min((ulong)get_group_id(2) * k_chunk, (ulong)k);                  \
        const uint k1 = (uint)min((ulong)k0 + k_chunk, (ulong)k);                               \
        tcl_dispatch(a_base + a_off, b_base + b_off, c_base + c_off, part_base + part_off,     \
                     ticket_base + ticket_off, m, n, k, k0, k1, trans_a, trans_b, alpha, beta,  \
                     (__local float*)smem4, &flag, WM, WN, MT, NT);                             \
    }

// 128 x 128 tiles, 8 warps of 64 x 32 (40 KB of local memory); 64 x 64 tiles, 4 warps of
// 32 x 32 (20 KB).
TCL_ENTRY(sgemm_tc128, 2, 4, 4, 4)
TCL_ENTRY(sgemm_tc64, 2, 2, 2, 4)

#endif  // RNN_CL_NV_TC
