// The f32 optimizer steps (the helpers are in optim_common.cl).

__kernel void sgd_step(__global float* p_base, ulong p_off, __global const float* g_base,
                       ulong g_off, __global float* v_base, ulong v_off,
                       __global float* state_base, ulong state_off, __global uint* ticket_base,
                       ulong ticket_off, uint n, uint nesterov, float momentum,
                       float weight_decay) {
    __local float st[4];
    __local uint flag;
    __global float* p = p_base + p_off;
    __global const float* g = g_base + g_off;
    __global float* v = v_base + v_off;
    __global float* state = state_base + state_off;
    rnn_optim_begin(state, 0.0f, 0.0f, st);
    float lr = st[0];
    RNN_GRID_LOOP(i, n) {
        float gi = g[i] + weight_decay * p[i];
        float step = gi;
        if (momentum != 0.0f) {
            float vi = momentum * v[i] + gi;
            v[i] = vi;
            step = nesterov ? gi + momentum * vi : vi;
        }
        p[i] -= lr * step;
    }
    rnn_optim_end(state, ticket_base + ticket_off, st, &flag);
}

// PyTorch's Adam/AdamW: p -= (lr / bias_c1) * m / (sqrt(v) / sqrt(bias_c2) + eps).
__kernel void adam_step(__global float* p_base, ulong p_off, __global const float* g_base,
                        ulong g_off, __global float* m_base, ulong m_off, __global float* v_base,
                        ulong v_off, __global float* state_base, ulong state_off,
                        __global uint* ticket_base, ulong ticket_off, uint n, uint decoupled,
                        float beta1, float beta2, float eps, float weight_decay) {
    __local float st[4];
    __local uint flag;
    __global float* p = p_base + p_off;
    __global const float* g = g_base + g_off;
    __global float* m = m_base + m_off;
    __global float* v = v_base + v_off;
    __global float* state = state_base + state_off;
    rnn_optim_begin(state, beta1, beta2, st);
    float lr = st[0];
    float step_size = lr / st[2];
    float sqrt_c2 = sqrt(st[3]);
    // Geometry V: float4s when every view is 16-byte aligned, then a scalar tail.
    ulong done = 0;
    if (((p_off | g_off | m_off | v_off) & 3) == 0) {
        const ulong n4 = n / 4;
        for (ulong i = get_global_id(0); i < n4; i += get_global_size(0)) {
            float4 pi = RNN_F4(p)[i];
            float4 gi = RNN_CF4(g)[i];
            if (decoupled) pi *= 1.0f - lr * weight_decay;
            else gi += weight_decay * pi;
            const float4 mi = beta1 * RNN_F4(m)[i] + (1.0f - beta1) * gi;
            const float4 vi = beta2 * RNN_F4(v)[i] + (1.0f - beta2) * gi * gi;
            RNN_F4(m)[i] = mi;
            RNN_F4(v)[i] = vi;
            RNN_F4(p)[i] = pi - step_size * mi / (sqrt(vi) / sqrt_c2 + eps);
        }
        done = n4 * 4;
    }
    for (ulong i = done + get_global_id(0); i < n; i += get_global_size(0)) {
        float pi = p[i];
        float gi = g[i];
        if (decoupled) pi *= 1.0f - lr * weight_decay;
        else gi += weight_decay * pi;
        float mi = beta1 * m[i] + (1.0f - beta1) * gi;
        float vi = beta2 * v[i] + (1.0f - beta2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        p[i] = pi - step_size * mi / (sqrt(vi) / sqrt_c2 + eps);
    }
    rnn_optim_end(state, ticket_base + ticket_off, st, &flag);
}
