// Shared helpers of the OpenCL op set. Buffers arrive as (base, element offset) pairs; sizes
// are uint. See docs/kernel-abi.md for every entry point and its launch geometry.

#define ACT_IDENTITY 0u
#define ACT_RELU 1u
#define ACT_SIGMOID 2u
#define ACT_TANH 3u
#define ACT_GELU 4u
#define ACT_LEAKY 5u

#define RNN_SQRT1_2 0.70710678118654752f
#define RNN_INV_SQRT_2PI 0.39894228040143268f

inline float sigmoid_f(float z) {
    return 1.0f / (1.0f + exp(-z));
}

inline float act_forward(float z, uint act, float p) {
    switch (act) {
    case ACT_RELU: return z > 0.0f ? z : 0.0f;
    case ACT_SIGMOID: return sigmoid_f(z);
    case ACT_TANH: return tanh(z);
    case ACT_GELU: return 0.5f * z * (1.0f + erf(z * RNN_SQRT1_2));
    case ACT_LEAKY: return z > 0.0f ? z : p * z;
    default: return z;
    }
}

// dL/dz given dL/dy; relu, sigmoid and tanh use the output y, gelu and leaky relu use z.
inline float act_derivative(float dy, float z, float y, uint act, float p) {
    switch (act) {
    case ACT_RELU: return y > 0.0f ? dy : 0.0f;
    case ACT_SIGMOID: return dy * y * (1.0f - y);
    case ACT_TANH: return dy * (1.0f - y * y);
    case ACT_GELU: {
        float cdf = 0.5f * (1.0f + erf(z * RNN_SQRT1_2));
        float pdf = RNN_INV_SQRT_2PI * exp(-0.5f * z * z);
        return dy * (cdf + z * pdf);
    }
    case ACT_LEAKY: return z > 0.0f ? dy : p * dy;
    default: return dy;
    }
}

// The index rule of docs/kernel-abi.md, the same as the CPU backend's: an index value `v`
// (labels, row indices) names entry `(ulong)v` iff it is an integer in 0..n. Negative,
// fractional, too large and NaN values are invalid; the test runs before any conversion, since
// converting an out-of-range float to an integer is undefined.
inline bool rnn_valid_index(float v, uint n) {
    return v >= 0.0f && v < (float)n && v == floor(v);
}

// Grid-stride loops use 64-bit counters so that `i += get_global_size(0)` cannot wrap for n
// near 2^32 (which would loop forever).
#define RNN_GRID_LOOP(i, n) for (ulong i = get_global_id(0); i < (ulong)(n); i += get_global_size(0))

#define RED_THREADS 256

// Tree sum over the 256 work-items of a group; every work-item gets the result. The trailing
// barrier lets the caller reuse `sh` straight away.
inline float group_sum(__local float* sh, float v) {
    uint lid = get_local_id(0);
    sh[lid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint s = RED_THREADS / 2; s > 0; s >>= 1) {
        if (lid < s) sh[lid] += sh[lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    float r = sh[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return r;
}

inline float group_max(__local float* sh, float v) {
    uint lid = get_local_id(0);
    sh[lid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint s = RED_THREADS / 2; s > 0; s >>= 1) {
        if (lid < s) sh[lid] = fmax(sh[lid], sh[lid + s]);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    float r = sh[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return r;
}
