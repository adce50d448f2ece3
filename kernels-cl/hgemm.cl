// GEMM of bf16/f16 operands with f32 accumulation, the portable kernels of the OpenCL dialect:
// kernels-cu/hgemm.cu's design, entries, arguments and epilogues (described there), for every
// OpenCL device (PoCL included). T elements travel as their bits in ushort
// (kernels-common/half_convert.h); each entry exists per type (`_bf16`, `_f16`) and passes a
// constant kind that inlining folds. The transposes are uniform run-time branches.

#define HG_EPI_PLAIN 0u
#define HG_EPI_DENSE 1u
#define HG_EPI_ACT_GRAD 2u

#define HG_TILE 64
#define HG_BK 16
#define HG_THREADS 256
#define HG_LD (HG_TILE + 4)

// The k-tile at `kb` of one operand (64 rows of op(A) or columns of op(B), 16 deep) as f32 into
// the k-major local tile `xs`, zero outside rows [0, rows) and k [0, k_end). k_contig: the
// operand is stored rows x k, else k x rows.
inline void hg_load_tile(__local float* xs, __global const ushort* x, uint rows, uint k_end,
                         uint ld, uint b0, uint kb, bool k_contig, uint kind) {
    for (uint j = 0; j < HG_TILE * HG_BK / HG_THREADS; ++j) {
        const uint e = get_local_id(0) + j * HG_THREADS;
        const uint r = k_contig ? e / HG_BK : e % HG_TILE;
        const uint kk = k_contig ? e % HG_BK : e / HG_TILE;
        const uint gr = b0 + r, gk = kb + kk;
        float v = 0.0f;
        if (gr < rows && gk < k_end) {
            v = rnn_half_to_f32(k_contig ? x[(ulong)gr * ld + gk] : x[(ulong)gk * ld + gr], kind);
        }
        xs[kk * HG_LD + r] = v;
    }
}

// acc[i * 4 + j] = Σ_{k in [k0, k_end)} op(A)[bm + ty + 16 i][k] op(B)[k][bn + tx + 16 j].
inline void hg_product(__global const ushort* a, __global const ushort* b, uint m, uint n, uint k,
                       uint trans_a, uint trans_b, uint k0, uint k_end, float* acc,
                       __local float* as, __local float* bs, uint kind) {
    const uint bm = get_group_id(1) * HG_TILE, bn = get_group_id(0) * HG_TILE;
    const uint tx = get_local_id(0) % 16, ty = get_local_id(0) / 16;
    const uint lda = trans_a ? m : k, ldb = trans_b ? k : n;
    for (uint i = 0; i < 16; ++i) acc[i] = 0.0f;
    for (uint kb = k0; kb < k_end; kb += HG_BK) {
        hg_load_tile(as, a, m, k_end, lda, bm, kb, !trans_a, kind);
        hg_load_tile(bs, b, n, k_end, ldb, bn, kb, trans_b != 0, kind);
        barrier(CLK_LOCAL_MEM_FENCE);
        for (uint kk = 0; kk < HG_BK; ++kk) {
            float av[4], bv[4];
            for (uint i = 0; i < 4; ++i) av[i] = as[kk * HG_LD + ty + 16 * i];
            for (uint j = 0; j < 4; ++j) bv[j] = bs[kk * HG_LD + tx + 16 * j];
            for (uint i = 0; i < 4; ++i)
                for (uint j = 0; j < 4; ++j) acc[i * 4 + j] = fma(av[i], bv[j], acc[i * 4 + j]);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
}

inline void hgemm_f32_body(__global const ushort* a, __global const ushort* b, __global float* c,
                           __global float* part, uint m, uint n, uint k, uint trans_a,
                           uint trans_b, uint k_chunk, float alpha, float beta,
                           __local float* as, __local float* bs, uint kind) {
    const uint k0 = get_group_id(2) * k_chunk;
    float acc[16];
    hg_product(a, b, m, n, k, trans_a, trans_b, k0, min(k, k0 + k_chunk), acc, as, bs, kind);
    // With a k split, the group's own part, unscaled (sgemm_split_sum scales the sum).
    const bool split = get_num_groups(2) > 1;
    __global float* out = split ? part + (ulong)get_group_id(2) * m * n : c;
    const float a_s = split ? 1.0f : alpha, b_s = split ? 0.0f : beta;
    const uint row0 = get_group_id(1) * HG_TILE + get_local_id(0) / 16;
    const uint col0 = get_group_id(0) * HG_TILE + get_local_id(0) % 16;
    for (uint i = 0; i < 4; ++i)
        for (uint j = 0; j < 4; ++j) {
            const uint row = row0 + 16 * i, col = col0 + 16 * j;
            if (row < m && col < n) {
                __global float* p = out + (ulong)row * n + col;
                const float v = acc[i * 4 + j];
                *p = (b_s != 0.0f) ? a_s * v + b_s * *p : a_s * v;
            }
        }
}

// The T-typed outputs of an `hgemm_lo_*` launch and its epilogue (the portable kernels' and
// hgemm_tc.cl's).
typedef struct {
    __global ushort* c;
    __global const ushort* aux;
    __global ushort* y;
    uint epilogue;
    uint act;
    uint keep_z;
    float alpha;
    float beta;
    float act_param;
} HgLowOut;

// The sum `v` of output (row, col) through the launch's epilogue into its T outputs.
inline void hg_store_low(const HgLowOut* o, uint row, uint col, uint n, float v, uint kind) {
    const ulong e = (ulong)row * n + col;
    if (o->epilogue == HG_EPI_DENSE) {
        const ushort z = rnn_f32_to_half(v + rnn_half_to_f32(o->aux[col], kind), kind);
        if (o->keep_z) o->c[e] = z;
        o->y[e] =
            rnn_f32_to_half(act_forward(rnn_half_to_f32(z, kind), o->act, o->act_param), kind);
    } else if (o->epilogue == HG_EPI_ACT_GRAD) {
        const float d = act_grad(rnn_half_to_f32(o->aux[e], kind),
                                 rnn_half_to_f32(o->y[e], kind), o->act, o->act_param);
        o->c[e] = rnn_f32_to_half(v * d, kind);
    } else {
        float r = o->alpha * v;
        if (o->beta != 0.0f) r += o->beta * rnn_half_to_f32(o->c[e], kind);
        o->c[e] = rnn_f32_to_half(r, kind);
    }
}

inline void hgemm_low_body(__global const ushort* a, __global const ushort* b, const HgLowOut* o,
                           uint m, uint n, uint k, uint trans_a, uint trans_b, __local float* as,
                           __local float* bs, uint kind) {
    float acc[16];
    hg_product(a, b, m, n, k, trans_a, trans_b, 0, k, acc, as, bs, kind);
    const uint row0 = get_group_id(1) * HG_TILE + get_local_id(0) / 16;
    const uint col0 = get_group_id(0) * HG_TILE + get_local_id(0) % 16;
    for (uint i = 0; i < 4; ++i)
        for (uint j = 0; j < 4; ++j) {
            const uint row = row0 + 16 * i, col = col0 + 16 * j;
            if (row < m && col < n) hg_store_low(o, row, col, n, acc[i * 4 + j], kind);
        }
}

// The HgLowOut of an `hgemm_lo_*` entry's arguments.
#define HG_LOW_OUT                                                                              \
    {c_base + c_off, aux_base + aux_off, y_base + y_off, epilogue, act, keep_z, alpha, beta,    \
     act_param}

#define HG_F32_ENTRY(NAME, KIND)                                                                \
    __kernel __attribute__((reqd_work_group_size(HG_THREADS, 1, 1))) void NAME(                 \
        __global const ushort* a_base, ulong a_off, __global const ushort* b_base, ulong b_off, \
        __global float* c_base, ulong c_off, __global float* part_base, ulong part_off, uint m, \
        uint n, uint k, uint trans_a, uint trans_b, uint k_chunk, float alpha, float beta) {    \
        __local float as[HG_BK * HG_LD];                                                        \
        __local float bs[HG_BK * HG_LD];                                                        \
        hgemm_f32_body(a_base + a_off, b_base + b_off, c_base + c_off, part_base + part_off, m, \
                       n, k, trans_a, trans_b, k_chunk, alpha, beta, as, bs, KIND);             \
    }

#define HG_LOW_ENTRY(NAME, KIND)                                                                \
    __kernel __attribute__((reqd_work_group_size(HG_THREADS, 1, 1))) void NAME(                 \
        __global const ushort* a_base, ulong a_off, __global const ushort* b_base, ulong b_off, \
        __global ushort* c_base, ulong c_off, __global const ushort* aux_base, ulong aux_off,   \
        __global ushort* y_base, ulong y_off, uint m, uint n, uint k, uint trans_a,             \
        uint trans_b, uint epilogue, uint act, uint keep_z, float alpha, float beta,            \
        float act_param) {                                                                      \
        __local float as[HG_BK * HG_LD];                                                        \
        __local float bs[HG_BK * HG_LD];                                                        \
        const HgLowOut o = HG_LOW_OUT;                                                          \
        hgemm_low_body(a_base + a_off, b_base + b_off, &o, m, n, k, trans_a, trans_b, as, bs,   \
                       KIND);                                                                   \
    }

HG_F32_ENTRY(hgemm_bf16, RNN_KIND_BF16)
HG_F32_ENTRY(hgemm_f16, RNN_KIND_F16)
HG_LOW_ENTRY(hgemm_lo_bf16, RNN_KIND_BF16)
HG_LOW_ENTRY(hgemm_lo_f16, RNN_KIND_F16)

// Column sums of a T matrix into f32: kernels-cu/hgemm.cu's `hcol_sum_*` (work-group (32, 8)
// over a strip of 32 columns and a chunk of `chunk_rows` rows, the chunks added in order by the
// last group of the strip to arrive). No early return, every barrier reached by all work-items
// (PoCL, see rnn_last_arrival).
inline void hcol_sum_body(__global const ushort* x, __global float* out, __global float* part,
                          __global uint* tickets, uint rows, uint cols, uint chunk_rows,
                          float beta, __local float* sums, __local uint* flag, uint kind) {
    const uint tx = get_local_id(0), ty = get_local_id(1);
    const uint chunks = get_num_groups(1);
    const uint c = get_group_id(0) * 32 + tx;
    const ulong r1 = min((ulong)rows, (ulong)get_group_id(1) * chunk_rows + chunk_rows);
    float s = 0.0f;
    if (c < cols) {
        for (ulong r = (ulong)get_group_id(1) * chunk_rows + ty; r < r1; r += 8)
            s += rnn_half_to_f32(x[r * cols + c], kind);
    }
    sums[ty * 33 + tx] = s;
    barrier(CLK_LOCAL_MEM_FENCE);
    float t = 0.0f;
    for (uint i = 0; i < 8; ++i) t += sums[i * 33 + tx];
    const bool owner = ty == 0 && c < cols;
    if (chunks > 1 && owner) {
        part[(ulong)get_group_id(1) * cols + c] = t;
        mem_fence(CLK_GLOBAL_MEM_FENCE);
    }
    const bool last = rnn_last_arrival(tickets + get_group_id(0), chunks, flag);
    float u = 0.0f;
    if (last && chunks > 1 && c < cols)
        for (uint j = ty; j < chunks; j += 8) u += rnn_load_coherent(part + (ulong)j * cols + c);
    barrier(CLK_LOCAL_MEM_FENCE);  // every work-item has read sums above
    sums[ty * 33 + tx] = u;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (last && owner) {
        float v = t;
        if (chunks > 1) {
            v = 0.0f;
            for (uint i = 0; i < 8; ++i) v += sums[i * 33 + tx];
        }
        out[c] = (beta != 0.0f) ? v + beta * out[c] : v;
    }
}

#define HCOL_SUM_ENTRY(NAME, KIND)                                                              \
    __kernel __attribute__((reqd_work_group_size(32, 8, 1))) void NAME(                         \
        __global const ushort* x_base, ulong x_off, __global float* out_base, ulong out_off,    \
        __global float* part_base, ulong part_off, __global uint* ticket_base,                  \
        ulong ticket_off, uint rows, uint cols, uint chunk_rows, float beta) {                  \
        __local float sums[8 * 33];                                                             \
        __local uint flag;                                                                      \
        hcol_sum_body(x_base + x_off, out_base + out_off, part_base + part_off,                 \
                      ticket_base + ticket_off, rows, cols, chunk_rows, beta, sums, &flag,      \
                      KIND);                                                                    \
    }

HCOL_SUM_ENTRY(hcol_sum_bf16, RNN_KIND_BF16)
HCOL_SUM_ENTRY(hcol_sum_f16, RNN_KIND_F16)
