// The LSTM and GRU block-local sequence kernels with W_hh in registers (BL_REGS of
// small_seq.cl): a module of their own, built on first use only (a forced algorithm,
// RecurrentAlgorithm::BlockLocalRegisters), so the families every recurrent model builds at
// its start stay as they were. The Elman cell's, which the router takes by default, are in
// small_seq_rnn.

BL_LSTM_FORWARD(lstm_seq_forward_local_regs, BL_REGS)
BL_LSTM_BACKWARD(lstm_seq_backward_local_regs, BL_REGS)
BL_GRU_FORWARD(gru_seq_forward_local_regs, BL_REGS)
BL_GRU_BACKWARD(gru_seq_backward_local_regs, BL_REGS)
