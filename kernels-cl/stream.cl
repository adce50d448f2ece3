// Streaming helpers of geometry V (docs/kernel-abi.md), shared by every op-set module: the
// elementwise kernels, and the reductions, thin GEMMs and optimizer steps that load float4s.
//
// The streaming elementwise kernels (fill, scale, axpy, add, mul, activation,
// act_backward, bias_act_forward) run geometry V of docs/kernel-abi.md: when every view offset
// is a multiple of 4 (cl_mem bases are aligned to CL_DEVICE_MEM_BASE_ADDR_ALIGN, at least 128
// bytes) they move float4s, RNN_VEC_UNROLL independent ones in flight per work-item, and finish
// the n % 4 tail with scalars; otherwise they run the scalar loop. Both loops are grid-stride,
// so any global size is correct.
//
// The vector path dereferences float4 pointers rather than calling vload4: vload4 may only
// assume the alignment of a float, so compilers (NVIDIA's among them) split it into four scalar
// loads, while a float4 access is one 16-byte load; the alignment test makes it valid.

#define RNN_VEC_UNROLL 4

typedef struct { float4 a; } rnn_v1;
typedef struct { float4 a, b; } rnn_v2;
typedef struct { float4 a, b, c; } rnn_v3;

#define RNN_F4(p) ((__global float4*)(p))
#define RNN_CF4(p) ((__global const float4*)(p))
#define RNN_MAP4(v, F) ((float4)(F((v).x), F((v).y), F((v).z), F((v).w)))

// Runs the vector loop when `aligned` (float4 k covers elements 4k..4k+3; each round loads
// RNN_VEC_UNROLL float4s one global size apart, so neighbouring work-items stay contiguous,
// before storing any), then SCALAR(i) for the elements the vector loop did not cover.
#define RNN_STREAM(n, aligned, T, LOAD, STORE, SCALAR)                                 \
    {                                                                                  \
        const ulong n_ = (ulong)(n), tid_ = get_global_id(0), st_ = get_global_size(0);\
        ulong done_ = 0;                                                               \
        if (aligned) {                                                                 \
            const ulong n4_ = n_ / 4;                                                  \
            for (ulong i_ = tid_; i_ < n4_; i_ += RNN_VEC_UNROLL * st_) {               \
                T v_[RNN_VEC_UNROLL];                                                  \
                for (uint u_ = 0; u_ < RNN_VEC_UNROLL; ++u_) {                         \
                    const ulong k_ = i_ + u_ * st_;                                    \
                    if (k_ < n4_) LOAD(k_, v_[u_]);                                    \
                }                                                                      \
                for (uint u_ = 0; u_ < RNN_VEC_UNROLL; ++u_) {                         \
                    const ulong k_ = i_ + u_ * st_;                                    \
                    if (k_ < n4_) STORE(k_, v_[u_]);                                   \
                }                                                                      \
            }                                                                          \
            done_ = n4_ * 4;                                                           \
        }                                                                              \
        for (ulong i_ = done_ + tid_; i_ < n_; i_ += st_) SCALAR(i_);                  \
    }

// The activations the streaming kernels apply: relu, leaky relu and identity inline, the
// transcendental ones (sigmoid, tanh, gelu) as a call. Their loops run 16 elements a round;
// inlined copies of exp, tanh and erfc in every one made most of a module's code and of its
// build time on NVIDIA's compiler, which is a cold start's wait (bias_act_forward alone 188 KB
// of PTX and 1.17 s of elementwise's 1.43 s, H200, driver 580.159, 2026-11-27). The call costs
// the memory-bound loops little; the results are act_forward's and act_grad's, bit for bit.
__attribute__((noinline)) float rnn_act_forward_call(float z, uint act, float p) {
    return act_forward(z, act, p);
}

__attribute__((noinline)) float rnn_act_grad_call(float z, float y, uint act, float p) {
    return act_grad(z, y, act, p);
}

inline float rnn_stream_act(float z, uint act, float p) {
    switch (act) {
    case ACT_SIGMOID:
    case ACT_TANH:
    case ACT_GELU: return rnn_act_forward_call(z, act, p);
    default: return act_forward(z, act, p);
    }
}

inline float rnn_stream_act_grad(float z, float y, uint act, float p) {
    switch (act) {
    case ACT_SIGMOID:
    case ACT_TANH:
    case ACT_GELU: return rnn_act_grad_call(z, y, act, p);
    default: return act_grad(z, y, act, p);
    }
}

// Runs BODY with the activation code as the constant K for relu and identity, the layers' usual
// ones, so that theirs are loops of their own; the others share one loop that dispatches per
// element (K = act) through rnn_stream_act / rnn_stream_act_grad.
#define RNN_WITH_ACT(act, BODY)                                      \
    switch (act) {                                                   \
    case ACT_RELU: { const uint K = ACT_RELU; BODY; } break;         \
    case ACT_IDENTITY: { const uint K = ACT_IDENTITY; BODY; } break; \
    default: { const uint K = (act); BODY; } break;                  \
    }

// Four consecutive bf16/f16 values (a ushort4, 8 bytes: aligned where the view offset is a
// multiple of 4) as f32 and back, for the casts and the mixed optimizer steps.
#define RNN_H4(p) ((__global ushort4*)(p))
#define RNN_CH4(p) ((__global const ushort4*)(p))

inline float4 rnn_half4_to_f32(ushort4 h, uint kind) {
    return (float4)(rnn_half_to_f32(h.x, kind), rnn_half_to_f32(h.y, kind),
                    rnn_half_to_f32(h.z, kind), rnn_half_to_f32(h.w, kind));
}

inline ushort4 rnn_f32_to_half4(float4 v, uint kind) {
    return (ushort4)(rnn_f32_to_half(v.x, kind), rnn_f32_to_half(v.y, kind),
                     rnn_f32_to_half(v.z, kind), rnn_f32_to_half(v.w, kind));
}
