//! Normalization layers' ops.

use super::MemoryOps;
use crate::buffer::View;
use crate::error::Result;
use crate::ops::{LayerNormGrads, LayerNormParams, MatShape};

/// Normalization: layer normalization forward and backward, one fused launch each on a GPU.
pub trait NormOps: MemoryOps {
    /// Layer normalization of each row of a `rows x cols` matrix (`shape`; PyTorch's
    /// `nn.LayerNorm(cols)`): `y = (x - mean) * rstd * weight + bias` with the row's mean, its
    /// biased variance and `rstd = 1 / sqrt(var + eps)`. `weight` and `bias` (`params`) have
    /// `cols` elements. Writes `stats[2r] = mean`, `stats[2r + 1] = rstd` (`2 * rows` elements) for
    /// the backward pass. One fused launch on a GPU (a warp per row).
    fn layer_norm_forward(
        &self,
        x: View<'_>,
        params: LayerNormParams<'_>,
        y: View<'_>,
        stats: View<'_>,
        shape: MatShape,
        eps: f32,
    ) -> Result<()>;

    /// The backward pass of [`NormOps::layer_norm_forward`] in one fused launch: from `dy`, `x`,
    /// `weight` and the forward's `stats`, writes `grads.dx` (`rows x cols`) and overwrites
    /// `grads.dweight = sum_r dy * xhat` and `grads.dbias = sum_r dy` (`cols` each), where
    /// `xhat = (x - mean) * rstd`. The column sums are deterministic (a fixed order).
    fn layer_norm_backward(
        &self,
        dy: View<'_>,
        x: View<'_>,
        weight: View<'_>,
        stats: View<'_>,
        grads: LayerNormGrads<'_>,
        shape: MatShape,
    ) -> Result<()>;
}
