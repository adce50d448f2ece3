// One-launch optimizer steps over the flat parameter buffer (geometry E). The learning rate and
// the step count live in device memory, `state = [lr, step, bias_c1, bias_c2]`, so a captured
// training-step graph replays correctly while they change: every block reads the state when it
// starts, and the last block to finish (geometry L's ticket) advances it for the next launch.

// Thread 0's view of the state for this launch: the step this launch takes (state[1] + 1) and
// Adam's bias corrections 1 - beta^step, computed in double (1 - beta^t loses digits in float
// for small t).
struct RnnOptimStep {
    float lr;
    float step;
    float bias_c1;
    float bias_c2;
};

__device__ __forceinline__ RnnOptimStep rnn_optim_begin(const float* state, float beta1,
                                                        float beta2) {
    __shared__ RnnOptimStep st;
    if (threadIdx.x == 0) {
        st.lr = state[0];
        st.step = state[1] + 1.0f;
        st.bias_c1 = (float)(1.0 - pow((double)beta1, (double)st.step));
        st.bias_c2 = (float)(1.0 - pow((double)beta2, (double)st.step));
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
extern "C" __global__ void adam_step(float* p_base, u64 p_off, const float* g_base, u64 g_off,
                                     float* m_base, u64 m_off, float* v_base, u64 v_off,
                                     float* state_base, u64 state_off, uint* ticket_base,
                                     u64 ticket_off, uint n, uint decoupled, float beta1,
                                     float beta2, float eps, float weight_decay) {
    float* p = p_base + p_off;
    const float* g = g_base + g_off;
    float* m = m_base + m_off;
    float* v = v_base + v_off;
    float* state = state_base + state_off;
    const RnnOptimStep st = rnn_optim_begin(state, beta1, beta2);
    const float lr = st.lr;
    const float step_size = lr / st.bias_c1;
    const float sqrt_c2 = sqrtf(st.bias_c2);
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
    rnn_optim_end(state, ticket_base + ticket_off, st);
}
