// Elementwise kernels (geometry V: the helpers are in stream.cuh).

extern "C" __global__ void fill(float* y_base, u64 y_off, uint n, float value) {
    float* y = y_base + y_off;
    u64 done = 0;
    if (rnn_aligned16(y)) {
        float4* y4 = (float4*)y;
        const float4 v4 = make_float4(value, value, value, value);
        for (u64 i = rnn_tid(); i < n / 4; i += rnn_threads()) y4[i] = v4;
        done = n / 4 * 4;
    }
    for (u64 i = done + rnn_tid(); i < n; i += rnn_threads()) y[i] = value;
}

#ifndef RNN_TIER0_COPIES  // not among tier 0's copies (kernel.rs TIER0_COPIES)
extern "C" __global__ void scale(float* x_base, u64 x_off, uint n, float alpha) {
    float* x = x_base + x_off;
    rnn_stream1(x, x, n, [=](float v) { return v * alpha; });
}

extern "C" __global__ void axpy(const float* x_base, u64 x_off, float* y_base, u64 y_off, uint n,
                                float alpha) {
    const float* x = x_base + x_off;
    float* y = y_base + y_off;
    rnn_stream2(x, y, y, n, [=](float xv, float yv) { return yv + alpha * xv; });
}

// `out` may be the same view as `a` or `b`: each element is read before it is written by the
// same thread, so no __restrict__ here.
extern "C" __global__ void add(const float* a_base, u64 a_off, const float* b_base, u64 b_off,
                               float* out_base, u64 out_off, uint n) {
    rnn_stream2(a_base + a_off, b_base + b_off, out_base + out_off, n,
                [](float av, float bv) { return av + bv; });
}

extern "C" __global__ void mul(const float* a_base, u64 a_off, const float* b_base, u64 b_off,
                               float* out_base, u64 out_off, uint n) {
    rnn_stream2(a_base + a_off, b_base + b_off, out_base + out_off, n,
                [](float av, float bv) { return av * bv; });
}
#endif

// z += bias (broadcast over rows), y = act(z). The host has checked that rows * cols fits a
// uint, so the column index is tracked in 32 bits.
__device__ __forceinline__ void rnn_bias_act(float* z, const float* bias, float* y, uint n,
                                             uint cols, uint act, float p) {
    u64 done = 0;
    const bool same = z == y;
    if (rnn_aligned16(z) && rnn_aligned16(y)) {
        float4* z4 = (float4*)z;
        float4* y4 = (float4*)y;
        struct V { float4 a; };
        // The bias is small and stays in cache; its four columns may wrap past the row end.
#define RNN_L(k, v)                                                   \
    {                                                                 \
        uint c_ = (uint)(4 * (k)) % cols;                             \
        v.a = z4[k];                                                  \
        v.a.x += bias[c_]; c_ = c_ + 1 == cols ? 0 : c_ + 1;          \
        v.a.y += bias[c_]; c_ = c_ + 1 == cols ? 0 : c_ + 1;          \
        v.a.z += bias[c_]; c_ = c_ + 1 == cols ? 0 : c_ + 1;          \
        v.a.w += bias[c_];                                            \
    }
// In place (y is z) only y is stored: the pre-activation is not kept then.
#define RNN_S(k, v)                                                           \
    {                                                                         \
        if (!same) z4[k] = v.a;                                               \
        y4[k] = rnn_act_forward4(v.a, act, p);                                \
    }
        RNN_VEC_LOOP(n, V, RNN_L, RNN_S)
#undef RNN_L
#undef RNN_S
        done = n / 4 * 4;
    }
    for (u64 i = done + rnn_tid(); i < n; i += rnn_threads()) {
        const float v = z[i] + bias[i % cols];
        z[i] = v;
        y[i] = rnn_act_forward1(v, act, p);
    }
}

// Four blocks an SM (at most 64 registers): the streaming grid of a 4096 x 512 layer (512
// blocks) is then one wave on 132 SMs, where three blocks an SM took two.
extern "C" __global__ void __launch_bounds__(256, 4) bias_act_forward(float* z_base, u64 z_off, const float* bias_base,
                                            u64 bias_off, float* y_base, u64 y_off, uint rows,
                                            uint cols, uint act, float act_param) {
    float* z = z_base + z_off;
    const float* bias = bias_base + bias_off;
    float* y = y_base + y_off;
    const uint n = rows * cols;
    rnn_bias_act(z, bias, y, n, cols, act, act_param);
}

#ifndef RNN_TIER0_COPIES  // not among tier 0's copies (kernel.rs TIER0_COPIES)
extern "C" __global__ void activation(const float* x_base, u64 x_off, float* y_base, u64 y_off,
                                      uint n, uint act, float act_param) {
    rnn_stream1_4(
        x_base + x_off, y_base + y_off, n,
        [=](float4 v) { return rnn_act_forward4(v, act, act_param); },
        [=](float v) { return rnn_act_forward1(v, act, act_param); });
}

// dz = dy * act'(z or y). z is only read for the activations whose derivative needs it (the op
// contract lets callers pass y in its place otherwise).
extern "C" __global__ void act_backward(const float* dy_base, u64 dy_off, const float* z_base,
                                        u64 z_off, const float* y_base, u64 y_off,
                                        float* dz_base, u64 dz_off, uint n, uint act,
                                        float act_param) {
    const float* a = (act == ACT_GELU || act == ACT_LEAKY) ? z_base + z_off : y_base + y_off;
    rnn_stream2_4(
        dy_base + dy_off, a, dz_base + dz_off, n,
        [=](float4 g, float4 av) {
            return rnn_map4(g, rnn_act_grad4(av, av, act, act_param),
                            [](float gi, float d) { return gi * d; });
        },
        [=](float g, float av) { return g * rnn_act_grad1(av, av, act, act_param); });
}
#endif

extern "C" __global__ void clip_scale(float* x_base, u64 x_off, const float* norm_base,
                                      u64 norm_off, uint n, float max_norm) {
    float* x = x_base + x_off;
    const float norm = norm_base[norm_off];
    const float s = fminf(1.0f, max_norm / (norm + 1e-6f));
    RNN_GRID_LOOP(i, n) x[i] *= s;
}

// The body of the row gathers over `src_base`/`idx_base`/`dst_base` (elements of type T): a
// row whose index is invalid (rnn_valid_index over src_rows) becomes `invalid`, since a kernel
// cannot return an error and must never read outside `src`.
#define RNN_GATHER_ROWS_BODY(T, invalid)                                                        \
    const T* src = src_base + src_off;                                                          \
    const uint* idx = idx_base + idx_off;                                                       \
    T* dst = dst_base + dst_off;                                                                \
    const u64 n = (u64)nrows * cols;                                                            \
    RNN_GRID_LOOP(i, n) {                                                                       \
        const u64 r = i / cols;                                                                 \
        const u64 c = i - r * cols;                                                             \
        const uint v = idx[r];                                                                  \
        dst[i] = rnn_valid_index(v, src_rows) ? src[(u64)v * cols + c] : (invalid);            \
    }

// Float rows: a NaN row for an invalid index.
extern "C" __global__ void gather_rows(const float* src_base, u64 src_off, const uint* idx_base,
                                       u64 idx_off, float* dst_base, u64 dst_off, uint nrows,
                                       uint cols, uint src_rows) {
    RNN_GATHER_ROWS_BODY(float, RNN_NAN)
}

// u32 rows (labels, token ids moved with their samples): a row of RNN_INVALID_INDEX, itself an
// invalid index further on.
extern "C" __global__ void gather_rows_u32(const uint* src_base, u64 src_off,
                                           const uint* idx_base, u64 idx_off, uint* dst_base,
                                           u64 dst_off, uint nrows, uint cols, uint src_rows) {
    RNN_GATHER_ROWS_BODY(uint, RNN_INVALID_INDEX)
}

#ifndef RNN_TIER0_COPIES  // not among tier 0's copies (kernel.rs TIER0_COPIES)
extern "C" __global__ void one_hot(const uint* idx_base, u64 idx_off, float* out_base,
                                   u64 out_off, uint n, uint classes) {
    const uint* idx = idx_base + idx_off;
    float* out = out_base + out_off;
    const u64 total = (u64)n * classes;
    RNN_GRID_LOOP(i, total) {
        const u64 r = i / classes;
        const u64 c = i - r * classes;
        const uint v = idx[r];
        // An invalid index (rnn_valid_index) gives an all-zero row, as on the CPU.
        out[i] = (rnn_valid_index(v, classes) && (u64)v == c) ? 1.0f : 0.0f;
    }
}
#endif
