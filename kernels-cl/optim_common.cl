// One-launch optimizer steps over the flat parameter buffer (geometry E). The learning rate and
// the step count live in device memory, `state = [lr, step, bias_c1, bias_c2]`: every group reads
// it when it starts, and the last group to finish (geometry L's ticket) advances it.
//
// The state helpers of every optimizer step (optim and optim_mixed), included by both families;
// once in the whole op set.
#ifndef RNN_OPTIM_COMMON_CL
#define RNN_OPTIM_COMMON_CL

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

#endif  // RNN_OPTIM_COMMON_CL
