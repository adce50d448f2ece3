//! The LSTM and GRU cells: the gate math of one time step.

use super::MemoryOps;
use super::check::{self, CellArg};
use super::views::view_group;
use crate::buffer::View;
use crate::error::Result;
use crate::ops::GruGateGrads;
use crate::ops::SeqShape;

/// The gate math of one LSTM or GRU time step (the products are GEMMs by the caller).
///
/// Each op takes one argument struct; `batch` and `hidden` come in its [`SeqShape::step`]. No
/// output overlaps an input or another output.
pub trait GatedCellOps: MemoryOps {
    /// LSTM gates forward (PyTorch order i, f, g, o): activates `gates` in place (sigmoid i, f,
    /// o; tanh g), which the backward step reads, and writes `c = f * c_prev + i * g` and
    /// `h = o * tanh(c)`.
    fn lstm_cell_forward(&self, a: LstmCellForward<'_>) -> Result<()>;

    /// LSTM gates backward: from the activated gates, `c_prev`, `c`, `dh` and `dc`, writes
    /// `dgates` (the gradient w.r.t. the gate pre-activations) and overwrites `dc` with the
    /// gradient for `c_prev`.
    fn lstm_cell_backward(&self, a: LstmCellBackward<'_>) -> Result<()>;

    /// GRU cell forward (PyTorch order r, z, n): `r = σ(gx_r + gh_r)`, `z = σ(gx_z + gh_z)`,
    /// `n = tanh(gx_n + r * gh_n)`, `h = (1 - z) * n + z * h_prev`, and stores
    /// `[r, z, n, gh_n]` in `cache` for the backward step.
    fn gru_cell_forward(&self, a: GruCellForward<'_>) -> Result<()>;

    /// GRU cell backward: from `cache`, `h_prev` and `dh`, writes `grads.dgx` and `grads.dgh`
    /// (the gradients w.r.t. `gx` and `gh`) and `dh_prev` (the direct part, `dh * z`; the GEMM
    /// through `W_hh` is added by the caller).
    fn gru_cell_backward(&self, a: GruCellBackward<'_>) -> Result<()>;
}

view_group! {
    /// The arguments of [`GatedCellOps::lstm_cell_forward`].
    LstmCellForward {
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
    /// The arguments in declaration order.
}

view_group! {
    /// The arguments of [`GatedCellOps::lstm_cell_backward`].
    LstmCellBackward {
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
    /// The arguments in declaration order.
}

view_group! {
    /// The arguments of [`GatedCellOps::gru_cell_forward`].
    GruCellForward {
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
    /// The arguments in declaration order.
}

view_group! {
    /// The arguments of [`GatedCellOps::gru_cell_backward`].
    GruCellBackward {
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
    /// The arguments in declaration order.
}

impl<'a> LstmCellForward<'a> {
    pub(crate) const OP: &'static str = "lstm_cell_forward";

    /// Every view, in the kernel's order.
    pub(crate) fn views(&self) -> [View<'a>; 4] {
        [self.gates, self.c_prev, self.c, self.h]
    }

    /// Checks the arguments against the context `ctx`; returns `batch * hidden`.
    pub(crate) fn check(&self, ctx: u64) -> Result<usize> {
        // `gates` is read and rewritten in place: it counts as an output.
        let ins: [CellArg; 1] = [("c_prev", &self.c_prev, 1)];
        let outs: [CellArg; 3] = [
            ("gates", &self.gates, 4),
            ("c", &self.c, 1),
            ("h", &self.h, 1),
        ];
        check::cell(Self::OP, ctx, self.shape, &ins, &outs)
    }
}

impl<'a> LstmCellBackward<'a> {
    pub(crate) const OP: &'static str = "lstm_cell_backward";

    /// Every view, in the kernel's order.
    pub(crate) fn views(&self) -> [View<'a>; 6] {
        [
            self.gates,
            self.c_prev,
            self.c,
            self.dh,
            self.dc,
            self.dgates,
        ]
    }

    /// Checks the arguments against the context `ctx`; returns `batch * hidden`.
    pub(crate) fn check(&self, ctx: u64) -> Result<usize> {
        let ins: [CellArg; 4] = [
            ("gates", &self.gates, 4),
            ("c_prev", &self.c_prev, 1),
            ("c", &self.c, 1),
            ("dh", &self.dh, 1),
        ];
        let outs: [CellArg; 2] = [("dc", &self.dc, 1), ("dgates", &self.dgates, 4)];
        check::cell(Self::OP, ctx, self.shape, &ins, &outs)
    }
}

impl<'a> GruCellForward<'a> {
    pub(crate) const OP: &'static str = "gru_cell_forward";

    /// Every view, in the kernel's order.
    pub(crate) fn views(&self) -> [View<'a>; 5] {
        [self.gx, self.gh, self.h_prev, self.h, self.cache]
    }

    /// Checks the arguments against the context `ctx`; returns `batch * hidden`.
    pub(crate) fn check(&self, ctx: u64) -> Result<usize> {
        let ins: [CellArg; 3] = [
            ("gx", &self.gx, 3),
            ("gh", &self.gh, 3),
            ("h_prev", &self.h_prev, 1),
        ];
        let outs: [CellArg; 2] = [("h", &self.h, 1), ("cache", &self.cache, 4)];
        check::cell(Self::OP, ctx, self.shape, &ins, &outs)
    }
}

impl<'a> GruCellBackward<'a> {
    pub(crate) const OP: &'static str = "gru_cell_backward";

    /// Every view, in the kernel's order.
    pub(crate) fn views(&self) -> [View<'a>; 6] {
        let GruGateGrads { dgx, dgh } = self.grads;
        [self.cache, self.h_prev, self.dh, dgx, dgh, self.dh_prev]
    }

    /// Checks the arguments against the context `ctx`; returns `batch * hidden`.
    pub(crate) fn check(&self, ctx: u64) -> Result<usize> {
        let ins: [CellArg; 3] = [
            ("cache", &self.cache, 4),
            ("h_prev", &self.h_prev, 1),
            ("dh", &self.dh, 1),
        ];
        let outs: [CellArg; 3] = [
            ("dgx", &self.grads.dgx, 3),
            ("dgh", &self.grads.dgh, 3),
            ("dh_prev", &self.dh_prev, 1),
        ];
        check::cell(Self::OP, ctx, self.shape, &ins, &outs)
    }
}
