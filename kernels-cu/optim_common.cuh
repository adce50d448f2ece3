// One-launch optimizer steps over the flat parameter buffer (geometry E). The learning rate and
// the step count live in device memory, `state = [lr, step, bias_c1, bias_c2]`, so a captured
// training-step graph replays correctly while they change: every block reads the state when it
// starts, and the last block to finish (geometry L's ticket) advances it for the next launch.
//
// The state helpers of every optimizer step (optim and optim_mixed), included by both families;
// once in the whole op set.
#ifndef RNN_OPTIM_COMMON_CUH
#define RNN_OPTIM_COMMON_CUH

// Thread 0's view of the state for this launch: the step this launch takes (state[1] + 1) and
// Adam's bias corrections 1 - beta^step, computed in double (1 - beta^t loses digits in float
// for small t).
struct RnnOptimStep {
    float lr;
    float step;
    float bias_c1;
    float bias_c2;
};

// beta^t for a whole t by squaring, in double: about 2 log2 t dependent multiplications, where
// a library pow costs the thread hundreds of instructions while its whole block waits.
__device__ __forceinline__ double rnn_pow_whole(double beta, uint t) {
    double r = 1.0;
    for (; t != 0u; t >>= 1) {
        if (t & 1u) r *= beta;
        beta *= beta;
    }
    return r;
}

__device__ __forceinline__ RnnOptimStep rnn_optim_begin(const float* state, float beta1,
                                                        float beta2) {
    __shared__ RnnOptimStep st;
    if (threadIdx.x == 0) {
        st.lr = state[0];
        st.step = state[1] + 1.0f;
        // The step is a whole number below 2^24 (OPTIMIZER_STATE_LEN's contract).
        const uint t = (uint)st.step;
        st.bias_c1 = (float)(1.0 - rnn_pow_whole((double)beta1, t));
        st.bias_c2 = (float)(1.0 - rnn_pow_whole((double)beta2, t));
    }
    __syncthreads();
    return st;
}

// After the block's updates: the last block to arrive stores the new step and corrections. No
// block reads the state after its arrival, so the write races with nothing.
__device__ __forceinline__ void rnn_optim_end(float* state, uint* ticket, RnnOptimStep st) {
    if (rnn_last_arrival(ticket, gridDim.x) && threadIdx.x == 0) {
        state[1] = st.step;
        state[2] = st.bias_c1;
        state[3] = st.bias_c2;
    }
}

// PyTorch's Adam/AdamW: p -= (lr / bias_c1) * m / (sqrt(v) / sqrt(bias_c2) + eps).
struct RnnAdam {
    float lr, step_size, sqrt_c2, beta1, beta2, eps, weight_decay;
    bool decoupled;
};

__device__ __forceinline__ void rnn_adam1(float& p, float g, float& m, float& v,
                                          const RnnAdam& a) {
    if (a.decoupled) {
        p *= 1.0f - a.lr * a.weight_decay;
    } else {
        g += a.weight_decay * p;
    }
    m = a.beta1 * m + (1.0f - a.beta1) * g;
    v = a.beta2 * v + (1.0f - a.beta2) * g * g;
    p = p - a.step_size * m / (sqrtf(v) / a.sqrt_c2 + a.eps);
}

// Adam over n elements of p, g, m, v (geometry V): float4s when p, g, m and v are 16-byte
// aligned (and, with LOW, `low` 8-byte aligned), then a scalar tail; the same rnn_adam1 per
// element on either path. With LOW each new parameter is also stored, rounded to `kind`, in
// the bf16/f16 copy `low` (the mixed-precision steps, optim_mixed.cu).
template <bool LOW>
__device__ __forceinline__ void rnn_adam_stream(float* p, const float* g, float* m, float* v,
                                                ushort* low, u64 n, const RnnAdam& a,
                                                uint kind) {
    u64 done = 0;
    if (rnn_aligned16(p) && rnn_aligned16(g) && rnn_aligned16(m) && rnn_aligned16(v) &&
        (!LOW || (u64)low % 8 == 0)) {
        float4* p4 = (float4*)p;
        const float4* g4 = (const float4*)g;
        float4* m4 = (float4*)m;
        float4* v4 = (float4*)v;
        uint2* low4 = (uint2*)low;
        struct V { float4 p, g, m, v; };
#define RNN_L(k, e) (e.p = p4[k], e.g = g4[k], e.m = m4[k], e.v = v4[k])
#define RNN_S(k, e)                                         \
    {                                                       \
        rnn_adam1(e.p.x, e.g.x, e.m.x, e.v.x, a);           \
        rnn_adam1(e.p.y, e.g.y, e.m.y, e.v.y, a);           \
        rnn_adam1(e.p.z, e.g.z, e.m.z, e.v.z, a);           \
        rnn_adam1(e.p.w, e.g.w, e.m.w, e.v.w, a);           \
        p4[k] = e.p;                                        \
        m4[k] = e.m;                                        \
        v4[k] = e.v;                                        \
        if (LOW) low4[k] = rnn_f32_to_half4(e.p, kind);     \
    }
        RNN_VEC_LOOP(n, V, RNN_L, RNN_S)
#undef RNN_L
#undef RNN_S
        done = n / 4 * 4;
    }
    for (u64 i = done + rnn_tid(); i < n; i += rnn_threads()) {
        float pi = p[i], mi = m[i], vi = v[i];
        rnn_adam1(pi, g[i], mi, vi, a);
        p[i] = pi;
        m[i] = mi;
        v[i] = vi;
        if (LOW) low[i] = rnn_f32_to_half(pi, kind);
    }
}

#endif  // RNN_OPTIM_COMMON_CUH
