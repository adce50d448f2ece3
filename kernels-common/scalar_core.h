// The scalar core of the op set, one text for every dialect (CUDA and HIP C++, OpenCL C): the
// activation codes, the activation formulas, the index rule and the constants they share. It
// opens every op-set translation unit (src/backend/{cuda,hip,opencl}/kernels.rs), so a kernel
// in any dialect computes an activation the same way, in the same order of operations as the
// CPU reference (src/backend/cpu/activation.rs). The codes are tested against
// `ops::Activation::code` (src/ops/gpu/contract.rs).
//
// Only the common subset of OpenCL C and CUDA C++ is used; the spellings that differ are the
// RNN_* macros of the first block.

#ifdef __OPENCL_VERSION__
#define RNN_DEVICE_FN inline
#define RNN_EXP(x) exp(x)
#define RNN_TANH(x) tanh(x)
#define RNN_ERFC(x) erfc(x)
#define RNN_F32_BITS(x) as_uint(x)
#define RNN_BITS_F32(u) as_float(u)
#else
#define RNN_DEVICE_FN __device__ __forceinline__
#define RNN_EXP(x) expf(x)
#define RNN_TANH(x) tanhf(x)
#define RNN_ERFC(x) erfcf(x)
#define RNN_F32_BITS(x) __float_as_uint(x)
#define RNN_BITS_F32(u) __uint_as_float(u)
#endif

// Activation codes (`ops::Activation::code`).
#define ACT_IDENTITY 0u
#define ACT_RELU 1u
#define ACT_SIGMOID 2u
#define ACT_TANH 3u
#define ACT_GELU 4u
#define ACT_LEAKY 5u

// 1 / sqrt(2) and 1 / sqrt(2 pi), for the exact (erf) GELU.
#define RNN_SQRT1_2 0.70710678118654752f
#define RNN_INV_SQRT_2PI 0.39894228040143268f

RNN_DEVICE_FN float rnn_sigmoid(float z) {
    return 1.0f / (1.0f + RNN_EXP(-z));
}

// y = act(z); unknown codes act as identity. `p` is the leaky slope.
RNN_DEVICE_FN float act_forward(float z, unsigned int act, float p) {
    switch (act) {
    case ACT_RELU: return z > 0.0f ? z : 0.0f;
    case ACT_SIGMOID: return rnn_sigmoid(z);
    case ACT_TANH: return RNN_TANH(z);
    // 1 + erf(x) as erfc(-x): the sum cancels for z below about -3 (1e-3 relative at -4).
    case ACT_GELU: return 0.5f * z * RNN_ERFC(-z * RNN_SQRT1_2);
    case ACT_LEAKY: return z > 0.0f ? z : p * z;
    default: return z;
    }
}

// act'(z), which callers multiply into dL/dy (`dy * act_grad(..)`, as the CPU backend does).
// Identity, relu, sigmoid and tanh read the output y (z may be unset for those); gelu and leaky
// relu read z.
RNN_DEVICE_FN float act_grad(float z, float y, unsigned int act, float p) {
    switch (act) {
    case ACT_RELU: return y > 0.0f ? 1.0f : 0.0f;
    case ACT_SIGMOID: return y * (1.0f - y);
    case ACT_TANH: return 1.0f - y * y;
    case ACT_GELU: {
        const float cdf = 0.5f * RNN_ERFC(-z * RNN_SQRT1_2);
        const float pdf = RNN_INV_SQRT_2PI * RNN_EXP(-0.5f * z * z);
        return cdf + z * pdf;
    }
    case ACT_LEAKY: return z > 0.0f ? 1.0f : p;
    default: return 1.0f;
    }
}

// The index rule of docs/kernel-abi.md, the same as the CPU backend's: an index value `v`
// (labels, class targets, token ids, row indices; u32 on the device) names entry `v` iff
// `v < n`. Any other value is invalid and never addresses memory.
RNN_DEVICE_FN bool rnn_valid_index(unsigned int v, unsigned int n) {
    return v < n;
}

// What a u32 row gather writes for an invalid index: itself invalid as an index into any
// table (n <= u32::MAX), as NaN is for a float row.
#define RNN_INVALID_INDEX 0xffffffffu

// The GRU backward of one unit (gates r, z, n), in the order of operations of the CPU
// reference (src/backend/cpu/cells.rs): from `d`, the whole gradient reaching h, the cached
// `r`, `z`, `n` and `ghn` (gh_n) and the previous state `hp`, stores dgx = [dr, dz, dn] and
// dgh = [dr, dz, dn r] at `g3` with gate stride `H`, and `d z` in the lvalue `carry`. Every GRU
// backward kernel (cell, fused step, persistent sequence) ends in it. A macro rather than a
// function, so that the stores keep each dialect's pointers (OpenCL's address spaces).
#define RNN_GRU_UNIT_BACKWARD(dgx, dgh, g3, H, d, r, z, n, ghn, hp, carry) \
    do {                                                                  \
        const float gru_dn_ = (d) * (1.0f - (z)) * (1.0f - (n) * (n));    \
        const float gru_dz_ = (d) * ((hp) - (n)) * (z) * (1.0f - (z));    \
        const float gru_dr_ = gru_dn_ * (ghn) * (r) * (1.0f - (r));       \
        (dgx)[(g3)] = gru_dr_;                                            \
        (dgx)[(g3) + (H)] = gru_dz_;                                      \
        (dgx)[(g3) + 2 * (H)] = gru_dn_;                                  \
        (dgh)[(g3)] = gru_dr_;                                            \
        (dgh)[(g3) + (H)] = gru_dz_;                                      \
        (dgh)[(g3) + 2 * (H)] = gru_dn_ * (r);                            \
        carry = (d) * (z);                                                \
    } while (0)

// The LSTM forward of one unit (gates i, f, g, o): the pre-activations are the recurrent
// products `p` (gate stride `ps`) plus the input side `x` and the summed biases `bias`; stores
// the activated gates at `gr` with gate stride `H` (the backward reads them), the cell state
// gf c_prev + gi gg in the lvalue `c_out` and the hidden state go tanh(c_out) in `h_out`. The
// persistent and block-local LSTM forwards end in it.
#define RNN_LSTM_UNIT_FORWARD(p, ps, x, bias, gr, H, c_prev, c_out, h_out)   \
    do {                                                                   \
        const float lstm_gi_ = rnn_sigmoid((p)[0] + (x)[0] + (bias)[0]);    \
        const float lstm_gf_ = rnn_sigmoid((p)[(ps)] + (x)[1] + (bias)[1]); \
        const float lstm_gg_ = RNN_TANH((p)[2 * (ps)] + (x)[2] + (bias)[2]); \
        const float lstm_go_ = rnn_sigmoid((p)[3 * (ps)] + (x)[3] + (bias)[3]); \
        (gr)[0] = lstm_gi_;                                                \
        (gr)[(H)] = lstm_gf_;                                              \
        (gr)[2 * (H)] = lstm_gg_;                                          \
        (gr)[3 * (H)] = lstm_go_;                                          \
        c_out = lstm_gf_ * (c_prev) + lstm_gi_ * lstm_gg_;                 \
        h_out = lstm_go_ * RNN_TANH(c_out);                                \
    } while (0)

// The LSTM backward of one unit (gates i, f, g, o, activated), in the order of operations of
// the CPU reference (src/backend/cpu/cells.rs): from `dc` (the gradient reaching c from the
// next step), `dh` (the whole gradient reaching h), `tc` = tanh(c) and `c_prev`, stores the
// gate gradients at `ga` with gate stride `H` in `dg`, and dc_t f in the lvalue `carry`. Every
// LSTM backward kernel ends in it; a macro for the reason given at RNN_GRU_UNIT_BACKWARD.
#define RNN_LSTM_UNIT_BACKWARD(dg, ga, H, dc, dh, tc, c_prev, gi, gf, gg, go, carry) \
    do {                                                                            \
        const float lstm_dct_ = (dc) + (dh) * (go) * (1.0f - (tc) * (tc));          \
        (dg)[(ga)] = lstm_dct_ * (gg) * (gi) * (1.0f - (gi));                       \
        (dg)[(ga) + (H)] = lstm_dct_ * (c_prev) * (gf) * (1.0f - (gf));             \
        (dg)[(ga) + 2 * (H)] = lstm_dct_ * (gi) * (1.0f - (gg) * (gg));             \
        (dg)[(ga) + 3 * (H)] = (dh) * (tc) * (go) * (1.0f - (go));                  \
        carry = lstm_dct_ * (gf);                                                   \
    } while (0)
