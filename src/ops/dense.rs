//! A dense layer's forward pass and parameter gradients in one call each.

use super::{ActivationOps, check};
#[cfg(doc)]
use super::{LinalgOps, ReduceOps};
use crate::error::Result;
use crate::ops::{Activated, DenseForward, DenseParamGrads, DenseParams};

/// A dense layer's forward pass and parameter gradients, compositions of
/// [`LinalgOps::gemm`], [`ActivationOps::bias_act_forward`] and [`ReduceOps::sum_rows`] by
/// default; a backend overrides them where it has a fused kernel.
pub trait DenseOps: ActivationOps {
    /// A dense layer's forward in one call: `z = x W^T + bias` (x `rows x inputs`, W
    /// `outputs x inputs`, PyTorch's layout) and `y = act(z)`; `y` may be the
    /// same view as `z`. The same as [`LinalgOps::gemm`] then
    /// [`ActivationOps::bias_act_forward`], which is what it does where the backend has nothing
    /// faster; GPU backends add the bias and activation inside the thin GEMM of a layer with at
    /// most 16 outputs (a classifier head), saving a launch.
    fn dense_forward(&self, a: DenseForward<'_>) -> Result<()> {
        let DenseParams { w, bias } = a.params;
        let views = [
            ("x", &a.x),
            ("w", &w),
            ("bias", &bias),
            ("z", &a.z),
            ("y", &a.y),
        ];
        check::all_f32("dense_forward", &views)?;
        composed_forward(self, a)
    }

    /// A dense layer's parameter gradients from the gradient `dz` (`rows x outputs`) of its
    /// pre-activation and its input `x` (`rows x inputs`): `grads.w = dz^T x` (the `dw`,
    /// `outputs x inputs`) and `grads.bias[o] = Σ_r dz[r, o]` (the `dbias`), both overwritten.
    /// The same as [`LinalgOps::gemm`] then [`ReduceOps::sum_rows`], which is what it does where
    /// the backend has nothing faster; GPU backends sum the bias gradient inside the thin GEMM
    /// of a layer with at most 16 outputs.
    fn dense_param_grads(&self, a: DenseParamGrads<'_>) -> Result<()> {
        let DenseParams { w: dw, bias: dbias } = a.grads;
        let views = [("dz", &a.dz), ("x", &a.x), ("dw", &dw), ("dbias", &dbias)];
        check::all_f32("dense_param_grads", &views)?;
        composed_param_grads(self, a)
    }
}

/// [`DenseOps::dense_forward`] as the product then [`ActivationOps::bias_act_forward`].
pub(crate) fn composed_forward(
    ops: &(impl ActivationOps + ?Sized),
    a: DenseForward<'_>,
) -> Result<()> {
    let DenseParams { w, bias } = a.params;
    ops.gemm(a.shape.forward_gemm(), a.x, w, a.z)?;
    let f = Activated::new(a.z, a.y, a.act);
    ops.bias_act_forward(f, bias, a.shape.output())
}

/// [`DenseOps::dense_param_grads`] as the product then [`ReduceOps::sum_rows`].
pub(crate) fn composed_param_grads(
    ops: &(impl ActivationOps + ?Sized),
    a: DenseParamGrads<'_>,
) -> Result<()> {
    let DenseParams { w: dw, bias: dbias } = a.grads;
    ops.gemm(a.shape.weight_grad_gemm(), a.dz, a.x, dw)?;
    ops.sum_rows(a.dz, dbias, a.shape.output(), 0.0)
}
