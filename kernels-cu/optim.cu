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
