// The paired block-local entries (the `*_PAIR` macros of small_seq.cu): the two directions of a
// bidirectional layer in one launch, W_hh in shared memory, read through L1 or (Elman, as the
// router takes it) in registers. A module of its own, built on first use: only bidirectional
// models launch it.

BL_RNN_FORWARD_PAIR(rnn_seq_forward_local_pair, BL_SHARED)
BL_RNN_FORWARD_PAIR(rnn_seq_forward_l1_pair, BL_GLOBAL)
BL_RNN_FORWARD_PAIR(rnn_seq_forward_local_regs_pair, BL_REGS)
BL_RNN_BACKWARD_PAIR(rnn_seq_backward_local_pair, BL_SHARED)
BL_RNN_BACKWARD_PAIR(rnn_seq_backward_l1_pair, BL_GLOBAL)
BL_RNN_BACKWARD_PAIR(rnn_seq_backward_local_regs_pair, BL_REGS)
BL_LSTM_FORWARD_PAIR(lstm_seq_forward_local_pair, BL_SHARED)
BL_LSTM_FORWARD_PAIR(lstm_seq_forward_l1_pair, BL_GLOBAL)
BL_LSTM_BACKWARD_PAIR(lstm_seq_backward_local_pair, BL_SHARED)
BL_LSTM_BACKWARD_PAIR(lstm_seq_backward_l1_pair, BL_GLOBAL)
BL_GRU_FORWARD_PAIR(gru_seq_forward_local_pair, BL_SHARED)
BL_GRU_FORWARD_PAIR(gru_seq_forward_l1_pair, BL_GLOBAL)
BL_GRU_BACKWARD_PAIR(gru_seq_backward_local_pair, BL_SHARED)
BL_GRU_BACKWARD_PAIR(gru_seq_backward_l1_pair, BL_GLOBAL)
