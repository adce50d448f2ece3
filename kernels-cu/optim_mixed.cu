// Mixed-precision training steps (after optim_common.cuh, whose state helpers they use): dynamic loss
// scaling and the optimizer steps that skip on inf/NaN gradients and refresh the bf16/f16 low
// copy of the parameters. Everything reads its inputs from device memory, so a captured
// training step replays it without a host sync.

// grads *= 1 / scaler[0]; found_inf[0] = 1 where a gradient is inf or NaN (geometry E). The host
// zeroes found_inf just before; only 1s are written here, so concurrent writers agree.
extern "C" __global__ void unscale_check(float* g_base, u64 g_off, const float* scaler_base,
                                         u64 scaler_off, float* found_base, u64 found_off,
                                         uint n) {
    float* g = g_base + g_off;
    const float inv = 1.0f / scaler_base[scaler_off];
    bool bad = false;
    RNN_GRID_LOOP(i, n) {
        const float x = g[i];
        bad |= (RNN_F32_BITS(x) & 0x7f800000u) == 0x7f800000u;
        g[i] = x * inv;
    }
    if (bad) found_base[found_off] = 1.0f;
}

// PyTorch's GradScaler update of scaler = [scale, clean steps in a row] (one thread).
extern "C" __global__ void update_scale(float* scaler_base, u64 scaler_off,
                                        const float* found_base, u64 found_off, uint interval,
                                        float growth, float backoff) {
    float* s = scaler_base + scaler_off;
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
// (every block returns before touching the state or the ticket, so the step count stays) and
// store each new parameter, rounded, in the low copy too.
#define RNN_SGD_MIXED(NAME, KIND) extern "C" __global__ void NAME(float* p_base, u64 p_off,      \
        const float* g_base, u64 g_off, float* vel_base, u64 vel_off, float* state_base,       \
        u64 state_off, uint* ticket_base, u64 ticket_off, ushort* low_base, u64 low_off,       \
        const float* found_base, u64 found_off, uint n, uint nesterov, float momentum,         \
        float weight_decay) {                                                                   \
    if (found_base[found_off] != 0.0f) return;                                                  \
    float* p = p_base + p_off;                                                                  \
    const float* g = g_base + g_off;                                                            \
    float* vel = vel_base + vel_off;                                                            \
    ushort* low = low_base + low_off;                                                           \
    float* state = state_base + state_off;                                                      \
    const RnnOptimStep st = rnn_optim_begin(state, 0.0f, 0.0f);                                 \
    RNN_GRID_LOOP(i, n) {                                                                       \
        const float pi = p[i];                                                                  \
        const float gi = g[i] + weight_decay * pi;                                              \
        float step = gi;                                                                        \
        if (momentum != 0.0f) {                                                                 \
            const float v = momentum * vel[i] + gi;                                             \
            vel[i] = v;                                                                         \
            step = nesterov ? gi + momentum * v : v;                                            \
        }                                                                                       \
        const float next = pi - st.lr * step;                                                   \
        p[i] = next;                                                                            \
        low[i] = rnn_f32_to_half(next, KIND);                                                   \
    }                                                                                           \
    rnn_optim_end(state, ticket_base + ticket_off, st);                                         \
}
RNN_SGD_MIXED(sgd_step_bf16, RNN_KIND_BF16)
RNN_SGD_MIXED(sgd_step_f16, RNN_KIND_F16)

// The Adam step streams as adam_step does (optim.cu's rnn_adam_stream, geometry V + L), each
// group of four new parameters also stored rounded as one 8-byte word of the low copy.
#define RNN_ADAM_MIXED(NAME, KIND) extern "C" __global__ void NAME(float* p_base, u64 p_off,     \
        const float* g_base, u64 g_off, float* m_base, u64 m_off, float* v_base, u64 v_off,    \
        float* state_base, u64 state_off, uint* ticket_base, u64 ticket_off, ushort* low_base,  \
        u64 low_off, const float* found_base, u64 found_off, uint n, uint decoupled,           \
        float beta1, float beta2, float eps, float weight_decay) {                             \
    if (found_base[found_off] != 0.0f) return;                                                  \
    float* p = p_base + p_off;                                                                  \
    const float* g = g_base + g_off;                                                            \
    float* m = m_base + m_off;                                                                  \
    float* v = v_base + v_off;                                                                  \
    ushort* low = low_base + low_off;                                                           \
    float* state = state_base + state_off;                                                      \
    const RnnOptimStep st = rnn_optim_begin(state, beta1, beta2);                               \
    const RnnAdam a = {st.lr,        st.lr / st.bias_c1, sqrtf(st.bias_c2), beta1, beta2, eps, \
                       weight_decay, decoupled != 0};                                           \
    rnn_adam_stream<true>(p, g, m, v, low, n, a, KIND);                                         \
    rnn_optim_end(state, ticket_base + ticket_off, st);                                         \
}
RNN_ADAM_MIXED(adam_step_bf16, RNN_KIND_BF16)
RNN_ADAM_MIXED(adam_step_f16, RNN_KIND_F16)
