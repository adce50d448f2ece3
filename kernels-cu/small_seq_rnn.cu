// The Elman entries of the block-local sequence kernels (small_seq.cu has the
// bodies and the entry macros): a module of their own, so a model builds only its cell's
// kernels. The Elman cell's register variant is here too (the router takes it by default);
// the LSTM and GRU ones, run only when forced, are small_seq_regs.

BL_RNN_FORWARD(rnn_seq_forward_local, BL_SHARED)
BL_RNN_FORWARD(rnn_seq_forward_l1, BL_GLOBAL)
BL_RNN_BACKWARD(rnn_seq_backward_local, BL_SHARED)
BL_RNN_BACKWARD(rnn_seq_backward_l1, BL_GLOBAL)
BL_RNN_FORWARD(rnn_seq_forward_local_regs, BL_REGS)
BL_RNN_BACKWARD(rnn_seq_backward_local_regs, BL_REGS)
