//! The LSTM and GRU cells: the gate math of one time step.

use super::MemoryOps;
use crate::buffer::View;
use crate::error::Result;
use crate::ops::GruGateGrads;
use crate::ops::SeqShape;

/// The gate math of one LSTM or GRU time step (the products are GEMMs by the caller).
///
/// `batch` and `hidden` come in a [`SeqShape::step`].
pub trait GatedCellOps: MemoryOps {
    /// LSTM gates forward (PyTorch order i, f, g, o). `gates` is `batch x 4*hidden` holding
    /// `x W_ih^T + h_prev W_hh^T + b_ih + b_hh`; it is overwritten with the activated gates
    /// (sigmoid i, f, o; tanh g), which the backward step reads. Writes
    /// `c = f * c_prev + i * g` and `h = o * tanh(c)`.
    fn lstm_cell_forward(
        &self,
        gates: View<'_>,
        c_prev: View<'_>,
        c: View<'_>,
        h: View<'_>,
        shape: SeqShape,
    ) -> Result<()>;

    /// LSTM gates backward. Inputs: activated `gates`, `c_prev`, `c`, `dh` (gradient reaching
    /// `h`) and `dc` (gradient reaching `c` from the next step; overwritten with the gradient
    /// for `c_prev`). Writes `dgates` (`batch x 4*hidden`, gradient w.r.t. the gate
    /// pre-activations).
    #[allow(clippy::too_many_arguments)]
    fn lstm_cell_backward(
        &self,
        gates: View<'_>,
        c_prev: View<'_>,
        c: View<'_>,
        dh: View<'_>,
        dc: View<'_>,
        dgates: View<'_>,
        shape: SeqShape,
    ) -> Result<()>;

    /// GRU cell forward (PyTorch order r, z, n). `gx = x W_ih^T + b_ih` and
    /// `gh = h_prev W_hh^T + b_hh`, both `batch x 3*hidden`. Computes
    /// `r = σ(gx_r + gh_r)`, `z = σ(gx_z + gh_z)`, `n = tanh(gx_n + r * gh_n)`,
    /// `h = (1 - z) * n + z * h_prev`, and stores `[r, z, n, gh_n]` in `cache`
    /// (`batch x 4*hidden`) for the backward step.
    fn gru_cell_forward(
        &self,
        gx: View<'_>,
        gh: View<'_>,
        h_prev: View<'_>,
        h: View<'_>,
        cache: View<'_>,
        shape: SeqShape,
    ) -> Result<()>;

    /// GRU cell backward. From `cache`, `h_prev` and `dh`, writes `grads.dgx` and `grads.dgh`
    /// (each `batch x 3*hidden`: gradients w.r.t. `gx` and `gh`) and `dh_prev` (the direct
    /// part, `dh * z`; the GEMM through `W_hh` is added by the caller).
    fn gru_cell_backward(
        &self,
        cache: View<'_>,
        h_prev: View<'_>,
        dh: View<'_>,
        grads: GruGateGrads<'_>,
        dh_prev: View<'_>,
        shape: SeqShape,
    ) -> Result<()>;
}
