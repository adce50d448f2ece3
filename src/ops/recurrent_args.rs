//! The argument structs of the recurrent ops (Elman, the LSTM and GRU cells and sequences),
//! one per op as cuDNN has its descriptors: the views and sizes of a call, named, with the op's
//! name, its views in the kernels' order and its checks (context and type, lengths, overlaps),
//! which every backend runs before touching memory.

use super::check::{self, Arg, SeqArg};
use super::views::op_args;
use super::{Activation, GruGateGrads, RecurrentWeights, SeqShape};
#[cfg(doc)]
use super::{ElmanOps, GatedCellOps, GatedSequenceOps};
use crate::buffer::View;
use crate::error::Result;

// The Elman ops.

op_args! {
    /// The arguments of [`ElmanOps::rnn_step_forward`].
    RnnStepForward for "rnn_step_forward" {
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
    views [pre, h_prev, weights.w_hh, weights.b_ih, weights.b_hh, h]
}

op_args! {
    /// The arguments of [`ElmanOps::rnn_step_backward`].
    RnnStepBackward for "rnn_step_backward" {
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
}

op_args! {
    /// The arguments of [`ElmanOps::rnn_sequence_forward`].
    RnnSequenceForward for "rnn_sequence_forward" {
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
    views [pre, hs, weights.w_hh, weights.b_ih, weights.b_hh]
}

op_args! {
    /// The arguments of [`ElmanOps::rnn_sequence_backward`].
    RnnSequenceBackward for "rnn_sequence_backward" {
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
    views [dh, hs, w_hh, dpre]
}

impl RnnStepForward<'_> {
    /// Checks the arguments against the context `ctx`; returns `batch * hidden`, which fits the
    /// 32-bit kernel dimensions.
    pub(crate) fn check(&self, ctx: u64) -> Result<usize> {
        check::same_context(Self::OP, ctx, &self.views().each_ref())?;
        let n = self.shape.batch.saturating_mul(self.shape.hidden);
        let [w_hh, b_ih, b_hh] = check::gate_params(1, self.shape.hidden, &self.weights);
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
            check::recurrent_weight(1, hidden, &self.w_hh),
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

impl RnnSequenceForward<'_> {
    /// Checks the arguments against the context `ctx`; returns one step's `batch * hidden`, 0
    /// where there is nothing to compute.
    pub(crate) fn check(&self, ctx: u64) -> Result<usize> {
        check::same_context(Self::OP, ctx, &self.views().each_ref())?;
        let SeqShape { steps, hidden, .. } = self.shape;
        let n = self.shape.batch.saturating_mul(self.shape.hidden);
        let [w_hh, b_ih, b_hh] = check::gate_params(1, hidden, &self.weights);
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

impl RnnSequenceBackward<'_> {
    /// Checks the arguments against the context `ctx`; returns one step's `batch * hidden`, 0
    /// where there is nothing to compute.
    pub(crate) fn check(&self, ctx: u64) -> Result<usize> {
        check::same_context(Self::OP, ctx, &self.views().each_ref())?;
        let SeqShape { steps, hidden, .. } = self.shape;
        let n = self.shape.batch.saturating_mul(self.shape.hidden);
        let inputs = [
            ("dh", &self.dh, steps.saturating_mul(n)),
            ("hs", &self.hs, steps.saturating_add(1).saturating_mul(n)),
            check::recurrent_weight(1, hidden, &self.w_hh),
        ];
        let out = ("dpre", &self.dpre, steps.saturating_mul(n));
        let n = check::elman(Self::OP, self.act, self.shape, &inputs, out)?;
        Ok(if steps == 0 { 0 } else { n })
    }
}

// The LSTM and GRU cells.

op_args! {
    /// The arguments of [`GatedCellOps::lstm_cell_forward`].
    LstmCellForward for "lstm_cell_forward" {
        /// `batch x 4*hidden`: `x W_ih^T + h_prev W_hh^T + b_ih + b_hh` on entry, the activated
        /// gates on return.
        gates: View<'a>,
        /// The previous cell state, `batch x hidden`.
        c_prev: View<'a>,
        /// Written: the cell state, `batch x hidden`.
        c: View<'a>,
        /// Written: the hidden state, `batch x hidden`.
        h: View<'a>,
        /// Batch and hidden size ([`SeqShape::step`]).
        shape: SeqShape,
    }
    views [gates, c_prev, c, h]
}

op_args! {
    /// The arguments of [`GatedCellOps::lstm_cell_backward`].
    LstmCellBackward for "lstm_cell_backward" {
        /// The activated gates the forward step left, `batch x 4*hidden`.
        gates: View<'a>,
        /// The previous cell state, `batch x hidden`.
        c_prev: View<'a>,
        /// The cell state, `batch x hidden`.
        c: View<'a>,
        /// The gradient reaching `h`, `batch x hidden`.
        dh: View<'a>,
        /// The gradient reaching `c` from the next step; overwritten with the gradient for
        /// `c_prev`.
        dc: View<'a>,
        /// Written: the gradient w.r.t. the gate pre-activations, `batch x 4*hidden`.
        dgates: View<'a>,
        /// Batch and hidden size ([`SeqShape::step`]).
        shape: SeqShape,
    }
    views [gates, c_prev, c, dh, dc, dgates]
}

op_args! {
    /// The arguments of [`GatedCellOps::gru_cell_forward`].
    GruCellForward for "gru_cell_forward" {
        /// `x W_ih^T + b_ih`, `batch x 3*hidden`.
        gx: View<'a>,
        /// `h_prev W_hh^T + b_hh`, `batch x 3*hidden`.
        gh: View<'a>,
        /// The previous hidden state, `batch x hidden`.
        h_prev: View<'a>,
        /// Written: the hidden state, `batch x hidden`.
        h: View<'a>,
        /// Written: `[r, z, n, gh_n]`, `batch x 4*hidden`.
        cache: View<'a>,
        /// Batch and hidden size ([`SeqShape::step`]).
        shape: SeqShape,
    }
    views [gx, gh, h_prev, h, cache]
}

op_args! {
    /// The arguments of [`GatedCellOps::gru_cell_backward`].
    GruCellBackward for "gru_cell_backward" {
        /// The cache the forward step left, `batch x 4*hidden`.
        cache: View<'a>,
        /// The previous hidden state, `batch x hidden`.
        h_prev: View<'a>,
        /// The gradient reaching `h`, `batch x hidden`.
        dh: View<'a>,
        /// Written: `dgx` and `dgh`, `batch x 3*hidden` each.
        grads: GruGateGrads<'a>,
        /// Written: the direct part of the gradient for `h_prev`, `batch x hidden`.
        dh_prev: View<'a>,
        /// Batch and hidden size ([`SeqShape::step`]).
        shape: SeqShape,
    }
    views [cache, h_prev, dh, grads.dgx, grads.dgh, dh_prev]
}

impl LstmCellForward<'_> {
    /// Checks the arguments against the context `ctx`; returns `batch * hidden`.
    pub(crate) fn check(&self, ctx: u64) -> Result<usize> {
        // `gates` is read and rewritten in place: it counts as an output.
        let ins: [Arg; 1] = [("c_prev", &self.c_prev, 1)];
        let outs: [Arg; 3] = [
            ("gates", &self.gates, 4),
            ("c", &self.c, 1),
            ("h", &self.h, 1),
        ];
        check::cell(Self::OP, ctx, self.shape, &ins, &outs)
    }
}

impl LstmCellBackward<'_> {
    /// Checks the arguments against the context `ctx`; returns `batch * hidden`.
    pub(crate) fn check(&self, ctx: u64) -> Result<usize> {
        let ins: [Arg; 4] = [
            ("gates", &self.gates, 4),
            ("c_prev", &self.c_prev, 1),
            ("c", &self.c, 1),
            ("dh", &self.dh, 1),
        ];
        let outs: [Arg; 2] = [("dc", &self.dc, 1), ("dgates", &self.dgates, 4)];
        check::cell(Self::OP, ctx, self.shape, &ins, &outs)
    }
}

impl GruCellForward<'_> {
    /// Checks the arguments against the context `ctx`; returns `batch * hidden`.
    pub(crate) fn check(&self, ctx: u64) -> Result<usize> {
        let ins: [Arg; 3] = [
            ("gx", &self.gx, 3),
            ("gh", &self.gh, 3),
            ("h_prev", &self.h_prev, 1),
        ];
        let outs: [Arg; 2] = [("h", &self.h, 1), ("cache", &self.cache, 4)];
        check::cell(Self::OP, ctx, self.shape, &ins, &outs)
    }
}

impl GruCellBackward<'_> {
    /// Checks the arguments against the context `ctx`; returns `batch * hidden`.
    pub(crate) fn check(&self, ctx: u64) -> Result<usize> {
        let ins: [Arg; 3] = [
            ("cache", &self.cache, 4),
            ("h_prev", &self.h_prev, 1),
            ("dh", &self.dh, 1),
        ];
        let outs: [Arg; 3] = [
            ("dgx", &self.grads.dgx, 3),
            ("dgh", &self.grads.dgh, 3),
            ("dh_prev", &self.dh_prev, 1),
        ];
        check::cell(Self::OP, ctx, self.shape, &ins, &outs)
    }
}

// The LSTM and GRU sequences.

op_args! {
    /// The arguments of [`GatedSequenceOps::lstm_sequence_forward`].
    LstmSequenceForward for "lstm_sequence_forward" {
        /// `steps * batch x 4H`: `x_t W_ih^T` of every step on entry (one GEMM over all steps,
        /// no bias), overwritten with the activated gates, which
        /// [`GatedSequenceOps::lstm_sequence_backward`] reads.
        gates: View<'a>,
        /// Hidden states, `(steps + 1) * batch x H`: block 0 the initial state (read), blocks
        /// `1..=steps` written.
        hs: View<'a>,
        /// Cell states, laid out as `hs`.
        cs: View<'a>,
        /// `w_hh` (`4H x H` row-major), `b_ih` and `b_hh` (`4H` each).
        weights: RecurrentWeights<'a>,
        /// Steps, batch and hidden size.
        shape: SeqShape,
    }
    views [gates, hs, cs, weights.w_hh, weights.b_ih, weights.b_hh]
}

op_args! {
    /// The arguments of [`GatedSequenceOps::lstm_sequence_backward`].
    LstmSequenceBackward for "lstm_sequence_backward" {
        /// The gradient reaching each `h_t` from above, `steps * batch x H`.
        dh: View<'a>,
        /// The activated gates [`GatedSequenceOps::lstm_sequence_forward`] left.
        gates: View<'a>,
        /// The cell states [`GatedSequenceOps::lstm_sequence_forward`] left.
        cs: View<'a>,
        /// The recurrent weight, `4H x H` row-major.
        w_hh: View<'a>,
        /// Written: the gate pre-activation gradients, `steps * batch x 4H`; overlaps no input.
        dgates: View<'a>,
        /// The cell-state gradient across the sequence's ends, `batch x H`: read on entry as
        /// the gradient reaching the last cell state from outside (`dc_n`), written on return
        /// with the gradient for the initial cell state (`dc_{-1} = dc_0 f_0`). `None`: no
        /// gradient reaches the last cell state and none is wanted for the initial one.
        dc_state: Option<View<'a>>,
        /// Steps, batch and hidden size.
        shape: SeqShape,
    }
    views [dh, gates, cs, w_hh, dgates]
}

op_args! {
    /// The arguments of [`GatedSequenceOps::gru_sequence_forward`].
    GruSequenceForward for "gru_sequence_forward" {
        /// `x_t W_ih^T` of every step (one GEMM, no bias), `steps * batch x 3H`; read only.
        gx: View<'a>,
        /// Hidden states, `(steps + 1) * batch x H`: block 0 the initial state (read), blocks
        /// `1..=steps` written.
        hs: View<'a>,
        /// `w_hh` (`3H x H` row-major), `b_ih` and `b_hh` (`3H` each).
        weights: RecurrentWeights<'a>,
        /// Written for [`GatedSequenceOps::gru_sequence_backward`], `steps * batch x 4H`.
        cache: View<'a>,
        /// Steps, batch and hidden size.
        shape: SeqShape,
    }
    views [gx, hs, weights.w_hh, weights.b_ih, weights.b_hh, cache]
}

op_args! {
    /// The arguments of [`GatedSequenceOps::gru_sequence_backward`].
    GruSequenceBackward for "gru_sequence_backward" {
        /// The gradient reaching each `h_t` from above, `steps * batch x H`.
        dh: View<'a>,
        /// The hidden states [`GatedSequenceOps::gru_sequence_forward`] left.
        hs: View<'a>,
        /// The cache [`GatedSequenceOps::gru_sequence_forward`] left.
        cache: View<'a>,
        /// The recurrent weight, `3H x H` row-major.
        w_hh: View<'a>,
        /// Written: `dgx` and `dgh`, `steps * batch x 3H` each, overlapping no input nor each
        /// other.
        grads: GruGateGrads<'a>,
        /// Written when given, `batch x H`: the direct part of the gradient for the initial
        /// hidden state, `z_0 dh_0` (the caller adds `dgh_0 W_hh` for the whole of it).
        dh_state: Option<View<'a>>,
        /// Steps, batch and hidden size.
        shape: SeqShape,
    }
    views [dh, hs, cache, w_hh, grads.dgx, grads.dgh]
}

impl LstmSequenceForward<'_> {
    /// Checks the arguments against the context `ctx`; returns one step's `batch * hidden`, 0
    /// where there is nothing to compute.
    pub(crate) fn check(&self, ctx: u64) -> Result<usize> {
        let SeqShape { steps, hidden, .. } = self.shape;
        check::same_context(Self::OP, ctx, &self.views().each_ref())?;
        let all = steps.saturating_add(1);
        check::gated_sequence(
            Self::OP,
            4,
            self.shape,
            &check::gate_params(4, hidden, &self.weights),
            &[], // `gates` is read and rewritten in place: it counts as an output.
            &[
                ("gates", &self.gates, steps, 4),
                ("hs", &self.hs, all, 1),
                ("cs", &self.cs, all, 1),
            ],
        )
    }
}

impl LstmSequenceBackward<'_> {
    /// Checks the arguments against the context `ctx`; returns one step's `batch * hidden`, 0
    /// where there is nothing to compute.
    pub(crate) fn check(&self, ctx: u64) -> Result<usize> {
        let steps = self.shape.steps;
        check::same_context(Self::OP, ctx, &self.views().each_ref())?;
        let inputs: [SeqArg; 3] = [
            ("dh", &self.dh, steps, 1),
            ("gates", &self.gates, steps, 4),
            ("cs", &self.cs, steps.saturating_add(1), 1),
        ];
        let mut outputs: Vec<SeqArg> = vec![("dgates", &self.dgates, steps, 4)];
        if let Some(d) = &self.dc_state {
            check::view(Self::OP, ctx, 5, d)?;
            outputs.push(("dc_state", d, 1, 1));
        }
        let w_hh = check::recurrent_weight(4, self.shape.hidden, &self.w_hh);
        check::gated_sequence(Self::OP, 4, self.shape, &[w_hh], &inputs, &outputs)
    }
}

impl GruSequenceForward<'_> {
    /// Checks the arguments against the context `ctx`; returns one step's `batch * hidden`, 0
    /// where there is nothing to compute.
    pub(crate) fn check(&self, ctx: u64) -> Result<usize> {
        let SeqShape { steps, hidden, .. } = self.shape;
        check::same_context(Self::OP, ctx, &self.views().each_ref())?;
        check::gated_sequence(
            Self::OP,
            3,
            self.shape,
            &check::gate_params(3, hidden, &self.weights),
            &[("gx", &self.gx, steps, 3)],
            &[
                ("hs", &self.hs, steps.saturating_add(1), 1),
                ("cache", &self.cache, steps, 4),
            ],
        )
    }
}

impl GruSequenceBackward<'_> {
    /// Checks the arguments against the context `ctx`; returns one step's `batch * hidden`, 0
    /// where there is nothing to compute.
    pub(crate) fn check(&self, ctx: u64) -> Result<usize> {
        let steps = self.shape.steps;
        check::same_context(Self::OP, ctx, &self.views().each_ref())?;
        let inputs: [SeqArg; 3] = [
            ("dh", &self.dh, steps, 1),
            ("hs", &self.hs, steps.saturating_add(1), 1),
            ("cache", &self.cache, steps, 4),
        ];
        let mut outputs: Vec<SeqArg> = vec![
            ("dgx", &self.grads.dgx, steps, 3),
            ("dgh", &self.grads.dgh, steps, 3),
        ];
        if let Some(d) = &self.dh_state {
            check::view(Self::OP, ctx, 6, d)?;
            outputs.push(("dh_state", d, 1, 1));
        }
        let w_hh = check::recurrent_weight(3, self.shape.hidden, &self.w_hh);
        check::gated_sequence(Self::OP, 3, self.shape, &[w_hh], &inputs, &outputs)
    }
}
