//! A dense layer's forward pass and parameter gradients in one call each.

use super::{Activation, ActivationOps, Gemm};
#[cfg(doc)]
use super::{LinalgOps, ReduceOps};
use crate::buffer::View;
use crate::error::Result;

/// A dense layer's forward pass and parameter gradients, compositions of
/// [`LinalgOps::gemm`], [`ActivationOps::bias_act_forward`] and [`ReduceOps::sum_rows`] by
/// default; a backend overrides them where it has a fused kernel.
pub trait DenseOps: ActivationOps {
    /// A dense layer's forward in one call: `z = x W^T + bias` (x `rows x inputs`, W `outputs x
    /// inputs`, PyTorch's layout) and `y = act(z)`; `y` may be the same view as `z`. The same as
    /// [`LinalgOps::gemm`] then [`ActivationOps::bias_act_forward`], which is what it does where
    /// the backend has nothing faster; GPU backends add the bias and activation inside the thin
    /// GEMM of a layer with at most 16 outputs (a classifier head), saving a launch.
    #[allow(clippy::too_many_arguments)]
    fn dense_forward(
        &self,
        x: View<'_>,
        w: View<'_>,
        bias: View<'_>,
        z: View<'_>,
        y: View<'_>,
        act: Activation,
        rows: usize,
        inputs: usize,
        outputs: usize,
    ) -> Result<()> {
        self.gemm(Gemm::new(rows, outputs, inputs).tb(), x, w, z)?;
        self.bias_act_forward(z, bias, y, act, rows, outputs)
    }

    /// A dense layer's parameter gradients from the gradient `dz` (`rows x outputs`) of its
    /// pre-activation and its input `x` (`rows x inputs`): `dw = dz^T x` (`outputs x inputs`)
    /// and `dbias[o] = Σ_r dz[r, o]`, both overwritten. The same as [`LinalgOps::gemm`] then
    /// [`ReduceOps::sum_rows`], which is what it does where the backend has nothing faster; GPU
    /// backends sum the bias gradient inside the thin GEMM of a layer with at most 16 outputs.
    #[allow(clippy::too_many_arguments)]
    fn dense_param_grads(
        &self,
        dz: View<'_>,
        x: View<'_>,
        dw: View<'_>,
        dbias: View<'_>,
        rows: usize,
        inputs: usize,
        outputs: usize,
    ) -> Result<()> {
        self.gemm(Gemm::new(outputs, inputs, rows).ta(), dz, x, dw)?;
        self.sum_rows(dz, dbias, rows, outputs, 0.0)
    }
}
