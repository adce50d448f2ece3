// The LSTM entries of the block-local sequence kernels (small_seq.cl has the
// bodies): a module of their own, so a model builds only its cell's kernels.

// The entries, each body twice: `NAME` the entry, `W_GLOBAL` 0 (W_hh into local memory) or 1
// (`w_hh` is W_hh packed by bl_pack_w, read through the L1 cache).
#define BL_LSTM_FORWARD(NAME, W_GLOBAL)                                                         \
    __kernel void NAME(__global float* gates_base, ulong gates_off, __global float* hs_base,  \
                       ulong hs_off, __global float* cs_base, ulong cs_off,                   \
                       __global const float* w_hh_base, ulong w_hh_off,                       \
                       __global const float* b_ih_base, ulong b_ih_off,                       \
                       __global const float* b_hh_base, ulong b_hh_off, uint steps,           \
                       uint batch, uint hidden, __local float* smem) {                        \
        bl_lstm_forward(gates_base + gates_off, hs_base + hs_off, cs_base + cs_off,           \
                        w_hh_base + w_hh_off, b_ih_base + b_ih_off, b_hh_base + b_hh_off,     \
                        steps, batch, hidden, smem, W_GLOBAL);                                 \
    }
BL_LSTM_FORWARD(lstm_seq_forward_local, 0)
BL_LSTM_FORWARD(lstm_seq_forward_l1, 1)

#define BL_LSTM_BACKWARD(NAME, W_GLOBAL)                                                        \
    __kernel void NAME(__global const float* dh_base, ulong dh_off,                           \
                       __global const float* gates_base, ulong gates_off,                     \
                       __global const float* cs_base, ulong cs_off,                           \
                       __global const float* w_hh_base, ulong w_hh_off,                       \
                       __global float* dgates_base, ulong dgates_off,                         \
                       __global float* carry_base, ulong carry_off, uint steps, uint batch,   \
                       uint hidden, uint carry_in, __local float* smem) {                     \
        bl_lstm_backward(dh_base + dh_off, gates_base + gates_off, cs_base + cs_off,          \
                         w_hh_base + w_hh_off, dgates_base + dgates_off,                      \
                         carry_base + carry_off, steps, batch, hidden, carry_in, smem,        \
                         W_GLOBAL);                                                            \
    }
BL_LSTM_BACKWARD(lstm_seq_backward_local, 0)
BL_LSTM_BACKWARD(lstm_seq_backward_l1, 1)
