// One-launch optimizer steps over the flat parameter buffer.

__kernel void sgd_step(__global float* p_base, ulong p_off, __global const float* g_base,
                       ulong g_off, __global float* v_base, ulong v_off, uint n, uint nesterov,
                       float lr, float momentum, float weight_decay) {
    __global float* p = p_base + p_off;
    __global const float* g = g_base + g_off;
    __global float* v = v_base + v_off;
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
}

__kernel void adam_step(__global float* p_base, ulong p_off, __global const float* g_base,
                        ulong g_off, __global float* m_base, ulong m_off, __global float* v_base,
                        ulong v_off, uint n, uint decoupled, float lr, float beta1, float beta2,
                        float eps, float weight_decay, float bias_c1, float bias_c2) {
    __global float* p = p_base + p_off;
    __global const float* g = g_base + g_off;
    __global float* m = m_base + m_off;
    __global float* v = v_base + v_off;
    float step_size = lr / bias_c1;
    float sqrt_c2 = sqrt(bias_c2);
    RNN_GRID_LOOP(i, n) {
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
}
