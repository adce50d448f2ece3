//! The LSTM and GRU cells: the gate math of one time step.

use super::MemoryOps;
use crate::error::Result;
#[cfg(doc)]
use crate::ops::SeqShape;
use crate::ops::{GruCellBackward, GruCellForward, LstmCellBackward, LstmCellForward};

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
