// One-launch optimizer steps over the flat parameter buffer (geometry E).

extern "C" __global__ void sgd_step(float* p_base, u64 p_off, const float* g_base, u64 g_off,
                                    float* vel_base, u64 vel_off, uint n, uint nesterov, float lr,
                                    float momentum, float weight_decay) {
    float* p = p_base + p_off;
    const float* g = g_base + g_off;
    float* vel = vel_base + vel_off;
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
}

// PyTorch's Adam/AdamW: p -= (lr / bias_c1) * m / (sqrt(v) / sqrt(bias_c2) + eps).
extern "C" __global__ void adam_step(float* p_base, u64 p_off, const float* g_base, u64 g_off,
                                     float* m_base, u64 m_off, float* v_base, u64 v_off, uint n,
                                     uint decoupled, float lr, float beta1, float beta2, float eps,
                                     float weight_decay, float bias_c1, float bias_c2) {
    float* p = p_base + p_off;
    const float* g = g_base + g_off;
    float* m = m_base + m_off;
    float* v = v_base + v_off;
    const float step_size = lr / bias_c1;
    const float sqrt_c2 = sqrtf(bias_c2);
    RNN_GRID_LOOP(i, n) {
        float pi = p[i];
        float gi = g[i];
        if (decoupled) {
            pi *= 1.0f - lr * weight_decay;
        } else {
            gi += weight_decay * pi;
        }
        const float mi = beta1 * m[i] + (1.0f - beta1) * gi;
        const float vi = beta2 * v[i] + (1.0f - beta2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        p[i] = pi - step_size * mi / (sqrtf(vi) / sqrt_c2 + eps);
    }
}
