// GEMM of bf16/f16 operands with f32 accumulation (issue 28's op layer), the portable kernels
// of the CUDA and HIP dialects (kernels-cl/hgemm.cl is the same design in OpenCL C), and the
// epilogues the tensor-core kernels (hgemm_tc.cu, CUDA sm_80+) share with them. The f32
// outputs go through gemm_common.cuh's TcOut.
//
// A, B (and a T-typed C) hold the bits of their values (kernels-common/half_convert.h); each
// entry is stamped out per type with the suffix `_bf16` or `_f16` and a constant `KIND`
// (RNN_KIND_BF16 / RNN_KIND_F16), which inlining folds. Two output forms:
// - `hgemm_*` (the `T` arguments of `sgemm_tc128`): C is f32, `C = alpha op(A)op(B) + beta C`
//   (beta = 0: C is not read); with grid z > 1 block z stores its k range's raw sum in part[z]
//   and `sgemm_split_sum` adds the parts (the weight gradient `dW = dz^T x` of a dense layer).
// - `hgemm_lo_*`: C is T, the f32 result rounded once, by `epilogue`: HG_EPI_PLAIN
//   `C = alpha op(A)op(B) + beta C`; HG_EPI_DENSE (`Ops::dense_forward`) `z = Σ + bias[col]`
//   rounded, stored unless `keep_z` is 0 (y is z), then `y = act(z)` rounded (act of the rounded
//   z, as an unfused bias + activation over a stored z computes it); HG_EPI_ACT_GRAD
//   (`Ops::bias_act_backward_product`) `dz = Σ * act'(z, y)` rounded, `aux` being z.
//
// Portable tile: 64 x 64 outputs, k-steps of 16, 256 threads with 4 x 4 outputs each (rows
// ty + 16 i, columns tx + 16 j, so that a warp's stores are contiguous). Operands are converted
// to f32 on their way into shared memory; one barrier pair per k-step.

#define HG_EPI_PLAIN 0u
#define HG_EPI_DENSE 1u
#define HG_EPI_ACT_GRAD 2u

#define HG_TILE 64
#define HG_BK 16
#define HG_THREADS 256
#define HG_LD (HG_TILE + 4)

// One f32 result of an `hgemm_*` block (alpha applied here) into gemm_common.cuh's TcOut.
__device__ __forceinline__ void hg_store_f32(const TcOut& o, uint row, uint col, uint n, float v) {
    float* p = o.out + (u64)row * n + col;
    *p = (o.b_s != 0.0f) ? o.a_s * v + o.b_s * *p : o.a_s * v;
}

// The T-typed outputs of an `hgemm_lo_*` launch and its epilogue (see the top of the file).
struct HgLowOut {
    ushort* c;
    const ushort* aux;
    ushort* y;
    uint epilogue;
    uint act;
    uint keep_z;
    float alpha;
    float beta;
    float act_param;
};

template <uint KIND>
__device__ __forceinline__ void hg_store_low(const HgLowOut& o, uint row, uint col, uint n,
                                             float v) {
    const u64 i = (u64)row * n + col;
    if (o.epilogue == HG_EPI_DENSE) {
        const ushort z = rnn_f32_to_half(v + rnn_half_to_f32(o.aux[col], KIND), KIND);
        if (o.keep_z) o.c[i] = z;
        o.y[i] = rnn_f32_to_half(act_forward(rnn_half_to_f32(z, KIND), o.act, o.act_param), KIND);
    } else if (o.epilogue == HG_EPI_ACT_GRAD) {
        const float d = act_grad(rnn_half_to_f32(o.aux[i], KIND), rnn_half_to_f32(o.y[i], KIND),
                                 o.act, o.act_param);
        o.c[i] = rnn_f32_to_half(v * d, KIND);
    } else {
        float r = o.alpha * v;
        if (o.beta != 0.0f) r += o.beta * rnn_half_to_f32(o.c[i], KIND);
        o.c[i] = rnn_f32_to_half(r, KIND);
    }
}

// The k-tile at `kb` of one operand (64 rows of op(A) or columns of op(B), 16 deep) as f32 into
// the k-major shared tile `Xs`, zero outside rows [0, rows) and k [0, k_end). K_CONTIG: the
// operand is stored rows x k (A, or B transposed), else k x rows.
template <uint KIND, bool K_CONTIG>
__device__ __forceinline__ void hg_load_tile(float* Xs, const ushort* __restrict__ X, uint rows,
                                             uint k_end, uint ld, uint b0, uint kb) {
#pragma unroll
    for (int j = 0; j < HG_TILE * HG_BK / HG_THREADS; ++j) {
        const uint e = threadIdx.x + j * HG_THREADS;
        const uint r = K_CONTIG ? e / HG_BK : e % HG_TILE;
        const uint kk = K_CONTIG ? e % HG_BK : e / HG_TILE;
        const uint gr = b0 + r, gk = kb + kk;
        float v = 0.0f;
        if (gr < rows && gk < k_end) {
            v = rnn_half_to_f32(K_CONTIG ? X[(u64)gr * ld + gk] : X[(u64)gk * ld + gr], KIND);
        }
        Xs[kk * HG_LD + r] = v;
    }
}

// acc[i][j] = Σ_{k in [k0, k_end)} op(A)[bm + ty + 16 i][k] op(B)[k][bn + tx + 16 j].
template <uint KIND, bool TA, bool TB>
__device__ __forceinline__ void hg_product(const ushort* __restrict__ A,
                                           const ushort* __restrict__ B, uint m, uint n, uint k,
                                           uint k0, uint k_end, float (&acc)[4][4], float* As,
                                           float* Bs) {
    const uint bm = blockIdx.y * HG_TILE, bn = blockIdx.x * HG_TILE;
    const uint tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    const uint lda = TA ? m : k, ldb = TB ? k : n;
    for (uint kb = k0; kb < k_end; kb += HG_BK) {
        hg_load_tile<KIND, !TA>(As, A, m, k_end, lda, bm, kb);
        hg_load_tile<KIND, TB>(Bs, B, n, k_end, ldb, bn, kb);
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < HG_BK; ++kk) {
            float a[4], b[4];
#pragma unroll
            for (int i = 0; i < 4; ++i) a[i] = As[kk * HG_LD + ty + 16 * i];
#pragma unroll
            for (int j = 0; j < 4; ++j) b[j] = Bs[kk * HG_LD + tx + 16 * j];
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        __syncthreads();
    }
}

template <uint KIND>
__device__ __forceinline__ void hg_product_any(const ushort* A, const ushort* B, uint m, uint n,
                                               uint k, uint trans_a, uint trans_b, uint k0,
                                               uint k_end, float (&acc)[4][4]) {
    // Declared once here: a __shared__ array in hg_product would be allocated once per
    // transpose case.
    __shared__ float As[HG_BK * HG_LD];
    __shared__ float Bs[HG_BK * HG_LD];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = 0.0f;
    if (trans_a) {
        if (trans_b) {
            hg_product<KIND, true, true>(A, B, m, n, k, k0, k_end, acc, As, Bs);
        } else {
            hg_product<KIND, true, false>(A, B, m, n, k, k0, k_end, acc, As, Bs);
        }
    } else {
        if (trans_b) {
            hg_product<KIND, false, true>(A, B, m, n, k, k0, k_end, acc, As, Bs);
        } else {
            hg_product<KIND, false, false>(A, B, m, n, k, k0, k_end, acc, As, Bs);
        }
    }
}

// Calls `store(row, col, acc[i][j])` for each of the thread's results inside the m x n output.
template <typename Store>
__device__ __forceinline__ void hg_each_result(const float (&acc)[4][4], uint m, uint n,
                                               Store store) {
    const uint row0 = blockIdx.y * HG_TILE + threadIdx.x / 16;
    const uint col0 = blockIdx.x * HG_TILE + threadIdx.x % 16;
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const uint row = row0 + 16 * i, col = col0 + 16 * j;
            if (row < m && col < n) store(row, col, acc[i][j]);
        }
}

template <uint KIND>
__device__ __forceinline__ void hgemm_f32_body(const ushort* A, const ushort* B, float* C,
                                               float* part, uint m, uint n, uint k, uint trans_a,
                                               uint trans_b, uint k_chunk, float alpha,
                                               float beta) {
    const uint k0 = blockIdx.z * k_chunk;
    float acc[4][4];
    hg_product_any<KIND>(A, B, m, n, k, trans_a, trans_b, k0, min(k, k0 + k_chunk), acc);
    const TcOut o = tc_out(C, part, m, n, alpha, beta);
    hg_each_result(acc, m, n, [&](uint row, uint col, float v) { hg_store_f32(o, row, col, n, v); });
}

template <uint KIND>
__device__ __forceinline__ void hgemm_low_body(const ushort* A, const ushort* B, const HgLowOut& o,
                                               uint m, uint n, uint k, uint trans_a,
                                               uint trans_b) {
    float acc[4][4];
    hg_product_any<KIND>(A, B, m, n, k, trans_a, trans_b, 0, k, acc);
    hg_each_result(acc, m, n,
                   [&](uint row, uint col, float v) { hg_store_low<KIND>(o, row, col, n, v); });
}

#define HG_F32_ENTRY(NAME, KIND)                                                                \
    extern "C" __global__ void __launch_bounds__(HG_THREADS)                                    \
        NAME(const ushort* a_base, u64 a_off, const ushort* b_base, u64 b_off, float* c_base,   \
             u64 c_off, float* part_base, u64 part_off, uint m, uint n, uint k, uint trans_a,   \
             uint trans_b, uint k_chunk, float alpha, float beta) {                             \
        hgemm_f32_body<KIND>(a_base + a_off, b_base + b_off, c_base + c_off,                    \
                             part_base + part_off, m, n, k, trans_a, trans_b, k_chunk, alpha,   \
                             beta);                                                             \
    }

__device__ __forceinline__ HgLowOut hg_low_out(ushort* c, const ushort* aux, ushort* y,
                                               uint epilogue, uint act, uint keep_z, float alpha,
                                               float beta, float act_param) {
    HgLowOut o;
    o.c = c;
    o.aux = aux;
    o.y = y;
    o.epilogue = epilogue;
    o.act = act;
    o.keep_z = keep_z;
    o.alpha = alpha;
    o.beta = beta;
    o.act_param = act_param;
    return o;
}

#define HG_LOW_OUT                                                                              \
    hg_low_out(c_base + c_off, aux_base + aux_off, y_base + y_off, epilogue, act, keep_z, alpha, \
               beta, act_param)

#define HG_LOW_ENTRY(NAME, KIND)                                                                \
    extern "C" __global__ void __launch_bounds__(HG_THREADS)                                    \
        NAME(const ushort* a_base, u64 a_off, const ushort* b_base, u64 b_off, ushort* c_base,  \
             u64 c_off, const ushort* aux_base, u64 aux_off, ushort* y_base, u64 y_off, uint m, \
             uint n, uint k, uint trans_a, uint trans_b, uint epilogue, uint act, uint keep_z,  \
             float alpha, float beta, float act_param) {                                        \
        hgemm_low_body<KIND>(a_base + a_off, b_base + b_off, HG_LOW_OUT, m, n, k, trans_a,      \
                             trans_b);                                                          \
    }

#if !defined(RNN_HIP)
// Packed pairs of T (CUDA only): the tensor-core epilogues (hgemm_tc.cu) and hgemm_epilogue_*
// round and store a pair of neighbouring results at a time, two T in one 32-bit word (the
// lower column in the low half).

// Two f32 values rounded to nearest even into a packed pair of T, `lo` in the low half. From
// sm_80 on with the conversion instruction: the same bits as half_convert.h's rounding for
// every value but NaN payloads, in one instruction instead of a dozen per value, which is what
// keeps an epilogue from costing more than the product; before sm_80 half_convert.h's.
template <uint KIND>
__device__ __forceinline__ unsigned ht_pack2(float lo, float hi) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    unsigned r;
    if (KIND == RNN_KIND_BF16) {
        asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
    } else {
        asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
    }
    return r;
#else
    return (unsigned)rnn_f32_to_half(lo, KIND) | ((unsigned)rnn_f32_to_half(hi, KIND) << 16);
#endif
}

// The low (`hi` false) or high half of a packed pair of T as f32 (exact).
template <uint KIND>
__device__ __forceinline__ float ht_unpack(unsigned pair, bool hi) {
    const unsigned short h = (unsigned short)(hi ? pair >> 16 : pair & 0xffffu);
    if (KIND == RNN_KIND_BF16) return __uint_as_float((unsigned)h << 16);
    float f;
    asm("cvt.f32.f16 %0, %1;\n" : "=f"(f) : "h"(h));
    return f;
}

// hg_store_low's arithmetic on the pair of results v0, v1 (columns col, col + 1), over packed
// words: `aux` the bias pair (dense) or z (act grad), `y_in` y (act grad), `c_in` C (plain
// with beta != 0); `c` the pair for C (z, dz or C), `y` the activations (dense only).
template <uint KIND>
__device__ __forceinline__ void ht_epilogue_pair(const HgLowOut& o, float v0, float v1,
                                                 unsigned aux, unsigned y_in, unsigned c_in,
                                                 unsigned& c, unsigned& y) {
    y = 0u;
    if (o.epilogue == HG_EPI_DENSE) {
        c = ht_pack2<KIND>(v0 + ht_unpack<KIND>(aux, false), v1 + ht_unpack<KIND>(aux, true));
        y = ht_pack2<KIND>(act_forward(ht_unpack<KIND>(c, false), o.act, o.act_param),
                           act_forward(ht_unpack<KIND>(c, true), o.act, o.act_param));
    } else if (o.epilogue == HG_EPI_ACT_GRAD) {
        const float d0 = act_grad(ht_unpack<KIND>(aux, false), ht_unpack<KIND>(y_in, false),
                                  o.act, o.act_param);
        const float d1 =
            act_grad(ht_unpack<KIND>(aux, true), ht_unpack<KIND>(y_in, true), o.act, o.act_param);
        c = ht_pack2<KIND>(v0 * d0, v1 * d1);
    } else {
        float r0 = o.alpha * v0, r1 = o.alpha * v1;
        if (o.beta != 0.0f) {
            r0 += o.beta * ht_unpack<KIND>(c_in, false);
            r1 += o.beta * ht_unpack<KIND>(c_in, true);
        }
        c = ht_pack2<KIND>(r0, r1);
    }
}

// W packed words of T (2W elements from an element index that is a multiple of 2W): one 4-byte
// (W = 1) or 8-byte (W = 2) access.
template <int W>
struct HtWords {
    unsigned w[W];
};

template <int W>
__device__ __forceinline__ HtWords<W> ht_load_words(const ushort* p, u64 i) {
    HtWords<W> r;
    if (W == 2) {
        const uint2 q = *reinterpret_cast<const uint2*>(p + i);
        r.w[0] = q.x;
        r.w[W - 1] = q.y;
    } else {
        r.w[0] = *reinterpret_cast<const unsigned*>(p + i);
    }
    return r;
}

template <int W>
__device__ __forceinline__ void ht_store_words(ushort* p, u64 i, const HtWords<W>& r) {
    if (W == 2) {
        *reinterpret_cast<uint2*>(p + i) = make_uint2(r.w[0], r.w[W - 1]);
    } else {
        *reinterpret_cast<unsigned*>(p + i) = r.w[0];
    }
}

// The epilogues of `hgemm_lo_*` on the 2W results `v` at columns col .. col + 2W - 1 of a row
// (element index i), all inside the output, every T pointer aligned to 2W elements there (and
// the bias at col): hg_store_low's arithmetic, a pair at a time, W-word loads and stores.
template <uint KIND, int W>
__device__ __forceinline__ void ht_store_low_words(const HgLowOut& o, u64 i, uint col,
                                                   const float* v) {
    const bool dense = o.epilogue == HG_EPI_DENSE, grad = o.epilogue == HG_EPI_ACT_GRAD;
    HtWords<W> aux = {}, y_in = {}, c_in = {}, c, y;
    if (dense) {
        aux = ht_load_words<W>(o.aux, col);
    } else if (grad) {
        aux = ht_load_words<W>(o.aux, i);
        y_in = ht_load_words<W>(o.y, i);
    } else if (o.beta != 0.0f) {
        c_in = ht_load_words<W>(o.c, i);
    }
#pragma unroll
    for (int q = 0; q < W; ++q) {
        ht_epilogue_pair<KIND>(o, v[2 * q], v[2 * q + 1], aux.w[q], y_in.w[q], c_in.w[q], c.w[q],
                               y.w[q]);
    }
    if (!dense || o.keep_z) ht_store_words<W>(o.c, i, c);
    if (dense) ht_store_words<W>(o.y, i, y);
}

// A pair of results at columns col, col + 1 (both inside the output, every pointer at an even
// element index).
template <uint KIND>
__device__ __forceinline__ void ht_store_low_pair(const HgLowOut& o, u64 i, uint col, float v0,
                                                  float v1) {
    const float v[2] = {v0, v1};
    ht_store_low_words<KIND, 1>(o, i, col, v);
}

// The `hgemm_lo_*` epilogues over a product the vendor library has summed into f32 (`sum`,
// rows x cols, geometry V; CUDA only, where cuBLAS takes the product and these kernels round
// it): element i is the kernels' result at row i / cols, column i % cols, so z, y and dz get
// the same single rounding as in the fused kernels. `aux` is the bias (epilogue 1, indexed by
// column) or z (epilogue 2, indexed by element). rows * cols fits 32 bits (the host's blocks of
// rows stay within its scratch), so rows and columns come from 32-bit divisions. Where cols is
// a multiple of 4, `sum` 16-byte aligned and every T pointer 8-byte aligned, four results move
// at a time (a float4 of the sum, 8-byte words of T; RNN_VEC_UNROLL in flight per thread);
// otherwise one.
template <uint KIND>
__device__ __forceinline__ void hg_epilogue_stream(const HgLowOut& o, const float* sum,
                                                   uint rows, uint cols) {
    const uint n = rows * cols;
    const u64 low_ptrs = (u64)o.c | (u64)o.aux | (u64)o.y;
    if (cols % 4u == 0u && rnn_aligned16(sum) && (low_ptrs & 7ull) == 0ull) {
        const float4* sum4 = reinterpret_cast<const float4*>(sum);
        struct V { float4 s; };
#define HG_L(k, e) e.s = sum4[k]
#define HG_S(k, e)                                                    \
    {                                                                 \
        const uint i_ = 4u * (uint)(k);                               \
        const float r_[4] = {e.s.x, e.s.y, e.s.z, e.s.w};             \
        ht_store_low_words<KIND, 2>(o, i_, i_ % cols, r_);            \
    }
        RNN_VEC_LOOP(n, V, HG_L, HG_S)
#undef HG_L
#undef HG_S
        return;
    }
    for (u64 i = rnn_tid(); i < n; i += rnn_threads()) {
        const uint row = (uint)i / cols;
        hg_store_low<KIND>(o, row, (uint)i - row * cols, cols, sum[i]);
    }
}

#define HG_EPILOGUE_ENTRY(NAME, KIND)                                                           \
    extern "C" __global__ void NAME(const float* sum_base, u64 sum_off, ushort* c_base,         \
                                    u64 c_off, const ushort* aux_base, u64 aux_off,             \
                                    ushort* y_base, u64 y_off, uint rows, uint cols,            \
                                    uint epilogue, uint act, uint keep_z, float alpha,          \
                                    float beta, float act_param) {                              \
        hg_epilogue_stream<KIND>(HG_LOW_OUT, sum_base + sum_off, rows, cols);                   \
    }
HG_EPILOGUE_ENTRY(hgemm_epilogue_bf16, RNN_KIND_BF16)
HG_EPILOGUE_ENTRY(hgemm_epilogue_f16, RNN_KIND_F16)
#endif

HG_F32_ENTRY(hgemm_bf16, RNN_KIND_BF16)
HG_F32_ENTRY(hgemm_f16, RNN_KIND_F16)
HG_LOW_ENTRY(hgemm_lo_bf16, RNN_KIND_BF16)
HG_LOW_ENTRY(hgemm_lo_f16, RNN_KIND_F16)

// Column sums of a T matrix into f32 (geometry C: block (32, 8) over a strip of 32 columns and
// a chunk of `chunk_rows` rows, blockIdx.y): `out[c] = Σ_r x[r][c] + beta out[c]` (beta = 0:
// out is not read), the bias gradient of `Ops::dense_param_grads` and
// `Ops::bias_act_backward_product`. Each column of a chunk is summed by 8 threads over rows
// ty, ty + 8, ... and their sums added in row order; with one chunk the block writes `out`,
// otherwise it stores its sums in `part[chunk * cols + col]` and the last block of the strip to
// arrive (one ticket per strip, geometry L) adds the chunks in order, so the sum does not
// depend on the arrival order and a tall matrix is read by many blocks, not one per strip.
template <uint KIND>
__device__ __forceinline__ void hcol_sum_body(const ushort* __restrict__ x, float* __restrict__ out,
                                              float* part, uint* tickets, uint rows, uint cols,
                                              uint chunk_rows, float beta) {
    __shared__ float sums[8][33];
    const uint c = blockIdx.x * 32 + threadIdx.x;
    const u64 r1 = min((u64)rows, (u64)blockIdx.y * chunk_rows + chunk_rows);
    float s = 0.0f;
    if (c < cols) {
        for (u64 r = (u64)blockIdx.y * chunk_rows + threadIdx.y; r < r1; r += 8)
            s += rnn_half_to_f32(x[r * cols + c], KIND);
    }
    sums[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    float t = 0.0f;
#pragma unroll
    for (int i = 0; i < 8; ++i) t += sums[i][threadIdx.x];
    const bool owner = threadIdx.y == 0 && c < cols;
    if (gridDim.y > 1 && owner) {
        part[(u64)blockIdx.y * cols + c] = t;
        __threadfence();
    }
    if (!rnn_last_arrival(tickets + blockIdx.x, gridDim.y)) return;
    float u = 0.0f;
    if (gridDim.y > 1 && c < cols)
        for (uint j = threadIdx.y; j < gridDim.y; j += 8)
            u += rnn_load_coherent(part + (u64)j * cols + c);
    sums[threadIdx.y][threadIdx.x] = u;
    __syncthreads();
    if (owner) {
        float v = t;
        if (gridDim.y > 1) {
            v = 0.0f;
#pragma unroll
            for (int i = 0; i < 8; ++i) v += sums[i][threadIdx.x];
        }
        out[c] = (beta != 0.0f) ? v + beta * out[c] : v;
    }
}

#define HCOL_SUM_ENTRY(NAME, KIND)                                                              \
    extern "C" __global__ void __launch_bounds__(256)                                           \
        NAME(const ushort* x_base, u64 x_off, float* out_base, u64 out_off, float* part_base,   \
             u64 part_off, uint* ticket_base, u64 ticket_off, uint rows, uint cols,             \
             uint chunk_rows, float beta) {                                                     \
        hcol_sum_body<KIND>(x_base + x_off, out_base + out_off, part_base + part_off,           \
                            ticket_base + ticket_off, rows, cols, chunk_rows, beta);            \
    }

HCOL_SUM_ENTRY(hcol_sum_bf16, RNN_KIND_BF16)
HCOL_SUM_ENTRY(hcol_sum_f16, RNN_KIND_F16)
