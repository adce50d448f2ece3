// What the f32 GEMMs (gemm.cu, gemm_thin.cu, gemm_tc.cu, gemm_wg.cu) and the bf16/f16 GEMMs
// (hgemm.cu, hgemm_tc.cu) share: where a block's f32 results go and how they are stored, and
// (CUDA sm_80+) the asynchronous global -> shared copies. It is the first file of the three
// GEMM families' modules, so the whole op set's translation unit has it three times: the guard
// keeps the later copies out.

#ifndef RNN_GEMM_COMMON_CUH
#define RNN_GEMM_COMMON_CUH

// Where a block's results go: C, scaled by alpha and beta; with a k split (gridDim.z > 1), the
// block's own slice of `part`, unscaled (sgemm_split_sum scales the sum). `pair`: `out` takes
// float2 stores (8-byte aligned, n even).
struct TcOut {
    float* out;
    float a_s;
    float b_s;
    bool pair;
};

__device__ __forceinline__ TcOut tc_out(float* C, float* part, uint m, uint n, float alpha,
                                        float beta) {
    const bool split = gridDim.z > 1;
    TcOut o;
    o.out = split ? part + (u64)blockIdx.z * m * n : C;
    o.a_s = split ? 1.0f : alpha;
    o.b_s = split ? 0.0f : beta;
    o.pair = ((u64)o.out % 8 == 0) && (n % 2 == 0);
    return o;
}

// Stores v0 and v1 (alpha already applied) into p[0] and p[1], columns col and col + 1 of an
// n-wide row, adding beta times what is there (beta = 0: p is not read, so it may hold NaN).
// `pair`: p may be written as one float2 (8-byte aligned, n even).
__device__ __forceinline__ void tc_store_pair(float* p, float v0, float v1, float beta, bool pair,
                                              uint col, uint n) {
    if (pair && col + 1 < n) {
        if (beta != 0.0f) {
            const float2 o = *reinterpret_cast<const float2*>(p);
            v0 += beta * o.x;
            v1 += beta * o.y;
        }
        *reinterpret_cast<float2*>(p) = make_float2(v0, v1);
    } else {
        if (col < n) p[0] = (beta != 0.0f) ? v0 + beta * p[0] : v0;
        if (col + 1 < n) p[1] = (beta != 0.0f) ? v1 + beta * p[1] : v1;
    }
}

// Stores 4 results (acc, scaled by alpha, plus beta times what is there) at columns col.. of
// row `row` of the m x n matrix C, as a float4 where `vec` (rows 16-byte aligned): the SIMT
// tile GEMM's (gemm.cu) and sgemm_thin_k's stores.
__device__ __forceinline__ void sg_store_c(float* __restrict__ C, uint row, uint col, uint m,
                                           uint n, const float* acc, float alpha, float beta,
                                           bool vec) {
    if (row >= m) return;
    float* p = C + (u64)row * n + col;
    if (vec && col + 3 < n) {
        float4 o = make_float4(alpha * acc[0], alpha * acc[1], alpha * acc[2], alpha * acc[3]);
        if (beta != 0.0f) {
            const float4 c = *reinterpret_cast<const float4*>(p);
            o.x += beta * c.x;
            o.y += beta * c.y;
            o.z += beta * c.z;
            o.w += beta * c.w;
        }
        *reinterpret_cast<float4*>(p) = o;
    } else {
        for (uint q = 0; q < 4; ++q) {
            if (col + q < n) p[q] = (beta != 0.0f) ? alpha * acc[q] + beta * p[q] : alpha * acc[q];
        }
    }
}

#if !defined(RNN_HIP) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800

__device__ __forceinline__ unsigned tc_smem_addr(const void* p) {
    return (unsigned)__cvta_generic_to_shared(p);
}

// 16 bytes global -> shared, or 16 zero bytes when !in (no global read then).
__device__ __forceinline__ void tc_copy16(void* dst, const void* src, bool in) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(tc_smem_addr(dst)),
                 "l"(src), "r"(in ? 16 : 0));
}

__device__ __forceinline__ void tc_commit() { asm volatile("cp.async.commit_group;\n" ::); }

template <int N>
__device__ __forceinline__ void tc_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// Copies a ROWS x COLS tile of a row-major matrix of E (leading dimension ld, rows [row0,
// row_lim), columns [col0, col_lim)) into shared memory with row stride `sld`, zero outside, in
// 16-byte chunks along the rows. The caller guarantees 16-byte aligned chunks (base, ld and
// col0 multiples of a chunk) and a col_lim at a chunk boundary, so a chunk is wholly inside or
// wholly outside.
template <typename E, int ROWS, int COLS, int THREADS>
__device__ __forceinline__ void tc_load_chunks(E* dst, int sld, const E* __restrict__ src,
                                               uint ld, uint row0, uint row_lim, uint col0,
                                               uint col_lim) {
    constexpr int PER = 16 / sizeof(E);
    constexpr int CHUNKS = ROWS * COLS / PER;
    static_assert(CHUNKS % THREADS == 0, "whole chunks per thread");
#pragma unroll
    for (int j = 0; j < CHUNKS / THREADS; ++j) {
        const int c = threadIdx.x + j * THREADS;
        const uint r = c / (COLS / PER), cc = (c % (COLS / PER)) * PER;
        const uint gr = row0 + r, gc = col0 + cc;
        const bool in = gr < row_lim && gc < col_lim;
        tc_copy16(dst + r * sld + cc, in ? src + (u64)gr * ld + gc : src, in);
    }
}

#endif  // CUDA sm_80+

#endif  // RNN_GEMM_COMMON_CUH
