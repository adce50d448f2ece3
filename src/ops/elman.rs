//! The Elman recurrent network's ops: one fused time step, and a whole sequence.

use super::MemoryOps;
use crate::error::Result;
#[cfg(doc)]
use crate::ops::SeqShape;
use crate::ops::{RnnSequenceBackward, RnnSequenceForward, RnnStepBackward, RnnStepForward};

/// The Elman (vanilla RNN) recurrence, one time step or a whole sequence per call.
///
/// Each op takes one argument struct; `batch`, `hidden` (and `steps`) come in its [`SeqShape`],
/// the step ops' a [`SeqShape::step`]. `act` is `Tanh` or `Relu`.
pub trait ElmanOps: MemoryOps {
    /// Elman forward for one time step over `batch x hidden`, fused into one pass:
    /// `h = act(pre + h_prev W_hh^T + b_ih + b_hh)`. `h` overlaps no input (at `t = 0` a zero
    /// block serves as `h_prev`).
    fn rnn_step_forward(&self, a: RnnStepForward<'_>) -> Result<()>;

    /// Elman backward for one time step over `batch x hidden`, fused into one pass:
    /// `dpre = act'(h) * (dh + dpre_next W_hh)`, the derivative taken from the output `h`.
    /// `dpre` overlaps no input.
    fn rnn_step_backward(&self, a: RnnStepBackward<'_>) -> Result<()>;

    /// Elman forward over a whole sequence: for `t in 0..steps`,
    /// `hs[t+1] = act(pre[t] + hs[t] W_hh^T + b_ih + b_hh)`, each block `batch x hidden`. `hs`
    /// overlaps no other argument. The same result as [`ElmanOps::rnn_step_forward`] step by
    /// step; a GPU backend with a cooperative launch (CUDA) runs all steps in one kernel.
    fn rnn_sequence_forward(&self, a: RnnSequenceForward<'_>) -> Result<()>;

    /// Elman backward through a whole sequence: for `t` from `steps - 1` down to 0,
    /// `dpre[t] = act'(hs[t+1]) * (dh[t] + dpre[t+1] W_hh)`, without the product at
    /// `t = steps - 1`. `dpre` overlaps no input. The same result as
    /// [`ElmanOps::rnn_step_backward`] step by step.
    fn rnn_sequence_backward(&self, a: RnnSequenceBackward<'_>) -> Result<()>;
}
