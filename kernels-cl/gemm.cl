// Tiled SGEMM: each group of 256 work-items computes a 64x64 tile of C; each work-item owns a
// 4x4 register block (rows ty + 16 r, columns tx + 16 c, so stores are coalesced). K advances
// in slices of 16 staged in local memory. Row-major, C = alpha op(A) op(B) + beta C.

#define TM 64
#define TN 64
#define TK 16

__kernel __attribute__((reqd_work_group_size(256, 1, 1)))
void sgemm(__global const float* a_base, ulong a_off, __global const float* b_base, ulong b_off,
           __global float* c_base, ulong c_off, uint m, uint n, uint k, uint trans_a,
           uint trans_b, float alpha, float beta) {
    __global const float* A = a_base + a_off;
    __global const float* B = b_base + b_off;
    __global float* C = c_base + c_off;
    // +1 column of padding keeps the transposed stores free of bank conflicts.
    __local float As[TK][TM + 1];
    __local float Bs[TK][TN + 1];

    uint lid = get_local_id(0);
    uint tx = lid % 16;
    uint ty = lid / 16;
    uint row0 = get_group_id(1) * TM;
    uint col0 = get_group_id(0) * TN;

    float acc[4][4];
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 4; c++) acc[r][c] = 0.0f;

    // 64-bit so that `p0 += TK` cannot wrap for k near 2^32.
    for (ulong p0 = 0; p0 < k; p0 += TK) {
        // Each work-item stages 4 elements of each tile; the index order follows the storage
        // order so neighbouring work-items read neighbouring addresses.
        for (uint q = 0; q < 4; q++) {
            uint e = lid + 256 * q;
            uint i, p;
            if (trans_a) { i = e % TM; p = e / TM; } else { p = e % TK; i = e / TK; }
            uint gi = row0 + i;
            ulong gp = p0 + p;
            float v = 0.0f;
            if (gi < m && gp < k)
                v = trans_a ? A[(ulong)gp * m + gi] : A[(ulong)gi * k + gp];
            As[p][i] = v;

            uint j;
            if (trans_b) { p = e % TK; j = e / TK; } else { j = e % TN; p = e / TN; }
            uint gj = col0 + j;
            gp = p0 + p;
            float w = 0.0f;
            if (gj < n && gp < k)
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
            // beta == 0 must not read C: it may hold NaN.
            float out = alpha * acc[r][c];
            if (beta != 0.0f) out += beta * C[at];
            C[at] = out;
        }
    }
}
