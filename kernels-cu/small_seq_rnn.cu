// The Elman entries of the block-local sequence kernels (small_seq.cu has the
// bodies): a module of their own, so a model builds only its cell's kernels.

// The entries, each body twice: `NAME` the entry, `W_GLOBAL` false (W_hh into shared memory)
// or true (`w_hh` is W_hh packed by bl_pack_w, read through the read-only L1 path).
#define BL_RNN_FORWARD(NAME, W_GLOBAL)                                                             \
    extern "C" __global__ void __launch_bounds__(1024) NAME(                                       \
        const float* pre_base, u64 pre_off, float* hs_base, u64 hs_off, const float* w_hh_base,    \
        u64 w_hh_off, const float* b_ih_base, u64 b_ih_off, const float* b_hh_base,                \
        u64 b_hh_off, uint steps, uint batch, uint hidden, uint act, float act_param) {            \
        bl_rnn_forward<W_GLOBAL>(pre_base, pre_off, hs_base, hs_off, w_hh_base, w_hh_off,          \
            b_ih_base, b_ih_off, b_hh_base, b_hh_off, steps, batch, hidden, act, act_param);       \
    }
BL_RNN_FORWARD(rnn_seq_forward_local, false)
BL_RNN_FORWARD(rnn_seq_forward_l1, true)

#define BL_RNN_BACKWARD(NAME, W_GLOBAL)                                                            \
    extern "C" __global__ void __launch_bounds__(1024) NAME(                                       \
        const float* dh_base, u64 dh_off, const float* hs_base, u64 hs_off,                        \
        const float* w_hh_base, u64 w_hh_off, float* dpre_base, u64 dpre_off, uint steps,          \
        uint batch, uint hidden, uint act, float act_param) {                                      \
        bl_rnn_backward<W_GLOBAL>(dh_base, dh_off, hs_base, hs_off, w_hh_base, w_hh_off,           \
            dpre_base, dpre_off, steps, batch, hidden, act, act_param);                            \
    }
BL_RNN_BACKWARD(rnn_seq_backward_local, false)
BL_RNN_BACKWARD(rnn_seq_backward_l1, true)
