// The Elman entries of the block-local sequence kernels (small_seq.cl has the
// bodies): a module of their own, so a model builds only its cell's kernels.

// The entries, each body twice: `NAME` the entry, `W_GLOBAL` 0 (W_hh into local memory) or 1
// (`w_hh` is W_hh packed by bl_pack_w, read through the L1 cache).
#define BL_RNN_FORWARD(NAME, W_GLOBAL)                                                          \
    __kernel void NAME(__global const float* pre_base, ulong pre_off, __global float* hs_base, \
                       ulong hs_off, __global const float* w_hh_base, ulong w_hh_off,          \
                       __global const float* b_ih_base, ulong b_ih_off,                        \
                       __global const float* b_hh_base, ulong b_hh_off, uint steps,           \
                       uint batch, uint hidden, uint act, float act_param,                    \
                       __local float* smem) {                                                  \
        bl_rnn_forward(pre_base + pre_off, hs_base + hs_off, w_hh_base + w_hh_off,            \
                       b_ih_base + b_ih_off, b_hh_base + b_hh_off, steps, batch, hidden, act, \
                       act_param, smem, W_GLOBAL);                                             \
    }
BL_RNN_FORWARD(rnn_seq_forward_local, 0)
BL_RNN_FORWARD(rnn_seq_forward_l1, 1)

#define BL_RNN_BACKWARD(NAME, W_GLOBAL)                                                         \
    __kernel void NAME(__global const float* dh_base, ulong dh_off,                           \
                       __global const float* hs_base, ulong hs_off,                           \
                       __global const float* w_hh_base, ulong w_hh_off,                       \
                       __global float* dpre_base, ulong dpre_off, uint steps, uint batch,     \
                       uint hidden, uint act, float act_param, __local float* smem) {         \
        bl_rnn_backward(dh_base + dh_off, hs_base + hs_off, w_hh_base + w_hh_off,             \
                        dpre_base + dpre_off, steps, batch, hidden, act, act_param, smem,     \
                        W_GLOBAL);                                                             \
    }
BL_RNN_BACKWARD(rnn_seq_backward_local, 0)
BL_RNN_BACKWARD(rnn_seq_backward_l1, 1)
