// Kernels of the 16-bit float types (bf16, f16): a T view is a `ushort` pointer to the bits,
// converted by kernels-common/half_convert.h. Each op's body is written once and stamped per
// type by an entry macro (entries `_bf16`, `_f16`), the constant `KIND` folding the choice.

// Casts between f32, bf16 and f16 (geometry V): cast_<from>_<to>, groups of four moved whole
// (stream.cuh's rnn_stream1_as: a float4 or an 8-byte uint2) where both views start on one, a
// scalar loop for the rest; the same conversions on either path.
#define RNN_CAST_TO_HALF(NAME, KIND) extern "C" __global__ void NAME(const float* x_base,   \
        u64 x_off, ushort* y_base, u64 y_off, uint n) {                                     \
    rnn_stream1_as<float4, uint2>(                                                         \
        x_base + x_off, y_base + y_off, n,                                                  \
        [](float4 v) { return rnn_f32_to_half4(v, KIND); },                                 \
        [](float v) { return rnn_f32_to_half(v, KIND); });                                  \
}
#define RNN_CAST_FROM_HALF(NAME, KIND) extern "C" __global__ void NAME(const ushort* x_base, \
        u64 x_off, float* y_base, u64 y_off, uint n) {                                       \
    rnn_stream1_as<uint2, float4>(                                                          \
        x_base + x_off, y_base + y_off, n,                                                   \
        [](uint2 h) { return rnn_half4_to_f32(h, KIND); },                                   \
        [](ushort h) { return rnn_half_to_f32(h, KIND); });                                  \
}
#define RNN_CAST_HALF(NAME, FROM, TO) extern "C" __global__ void NAME(const ushort* x_base,    \
        u64 x_off, ushort* y_base, u64 y_off, uint n) {                                      \
    rnn_stream1_as<uint2, uint2>(                                                           \
        x_base + x_off, y_base + y_off, n,                                                   \
        [](uint2 h) { return rnn_f32_to_half4(rnn_half4_to_f32(h, FROM), TO); },             \
        [](ushort h) { return rnn_f32_to_half(rnn_half_to_f32(h, FROM), TO); });             \
}
RNN_CAST_TO_HALF(cast_f32_bf16, RNN_KIND_BF16)
RNN_CAST_TO_HALF(cast_f32_f16, RNN_KIND_F16)
RNN_CAST_FROM_HALF(cast_bf16_f32, RNN_KIND_BF16)
RNN_CAST_FROM_HALF(cast_f16_f32, RNN_KIND_F16)
RNN_CAST_HALF(cast_bf16_f16, RNN_KIND_BF16, RNN_KIND_F16)
RNN_CAST_HALF(cast_f16_bf16, RNN_KIND_F16, RNN_KIND_BF16)

// Elementwise ops and activations over T views (geometry E; the f32 entries are elementwise.cu's,
// same parameters): each element read as f32, the f32 kernel's arithmetic, the result rounded
// to T. `__fmul_rn` keeps axpy's product from contracting into a multiply-add, so the rounded
// results are the CPU backend's bit for bit.
#define RNN_LD(p, i, KIND) rnn_half_to_f32((p)[i], KIND)
#define RNN_SCALE_T(NAME, KIND) extern "C" __global__ void NAME(ushort* x_base, u64 x_off,     \
        uint n, float alpha) {                                                                 \
    ushort* x = x_base + x_off;                                                                \
    RNN_GRID_LOOP(i, n) x[i] = rnn_f32_to_half(RNN_LD(x, i, KIND) * alpha, KIND);             \
}
#define RNN_AXPY_T(NAME, KIND) extern "C" __global__ void NAME(const ushort* x_base, u64 x_off, \
        ushort* y_base, u64 y_off, uint n, float alpha) {                                      \
    const ushort* x = x_base + x_off;                                                          \
    ushort* y = y_base + y_off;                                                                \
    RNN_GRID_LOOP(i, n) {                                                                      \
        y[i] = rnn_f32_to_half(RNN_LD(y, i, KIND) + __fmul_rn(alpha, RNN_LD(x, i, KIND)), KIND); \
    }                                                                                          \
}
// `out` may be the same view as `a` or `b`: each element is read before it is written.
#define RNN_BINARY_T(NAME, KIND, PRODUCT) extern "C" __global__ void NAME(const ushort* a_base, \
        u64 a_off, const ushort* b_base, u64 b_off, ushort* out_base, u64 out_off, uint n) {  \
    const ushort* a = a_base + a_off;                                                          \
    const ushort* b = b_base + b_off;                                                          \
    ushort* out = out_base + out_off;                                                          \
    RNN_GRID_LOOP(i, n) {                                                                      \
        const float av = RNN_LD(a, i, KIND), bv = RNN_LD(b, i, KIND);                          \
        out[i] = rnn_f32_to_half(PRODUCT ? av * bv : av + bv, KIND);                           \
    }                                                                                          \
}
#define RNN_ACTIVATION_T(NAME, KIND) extern "C" __global__ void NAME(const ushort* x_base,      \
        u64 x_off, ushort* y_base, u64 y_off, uint n, uint act, float act_param) {             \
    const ushort* x = x_base + x_off;                                                          \
    ushort* y = y_base + y_off;                                                                \
    RNN_GRID_LOOP(i, n) y[i] = rnn_f32_to_half(act_forward(RNN_LD(x, i, KIND), act, act_param), KIND); \
}
// z is read only where the derivative needs it (callers may pass y in its place otherwise).
#define RNN_ACT_BACKWARD_T(NAME, KIND) extern "C" __global__ void NAME(const ushort* dy_base,   \
        u64 dy_off, const ushort* z_base, u64 z_off, const ushort* y_base, u64 y_off,          \
        ushort* dz_base, u64 dz_off, uint n, uint act, float act_param) {                      \
    const ushort* dy = dy_base + dy_off;                                                       \
    const ushort* z = z_base + z_off;                                                          \
    const ushort* y = y_base + y_off;                                                          \
    ushort* dz = dz_base + dz_off;                                                             \
    const bool reads_z = act == ACT_GELU || act == ACT_LEAKY;                                  \
    RNN_GRID_LOOP(i, n) {                                                                      \
        const float zi = reads_z ? RNN_LD(z, i, KIND) : 0.0f;                                  \
        const float g = act_grad(zi, RNN_LD(y, i, KIND), act, act_param);                      \
        dz[i] = rnn_f32_to_half(RNN_LD(dy, i, KIND) * g, KIND);                                \
    }                                                                                          \
}
// z += bias (broadcast over rows), y = act(z) from the unrounded sum; in place (y is z) only y
// is stored.
#define RNN_BIAS_ACT_T(NAME, KIND) extern "C" __global__ void NAME(ushort* z_base, u64 z_off,    \
        const ushort* bias_base, u64 bias_off, ushort* y_base, u64 y_off, uint rows, uint cols, \
        uint act, float act_param) {                                                           \
    ushort* z = z_base + z_off;                                                                \
    const ushort* bias = bias_base + bias_off;                                                 \
    ushort* y = y_base + y_off;                                                                \
    const bool same = z == y;                                                                  \
    RNN_GRID_LOOP(i, rows * cols) {                                                            \
        const float v = RNN_LD(z, i, KIND) + RNN_LD(bias, i % cols, KIND);                      \
        if (!same) z[i] = rnn_f32_to_half(v, KIND);                                            \
        y[i] = rnn_f32_to_half(act_forward(v, act, act_param), KIND);                          \
    }                                                                                          \
}
RNN_SCALE_T(scale_bf16, RNN_KIND_BF16)
RNN_SCALE_T(scale_f16, RNN_KIND_F16)
RNN_AXPY_T(axpy_bf16, RNN_KIND_BF16)
RNN_AXPY_T(axpy_f16, RNN_KIND_F16)
RNN_BINARY_T(add_bf16, RNN_KIND_BF16, false)
RNN_BINARY_T(add_f16, RNN_KIND_F16, false)
RNN_BINARY_T(mul_bf16, RNN_KIND_BF16, true)
RNN_BINARY_T(mul_f16, RNN_KIND_F16, true)
RNN_ACTIVATION_T(activation_bf16, RNN_KIND_BF16)
RNN_ACTIVATION_T(activation_f16, RNN_KIND_F16)
RNN_ACT_BACKWARD_T(act_backward_bf16, RNN_KIND_BF16)
RNN_ACT_BACKWARD_T(act_backward_f16, RNN_KIND_F16)
RNN_BIAS_ACT_T(bias_act_forward_bf16, RNN_KIND_BF16)
RNN_BIAS_ACT_T(bias_act_forward_f16, RNN_KIND_F16)
