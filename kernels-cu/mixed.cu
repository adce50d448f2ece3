// Kernels of the 16-bit float types (bf16, f16): a T view is a `ushort` pointer to the bits,
// converted by kernels-common/half_convert.h. Each op's body is written once and stamped per
// type by an entry macro (entries `_bf16`, `_f16`), the constant `KIND` folding the choice.

// Casts between f32, bf16 and f16 (geometry E): cast_<from>_<to>.
#define RNN_CAST_TO_HALF(NAME, KIND) extern "C" __global__ void NAME(const float* x_base, \
        u64 x_off, ushort* y_base, u64 y_off, uint n) {                                   \
    const float* x = x_base + x_off;                                                      \
    ushort* y = y_base + y_off;                                                           \
    RNN_GRID_LOOP(i, n) y[i] = rnn_f32_to_half(x[i], KIND);                               \
}
#define RNN_CAST_FROM_HALF(NAME, KIND) extern "C" __global__ void NAME(const ushort* x_base, \
        u64 x_off, float* y_base, u64 y_off, uint n) {                                       \
    const ushort* x = x_base + x_off;                                                        \
    float* y = y_base + y_off;                                                               \
    RNN_GRID_LOOP(i, n) y[i] = rnn_half_to_f32(x[i], KIND);                                  \
}
#define RNN_CAST_HALF(NAME, FROM, TO) extern "C" __global__ void NAME(const ushort* x_base,    \
        u64 x_off, ushort* y_base, u64 y_off, uint n) {                                      \
    const ushort* x = x_base + x_off;                                                        \
    ushort* y = y_base + y_off;                                                              \
    RNN_GRID_LOOP(i, n) y[i] = rnn_f32_to_half(rnn_half_to_f32(x[i], FROM), TO);             \
}
RNN_CAST_TO_HALF(cast_f32_bf16, RNN_KIND_BF16)
RNN_CAST_TO_HALF(cast_f32_f16, RNN_KIND_F16)
RNN_CAST_FROM_HALF(cast_bf16_f32, RNN_KIND_BF16)
RNN_CAST_FROM_HALF(cast_f16_f32, RNN_KIND_F16)
RNN_CAST_HALF(cast_bf16_f16, RNN_KIND_BF16, RNN_KIND_F16)
RNN_CAST_HALF(cast_f16_bf16, RNN_KIND_F16, RNN_KIND_BF16)
