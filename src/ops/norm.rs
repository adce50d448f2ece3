//! Normalization layers' ops.

use super::MemoryOps;
use crate::error::Result;
use crate::ops::{LayerNormBackward, LayerNormForward};

/// Normalization: layer normalization forward and backward, one fused launch each on a GPU.
pub trait NormOps: MemoryOps {
    /// Layer normalization of each row of a `rows x cols` matrix (PyTorch's
    /// `nn.LayerNorm(cols)`): `y = (x - mean) * rstd * weight + bias` with the row's mean, its
    /// biased variance and `rstd = 1 / sqrt(var + eps)`. Writes `stats[2r] = mean`,
    /// `stats[2r + 1] = rstd` for the backward pass. One fused launch on a GPU (a warp per row).
    fn layer_norm_forward(&self, a: LayerNormForward<'_>) -> Result<()>;

    /// The backward pass of [`NormOps::layer_norm_forward`] in one fused launch: from `dy`, `x`,
    /// `weight` and the forward's `stats`, writes `grads.dx` and overwrites
    /// `grads.dweight = sum_r dy * xhat` and `grads.dbias = sum_r dy`, where
    /// `xhat = (x - mean) * rstd`. The column sums are deterministic (a fixed order).
    fn layer_norm_backward(&self, a: LayerNormBackward<'_>) -> Result<()>;
}
