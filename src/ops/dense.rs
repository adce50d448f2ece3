//! A dense layer's forward pass and parameter gradients in one call each.

use super::{Activation, ActivationOps, Gemm, check};
#[cfg(doc)]
use super::{LinalgOps, ReduceOps};
use crate::buffer::View;
use crate::error::Result;
use crate::ops::{Activated, DenseParams, DenseShape, MatShape};

/// A dense layer's forward pass and parameter gradients, compositions of
/// [`LinalgOps::gemm`], [`ActivationOps::bias_act_forward`] and [`ReduceOps::sum_rows`] by
/// default; a backend overrides them where it has a fused kernel.
pub trait DenseOps: ActivationOps {
    /// A dense layer's forward in one call: `z = x W^T + bias` (`params`; x `rows x inputs`,
    /// W `outputs x inputs`, PyTorch's layout, from `shape`) and `y = act(z)`; `y` may be the
    /// same view as `z`. The same as [`LinalgOps::gemm`] then
    /// [`ActivationOps::bias_act_forward`], which is what it does where the backend has nothing
    /// faster; GPU backends add the bias and activation inside the thin GEMM of a layer with at
    /// most 16 outputs (a classifier head), saving a launch.
    fn dense_forward(
        &self,
        x: View<'_>,
        params: DenseParams<'_>,
        z: View<'_>,
        y: View<'_>,
        act: Activation,
        shape: DenseShape,
    ) -> Result<()> {
        let DenseParams { w, bias } = params;
        let DenseShape {
            rows,
            inputs,
            outputs,
        } = shape;
        let views = [("x", &x), ("w", &w), ("bias", &bias), ("z", &z), ("y", &y)];
        check::all_f32("dense_forward", &views)?;
        self.gemm(Gemm::new(rows, outputs, inputs).tb(), x, w, z)?;
        self.bias_act_forward(
            Activated::new(z, y, act),
            bias,
            MatShape::new(rows, outputs),
        )
    }

    /// A dense layer's parameter gradients from the gradient `dz` (`rows x outputs`) of its
    /// pre-activation and its input `x` (`rows x inputs`): `grads.w = dz^T x` (the `dw`,
    /// `outputs x inputs`) and `grads.bias[o] = Σ_r dz[r, o]` (the `dbias`), both overwritten.
    /// The same as [`LinalgOps::gemm`] then [`ReduceOps::sum_rows`], which is what it does where
    /// the backend has nothing faster; GPU backends sum the bias gradient inside the thin GEMM
    /// of a layer with at most 16 outputs.
    fn dense_param_grads(
        &self,
        dz: View<'_>,
        x: View<'_>,
        grads: DenseParams<'_>,
        shape: DenseShape,
    ) -> Result<()> {
        let DenseParams { w: dw, bias: dbias } = grads;
        let DenseShape {
            rows,
            inputs,
            outputs,
        } = shape;
        let views = [("dz", &dz), ("x", &x), ("dw", &dw), ("dbias", &dbias)];
        check::all_f32("dense_param_grads", &views)?;
        self.gemm(Gemm::new(outputs, inputs, rows).ta(), dz, x, dw)?;
        self.sum_rows(dz, dbias, MatShape::new(rows, outputs), 0.0)
    }
}
