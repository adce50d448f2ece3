// The f32 optimizer steps (the helpers are in optim_common.cuh).

extern "C" __global__ void sgd_step(float* p_base, u64 p_off, const float* g_base, u64 g_off,
                                    float* vel_base, u64 vel_off, float* state_base,
                                    u64 state_off, uint* ticket_base, u64 ticket_off, uint n,
                                    uint nesterov, float momentum, float weight_decay) {
    float* p = p_base + p_off;
    const float* g = g_base + g_off;
    float* vel = vel_base + vel_off;
    float* state = state_base + state_off;
    const RnnOptimStep st = rnn_optim_begin(state, 0.0f, 0.0f);
    const float lr = st.lr;
    RNN_GRID_LOOP(i, n) {
        const float pi = p[i];
        const float gi = g[i] + weight_decay * pi;
        float step = gi;
        if (momentum != 0.0f) {
            const float v = momentum * vel[i] + gi;
            vel[i] = v;
            step = nesterov ? gi + momentum * v : v;
        }
        p[i] = pi - lr * step;
    }
    rnn_optim_end(state, ticket_base + ticket_off, st);
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

// Geometry V + L: few blocks, so each block's double-precision bias corrections are paid once
// per block of streaming, not once per 256 elements.
extern "C" __global__ void adam_step(float* p_base, u64 p_off, const float* g_base, u64 g_off,
                                     float* m_base, u64 m_off, float* v_base, u64 v_off,
                                     float* state_base, u64 state_off, uint* ticket_base,
                                     u64 ticket_off, uint n, uint decoupled, float beta1,
                                     float beta2, float eps, float weight_decay) {
    float* state = state_base + state_off;
    const RnnOptimStep st = rnn_optim_begin(state, beta1, beta2);
    const RnnAdam a = {st.lr,        st.lr / st.bias_c1, sqrtf(st.bias_c2), beta1, beta2, eps,
                       weight_decay, decoupled != 0};
    rnn_adam_stream<false>(p_base + p_off, g_base + g_off, m_base + m_off, v_base + v_off,
                           nullptr, n, a, RNN_KIND_BF16);
    rnn_optim_end(state, ticket_base + ticket_off, st);
}
