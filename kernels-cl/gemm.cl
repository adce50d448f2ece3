// SGEMM (geometry G): row-major C = alpha * op(A) op(B) + beta * C; with beta == 0, C is not
// read (it may hold NaN). Two designs as split-k entries (geometry T, the
// arguments of kernels-cu/gemm_tc.cu's sgemm_tc128: a partial-sum buffer and a k chunk after C;
// with get_num_groups(2) > 1 group z sums k in [z k_chunk, (z + 1) k_chunk) into part[z] and
// sgemm_split_sum adds the parts into C), and the 128 tile also as `sgemm` over the whole k
// (geometry G, the entry every dialect exports). The host picks one per launch
// (src/backend/opencl/sgemm.rs) and launches it with its geometry:
//   sgemm, sgemm_split:        the design of kernels-cu/gemm.cu: 128 x 128 x 8 block tile, 256
//                 work-items, 8 x 8 outputs per work-item, local memory double buffered (one
//                 barrier per k-step), float4 global loads where the operand's address and
//                 leading dimension allow it. For outputs with enough tiles (or k deep enough to
//                 split) to fill the device.
//   sgemm_tile64_split: 64 x 64 x 16 tile, 256 work-items, 4 x 4 outputs per
//                 work-item, one local stage. Four times the work-groups for the same output:
//                 for small outputs, and for devices that cannot hold the 128 tile.
// A k range [k0, k1) of a body keeps k as the operands' leading dimension and k1 as the bound
// of the loads; k0 is a multiple of 16 (the host's k chunks are), so the float4 paths stay
// aligned.

#define SG_BM 128
#define SG_BK 8
// A k-row of a local stage in float4s: 128 values plus 4 of padding, so that the transposing
// scalar stores of a warp (32 rows, two k-rows 4 apart) fall in distinct banks.
#define SG_LD4 33
#define SG_STAGE4 (SG_BK * SG_LD4)

// Work-item t's four values of op(A)'s k-tile at kb (128 x 8 values in all), zero at k_lim and
// beyond. `ta` is uniform
// across the work-group, so the branch costs nothing next to the 512 FMAs of a k-step.
inline float4 sg_load_a(__global const float* A, uint m, uint k, uint k_lim, uint bm, uint kb,
                        uint t, bool ta, bool vec) {
    if (!ta) {
        // A is m x k: 4 consecutive k of row t / 2.
        return sg_load4(A, bm + t / 2, m, kb + (t % 2) * 4, k_lim, k, vec);
    }
    // A is stored k x m: 4 consecutive m of k-row t / 32.
    return sg_load4(A, kb + t / 32, k_lim, bm + (t % 32) * 4, m, m, vec);
}

// B's k-tile at kb (loads bounded by k_lim, rows of a transposed B k apart): B is k x n (4 consecutive n of k-row t / 32), or stored n x k when
// transposed (4 consecutive k of row t / 2).
inline float4 sg_load_b(__global const float* B, uint n, uint k, uint k_lim, uint bn, uint kb,
                        uint t, bool tb, bool vec) {
    if (!tb) {
        return sg_load4(B, kb + t / 32, k_lim, bn + (t % 32) * 4, n, n, vec);
    }
    return sg_load4(B, bn + t / 2, n, kb + (t % 2) * 4, k_lim, k, vec);
}

// Stores four values of a k-tile into a stage laid out k-major ([k][128 + pad]): values that
// run along k (`along_k`) are scattered over four k-rows, values that run along m/n are one
// float4.
inline void sg_store_tile(__local float4* stage, float4 v, uint t, bool along_k) {
    if (along_k) {
        __local float* s = (__local float*)stage;
        const uint r = t / 2;
        const uint kk = (t % 2) * 4;
        s[(kk + 0) * (SG_LD4 * 4) + r] = v.x;
        s[(kk + 1) * (SG_LD4 * 4) + r] = v.y;
        s[(kk + 2) * (SG_LD4 * 4) + r] = v.z;
        s[(kk + 3) * (SG_LD4 * 4) + r] = v.w;
    } else {
        stage[(t / 32) * SG_LD4 + t % 32] = v;
    }
}

// alpha * v + beta * C for four consecutive columns of one row of C, within (m, n).
inline void sg_store_c(__global float* C, uint row, uint col, uint m, uint n, float4 v,
                       float alpha, float beta, bool vec) {
    if (row >= m || col >= n) return;
    __global float* p = C + (ulong)row * n + col;
    float4 o = alpha * v;
    if (vec && col + 3 < n) {
        if (beta != 0.0f) o += beta * *(__global const float4*)p;
        *(__global float4*)p = o;
    } else {
        const float e[4] = {o.x, o.y, o.z, o.w};
#pragma unroll
        for (uint q = 0; q < 4; ++q) {
            if (col + q < n) p[q] = (beta != 0.0f) ? e[q] + beta * p[q] : e[q];
        }
    }
}

// The 128 x 128 tile of group (x, y) of C = alpha * sum over k in [k0, k1) of op(A) op(B) +
// beta * C. `As`, `Bs`: two stages of SG_STAGE4 float4s each.
inline void sg_body128(__global const float* restrict A, __global const float* restrict B,
                       __global float* restrict C, uint m, uint n, uint k, uint k0, uint k1,
                       uint trans_a, uint trans_b, float alpha, float beta, __local float4* As,
                       __local float4* Bs) {
    const bool ta = trans_a != 0;
    const bool tb = trans_b != 0;
    const uint t = get_local_id(0);
    const uint tx = t % 16;
    const uint ty = t / 16;
    const uint bm = get_group_id(1) * SG_BM;
    const uint bn = get_group_id(0) * SG_BM;
    const uint lda = ta ? m : k;
    const uint ldb = tb ? k : n;
    const bool a_vec = ((uintptr_t)A % 16 == 0) && (lda % 4 == 0);
    const bool b_vec = ((uintptr_t)B % 16 == 0) && (ldb % 4 == 0);
    const bool c_vec = ((uintptr_t)C % 16 == 0) && (n % 4 == 0);

    // Rows ty*4 + {0..3} and 64 + ty*4 + {0..3}; columns tx*4 + {0..3} ([i][0]) and
    // 64 + tx*4 + {0..3} ([i][1]): quadrants 64 apart keep the float4 local reads of a warp
    // free of bank conflicts.
    float4 acc[8][2];
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        acc[i][0] = (float4)(0.0f);
        acc[i][1] = (float4)(0.0f);
    }

    // k1 + 7 may wrap a uint.
    const uint ktiles = k1 > k0 ? (uint)(((ulong)k1 - k0 + SG_BK - 1) / SG_BK) : 0u;
    if (ktiles > 0) {
        sg_store_tile(As, sg_load_a(A, m, k, k1, bm, k0, t, ta, a_vec), t, !ta);
        sg_store_tile(Bs, sg_load_b(B, n, k, k1, bn, k0, t, tb, b_vec), t, tb);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint kt = 0; kt < ktiles; ++kt) {
        const uint cur = (kt & 1) * SG_STAGE4;
        const uint nxt = SG_STAGE4 - cur;
        const bool more = kt + 1 < ktiles;
        // The next k-tile is fetched into registers before this one is computed, so the
        // global loads are in flight during the FMAs.
        float4 a_next = (float4)(0.0f);
        float4 b_next = (float4)(0.0f);
        if (more) {
            a_next = sg_load_a(A, m, k, k1, bm, k0 + (kt + 1) * SG_BK, t, ta, a_vec);
            b_next = sg_load_b(B, n, k, k1, bn, k0 + (kt + 1) * SG_BK, t, tb, b_vec);
        }
#pragma unroll
        for (uint p = 0; p < SG_BK; ++p) {
            __local const float4* ar = As + cur + p * SG_LD4;
            __local const float4* br = Bs + cur + p * SG_LD4;
            const float4 a0 = ar[ty];
            const float4 a1 = ar[16 + ty];
            const float4 b0 = br[tx];
            const float4 b1 = br[16 + tx];
            const float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
#pragma unroll
            for (int i = 0; i < 8; ++i) {
                acc[i][0] = fma((float4)(a[i]), b0, acc[i][0]);
                acc[i][1] = fma((float4)(a[i]), b1, acc[i][1]);
            }
        }
        // The other stage was last read before the previous barrier: safe to overwrite.
        if (more) {
            sg_store_tile(As + nxt, a_next, t, !ta);
            sg_store_tile(Bs + nxt, b_next, t, tb);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }

#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const uint row = bm + (i < 4 ? ty * 4 + i : 64 + ty * 4 + (i - 4));
        sg_store_c(C, row, bn + tx * 4, m, n, acc[i][0], alpha, beta, c_vec);
        sg_store_c(C, row, bn + 64 + tx * 4, m, n, acc[i][1], alpha, beta, c_vec);
    }
}

__kernel __attribute__((reqd_work_group_size(256, 1, 1)))
void sgemm(__global const float* restrict a_base, ulong a_off,
           __global const float* restrict b_base, ulong b_off, __global float* restrict c_base,
           ulong c_off, uint m, uint n, uint k, uint trans_a, uint trans_b, float alpha,
           float beta) {
    // Two stages each; float4 elements keep every stage and row 16-byte aligned.
    __local float4 As[2 * SG_STAGE4];
    __local float4 Bs[2 * SG_STAGE4];
    sg_body128(a_base + a_off, b_base + b_off, c_base + c_off, m, n, k, 0, k, trans_a, trans_b,
               alpha, beta, As, Bs);
}

// The split-k start and end of this group and where it stores: part[z] (raw sums) when the grid
// splits k, else C (alpha, beta applied). *alpha and *beta become 1 and 0 for a part.
inline __global float* sg_split(__global float* C, __global float* part, uint m, uint n, uint k,
                                uint k_chunk, uint* k0, uint* k1, float* alpha, float* beta) {
    const uint z = get_group_id(2);
    *k0 = (uint)min((ulong)z * k_chunk, (ulong)k);
    *k1 = (uint)min((ulong)*k0 + k_chunk, (ulong)k);
    if (get_num_groups(2) == 1) return C;
    *alpha = 1.0f;
    *beta = 0.0f;
    return part + (ulong)z * m * n;
}

__kernel __attribute__((reqd_work_group_size(256, 1, 1)))
void sgemm_split(__global const float* restrict a_base, ulong a_off,
                 __global const float* restrict b_base, ulong b_off,
                 __global float* restrict c_base, ulong c_off, __global float* restrict part_base,
                 ulong part_off, uint m, uint n, uint k, uint trans_a, uint trans_b,
                 uint k_chunk, float alpha, float beta) {
    __local float4 As[2 * SG_STAGE4];
    __local float4 Bs[2 * SG_STAGE4];
    uint k0, k1;
    __global float* out = sg_split(c_base + c_off, part_base + part_off, m, n, k, k_chunk, &k0,
                                   &k1, &alpha, &beta);
    sg_body128(a_base + a_off, b_base + b_off, out, m, n, k, k0, k1, trans_a, trans_b, alpha,
               beta, As, Bs);
}

// sgemm_tile64_split: each group of 256 work-items computes a 64x64 tile of C; each work-item owns a
// 4x4 register block (rows ty + 16 r, columns tx + 16 c, so stores are coalesced). K advances in
// slices of 16 staged in local memory.

#define TM 64
#define TN 64
#define TK 16

// The 64 x 64 tile of group (x, y) of C = alpha * sum over k in [k0, k1) of op(A) op(B) +
// beta * C.
inline void sg_body64(__global const float* A, __global const float* B, __global float* C,
                      uint m, uint n, uint k, uint k0, uint k1, uint trans_a, uint trans_b,
                      float alpha, float beta, __local float (*As)[TM + 1],
                      __local float (*Bs)[TN + 1]) {

    uint lid = get_local_id(0);
    uint tx = lid % 16;
    uint ty = lid / 16;
    uint row0 = get_group_id(1) * TM;
    uint col0 = get_group_id(0) * TN;

    float acc[4][4];
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 4; c++) acc[r][c] = 0.0f;

    // 64-bit so that `p0 += TK` cannot wrap for k near 2^32.
    for (ulong p0 = k0; p0 < k1; p0 += TK) {
        // Each work-item stages 4 elements of each tile; the index order follows the storage
        // order so neighbouring work-items read neighbouring addresses.
        for (uint q = 0; q < 4; q++) {
            uint e = lid + 256 * q;
            uint i, p;
            if (trans_a) { i = e % TM; p = e / TM; } else { p = e % TK; i = e / TK; }
            uint gi = row0 + i;
            ulong gp = p0 + p;
            float v = 0.0f;
            if (gi < m && gp < k1)
                v = trans_a ? A[(ulong)gp * m + gi] : A[(ulong)gi * k + gp];
            As[p][i] = v;

            uint j;
            if (trans_b) { p = e % TK; j = e / TK; } else { j = e % TN; p = e / TN; }
            uint gj = col0 + j;
            gp = p0 + p;
            float w = 0.0f;
            if (gj < n && gp < k1)
                w = trans_b ? B[(ulong)gj * k + gp] : B[(ulong)gp * n + gj];
            Bs[p][j] = w;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (uint p = 0; p < TK; p++) {
            float av[4], bv[4];
            for (int r = 0; r < 4; r++) av[r] = As[p][ty + 16 * r];
            for (int c = 0; c < 4; c++) bv[c] = Bs[p][tx + 16 * c];
            for (int r = 0; r < 4; r++)
                for (int c = 0; c < 4; c++) acc[r][c] = fma(av[r], bv[c], acc[r][c]);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }

    for (int r = 0; r < 4; r++) {
        uint gi = row0 + ty + 16 * r;
        if (gi >= m) continue;
        for (int c = 0; c < 4; c++) {
            uint gj = col0 + tx + 16 * c;
            if (gj >= n) continue;
            ulong at = (ulong)gi * n + gj;
            float out = alpha * acc[r][c];
            if (beta != 0.0f) out += beta * C[at];
            C[at] = out;
        }
    }
}

__kernel __attribute__((reqd_work_group_size(256, 1, 1)))
void sgemm_tile64_split(__global const float* a_base, ulong a_off, __global const float* b_base,
                        ulong b_off, __global float* c_base, ulong c_off,
                        __global float* part_base, ulong part_off, uint m, uint n, uint k,
                        uint trans_a, uint trans_b, uint k_chunk, float alpha, float beta) {
    __local float As[TK][TM + 1];
    __local float Bs[TK][TN + 1];
    uint k0, k1;
    __global float* out = sg_split(c_base + c_off, part_base + part_off, m, n, k, k_chunk, &k0,
                                   &k1, &alpha, &beta);
    sg_body64(a_base + a_off, b_base + b_off, out, m, n, k, k0, k1, trans_a, trans_b, alpha,
              beta, As, Bs);
}

// C[i] = alpha * sum_z part[z][i] + beta * C[i] over i < mn (beta = 0: C not read), in z order,
// so the result does not depend on which group finished first. Geometry E.
__kernel void sgemm_split_sum(__global const float* part_base, ulong part_off,
                              __global float* c_base, ulong c_off, uint mn, uint splits,
                              float alpha, float beta) {
    __global const float* part = part_base + part_off;
    __global float* c = c_base + c_off;
    for (uint i = get_global_id(0); i < mn; i += get_global_size(0)) {
        float s = 0.0f;
        // Unrolled so that several parts are loaded at once; still added in z order.
#pragma unroll 8
        for (uint z = 0; z < splits; ++z) s += part[(ulong)z * mn + i];
        c[i] = (beta != 0.0f) ? alpha * s + beta * c[i] : alpha * s;
    }
}
