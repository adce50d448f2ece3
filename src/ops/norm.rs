//! Normalization layers' ops.

use super::MemoryOps;
use super::check;
use super::views::view_group;
use crate::buffer::View;
use crate::error::Result;
use crate::ops::{LayerNormGrads, LayerNormParams, MatShape};

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

view_group! {
    /// The arguments of [`NormOps::layer_norm_forward`].
    LayerNormForward {
        /// The input, `rows x cols`.
        x: View<'a>,
        /// `weight` and `bias`, `cols` elements each.
        params: LayerNormParams<'a>,
        /// Written: the output, `rows x cols`.
        y: View<'a>,
        /// Written: each row's mean and rstd, `2 * rows` elements.
        stats: View<'a>,
        /// Rows and columns.
        shape: MatShape,
        /// Added to the variance.
        eps: f32,
    }
    /// The arguments in declaration order.
}

view_group! {
    /// The arguments of [`NormOps::layer_norm_backward`].
    LayerNormBackward {
        /// The gradient w.r.t. the output, `rows x cols`.
        dy: View<'a>,
        /// The forward's input, `rows x cols`.
        x: View<'a>,
        /// The scale, `cols`.
        weight: View<'a>,
        /// The forward's `stats`, `2 * rows`.
        stats: View<'a>,
        /// Written: `dx` (`rows x cols`), `dweight` and `dbias` (`cols` each).
        grads: LayerNormGrads<'a>,
        /// Rows and columns.
        shape: MatShape,
    }
    /// The arguments in declaration order.
}

impl<'a> LayerNormForward<'a> {
    pub(crate) const OP: &'static str = "layer_norm_forward";

    /// Every view, in the kernel's order.
    pub(crate) fn views(&self) -> [View<'a>; 5] {
        let LayerNormParams { weight, bias } = self.params;
        [self.x, weight, bias, self.y, self.stats]
    }

    /// Checks the arguments against the context `ctx`; returns `rows * cols`, which fits the
    /// 32-bit kernel dimensions.
    pub(crate) fn check(&self, ctx: u64) -> Result<u32> {
        check::same_context(Self::OP, ctx, &self.views().each_ref())?;
        let MatShape { rows, cols } = self.shape;
        let n = rows.saturating_mul(cols);
        let ins = [
            ("x", &self.x, n),
            ("weight", &self.params.weight, cols),
            ("bias", &self.params.bias, cols),
        ];
        let outs = [("y", &self.y, n), ("stats", &self.stats, 2 * rows)];
        check::layer_norm(Self::OP, rows, cols, &ins, &outs)
    }
}

impl<'a> LayerNormBackward<'a> {
    pub(crate) const OP: &'static str = "layer_norm_backward";

    /// Every view, in the kernel's order.
    pub(crate) fn views(&self) -> [View<'a>; 7] {
        let LayerNormGrads { dx, dweight, dbias } = self.grads;
        [self.dy, self.x, self.weight, self.stats, dx, dweight, dbias]
    }

    /// Checks the arguments against the context `ctx`; returns `rows * cols`, which fits the
    /// 32-bit kernel dimensions.
    pub(crate) fn check(&self, ctx: u64) -> Result<u32> {
        check::same_context(Self::OP, ctx, &self.views().each_ref())?;
        let MatShape { rows, cols } = self.shape;
        let n = rows.saturating_mul(cols);
        let ins = [
            ("dy", &self.dy, n),
            ("x", &self.x, n),
            ("weight", &self.weight, cols),
            ("stats", &self.stats, 2 * rows),
        ];
        let outs = [
            ("dx", &self.grads.dx, n),
            ("dweight", &self.grads.dweight, cols),
            ("dbias", &self.grads.dbias, cols),
        ];
        check::layer_norm(Self::OP, rows, cols, &ins, &outs)
    }
}
