//! LSTM and GRU over a whole sequence: recurrent products and gate math of every step.

use super::MemoryOps;
use super::check::{self, SeqArg};
use super::views::view_group;
use crate::buffer::View;
use crate::error::Result;
use crate::ops::GruGateGrads;
use crate::ops::RecurrentWeights;
use crate::ops::SeqShape;

/// LSTM and GRU over a whole sequence, the recurrent products included.
///
/// Each op takes one argument struct; `steps`, `batch` and `hidden` come in its [`SeqShape`]
/// (`H = hidden` below).
pub trait GatedSequenceOps: MemoryOps {
    /// LSTM forward over a whole sequence (PyTorch gate order i, f, g, o): for
    /// `t in 0..steps`, with `z = gates[t] + b_ih + b_hh + hs[t] W_hh^T`,
    /// `[i, f, g, o] = [σ, σ, tanh, σ](z)`, `cs[t+1] = f * cs[t] + i * g` and
    /// `hs[t+1] = o * tanh(cs[t+1])`. No output overlaps another argument. The same result as
    /// [`crate::ops::GatedCellOps::lstm_cell_forward`] step by step; a GPU backend with a
    /// cooperative launch (CUDA) runs all steps in one kernel, elsewhere one fused kernel per
    /// step.
    fn lstm_sequence_forward(&self, a: LstmSequenceForward<'_>) -> Result<()>;

    /// LSTM backward through a whole sequence: for `t` from `steps - 1` down to 0,
    /// `dh_t = dh[t] + dgates[t+1] W_hh` (no product at `t = steps - 1`),
    /// `dc_t = dc_{t+1} * f_{t+1} + dh_t * o_t * (1 - tanh²(cs[t+1]))` (only the second term at
    /// `t = steps - 1`: nothing reaches the last cell state from beyond the sequence), and
    /// `dgates[t]` = the gradient w.r.t. the gate pre-activations:
    /// `[dc_t g i (1-i), dc_t cs[t] f (1-f), dc_t i (1-g²), dh_t tanh(cs[t+1]) o (1-o)]`.
    /// The weight and bias gradients of all steps are then single GEMMs / reductions over
    /// `dgates`.
    fn lstm_sequence_backward(&self, a: LstmSequenceBackward<'_>) -> Result<()>;

    /// GRU forward over a whole sequence (PyTorch gate order r, z, n): for `t in 0..steps`,
    /// with `gx = gx[t] + b_ih` and `gh = hs[t] W_hh^T + b_hh`, `r = σ(gx_r + gh_r)`,
    /// `z = σ(gx_z + gh_z)`, `n = tanh(gx_n + r * gh_n)`, `hs[t+1] = (1 - z) * n + z * hs[t]`,
    /// and `cache[t] = [r, z, n, gh_n]`. No output overlaps another argument. The same result
    /// as [`crate::ops::GatedCellOps::gru_cell_forward`] step by step (one kernel for all steps
    /// with a cooperative launch, one fused kernel per step elsewhere).
    fn gru_sequence_forward(&self, a: GruSequenceForward<'_>) -> Result<()>;

    /// GRU backward through a whole sequence: for `t` from `steps - 1` down to 0,
    /// `dh_t = dh[t] + dgh[t+1] W_hh + dh_{t+1} * z_{t+1}` (only `dh[t]` at `t = steps - 1`);
    /// then, with `r, z, n, gh_n` from `cache[t]` and `h_prev = hs[t]`,
    /// `dn = dh_t (1-z)(1-n²)`, `dz = dh_t (h_prev - n) z (1-z)`, `dr = dn gh_n r (1-r)`,
    /// `dgx[t] = [dr, dz, dn]` (the gradient w.r.t. `x W_ih^T + b_ih`) and
    /// `dgh[t] = [dr, dz, dn r]` (w.r.t. `h W_hh^T + b_hh`).
    fn gru_sequence_backward(&self, a: GruSequenceBackward<'_>) -> Result<()>;
}

view_group! {
    /// The arguments of [`GatedSequenceOps::lstm_sequence_forward`].
    LstmSequenceForward {
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
    /// The arguments in declaration order.
}

view_group! {
    /// The arguments of [`GatedSequenceOps::lstm_sequence_backward`].
    LstmSequenceBackward {
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
        /// Steps, batch and hidden size.
        shape: SeqShape,
    }
    /// The arguments in declaration order.
}

view_group! {
    /// The arguments of [`GatedSequenceOps::gru_sequence_forward`].
    GruSequenceForward {
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
    /// The arguments in declaration order.
}

view_group! {
    /// The arguments of [`GatedSequenceOps::gru_sequence_backward`].
    GruSequenceBackward {
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
        /// Steps, batch and hidden size.
        shape: SeqShape,
    }
    /// The arguments in declaration order.
}

impl<'a> LstmSequenceForward<'a> {
    pub(crate) const OP: &'static str = "lstm_sequence_forward";

    /// Every view, in the kernels' order.
    pub(crate) fn views(&self) -> [View<'a>; 6] {
        let RecurrentWeights { w_hh, b_ih, b_hh } = self.weights;
        [self.gates, self.hs, self.cs, w_hh, b_ih, b_hh]
    }

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

impl<'a> LstmSequenceBackward<'a> {
    pub(crate) const OP: &'static str = "lstm_sequence_backward";

    /// Every view, in the kernels' order.
    pub(crate) fn views(&self) -> [View<'a>; 5] {
        [self.dh, self.gates, self.cs, self.w_hh, self.dgates]
    }

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
        let outputs: [SeqArg; 1] = [("dgates", &self.dgates, steps, 4)];
        let w_hh = check::recurrent_weight(4, self.shape.hidden, &self.w_hh);
        check::gated_sequence(Self::OP, 4, self.shape, &[w_hh], &inputs, &outputs)
    }
}

impl<'a> GruSequenceForward<'a> {
    pub(crate) const OP: &'static str = "gru_sequence_forward";

    /// Every view, in the kernels' order.
    pub(crate) fn views(&self) -> [View<'a>; 6] {
        let RecurrentWeights { w_hh, b_ih, b_hh } = self.weights;
        [self.gx, self.hs, w_hh, b_ih, b_hh, self.cache]
    }

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

impl<'a> GruSequenceBackward<'a> {
    pub(crate) const OP: &'static str = "gru_sequence_backward";

    /// Every view, in the kernels' order.
    pub(crate) fn views(&self) -> [View<'a>; 6] {
        let GruGateGrads { dgx, dgh } = self.grads;
        [self.dh, self.hs, self.cache, self.w_hh, dgx, dgh]
    }

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
        let outputs: [SeqArg; 2] = [
            ("dgx", &self.grads.dgx, steps, 3),
            ("dgh", &self.grads.dgh, steps, 3),
        ];
        let w_hh = check::recurrent_weight(3, self.shape.hidden, &self.w_hh);
        check::gated_sequence(Self::OP, 3, self.shape, &[w_hh], &inputs, &outputs)
    }
}
