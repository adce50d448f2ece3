// Conversions between f32 and the 16-bit float types bf16 and f16, one definition for every
// dialect (CUDA and HIP C++, OpenCL C), over the bit patterns: a bf16 or f16 value travels as
// its 16 bits in a `ushort`. It follows kernels-common/scalar_core.h (its RNN_DEVICE_FN and bit
// casts). f32 -> bf16/f16 rounds to nearest even, f16 overflows to inf as IEEE does, NaN stays
// NaN (quiet, payload kept where it fits); bf16/f16 -> f32 is exact. The results are the
// `half` crate's bit for bit (the CPU backend converts with it), which tests/ops checks for
// every bf16 and f16 pattern and a sample of f32 ones on every backend.

#ifndef __OPENCL_VERSION__
typedef unsigned short ushort;
#endif

// Kernel variants of a T-typed op (`_bf16`, `_f16`) pass one of these as a constant `kind`;
// inlining folds the choice.
#define RNN_KIND_BF16 0u
#define RNN_KIND_F16 1u

RNN_DEVICE_FN float rnn_bf16_to_f32(ushort h) {
    return RNN_BITS_F32((unsigned int)h << 16);
}

RNN_DEVICE_FN ushort rnn_f32_to_bf16(float f) {
    const unsigned int u = RNN_F32_BITS(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (ushort)((u >> 16) | 0x40u);
    // Adding 0x7fff plus the lowest kept bit carries into the kept bits exactly when the
    // dropped half is above one half, or one half with an odd kept part.
    return (ushort)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

RNN_DEVICE_FN float rnn_f16_to_f32(ushort h) {
    const unsigned int sign = ((unsigned int)h & 0x8000u) << 16;
    const unsigned int exp = (unsigned int)h & 0x7c00u;
    const unsigned int man = (unsigned int)h & 0x03ffu;
    if (exp == 0x7c00u) {
        return RNN_BITS_F32(man == 0u ? sign | 0x7f800000u : sign | 0x7fc00000u | (man << 13));
    }
    if (exp == 0u) {
        // Zero or subnormal: man * 2^-24, exact in f32 (and a normal f32 unless zero).
        return RNN_BITS_F32(sign | RNN_F32_BITS((float)man * 5.9604644775390625e-8f));
    }
    return RNN_BITS_F32(sign | (((exp >> 10) + 112u) << 23) | (man << 13));
}

RNN_DEVICE_FN ushort rnn_f32_to_f16(float f) {
    const unsigned int x = RNN_F32_BITS(f);
    const unsigned int sign = (x >> 16) & 0x8000u;
    const unsigned int exp = x & 0x7f800000u;
    unsigned int man = x & 0x007fffffu;
    if (exp == 0x7f800000u) {
        return (ushort)(sign | 0x7c00u | (man != 0u ? 0x0200u : 0u) | (man >> 13));
    }
    const int half_exp = (int)(exp >> 23) - 127 + 15;
    if (half_exp >= 0x1f) return (ushort)(sign | 0x7c00u);
    if (half_exp <= 0) {
        if (14 - half_exp > 24) return (ushort)sign;
        man |= 0x00800000u;
        const unsigned int shift = (unsigned int)(14 - half_exp);
        const unsigned int round_bit = 1u << (shift - 1u);
        unsigned int half_man = man >> shift;
        if ((man & round_bit) != 0u && (man & (3u * round_bit - 1u)) != 0u) half_man += 1u;
        return (ushort)(sign | half_man);
    }
    const unsigned int bits = sign | ((unsigned int)half_exp << 10) | (man >> 13);
    // Round to nearest even; a carry out of the mantissa steps the exponent (to inf at the
    // top), as IEEE rounding does.
    const bool up = (man & 0x1000u) != 0u && (man & 0x2fffu) != 0u;
    return (ushort)(up ? bits + 1u : bits);
}

// Element `i` of a T view (`kind`: RNN_KIND_BF16 or RNN_KIND_F16) as f32, and `v` rounded into
// it.
RNN_DEVICE_FN float rnn_half_to_f32(ushort h, unsigned int kind) {
    return kind == RNN_KIND_BF16 ? rnn_bf16_to_f32(h) : rnn_f16_to_f32(h);
}

RNN_DEVICE_FN ushort rnn_f32_to_half(float v, unsigned int kind) {
    return kind == RNN_KIND_BF16 ? rnn_f32_to_bf16(v) : rnn_f32_to_f16(v);
}
