// Mixed-precision training steps (after optim_common.cl, whose state helpers they use): dynamic loss
// scaling and the optimizer steps that skip on inf/NaN gradients and refresh the bf16/f16 low
// copy of the parameters. Everything reads its inputs from device memory, so a captured
// training step replays it without a host sync.

// grads *= 1 / scaler[0]; found_inf[0] = 1 where a gradient is inf or NaN (geometry E). The host
// zeroes found_inf just before; only 1s are written here, so concurrent writers agree.
__kernel void unscale_check(__global float* g_base, ulong g_off,
                            __global const float* scaler_base, ulong scaler_off,
                            __global float* found_base, ulong found_off, uint n) {
    __global float* g = g_base + g_off;
    const float inv = 1.0f / scaler_base[scaler_off];
    bool bad = false;
    RNN_GRID_LOOP(i, n) {
        const float x = g[i];
        bad |= (RNN_F32_BITS(x) & 0x7f800000u) == 0x7f800000u;
        g[i] = x * inv;
    }
    if (bad) found_base[found_off] = 1.0f;
}

// PyTorch's GradScaler update of scaler = [scale, clean steps in a row] (one work-item).
__kernel void update_scale(__global float* scaler_base, ulong scaler_off,
                           __global const float* found_base, ulong found_off, uint interval,
                           float growth, float backoff) {
    __global float* s = scaler_base + scaler_off;
    if (found_base[found_off] != 0.0f) {
        s[0] *= backoff;
        s[1] = 0.0f;
        return;
    }
    const float clean = s[1] + 1.0f;
    if (clean >= (float)interval) {
        const float grown = s[0] * growth;
        if ((RNN_F32_BITS(grown) & 0x7f800000u) != 0x7f800000u) s[0] = grown;
        s[1] = 0.0f;
    } else {
        s[1] = clean;
    }
}

// sgd_step (geometry E + L) and adam_step (V + L) that do nothing where found_inf[0] is set
// (every group returns before touching the state or the ticket, so the step count stays) and
// store each new parameter, rounded, in the low copy too.
#define RNN_SGD_MIXED(NAME, KIND) __kernel void NAME(__global float* p_base, ulong p_off,         \
        __global const float* g_base, ulong g_off, __global float* v_base, ulong v_off,         \
        __global float* state_base, ulong state_off, __global uint* ticket_base,                \
        ulong ticket_off, __global ushort* low_base, ulong low_off,                             \
        __global const float* found_base, ulong found_off, uint n, uint nesterov,               \
        float momentum, float weight_decay) {                                                   \
    __local float st[4];                                                                        \
    __local uint flag;                                                                          \
    if (found_base[found_off] != 0.0f) return;                                                  \
    __global float* p = p_base + p_off;                                                         \
    __global const float* g = g_base + g_off;                                                   \
    __global float* v = v_base + v_off;                                                         \
    __global ushort* low = low_base + low_off;                                                  \
    __global float* state = state_base + state_off;                                             \
    rnn_optim_begin(state, 0.0f, 0.0f, st);                                                     \
    const float lr = st[0];                                                                     \
    RNN_GRID_LOOP(i, n) {                                                                       \
        const float gi = g[i] + weight_decay * p[i];                                            \
        float step = gi;                                                                        \
        if (momentum != 0.0f) {                                                                 \
            const float vi = momentum * v[i] + gi;                                              \
            v[i] = vi;                                                                          \
            step = nesterov ? gi + momentum * vi : vi;                                          \
        }                                                                                       \
        const float next = p[i] - lr * step;                                                    \
        p[i] = next;                                                                            \
        low[i] = rnn_f32_to_half(next, KIND);                                                   \
    }                                                                                           \
    rnn_optim_end(state, ticket_base + ticket_off, st, &flag);                                  \
}
RNN_SGD_MIXED(sgd_step_bf16, RNN_KIND_BF16)
RNN_SGD_MIXED(sgd_step_f16, RNN_KIND_F16)

// The Adam step streams (geometry V + L, as adam_step): float4s, and a ushort4 of the low copy,
// where every view offset is a multiple of 4, then a scalar tail; the same arithmetic per
// element on either path.
#define RNN_ADAM_MIXED(NAME, KIND) __kernel void NAME(__global float* p_base, ulong p_off,        \
        __global const float* g_base, ulong g_off, __global float* m_base, ulong m_off,         \
        __global float* v_base, ulong v_off, __global float* state_base, ulong state_off,       \
        __global uint* ticket_base, ulong ticket_off, __global ushort* low_base,                \
        ulong low_off, __global const float* found_base, ulong found_off, uint n,               \
        uint decoupled, float beta1, float beta2, float eps, float weight_decay) {              \
    __local float st[4];                                                                        \
    __local uint flag;                                                                          \
    if (found_base[found_off] != 0.0f) return;                                                  \
    __global float* p = p_base + p_off;                                                         \
    __global const float* g = g_base + g_off;                                                   \
    __global float* m = m_base + m_off;                                                         \
    __global float* v = v_base + v_off;                                                         \
    __global ushort* low = low_base + low_off;                                                  \
    __global float* state = state_base + state_off;                                             \
    rnn_optim_begin(state, beta1, beta2, st);                                                   \
    const float lr = st[0];                                                                     \
    const float step_size = lr / st[2];                                                         \
    const float sqrt_c2 = sqrt(st[3]);                                                          \
    ulong done = 0;                                                                             \
    if (((p_off | g_off | m_off | v_off | low_off) & 3) == 0) {                                 \
        const ulong n4 = n / 4;                                                                 \
        for (ulong i = get_global_id(0); i < n4; i += get_global_size(0)) {                     \
            float4 pi = RNN_F4(p)[i];                                                           \
            float4 gi = RNN_CF4(g)[i];                                                          \
            if (decoupled) pi *= 1.0f - lr * weight_decay;                                      \
            else gi += weight_decay * pi;                                                       \
            const float4 mi = beta1 * RNN_F4(m)[i] + (1.0f - beta1) * gi;                       \
            const float4 vi = beta2 * RNN_F4(v)[i] + (1.0f - beta2) * gi * gi;                  \
            RNN_F4(m)[i] = mi;                                                                  \
            RNN_F4(v)[i] = vi;                                                                  \
            const float4 next = pi - step_size * mi / (sqrt(vi) / sqrt_c2 + eps);               \
            RNN_F4(p)[i] = next;                                                                \
            RNN_H4(low)[i] = rnn_f32_to_half4(next, KIND);                                      \
        }                                                                                       \
        done = n4 * 4;                                                                          \
    }                                                                                           \
    for (ulong i = done + get_global_id(0); i < n; i += get_global_size(0)) {                   \
        float pi = p[i];                                                                        \
        float gi = g[i];                                                                        \
        if (decoupled) pi *= 1.0f - lr * weight_decay;                                          \
        else gi += weight_decay * pi;                                                           \
        const float mi = beta1 * m[i] + (1.0f - beta1) * gi;                                    \
        const float vi = beta2 * v[i] + (1.0f - beta2) * gi * gi;                               \
        m[i] = mi;                                                                              \
        v[i] = vi;                                                                              \
        const float next = pi - step_size * mi / (sqrt(vi) / sqrt_c2 + eps);                    \
        p[i] = next;                                                                            \
        low[i] = rnn_f32_to_half(next, KIND);                                                   \
    }                                                                                           \
    rnn_optim_end(state, ticket_base + ticket_off, st, &flag);                                  \
}
RNN_ADAM_MIXED(adam_step_bf16, RNN_KIND_BF16)
RNN_ADAM_MIXED(adam_step_f16, RNN_KIND_F16)
