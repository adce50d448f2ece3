// Thin GEMMs (geometry H of docs/kernel-abi.md), the design of kernels-cu/gemm_thin.cu:
// row-major C = alpha * op(A) op(B) + beta * C where one side is at most 16 wide.
// sgemm_thin (k > 16, n <= 16 or m <= 16): a group of 256 owns 32 long indices x (one per
// segment lane) over its k range; S[kk][0..16] is staged in local memory piece by piece and
// each segment of 32 sums 32 kk of the piece; the 8 segments' sums are added in order. Grid z
// > 1: part[z] holds the raw sums of k range z, and sgemm_split_sum adds them.
// sgemm_thin1: the same for a short side of 1, a matrix-vector product (thin_body with its
// width; each entry declares its local arrays to fit it).
// sgemm_thin_k (k <= 16): a work-item keeps op(B)[0..k][4 columns] in registers and writes 4
// columns of 16 rows, their op(A) values staged in local memory.
// Every work-item reaches every barrier (no early return). Aligned float4 accesses go through
// float4 pointers (RNN_F4, elementwise.cl), which NVIDIA's compiler keeps as 16-byte loads.

#define TH_SHORT 16
#define TH_X 32
#define TH_WARPS 8
#define TH_PIECE 256
#define TH_PER_WARP (TH_PIECE / TH_WARPS)

// acc[y] += l * srow[y] for y < sw; srow is 16-byte aligned when sw is a multiple of 4 (read
// as float4s then). sw is a literal at each call (thin_body is inlined into its entries).
inline void thin_fma(float* acc, float l, __local const float* srow, const uint sw) {
    if (sw % 4 == 0) {
        for (uint q = 0; q < sw / 4; ++q) {
            const float4 s = ((__local const float4*)srow)[q];
            acc[4 * q + 0] += l * s.x;
            acc[4 * q + 1] += l * s.y;
            acc[4 * q + 2] += l * s.z;
            acc[4 * q + 3] += l * s.w;
        }
    } else {
        for (uint y = 0; y < sw; ++y) acc[y] += l * srow[y];
    }
}

// Epilogues, as kernels-cu/gemm_thin.cu: TH_PLAIN; TH_BIAS_ACT (unsplit, short n: z = sum +
// bias[y] into C unless y_out is C, act(z) into y_out); TH_BIAS_GRAD (short m: the short
// operand's sums over the group's k range into bias[y], or part[z][m n + y] when split).
#define TH_PLAIN 0
#define TH_BIAS_ACT 1
#define TH_BIAS_GRAD 2

// The body of the entries for a short side of at most sw (16 or 1): sh_s holds TH_PIECE * sw
// floats (16-byte aligned for sw 16), sh_red TH_WARPS * TH_X * (sw + 1).
inline __attribute__((always_inline)) void thin_body(
    __global const float* a_base, ulong a_off, __global const float* b_base, ulong b_off,
    __global float* c_base, ulong c_off, __global float* part_base, ulong part_off,
    __global float* bias_base, ulong bias_off, __global float* y_base, ulong y_off, uint m,
    uint n, uint k, uint trans_a, uint trans_b, uint k_chunk, uint part_stride, uint epilogue,
    uint act, float alpha, float beta, float act_param, __local float* sh_s,
    __local float* sh_red, const uint sw) {
    __global const float* a = a_base + a_off;
    __global const float* b = b_base + b_off;
    __global float* c = c_base + c_off;
    __global float* part = part_base + part_off + (ulong)get_group_id(2) * part_stride;
    __global float* bias = bias_base + bias_off;
    __global float* y_out = y_base + y_off;
    // The bias gradient is summed by the groups of the first tile, 256 / sw work-items a column.
    const bool bias_grad = epilogue == TH_BIAS_GRAD && get_group_id(0) == 0;
    float bias_part = 0.0f;
    const bool split = get_num_groups(2) > 1;
    const uint t = get_local_id(0);
    const uint lane = t % TH_X, warp = t / TH_X;
    // op(A)[i][kk] = a[i a_i + kk a_k], op(B)[kk][j] = b[kk b_k + j b_j]; the long operand
    // L[x][kk] = l[x l_x + kk l_k], the short S[kk][y] = s[kk s_k + y s_y].
    const ulong a_i = trans_a ? 1 : k, a_k = trans_a ? m : 1;
    const ulong b_k = trans_b ? 1 : n, b_j = trans_b ? k : 1;
    // The host picks n as the short side whenever n <= 16: n <= sw exactly then.
    const bool short_is_n = n <= sw;
    __global const float* l = short_is_n ? a : b;
    const ulong l_x = short_is_n ? a_i : b_j, l_k = short_is_n ? a_k : b_k;
    __global const float* s = short_is_n ? b : a;
    const ulong s_k = short_is_n ? b_k : a_k, s_y = short_is_n ? b_j : a_i;
    const ulong long_n = short_is_n ? m : n, short_n = short_is_n ? n : m;
    const ulong k0 = (ulong)get_group_id(2) * k_chunk;
    const ulong k1 = min((ulong)k, k0 + k_chunk);
    const bool vec = l_k == 1 && l_x % 4 == 0 && (((ulong)l) & 15) == 0;
    const ulong tiles = (long_n + TH_X - 1) / TH_X;
    for (ulong tile = get_group_id(0); tile < tiles; tile += get_num_groups(0)) {
        const ulong x = tile * TH_X + lane;
        const bool x_in = x < long_n;
        __global const float* lx = l + (x_in ? x : 0) * l_x;
        float acc[TH_SHORT];
        for (uint y = 0; y < sw; ++y) acc[y] = 0.0f;
        // l_x == 1: segment w takes kk = w, w + 8, ... of a piece; else kk in [32 w, 32 w + 32).
        const bool x_contiguous = l_x == 1;
        const uint kb = warp * TH_PER_WARP;
        for (ulong p = k0; p < k1; p += TH_PIECE) {
            const uint len = (uint)min((ulong)TH_PIECE, k1 - p);
            // This work-item's L values first: in flight while the group stages S.
            float lv[TH_PER_WARP];
            if (!x_in) {
                for (int i = 0; i < TH_PER_WARP; ++i) lv[i] = 0.0f;
            } else if (x_contiguous) {
                for (int i = 0; i < TH_PER_WARP; ++i) {
                    const uint kk = warp + TH_WARPS * i;
                    lv[i] = kk < len ? lx[(p + kk) * l_k] : 0.0f;
                }
            } else if (vec && kb + TH_PER_WARP <= len) {
                for (int i = 0; i < TH_PER_WARP / 4; ++i) {
                    const float4 v = *RNN_CF4(lx + p + kb + 4 * i);
                    lv[4 * i + 0] = v.x;
                    lv[4 * i + 1] = v.y;
                    lv[4 * i + 2] = v.z;
                    lv[4 * i + 3] = v.w;
                }
            } else {
                for (int i = 0; i < TH_PER_WARP; ++i)
                    lv[i] = kb + i < len ? lx[(p + kb + i) * l_k] : 0.0f;
            }
            barrier(CLK_LOCAL_MEM_FENCE);
            // Unrolled over the group's fixed 256 work-items: all 16 loads in flight at once.
#pragma unroll
            for (uint j = 0; j < TH_PIECE * sw / 256; ++j) {
                const uint e = t + 256 * j;
                const uint kk = e / sw, y = e % sw;
                sh_s[e] =
                    (kk < len && y < short_n) ? s[(p + kk) * s_k + y * s_y] : 0.0f;
            }
            barrier(CLK_LOCAL_MEM_FENCE);
            if (bias_grad && tile == 0) {
                // Work-item t adds kk = t / sw, t / sw + 256 / sw, ... of column t % sw.
                for (uint kk = t / sw; kk < TH_PIECE; kk += 256 / sw)
                    bias_part += sh_s[kk * sw + t % sw];
            }
            if (x_contiguous) {
                for (int i = 0; i < TH_PER_WARP; ++i)
                    thin_fma(acc, lv[i], sh_s + (warp + TH_WARPS * i) * sw, sw);
            } else {
                for (int i = 0; i < TH_PER_WARP; ++i)
                    thin_fma(acc, lv[i], sh_s + (kb + i) * sw, sw);
            }
        }
        if (bias_grad && tile == 0) {
            // The 256 / sw partial sums of each column, added in order (sh_red is free here
            // and holds at least 256 floats).
            sh_red[t] = bias_part;
            barrier(CLK_LOCAL_MEM_FENCE);
            if (t < short_n) {
                float sum = 0.0f;
                for (uint g = 0; g < 256 / sw; ++g) sum += sh_red[g * sw + t];
                if (split) {
                    part[(ulong)m * n + t] = sum;
                } else {
                    bias[t] = sum;
                }
            }
            barrier(CLK_LOCAL_MEM_FENCE);
        }
        // sh_red[w][lane][y] at (w * TH_X + lane) * (sw + 1) + y.
        for (uint y = 0; y < sw; ++y) sh_red[(warp * TH_X + lane) * (sw + 1) + y] = acc[y];
        barrier(CLK_LOCAL_MEM_FENCE);
        for (uint e = t; e < TH_X * sw; e += 256) {
            const uint xl = e % TH_X, y = e / TH_X;
            const ulong xo = tile * TH_X + xl;
            if (xo < long_n && y < short_n) {
                float sum = 0.0f;
                for (int w = 0; w < TH_WARPS; ++w) sum += sh_red[(w * TH_X + xl) * (sw + 1) + y];
                const ulong at = short_is_n ? xo * n + y : (ulong)y * n + xo;
                if (split) {
                    part[at] = sum;
                } else if (epilogue == TH_BIAS_ACT) {
                    const float zv = sum + bias[y];
                    if (y_out != c) c[at] = zv;
                    y_out[at] = act_forward(zv, act, act_param);
                } else {
                    c[at] = (beta == 0.0f) ? alpha * sum : alpha * sum + beta * c[at];
                }
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
}

// The entries, one a short-side width (the host's choice: gemm_thin.rs); each declares its
// local arrays for its width (float4 ones where the rows are read as float4s).
#define THIN_ENTRY(NAME, SW, SH_S_TYPE)                                                          \
    __kernel __attribute__((reqd_work_group_size(256, 1, 1))) void NAME(                         \
        __global const float* a_base, ulong a_off, __global const float* b_base, ulong b_off,    \
        __global float* c_base, ulong c_off, __global float* part_base, ulong part_off,          \
        __global float* bias_base, ulong bias_off, __global float* y_base, ulong y_off, uint m,  \
        uint n, uint k, uint trans_a, uint trans_b, uint k_chunk, uint part_stride,              \
        uint epilogue, uint act, float alpha, float beta, float act_param) {                     \
        __local SH_S_TYPE sh_s[TH_PIECE * SW * sizeof(float) / sizeof(SH_S_TYPE)];               \
        __local float sh_red[TH_WARPS * TH_X * (SW + 1)];                                        \
        thin_body(a_base, a_off, b_base, b_off, c_base, c_off, part_base, part_off, bias_base,   \
                  bias_off, y_base, y_off, m, n, k, trans_a, trans_b, k_chunk, part_stride,      \
                  epilogue, act, alpha, beta, act_param, (__local float*)sh_s, sh_red, SW);      \
    }
THIN_ENTRY(sgemm_thin, TH_SHORT, float4)
THIN_ENTRY(sgemm_thin1, 1, float)

#define THK_ROWS 16
#define THK_THREADS 128

__kernel __attribute__((reqd_work_group_size(THK_THREADS, 1, 1)))
void sgemm_thin_k(__global const float* a_base, ulong a_off, __global const float* b_base,
                  ulong b_off, __global float* c_base, ulong c_off, uint m, uint n, uint k,
                  uint trans_a, uint trans_b, float alpha, float beta) {
    __local float sh_a[THK_ROWS][TH_SHORT];
    __global const float* a = a_base + a_off;
    __global const float* b = b_base + b_off;
    __global float* c = c_base + c_off;
    const uint t = get_local_id(0);
    const ulong col = ((ulong)get_group_id(0) * THK_THREADS + t) * 4;
    float bv[TH_SHORT][4];
    for (int kk = 0; kk < TH_SHORT; ++kk)
        for (int q = 0; q < 4; ++q) {
            const ulong j = col + q;
            bv[kk][q] = ((uint)kk < k && j < n) ? (trans_b ? b[j * k + kk] : b[(ulong)kk * n + j])
                                                : 0.0f;
        }
    const bool vec = n % 4 == 0 && (((ulong)c) & 15) == 0 && col + 3 < n;
    for (ulong r0 = (ulong)get_group_id(1) * THK_ROWS; r0 < m;
         r0 += (ulong)get_num_groups(1) * THK_ROWS) {
        barrier(CLK_LOCAL_MEM_FENCE);
#pragma unroll
        for (uint j = 0; j < THK_ROWS * TH_SHORT / THK_THREADS; ++j) {
            const uint e = t + THK_THREADS * j;
            const uint rl = e / TH_SHORT, kk = e % TH_SHORT;
            const ulong r = r0 + rl;
            sh_a[rl][kk] = (r < m && kk < k) ? (trans_a ? a[(ulong)kk * m + r] : a[r * k + kk])
                                             : 0.0f;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        if (col < n) {
            const uint rows = (uint)min((ulong)THK_ROWS, m - r0);
            for (uint rl = 0; rl < rows; ++rl) {
                float sv[4] = {0.0f, 0.0f, 0.0f, 0.0f};
                for (int kk = 0; kk < TH_SHORT; ++kk) {
                    const float av = sh_a[rl][kk];
                    for (int q = 0; q < 4; ++q) sv[q] += av * bv[kk][q];
                }
                __global float* cr = c + (r0 + rl) * n + col;
                if (vec) {
                    float4 v = (float4)(alpha * sv[0], alpha * sv[1], alpha * sv[2], alpha * sv[3]);
                    if (beta != 0.0f) v += beta * *RNN_CF4(cr);
                    *RNN_F4(cr) = v;
                } else {
                    for (int q = 0; q < 4; ++q)
                        if (col + q < n)
                            cr[q] = (beta == 0.0f) ? alpha * sv[q] : alpha * sv[q] + beta * cr[q];
                }
            }
        }
    }
}
