// Streaming helpers of geometry V (docs/kernel-abi.md), shared by every op-set module: the
// elementwise kernels, and the reductions and optimizer steps that stream the same way.
//
// The streaming elementwise kernels (fill, scale, axpy, add, mul, activation,
// act_backward, bias_act_forward) run geometry V of docs/kernel-abi.md: when every pointer they
// touch is 16-byte aligned (the view offsets are multiples of 4 on the allocator's aligned
// bases) they move float4s, RNN_VEC_UNROLL independent ones in flight per thread, and finish the
// n % 4 tail with scalars; otherwise they run the scalar loop. Both loops are grid-stride, so
// any grid is correct.

#define RNN_VEC_UNROLL 4

__device__ __forceinline__ bool rnn_aligned16(const void* p) {
    return ((u64)p & 15ull) == 0ull;
}

__device__ __forceinline__ u64 rnn_tid() { return (u64)blockIdx.x * blockDim.x + threadIdx.x; }
__device__ __forceinline__ u64 rnn_threads() { return (u64)gridDim.x * blockDim.x; }

template <typename F>
__device__ __forceinline__ float4 rnn_map4(float4 a, F f) {
    return make_float4(f(a.x), f(a.y), f(a.z), f(a.w));
}
template <typename F>
__device__ __forceinline__ float4 rnn_map4(float4 a, float4 b, F f) {
    return make_float4(f(a.x, b.x), f(a.y, b.y), f(a.z, b.z), f(a.w, b.w));
}

// The vector loop: float4 index i covers elements 4i..4i+3. Each round loads RNN_VEC_UNROLL
// float4s (one grid stride apart, so a warp's accesses stay contiguous) before storing any,
// which keeps that many independent loads in flight. `LOAD(k, v)` fills v for float4 k,
// `STORE(k, v)` writes the result for it. Covers the first n / 4 * 4 elements.
#define RNN_VEC_LOOP(n, T, LOAD, STORE)                                                  \
    {                                                                                    \
        const u64 n4_ = (u64)(n) / 4, tid_ = rnn_tid(), st_ = rnn_threads();            \
        for (u64 i_ = tid_; i_ < n4_; i_ += RNN_VEC_UNROLL * st_) {                      \
            T v_[RNN_VEC_UNROLL];                                                        \
            _Pragma("unroll") for (int u_ = 0; u_ < RNN_VEC_UNROLL; ++u_) {              \
                const u64 k_ = i_ + u_ * st_;                                            \
                if (k_ < n4_) LOAD(k_, v_[u_]);                                          \
            }                                                                            \
            _Pragma("unroll") for (int u_ = 0; u_ < RNN_VEC_UNROLL; ++u_) {              \
                const u64 k_ = i_ + u_ * st_;                                            \
                if (k_ < n4_) STORE(k_, v_[u_]);                                         \
            }                                                                            \
        }                                                                                \
    }

// y[i] = f(x[i]) over elements of types X and Y, moved in groups of four as X4 and Y4 (float4,
// or uint2 for four bf16/f16) where x and y both start on a group; `f4` converts a group, `f`
// one element (the tail, or everything when misaligned). y may be x.
template <typename X4, typename Y4, typename X, typename Y, typename F4, typename F>
__device__ __forceinline__ void rnn_stream1_as(const X* x, Y* y, u64 n, F4 f4, F f) {
    u64 done = 0;
    if ((u64)x % sizeof(X4) == 0 && (u64)y % sizeof(Y4) == 0) {
        const X4* x4 = (const X4*)x;
        Y4* y4 = (Y4*)y;
        struct V { X4 a; };
#define RNN_L(k, v) v.a = x4[k]
#define RNN_S(k, v) y4[k] = f4(v.a)
        RNN_VEC_LOOP(n, V, RNN_L, RNN_S)
#undef RNN_L
#undef RNN_S
        done = n / 4 * 4;
    }
    for (u64 i = done + rnn_tid(); i < n; i += rnn_threads()) y[i] = f(x[i]);
}

// y[i] = f(x[i]) over f32; y may be x. `f4` applies f to a float4 (one call a float4 where f is
// out of line: the activations below).
template <typename F4, typename F>
__device__ __forceinline__ void rnn_stream1_4(const float* x, float* y, u64 n, F4 f4, F f) {
    rnn_stream1_as<float4, float4>(x, y, n, f4, f);
}

template <typename F>
__device__ __forceinline__ void rnn_stream1(const float* x, float* y, u64 n, F f) {
    rnn_stream1_4(x, y, n, [=](float4 a) { return rnn_map4(a, f); }, f);
}

// out[i] = f(a[i], b[i]); out may be a or b. `f4` applies f to float4s, as in rnn_stream1_4.
template <typename F4, typename F>
__device__ __forceinline__ void rnn_stream2_4(const float* a, const float* b, float* out, u64 n,
                                              F4 f4, F f) {
    u64 done = 0;
    if (rnn_aligned16(a) && rnn_aligned16(b) && rnn_aligned16(out)) {
        const float4* a4 = (const float4*)a;
        const float4* b4 = (const float4*)b;
        float4* o4 = (float4*)out;
        struct V { float4 a, b; };
#define RNN_L(k, v) (v.a = a4[k], v.b = b4[k])
#define RNN_S(k, v) o4[k] = f4(v.a, v.b)
        RNN_VEC_LOOP(n, V, RNN_L, RNN_S)
#undef RNN_L
#undef RNN_S
        done = n / 4 * 4;
    }
    for (u64 i = done + rnn_tid(); i < n; i += rnn_threads()) out[i] = f(a[i], b[i]);
}

template <typename F>
__device__ __forceinline__ void rnn_stream2(const float* a, const float* b, float* out, u64 n,
                                            F f) {
    rnn_stream2_4(a, b, out, n, [=](float4 x, float4 y) { return rnn_map4(x, y, f); }, f);
}

// The activations of the streaming and column-sum kernels, by the runtime code `act` (uniform
// over a launch). Out of line, so that a module holds every formula once rather than once per
// activation, kernel and unrolled element: those copies were most of the elementwise and reduce
// modules' compile time. A call within a module costs a few moves, no stack (ptxas sees both
// sides), next to the 8 to 12 bytes each element moves through memory.
__device__ __noinline__ float rnn_act_forward1(float z, uint act, float p) {
    return act_forward(z, act, p);
}

__device__ __noinline__ float4 rnn_act_forward4(float4 z, uint act, float p) {
    return rnn_map4(z, [=](float t) { return act_forward(t, act, p); });
}

// act'(.) as act_grad takes it: `z` and `y` may be the same values (the one the activation's
// derivative reads).
__device__ __noinline__ float rnn_act_grad1(float z, float y, uint act, float p) {
    return act_grad(z, y, act, p);
}

__device__ __noinline__ float4 rnn_act_grad4(float4 z, float4 y, uint act, float p) {
    return rnn_map4(z, y, [=](float zi, float yi) { return act_grad(zi, yi, act, p); });
}

// Four consecutive bf16/f16 values as one 8-byte uint2 (little-endian: element 4k + j in the
// low half of word j / 2 for even j), the groups the casts and the mixed optimizer steps move.
__device__ __forceinline__ float4 rnn_half4_to_f32(uint2 h, uint kind) {
    return make_float4(rnn_half_to_f32((ushort)(h.x & 0xffffu), kind),
                       rnn_half_to_f32((ushort)(h.x >> 16), kind),
                       rnn_half_to_f32((ushort)(h.y & 0xffffu), kind),
                       rnn_half_to_f32((ushort)(h.y >> 16), kind));
}

__device__ __forceinline__ uint2 rnn_f32_to_half4(float4 v, uint kind) {
    return make_uint2((uint)rnn_f32_to_half(v.x, kind) | ((uint)rnn_f32_to_half(v.y, kind) << 16),
                      (uint)rnn_f32_to_half(v.z, kind) | ((uint)rnn_f32_to_half(v.w, kind) << 16));
}
