// Thin GEMMs (geometry H of docs/kernel-abi.md): row-major C = alpha * op(A) op(B) + beta * C
// where one side is at most 16 wide. Such products move bytes, not FLOPs (a classifier head:
// 4096 x 10 x 512), and tile kernels spend them on tiles that are mostly padding.
//
// sgemm_thin (k > 16, n <= 16 or m <= 16): the "long" operand L[x][kk] has one entry per long
// output index x (rows of C when n <= 16, columns when m <= 16) and the "short" one S[kk][y] at
// most 16 values per kk. A block owns 32 x (one per lane) over its k range: piece by piece,
// S[kk][0..16] is staged in shared memory and each warp sums 32 kk of the piece into 16
// accumulators per thread (S read as broadcast float4s); the 8 warps' sums are then added in
// warp order (deterministic). With grid z > 1, block z sums k in [z k_chunk, (z+1) k_chunk)
// into part[z] (the T contract) and sgemm_split_sum adds the parts.
// sgemm_thin1: the same for a short side of 1 (a matrix-vector product, as a recurrent step's
// product at batch 1): 16 accumulators a thread spend 16 times the FMAs and the staging one
// column needs, and at batch 1 the 16-wide kernel moved W_hh at about half the rate of
// cuBLAS's GEMV (H100, 2026-12-07). Each width is another instantiation of the body (about
// 0.8 s more of NVRTC for the family on a 2-core host), hence only these two.
// sgemm_thin_k (k <= 16): a thread keeps op(B)[0..k][4 columns] in registers and writes 4
// columns of 16 rows, whose op(A) values are staged in shared memory: a pass over C.
//
// No warp primitives: the same code serves HIP's 64-wide wavefronts.

#define TH_SHORT 16   // widest short side
#define TH_X 32       // long indices per block, one per lane
#define TH_WARPS 8    // k groups per block (256 threads)
#define TH_PIECE 256  // k values staged at once; k chunks are multiples of it
#define TH_PER_WARP (TH_PIECE / TH_WARPS)
#define TH_THREADS (TH_X * TH_WARPS)

struct ThinOperands {
    const float* l;  // long operand: L[x][kk] = l[x * l_x + kk * l_k]
    u64 l_x, l_k;
    const float* s;  // short operand: S[kk][y] = s[kk * s_k + y * s_y]
    u64 s_k, s_y;
    u64 long_n, short_n;
    bool short_is_n;  // C[x][y] (n <= 16) or C[y][x] (m <= 16)
};

// SHORT: the widest short side of the kernel (16 or 1); the host picks n as the short side
// whenever n <= 16, so n <= SHORT exactly when n is the short side here.
template <int SHORT>
__device__ __forceinline__ ThinOperands thin_operands(const float* a, const float* b, uint m,
                                                     uint n, uint k, uint ta, uint tb) {
    ThinOperands o;
    o.short_is_n = n <= SHORT;
    // op(A)[i][kk] = a[i * a_i + kk * a_k], op(B)[kk][j] = b[kk * b_k + j * b_j].
    const u64 a_i = ta ? 1 : k, a_k = ta ? m : 1;
    const u64 b_k = tb ? 1 : n, b_j = tb ? k : 1;
    if (o.short_is_n) {
        o.l = a; o.l_x = a_i; o.l_k = a_k;
        o.s = b; o.s_k = b_k; o.s_y = b_j;
        o.long_n = m; o.short_n = n;
    } else {
        o.l = b; o.l_x = b_j; o.l_k = b_k;
        o.s = a; o.s_k = a_k; o.s_y = a_i;
        o.long_n = n; o.short_n = m;
    }
    return o;
}

// acc[y] += l * srow[y] for y < SHORT; srow is 16-byte aligned when SHORT is a multiple of 4
// (read as broadcast float4s then).
template <int SHORT>
__device__ __forceinline__ void thin_fma(float (&acc)[SHORT], float l, const float* srow) {
    if (SHORT % 4 == 0) {
#pragma unroll
        for (int q = 0; q < SHORT / 4; ++q) {
            const float4 s = reinterpret_cast<const float4*>(srow)[q];
            acc[4 * q + 0] += l * s.x;
            acc[4 * q + 1] += l * s.y;
            acc[4 * q + 2] += l * s.z;
            acc[4 * q + 3] += l * s.w;
        }
    } else {
#pragma unroll
        for (int y = 0; y < SHORT; ++y) acc[y] += l * srow[y];
    }
}

// Epilogues of sgemm_thin (a dense layer's work around its product, saving a launch):
// TH_PLAIN stores C; TH_BIAS_ACT (unsplit, short n) adds bias[y] to each sum, stores it in C
// (the pre-activation z) unless y_out is C, and act(z) in y_out; TH_BIAS_GRAD (short m)
// also sums the short operand over the block's k range, the bias gradient of a layer whose
// weight gradient this is: into bias[y] unsplit, else into part[z][m n + y] (part_stride is
// then m n + m, so that one sgemm_split_sum adds weight and bias parts when the bias directly
// follows C in memory).
#define TH_PLAIN 0
#define TH_BIAS_ACT 1
#define TH_BIAS_GRAD 2

template <int SHORT>
__device__ __forceinline__ void thin_body(const float* a_base, u64 a_off, const float* b_base,
                                          u64 b_off, float* c_base, u64 c_off, float* part_base,
                                          u64 part_off, float* bias_base, u64 bias_off,
                                          float* y_base, u64 y_off, uint m, uint n, uint k,
                                          uint trans_a, uint trans_b, uint k_chunk,
                                          uint part_stride, uint epilogue, uint act, float alpha,
                                          float beta, float act_param) {
    __shared__ __align__(16) float sh_s[TH_PIECE * SHORT];
    __shared__ float sh_red[TH_WARPS][TH_X][SHORT + 1];
    const ThinOperands o = thin_operands<SHORT>(a_base + a_off, b_base + b_off, m, n, k,
                                                trans_a, trans_b);
    float* c = c_base + c_off;
    float* part = part_base + part_off + (u64)blockIdx.z * part_stride;
    float* bias = bias_base + bias_off;
    float* y_out = y_base + y_off;
    // The bias gradient is summed by the blocks of the first tile, TH_THREADS / SHORT threads a
    // column.
    const bool bias_grad = epilogue == TH_BIAS_GRAD && blockIdx.x == 0;
    float bias_part = 0.0f;
    const bool split = gridDim.z > 1;
    const uint lane = threadIdx.x % TH_X, warp = threadIdx.x / TH_X;
    const u64 k0 = (u64)blockIdx.z * k_chunk;
    const u64 k1 = min((u64)k, k0 + k_chunk);
    // float4 loads of L along kk: kk contiguous, rows and base 16-byte aligned (pieces start
    // at multiples of 4).
    const bool vec = o.l_k == 1 && o.l_x % 4 == 0 && ((size_t)o.l & 15) == 0;
    const u64 tiles = (o.long_n + TH_X - 1) / TH_X;
    for (u64 tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        const u64 x = tile * TH_X + lane;
        const bool x_in = x < o.long_n;
        const float* lx = o.l + (x_in ? x : 0) * o.l_x;
        float acc[SHORT];
#pragma unroll
        for (int y = 0; y < SHORT; ++y) acc[y] = 0.0f;
        // x contiguous: warp w takes kk = w, w + 8, ... of a piece (a warp reads 128 bytes per
        // kk); kk contiguous: kk in [32 w, 32 w + 32), each thread along its own row.
        const bool x_contiguous = o.l_x == 1;
        const uint kb = warp * TH_PER_WARP;
        for (u64 p = k0; p < k1; p += TH_PIECE) {
            const uint len = (uint)min((u64)TH_PIECE, k1 - p);
            // This thread's L values of the piece first: their loads are in flight while the
            // block stages S.
            float l[TH_PER_WARP];
            if (!x_in) {
#pragma unroll
                for (int i = 0; i < TH_PER_WARP; ++i) l[i] = 0.0f;
            } else if (x_contiguous) {
#pragma unroll
                for (int i = 0; i < TH_PER_WARP; ++i) {
                    const uint kk = warp + TH_WARPS * i;
                    l[i] = kk < len ? lx[(p + kk) * o.l_k] : 0.0f;
                }
            } else if (vec && kb + TH_PER_WARP <= len) {
#pragma unroll
                for (int i = 0; i < TH_PER_WARP / 4; ++i) {
                    const float4 v = *reinterpret_cast<const float4*>(lx + p + kb + 4 * i);
                    l[4 * i + 0] = v.x;
                    l[4 * i + 1] = v.y;
                    l[4 * i + 2] = v.z;
                    l[4 * i + 3] = v.w;
                }
            } else {
#pragma unroll
                for (int i = 0; i < TH_PER_WARP; ++i)
                    l[i] = kb + i < len ? lx[(p + kb + i) * o.l_k] : 0.0f;
            }
            __syncthreads();  // the previous piece is consumed
            // Unrolled over the block's fixed 256 threads, so all 16 loads are in flight at
            // once (a loop over blockDim.x issued them one latency apart).
#pragma unroll
            for (uint j = 0; j < TH_PIECE * SHORT / TH_THREADS; ++j) {
                const uint e = threadIdx.x + j * TH_THREADS;
                const uint kk = e / SHORT, y = e % SHORT;
                sh_s[e] =
                    (kk < len && y < o.short_n) ? o.s[(p + kk) * o.s_k + y * o.s_y] : 0.0f;
            }
            __syncthreads();
            if (bias_grad && tile == 0) {
                // Thread t adds kk = t / SHORT, t / SHORT + 256 / SHORT, ... of column
                // t % SHORT.
#pragma unroll
                for (uint kk = threadIdx.x / SHORT; kk < TH_PIECE; kk += TH_THREADS / SHORT)
                    bias_part += sh_s[kk * SHORT + threadIdx.x % SHORT];
            }
            if (x_contiguous) {
#pragma unroll
                for (int i = 0; i < TH_PER_WARP; ++i)
                    thin_fma<SHORT>(acc, l[i], &sh_s[(warp + TH_WARPS * i) * SHORT]);
            } else {
#pragma unroll
                for (int i = 0; i < TH_PER_WARP; ++i)
                    thin_fma<SHORT>(acc, l[i], &sh_s[(kb + i) * SHORT]);
            }
        }
        if (bias_grad && tile == 0) {
            // The 256 / SHORT partial sums of each column, added in order (sh_red is free here
            // and holds at least 256 floats).
            float* flat = &sh_red[0][0][0];
            flat[threadIdx.x] = bias_part;
            __syncthreads();
            if (threadIdx.x < o.short_n) {
                float sum = 0.0f;
                for (uint g = 0; g < TH_THREADS / SHORT; ++g) sum += flat[g * SHORT + threadIdx.x];
                if (split) {
                    part[(u64)m * n + threadIdx.x] = sum;
                } else {
                    bias[threadIdx.x] = sum;
                }
            }
            __syncthreads();
        }
#pragma unroll
        for (int y = 0; y < SHORT; ++y) sh_red[warp][lane][y] = acc[y];
        __syncthreads();
#pragma unroll
        for (uint e = threadIdx.x; e < TH_X * SHORT; e += TH_THREADS) {
            const uint xl = e % TH_X, y = e / TH_X;
            const u64 xo = tile * TH_X + xl;
            if (xo >= o.long_n || y >= o.short_n) continue;
            float s = 0.0f;
#pragma unroll
            for (int w = 0; w < TH_WARPS; ++w) s += sh_red[w][xl][y];
            const u64 at = o.short_is_n ? xo * n + y : (u64)y * n + xo;
            if (split) {
                part[at] = s;
            } else if (epilogue == TH_BIAS_ACT) {
                const float zv = s + bias[y];
                if (y_out != c) c[at] = zv;
                y_out[at] = act_forward(zv, act, act_param);
            } else {
                c[at] = (beta == 0.0f) ? alpha * s : alpha * s + beta * c[at];
            }
        }
        __syncthreads();  // sh_red is read before the next tile writes it
    }
}

// The entries, one a short-side width (the host's choice: gemm_thin.rs).
#define THIN_ENTRY(NAME, SHORT)                                                                  \
    extern "C" __global__ void __launch_bounds__(TH_THREADS)                                     \
        NAME(const float* a_base, u64 a_off, const float* b_base, u64 b_off, float* c_base,     \
             u64 c_off, float* part_base, u64 part_off, float* bias_base, u64 bias_off,         \
             float* y_base, u64 y_off, uint m, uint n, uint k, uint trans_a, uint trans_b,      \
             uint k_chunk, uint part_stride, uint epilogue, uint act, float alpha, float beta,  \
             float act_param) {                                                                  \
        thin_body<SHORT>(a_base, a_off, b_base, b_off, c_base, c_off, part_base, part_off,      \
                         bias_base, bias_off, y_base, y_off, m, n, k, trans_a, trans_b, k_chunk, \
                         part_stride, epilogue, act, alpha, beta, act_param);                    \
    }
THIN_ENTRY(sgemm_thin, TH_SHORT)
THIN_ENTRY(sgemm_thin1, 1)

#define THK_ROWS 16
#define THK_THREADS 128

extern "C" __global__ void __launch_bounds__(THK_THREADS)
    sgemm_thin_k(const float* a_base, u64 a_off, const float* b_base, u64 b_off, float* c_base,
                 u64 c_off, uint m, uint n, uint k, uint trans_a, uint trans_b, float alpha,
                 float beta) {
    __shared__ float sh_a[THK_ROWS][TH_SHORT];
    const float* a = a_base + a_off;
    const float* b = b_base + b_off;
    float* c = c_base + c_off;
    const u64 col = ((u64)blockIdx.x * THK_THREADS + threadIdx.x) * 4;
    float bv[TH_SHORT][4];
#pragma unroll
    for (int kk = 0; kk < TH_SHORT; ++kk)
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            const u64 j = col + q;
            bv[kk][q] = ((uint)kk < k && j < n) ? (trans_b ? b[j * k + kk] : b[(u64)kk * n + j])
                                                : 0.0f;
        }
    // sg_store_c (gemm_common.cuh) stores 4 columns, a float4 where rows stay 16-byte aligned.
    const bool vec = n % 4 == 0 && (((size_t)c) & 15) == 0;
    for (u64 r0 = (u64)blockIdx.y * THK_ROWS; r0 < m; r0 += (u64)gridDim.y * THK_ROWS) {
        __syncthreads();
#pragma unroll
        for (uint e = threadIdx.x; e < THK_ROWS * TH_SHORT; e += THK_THREADS) {
            const uint rl = e / TH_SHORT, kk = e % TH_SHORT;
            const u64 r = r0 + rl;
            sh_a[rl][kk] = (r < m && kk < k) ? (trans_a ? a[(u64)kk * m + r] : a[r * k + kk])
                                             : 0.0f;
        }
        __syncthreads();
        if (col >= n) continue;
        const uint rows = (uint)min((u64)THK_ROWS, m - r0);
        for (uint rl = 0; rl < rows; ++rl) {
            float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
            for (int kk = 0; kk < TH_SHORT; ++kk) {
                const float av = sh_a[rl][kk];
#pragma unroll
                for (int q = 0; q < 4; ++q) s[q] += av * bv[kk][q];
            }
            sg_store_c(c, (uint)(r0 + rl), (uint)col, m, n, s, alpha, beta, vec);
        }
    }
}

// C[i] = alpha * sum_z part[z][i] + beta * C[i] over i < mn (beta = 0: C not read), in z order,
// so the result does not depend on which block finished first. Geometry E. Every CUDA and HIP
// build has it (the thin GEMMs split k on any device).
extern "C" __global__ void sgemm_split_sum(const float* part_base, u64 part_off,
                                           float* c_base, u64 c_off, uint mn, uint splits,
                                           float alpha, float beta) {
    const float* part = part_base + part_off;
    float* c = c_base + c_off;
    RNN_GRID_LOOP(i, mn) {
        float s = 0.0f;
        // Unrolled so that several parts are loaded at once; still added in z order.
#pragma unroll 8
        for (uint z = 0; z < splits; ++z) s += part[(u64)z * mn + i];
        c[i] = (beta == 0.0f) ? alpha * s : alpha * s + beta * c[i];
    }
}
