//! Normalization layers' ops.

use super::MemoryOps;
use crate::buffer::View;
use crate::error::Result;

/// Normalization: layer normalization forward and backward, one fused launch each on a GPU.
pub trait NormOps: MemoryOps {
    /// Layer normalization of each row of a `rows x cols` matrix (PyTorch's
    /// `nn.LayerNorm(cols)`): `y = (x - mean) * rstd * weight + bias` with the row's mean, its
    /// biased variance and `rstd = 1 / sqrt(var + eps)`. `weight` and `bias` have `cols`
    /// elements. Writes `stats[2r] = mean`, `stats[2r + 1] = rstd` (`2 * rows` elements) for
    /// the backward pass. One fused launch on a GPU (a warp per row).
    #[allow(clippy::too_many_arguments)]
    fn layer_norm_forward(
        &self,
        x: View<'_>,
        weight: View<'_>,
        bias: View<'_>,
        y: View<'_>,
        stats: View<'_>,
        rows: usize,
        cols: usize,
        eps: f32,
    ) -> Result<()>;

    /// The backward pass of [`NormOps::layer_norm_forward`] in one fused launch: from `dy`, `x`,
    /// `weight` and the forward's `stats`, writes `dx` (`rows x cols`) and overwrites
    /// `dweight = sum_r dy * xhat` and `dbias = sum_r dy` (`cols` each), where
    /// `xhat = (x - mean) * rstd`. The column sums are deterministic (a fixed order).
    #[allow(clippy::too_many_arguments)]
    fn layer_norm_backward(
        &self,
        dy: View<'_>,
        x: View<'_>,
        weight: View<'_>,
        stats: View<'_>,
        dx: View<'_>,
        dweight: View<'_>,
        dbias: View<'_>,
        rows: usize,
        cols: usize,
    ) -> Result<()>;
}
