// The LSTM entries of the block-local sequence kernels (small_seq.cu has the
// bodies): a module of their own, so a model builds only its cell's kernels.

// The entries, each body twice: `NAME` the entry, `W_GLOBAL` false (W_hh into shared memory)
// or true (`w_hh` is W_hh packed by bl_pack_w, read through the read-only L1 path).
#define BL_LSTM_FORWARD(NAME, W_GLOBAL)                                                            \
    extern "C" __global__ void __launch_bounds__(1024) NAME(                                       \
        float* gates_base, u64 gates_off, float* hs_base, u64 hs_off, float* cs_base,              \
        u64 cs_off, const float* w_hh_base, u64 w_hh_off, const float* b_ih_base, u64 b_ih_off,    \
        const float* b_hh_base, u64 b_hh_off, uint steps, uint batch, uint hidden) {               \
        bl_lstm_forward<W_GLOBAL>(gates_base, gates_off, hs_base, hs_off, cs_base, cs_off,         \
            w_hh_base, w_hh_off, b_ih_base, b_ih_off, b_hh_base, b_hh_off, steps, batch,           \
            hidden);                                                                               \
    }
BL_LSTM_FORWARD(lstm_seq_forward_local, false)
BL_LSTM_FORWARD(lstm_seq_forward_l1, true)

#define BL_LSTM_BACKWARD(NAME, W_GLOBAL)                                                           \
    extern "C" __global__ void __launch_bounds__(1024) NAME(                                       \
        const float* dh_base, u64 dh_off, const float* gates_base, u64 gates_off,                  \
        const float* cs_base, u64 cs_off, const float* w_hh_base, u64 w_hh_off,                    \
        float* dgates_base, u64 dgates_off, float* carry_base, u64 carry_off, uint steps,          \
        uint batch, uint hidden, uint carry_in) {                                                  \
        bl_lstm_backward<W_GLOBAL>(dh_base, dh_off, gates_base, gates_off, cs_base, cs_off,        \
            w_hh_base, w_hh_off, dgates_base, dgates_off, carry_base, carry_off, steps, batch,     \
            hidden, carry_in);                                                                     \
    }
BL_LSTM_BACKWARD(lstm_seq_backward_local, false)
BL_LSTM_BACKWARD(lstm_seq_backward_l1, true)
