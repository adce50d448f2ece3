// One-launch optimizer steps over the flat parameter buffer (geometry E). The learning rate and
// the step count live in device memory, `state = [lr, step, bias_c1, bias_c2]`: every group reads
// it when it starts, and the last group to finish (geometry L's ticket) advances it.

#ifdef cl_khr_fp64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
// 1 - beta^t in double (in float it loses digits for small t), beta^t by squaring over the
// whole step t (below 2^24): about 2 log2 t dependent multiplications, where a library pow
// costs the work-item hundreds of instructions while its whole group waits.
inline float rnn_bias_correction(float beta, float t) {
    double b = (double)beta, r = 1.0;
    for (uint e = (uint)t; e != 0u; e >>= 1) {
        if (e & 1u) r *= b;
        b *= b;
    }
    return (float)(1.0 - r);
}
#else
inline float rnn_bias_correction(float beta, float t) {
    return 1.0f - pow(beta, t);
}
#endif

// Work-item 0 reads the state into `st` = [lr, step this launch takes, bias_c1, bias_c2].
inline void rnn_optim_begin(__global const float* state, float beta1, float beta2,
                            __local float* st) {
    if (get_local_id(0) == 0) {
        float t = state[1] + 1.0f;
        st[0] = state[0];
        st[1] = t;
        st[2] = rnn_bias_correction(beta1, t);
        st[3] = rnn_bias_correction(beta2, t);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
}

// After the group's updates: the last group to arrive stores the new step and corrections. No
// group reads the state after its arrival, so the write races with nothing.
inline void rnn_optim_end(__global float* state, __global uint* ticket, __local float* st,
                          __local uint* flag) {
    if (rnn_last_arrival(ticket, get_num_groups(0), flag) && get_local_id(0) == 0) {
        state[1] = st[1];
        state[2] = st[2];
        state[3] = st[3];
    }
}

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
