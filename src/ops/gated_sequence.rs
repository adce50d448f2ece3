//! LSTM and GRU over a whole sequence: recurrent products and gate math of every step.

use super::MemoryOps;
use crate::buffer::View;
use crate::error::Result;
#[cfg(doc)]
use crate::ops::SeqShape;
use crate::ops::{
    GruSequenceBackward, GruSequenceForward, LstmSequenceBackward, LstmSequenceForward,
};

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

    /// [`GatedSequenceOps::lstm_sequence_forward`] that also writes the outputs
    /// `hs[1..=steps]`, rounded to nearest even, into `low` (bf16 or f16, `steps * batch x H`,
    /// overlapping no other view) in the same pass, where the backend can: it returns true
    /// then. Where it cannot (the default; a GPU whose sequence runs other than on the
    /// persistent kernels) it returns false and has run nothing: the caller runs the op and
    /// casts. A bf16/f16 network's recurrent layer hands its output to the next layer this way
    /// without a cast pass.
    fn lstm_sequence_forward_low(&self, a: LstmSequenceForward<'_>, low: View<'_>) -> Result<bool> {
        let _ = (a, low);
        Ok(false)
    }

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

    /// [`GatedSequenceOps::gru_sequence_forward`] with the T copy of the outputs in `low`, as
    /// [`GatedSequenceOps::lstm_sequence_forward_low`] (false, nothing run, where the backend
    /// cannot).
    fn gru_sequence_forward_low(&self, a: GruSequenceForward<'_>, low: View<'_>) -> Result<bool> {
        let _ = (a, low);
        Ok(false)
    }

    /// GRU backward through a whole sequence: for `t` from `steps - 1` down to 0,
    /// `dh_t = dh[t] + dgh[t+1] W_hh + dh_{t+1} * z_{t+1}` (only `dh[t]` at `t = steps - 1`);
    /// then, with `r, z, n, gh_n` from `cache[t]` and `h_prev = hs[t]`,
    /// `dn = dh_t (1-z)(1-n²)`, `dz = dh_t (h_prev - n) z (1-z)`, `dr = dn gh_n r (1-r)`,
    /// `dgx[t] = [dr, dz, dn]` (the gradient w.r.t. `x W_ih^T + b_ih`) and
    /// `dgh[t] = [dr, dz, dn r]` (w.r.t. `h W_hh^T + b_hh`).
    fn gru_sequence_backward(&self, a: GruSequenceBackward<'_>) -> Result<()>;
}
