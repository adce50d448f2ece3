//! A dense layer's forward pass and parameter gradients in one call each.

use super::{ActivationOps, check};
#[cfg(doc)]
use super::{LinalgOps, ReduceOps};
use crate::dtype::DType;
use crate::error::Result;
use crate::ops::{Activated, BiasActBackwardProduct, DenseForward, DenseParamGrads, DenseParams};

/// A dense layer's forward pass and parameter gradients, compositions of
/// [`LinalgOps::gemm`], [`ActivationOps::bias_act_forward`] and [`ReduceOps::sum_rows`] by
/// default; a backend overrides them where it has a fused kernel.
///
/// Types (docs/architecture.md, "Typed storage"): the activations, the weight (the low copy of
/// the parameters in mixed precision) and the bias of [`DenseOps::dense_forward`] hold one
/// float type T (f32, bf16 or f16); [`DenseOps::dense_param_grads`] reads T and writes f32
/// gradients. Products are summed in f32; each T output is rounded once (to nearest even).
pub trait DenseOps: ActivationOps {
    /// A dense layer's forward in one call: `z = x W^T + bias` (x `rows x inputs`, W
    /// `outputs x inputs`, PyTorch's layout) and `y = act(z)`; `y` may be the same view as `z`.
    /// The same as [`LinalgOps::gemm`] then [`ActivationOps::bias_act_forward`], which is what it
    /// does where the backend has nothing faster; GPU backends add the bias and activation
    /// inside the thin GEMM of a layer with at most 16 outputs (a classifier head), saving a
    /// launch.
    ///
    /// Types: `x`, `w`, `bias`, `z` and `y` hold one float type T. With T bf16 or f16 the
    /// product is summed in f32, `z = Σ + bias` is rounded to T, and `y = act(z)` is computed
    /// in f32 from that rounded `z` and rounded (what a bias + activation over the stored `z`
    /// gives), in one pass on every backend.
    fn dense_forward(&self, a: DenseForward<'_>) -> Result<()> {
        a.float_type(a.x.buffer().context_id())?;
        composed_forward(self, a)
    }

    /// A dense layer's parameter gradients from the gradient `dz` (`rows x outputs`) of its
    /// pre-activation and its input `x` (`rows x inputs`): `grads.w = dz^T x` (the `dw`,
    /// `outputs x inputs`) and `grads.bias[o] = Σ_r dz[r, o]` (the `dbias`), both overwritten.
    /// The same as [`LinalgOps::gemm`] then [`ReduceOps::sum_rows`], which is what it does where
    /// the backend has nothing faster; GPU backends sum the bias gradient inside the thin GEMM
    /// of a layer with at most 16 outputs.
    ///
    /// Types: `dz` and `x` hold one float type T; `dw` and `dbias` are f32 (the gradients of
    /// the f32 master parameters), summed in f32.
    fn dense_param_grads(&self, a: DenseParamGrads<'_>) -> Result<()> {
        a.float_type(a.x.buffer().context_id())?;
        composed_param_grads(self, a)
    }
}

impl DenseForward<'_> {
    /// The float type T of the call: `x`, `w`, `bias`, `z` and `y` hold T, each of the context
    /// `ctx`; else [`crate::Error::DTypeMismatch`] naming the argument.
    pub(crate) fn float_type(&self, ctx: u64) -> Result<DType> {
        let DenseParams { w, bias } = &self.params;
        let t = [
            ("x", &self.x),
            ("w", w),
            ("bias", bias),
            ("z", &self.z),
            ("y", &self.y),
        ];
        check::float_t("dense_forward", ctx, &t, &[])
    }
}

impl DenseParamGrads<'_> {
    /// The float type T of the call: `dz` and `x` hold T, `dw` and `dbias` f32, each of the
    /// context `ctx`; else [`crate::Error::DTypeMismatch`] naming the argument.
    pub(crate) fn float_type(&self, ctx: u64) -> Result<DType> {
        let DenseParams { w: dw, bias: dbias } = &self.grads;
        let fixed = [("dw", dw, DType::F32), ("dbias", dbias, DType::F32)];
        check::float_t(
            "dense_param_grads",
            ctx,
            &[("dz", &self.dz), ("x", &self.x)],
            &fixed,
        )
    }
}

impl BiasActBackwardProduct<'_> {
    /// The float type T of the call: `g`, `w`, `z`, `y` and `dz` hold T, `dbias` f32, each of
    /// the context `ctx`; else [`crate::Error::DTypeMismatch`] naming the argument.
    pub(crate) fn float_type(&self, ctx: u64) -> Result<DType> {
        let Activated { z, y, .. } = &self.f;
        let t = [
            ("g", &self.g),
            ("w", &self.w),
            ("z", z),
            ("y", y),
            ("dz", &self.grads.dz),
        ];
        let fixed = [("dbias", &self.grads.dbias, DType::F32)];
        check::float_t(Self::OP, ctx, &t, &fixed)
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
