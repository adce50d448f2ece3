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

#endif  // RNN_OPTIM_COMMON_CUH
