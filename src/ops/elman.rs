//! The Elman recurrent network's ops: one fused time step, and a whole sequence.

use super::{Activation, MemoryOps};
use crate::buffer::View;
use crate::error::Result;
use crate::ops::RecurrentWeights;
use crate::ops::SeqShape;

/// The Elman (vanilla RNN) recurrence, one time step or a whole sequence per call.
///
/// `batch`, `hidden` (and `steps`) come in a [`SeqShape`]; the step ops take
/// [`SeqShape::step`].
pub trait ElmanOps: MemoryOps {
    /// Elman forward for one time step over `batch x hidden`, fused into one pass:
    /// `h = act(pre + h_prev W_hh^T + b_ih + b_hh)`, where `pre = x_t W_ih^T` (from one GEMM
    /// over all steps) and `w_hh` is `hidden x hidden`, row-major (PyTorch's layout). `act` is
    /// `Tanh` or `Relu`. `h` overlaps no input (at `t = 0` a zero block serves as `h_prev`).
    fn rnn_step_forward(
        &self,
        pre: View<'_>,
        h_prev: View<'_>,
        weights: RecurrentWeights<'_>,
        h: View<'_>,
        act: Activation,
        shape: SeqShape,
    ) -> Result<()>;

    /// Elman backward for one time step over `batch x hidden`, fused into one pass:
    /// `dpre = act'(h) * (dh + dpre_next W_hh)`, the derivative taken from the output `h`.
    /// `dh` is the gradient reaching `h` from above; `dpre_next` is the next step's `dpre`
    /// (`None` at the last step, where the product is zero). `act` is `Tanh` or `Relu`. `dpre`
    /// overlaps no input.
    #[allow(clippy::too_many_arguments)]
    fn rnn_step_backward(
        &self,
        dh: View<'_>,
        dpre_next: Option<View<'_>>,
        w_hh: View<'_>,
        h: View<'_>,
        dpre: View<'_>,
        act: Activation,
        shape: SeqShape,
    ) -> Result<()>;

    /// Elman forward over a whole sequence: for `t in 0..steps`,
    /// `hs[t+1] = act(pre[t] + hs[t] W_hh^T + b_ih + b_hh)`, each block `batch x hidden`.
    /// `pre` is `steps * batch x hidden` (`x W_ih^T` for all steps, from one GEMM); `hs` is
    /// `(steps + 1) * batch x hidden`, its block 0 the initial state (read) and blocks
    /// `1..=steps` written. `act` is `Tanh` or `Relu`; `hs` overlaps no other argument. The same
    /// result as [`ElmanOps::rnn_step_forward`] step by step; a GPU backend with a cooperative
    /// launch (CUDA) runs all steps in one kernel.
    fn rnn_sequence_forward(
        &self,
        pre: View<'_>,
        hs: View<'_>,
        weights: RecurrentWeights<'_>,
        act: Activation,
        shape: SeqShape,
    ) -> Result<()>;

    /// Elman backward through a whole sequence: for `t` from `steps - 1` down to 0,
    /// `dpre[t] = act'(hs[t+1]) * (dh[t] + dpre[t+1] W_hh)`, without the product at
    /// `t = steps - 1`. `dh` (`steps * batch x hidden`) is the gradient reaching each `h_t` from
    /// above; `hs` is the forward's `(steps + 1) * batch x hidden` state buffer; `dpre`
    /// (`steps * batch x hidden`) is written and overlaps no input. `act` is `Tanh` or `Relu`.
    /// The same result as [`ElmanOps::rnn_step_backward`] step by step.
    fn rnn_sequence_backward(
        &self,
        dh: View<'_>,
        hs: View<'_>,
        w_hh: View<'_>,
        dpre: View<'_>,
        act: Activation,
        shape: SeqShape,
    ) -> Result<()>;
}
