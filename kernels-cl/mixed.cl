// Kernels of the 16-bit float types (bf16, f16): a T view is a `ushort` pointer to the bits,
// converted by kernels-common/half_convert.h. Each op's body is written once and stamped per
// type by an entry macro (entries `_bf16`, `_f16`), the constant `KIND` folding the choice.

#pragma OPENCL FP_CONTRACT OFF

// Casts between f32, bf16 and f16 (geometry V): cast_<from>_<to>. Where both view offsets are
// multiples of 4, groups of four move whole (float4s and ushort4s through RNN_STREAM's vector
// loop, converted to f32 on the way in); a scalar loop covers the rest. The same conversions on
// either path. The loads and stores below name the kernels' `x`, `y` and `kind_from`/`kind_to`.
#define RNN_CAST_LD_F32(k, v) v.a = RNN_CF4(x)[k]
#define RNN_CAST_LD_HALF(k, v) v.a = rnn_half4_to_f32(RNN_CH4(x)[k], kind_from)
#define RNN_CAST_ST_F32(k, v) RNN_F4(y)[k] = v.a
#define RNN_CAST_ST_HALF(k, v) RNN_H4(y)[k] = rnn_f32_to_half4(v.a, kind_to)
#define RNN_CAST_TO_HALF(NAME, KIND) __kernel void NAME(__global const float* x_base,    \
        ulong x_off, __global ushort* y_base, ulong y_off, uint n) {                     \
    __global const float* x = x_base + x_off;                                            \
    __global ushort* y = y_base + y_off;                                                 \
    const uint kind_to = KIND;                                                           \
    RNN_STREAM(n, ((x_off | y_off) & 3) == 0, rnn_v1, RNN_CAST_LD_F32, RNN_CAST_ST_HALF, \
               RNN_CAST_ONE_TO_HALF)                                                     \
}
#define RNN_CAST_FROM_HALF(NAME, KIND) __kernel void NAME(__global const ushort* x_base, \
        ulong x_off, __global float* y_base, ulong y_off, uint n) {                      \
    __global const ushort* x = x_base + x_off;                                           \
    __global float* y = y_base + y_off;                                                  \
    const uint kind_from = KIND;                                                         \
    RNN_STREAM(n, ((x_off | y_off) & 3) == 0, rnn_v1, RNN_CAST_LD_HALF, RNN_CAST_ST_F32, \
               RNN_CAST_ONE_FROM_HALF)                                                   \
}
#define RNN_CAST_HALF(NAME, FROM, TO) __kernel void NAME(__global const ushort* x_base,  \
        ulong x_off, __global ushort* y_base, ulong y_off, uint n) {                     \
    __global const ushort* x = x_base + x_off;                                           \
    __global ushort* y = y_base + y_off;                                                 \
    const uint kind_from = FROM, kind_to = TO;                                           \
    RNN_STREAM(n, ((x_off | y_off) & 3) == 0, rnn_v1, RNN_CAST_LD_HALF, RNN_CAST_ST_HALF,\
               RNN_CAST_ONE_HALF)                                                        \
}
#define RNN_CAST_ONE_TO_HALF(i) y[i] = rnn_f32_to_half(x[i], kind_to)
#define RNN_CAST_ONE_FROM_HALF(i) y[i] = rnn_half_to_f32(x[i], kind_from)
#define RNN_CAST_ONE_HALF(i) y[i] = rnn_f32_to_half(rnn_half_to_f32(x[i], kind_from), kind_to)
RNN_CAST_TO_HALF(cast_f32_bf16, RNN_KIND_BF16)
RNN_CAST_TO_HALF(cast_f32_f16, RNN_KIND_F16)
RNN_CAST_FROM_HALF(cast_bf16_f32, RNN_KIND_BF16)
RNN_CAST_FROM_HALF(cast_f16_f32, RNN_KIND_F16)
RNN_CAST_HALF(cast_bf16_f16, RNN_KIND_BF16, RNN_KIND_F16)
RNN_CAST_HALF(cast_f16_bf16, RNN_KIND_F16, RNN_KIND_BF16)

// Elementwise ops and activations over T views (geometry E; the f32 entries are elementwise.cl's,
// same parameters): each element read as f32, the f32 kernel's arithmetic, the result rounded
// to T. FP_CONTRACT OFF (top of this file) keeps products from contracting into
// multiply-adds, so the rounded results are the CPU backend's bit for bit.
#define RNN_LD(p, i, KIND) rnn_half_to_f32((p)[i], KIND)
#define RNN_SCALE_T(NAME, KIND) __kernel void NAME(__global ushort* x_base, ulong x_off,     \
        uint n, float alpha) {                                                                 \
    __global ushort* x = x_base + x_off;                                                                \
    RNN_GRID_LOOP(i, n) x[i] = rnn_f32_to_half(RNN_LD(x, i, KIND) * alpha, KIND);             \
}
#define RNN_AXPY_T(NAME, KIND) __kernel void NAME(__global const ushort* x_base, ulong x_off, \
        __global ushort* y_base, ulong y_off, uint n, float alpha) {                                      \
    __global const ushort* x = x_base + x_off;                                                          \
    __global ushort* y = y_base + y_off;                                                                \
    RNN_GRID_LOOP(i, n) {                                                                      \
        y[i] = rnn_f32_to_half(RNN_LD(y, i, KIND) + alpha * RNN_LD(x, i, KIND), KIND); \
    }                                                                                          \
}
// `out` may be the same view as `a` or `b`: each element is read before it is written.
#define RNN_BINARY_T(NAME, KIND, PRODUCT) __kernel void NAME(__global const ushort* a_base, \
        ulong a_off, __global const ushort* b_base, ulong b_off, __global ushort* out_base, ulong out_off, uint n) {  \
    __global const ushort* a = a_base + a_off;                                                          \
    __global const ushort* b = b_base + b_off;                                                          \
    __global ushort* out = out_base + out_off;                                                          \
    RNN_GRID_LOOP(i, n) {                                                                      \
        const float av = RNN_LD(a, i, KIND), bv = RNN_LD(b, i, KIND);                          \
        out[i] = rnn_f32_to_half(PRODUCT ? av * bv : av + bv, KIND);                           \
    }                                                                                          \
}
#define RNN_ACTIVATION_T(NAME, KIND) __kernel void NAME(__global const ushort* x_base,      \
        ulong x_off, __global ushort* y_base, ulong y_off, uint n, uint act, float act_param) {             \
    __global const ushort* x = x_base + x_off;                                                          \
    __global ushort* y = y_base + y_off;                                                                \
    RNN_GRID_LOOP(i, n) y[i] = rnn_f32_to_half(act_forward(RNN_LD(x, i, KIND), act, act_param), KIND); \
}
// z is read only where the derivative needs it (callers may pass y in its place otherwise).
#define RNN_ACT_BACKWARD_T(NAME, KIND) __kernel void NAME(__global const ushort* dy_base,   \
        ulong dy_off, __global const ushort* z_base, ulong z_off, __global const ushort* y_base, ulong y_off,          \
        __global ushort* dz_base, ulong dz_off, uint n, uint act, float act_param) {                      \
    __global const ushort* dy = dy_base + dy_off;                                                       \
    __global const ushort* z = z_base + z_off;                                                          \
    __global const ushort* y = y_base + y_off;                                                          \
    __global ushort* dz = dz_base + dz_off;                                                             \
    const bool reads_z = act == ACT_GELU || act == ACT_LEAKY;                                  \
    RNN_GRID_LOOP(i, n) {                                                                      \
        const float zi = reads_z ? RNN_LD(z, i, KIND) : 0.0f;                                  \
        const float g = act_grad(zi, RNN_LD(y, i, KIND), act, act_param);                      \
        dz[i] = rnn_f32_to_half(RNN_LD(dy, i, KIND) * g, KIND);                                \
    }                                                                                          \
}
// z += bias (broadcast over rows), y = act(z) from the unrounded sum; in place (y is z) only y
// is stored.
#define RNN_BIAS_ACT_T(NAME, KIND) __kernel void NAME(__global ushort* z_base, ulong z_off,    \
        __global const ushort* bias_base, ulong bias_off, __global ushort* y_base, ulong y_off, uint rows, uint cols, \
        uint act, float act_param) {                                                           \
    __global ushort* z = z_base + z_off;                                                                \
    __global const ushort* bias = bias_base + bias_off;                                                 \
    __global ushort* y = y_base + y_off;                                                                \
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
