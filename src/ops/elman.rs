//! The Elman recurrent network's ops: one fused time step, and a whole sequence.

use super::check::{self, ElmanArg};
use super::views::view_group;
use super::{Activation, MemoryOps};
use crate::buffer::View;
use crate::error::Result;
use crate::ops::RecurrentWeights;
use crate::ops::SeqShape;

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

view_group! {
    /// The arguments of [`ElmanOps::rnn_step_forward`].
    RnnStepForward {
        /// `x_t W_ih^T` (from one GEMM over all steps), `batch x hidden`.
        pre: View<'a>,
        /// The previous hidden state, `batch x hidden`.
        h_prev: View<'a>,
        /// `w_hh` (`hidden x hidden`, row-major, PyTorch's layout), `b_ih` and `b_hh`.
        weights: RecurrentWeights<'a>,
        /// Written: the new hidden state, `batch x hidden`.
        h: View<'a>,
        /// `Tanh` or `Relu`.
        act: Activation,
        /// Batch and hidden size ([`SeqShape::step`]).
        shape: SeqShape,
    }
    /// The arguments in declaration order.
}

view_group! {
    /// The arguments of [`ElmanOps::rnn_step_backward`].
    RnnStepBackward {
        /// The gradient reaching `h` from above, `batch x hidden`.
        dh: View<'a>,
        /// The next step's `dpre`; `None` at the last step, where the product is zero.
        dpre_next: Option<View<'a>>,
        /// The recurrent weight, `hidden x hidden`.
        w_hh: View<'a>,
        /// The step's output, which gives the derivative.
        h: View<'a>,
        /// Written: the gradient w.r.t. the pre-activation, `batch x hidden`.
        dpre: View<'a>,
        /// `Tanh` or `Relu`.
        act: Activation,
        /// Batch and hidden size ([`SeqShape::step`]).
        shape: SeqShape,
    }
    /// The arguments in declaration order.
}

view_group! {
    /// The arguments of [`ElmanOps::rnn_sequence_forward`].
    RnnSequenceForward {
        /// `x W_ih^T` for all steps (from one GEMM), `steps * batch x hidden`.
        pre: View<'a>,
        /// The states, `(steps + 1) * batch x hidden`: block 0 the initial state (read), blocks
        /// `1..=steps` written.
        hs: View<'a>,
        /// `w_hh` (`hidden x hidden`, row-major), `b_ih` and `b_hh`.
        weights: RecurrentWeights<'a>,
        /// `Tanh` or `Relu`.
        act: Activation,
        /// Steps, batch and hidden size.
        shape: SeqShape,
    }
    /// The arguments in declaration order.
}

view_group! {
    /// The arguments of [`ElmanOps::rnn_sequence_backward`].
    RnnSequenceBackward {
        /// The gradient reaching each `h_t` from above, `steps * batch x hidden`.
        dh: View<'a>,
        /// The forward's `(steps + 1) * batch x hidden` state buffer.
        hs: View<'a>,
        /// The recurrent weight, `hidden x hidden`.
        w_hh: View<'a>,
        /// Written: `steps * batch x hidden`; overlaps no input.
        dpre: View<'a>,
        /// `Tanh` or `Relu`.
        act: Activation,
        /// Steps, batch and hidden size.
        shape: SeqShape,
    }
    /// The arguments in declaration order.
}

/// `(W_hh, b_ih, b_hh)` of an Elman layer of `hidden` units, for [`check::elman`]; the product
/// saturates (the check rejects an overflowing shape first).
fn elman_params<'a, 'b>(hidden: usize, w: &'a RecurrentWeights<'b>) -> [ElmanArg<'a, 'b>; 3] {
    [
        ("w_hh", &w.w_hh, hidden.saturating_mul(hidden)),
        ("b_ih", &w.b_ih, hidden),
        ("b_hh", &w.b_hh, hidden),
    ]
}

impl<'a> RnnStepForward<'a> {
    pub(crate) const OP: &'static str = "rnn_step_forward";

    /// Every view, in the kernel's order.
    pub(crate) fn views(&self) -> [View<'a>; 6] {
        let RecurrentWeights { w_hh, b_ih, b_hh } = self.weights;
        [self.pre, self.h_prev, w_hh, b_ih, b_hh, self.h]
    }

    /// Checks the arguments against the context `ctx`; returns `batch * hidden`, which fits the
    /// 32-bit kernel dimensions.
    pub(crate) fn check(&self, ctx: u64) -> Result<usize> {
        check::same_context(Self::OP, ctx, &self.views().each_ref())?;
        let n = self.shape.batch.saturating_mul(self.shape.hidden);
        let [w_hh, b_ih, b_hh] = elman_params(self.shape.hidden, &self.weights);
        let inputs = [
            ("pre", &self.pre, n),
            ("h_prev", &self.h_prev, n),
            w_hh,
            b_ih,
            b_hh,
        ];
        check::elman(Self::OP, self.act, self.shape, &inputs, ("h", &self.h, n))
    }
}

impl<'a> RnnStepBackward<'a> {
    pub(crate) const OP: &'static str = "rnn_step_backward";

    /// Every view in the kernel's order, `dh` in the slot of a missing `dpre_next` (the kernel
    /// does not read it then).
    pub(crate) fn views(&self) -> [View<'a>; 5] {
        let next = self.dpre_next.unwrap_or(self.dh);
        [self.dh, next, self.w_hh, self.h, self.dpre]
    }

    /// Checks the arguments against the context `ctx`; returns `batch * hidden`, which fits the
    /// 32-bit kernel dimensions.
    pub(crate) fn check(&self, ctx: u64) -> Result<usize> {
        check::same_context(Self::OP, ctx, &self.views().each_ref())?;
        let hidden = self.shape.hidden;
        let n = self.shape.batch.saturating_mul(hidden);
        let mut inputs = vec![
            ("dh", &self.dh, n),
            ("w_hh", &self.w_hh, hidden.saturating_mul(hidden)),
            ("h", &self.h, n),
        ];
        if let Some(next) = &self.dpre_next {
            inputs.push(("dpre_next", next, n));
        }
        check::elman(
            Self::OP,
            self.act,
            self.shape,
            &inputs,
            ("dpre", &self.dpre, n),
        )
    }
}

impl<'a> RnnSequenceForward<'a> {
    pub(crate) const OP: &'static str = "rnn_sequence_forward";

    /// Every view, in the kernels' order.
    pub(crate) fn views(&self) -> [View<'a>; 5] {
        let RecurrentWeights { w_hh, b_ih, b_hh } = self.weights;
        [self.pre, self.hs, w_hh, b_ih, b_hh]
    }

    /// Checks the arguments against the context `ctx`; returns one step's `batch * hidden`, 0
    /// where there is nothing to compute.
    pub(crate) fn check(&self, ctx: u64) -> Result<usize> {
        check::same_context(Self::OP, ctx, &self.views().each_ref())?;
        let SeqShape { steps, hidden, .. } = self.shape;
        let n = self.shape.batch.saturating_mul(self.shape.hidden);
        let [w_hh, b_ih, b_hh] = elman_params(hidden, &self.weights);
        let inputs = [
            ("pre", &self.pre, steps.saturating_mul(n)),
            w_hh,
            b_ih,
            b_hh,
        ];
        let out = ("hs", &self.hs, steps.saturating_add(1).saturating_mul(n));
        let n = check::elman(Self::OP, self.act, self.shape, &inputs, out)?;
        Ok(if steps == 0 { 0 } else { n })
    }
}

impl<'a> RnnSequenceBackward<'a> {
    pub(crate) const OP: &'static str = "rnn_sequence_backward";

    /// Every view, in the kernels' order.
    pub(crate) fn views(&self) -> [View<'a>; 4] {
        [self.dh, self.hs, self.w_hh, self.dpre]
    }

    /// Checks the arguments against the context `ctx`; returns one step's `batch * hidden`, 0
    /// where there is nothing to compute.
    pub(crate) fn check(&self, ctx: u64) -> Result<usize> {
        check::same_context(Self::OP, ctx, &self.views().each_ref())?;
        let SeqShape { steps, hidden, .. } = self.shape;
        let n = self.shape.batch.saturating_mul(self.shape.hidden);
        let inputs = [
            ("dh", &self.dh, steps.saturating_mul(n)),
            ("hs", &self.hs, steps.saturating_add(1).saturating_mul(n)),
            ("w_hh", &self.w_hh, hidden.saturating_mul(hidden)),
        ];
        let out = ("dpre", &self.dpre, steps.saturating_mul(n));
        let n = check::elman(Self::OP, self.act, self.shape, &inputs, out)?;
        Ok(if steps == 0 { 0 } else { n })
    }
}
