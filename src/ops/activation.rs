//! Activations: fused bias + activation, elementwise activations and their backward passes.

use super::{Activation, LinalgOps, ReduceOps, check};
use crate::buffer::View;
use crate::error::Result;
use crate::ops::{Activated, BiasActBackward, BiasActBackwardProduct, BiasActGrads, MatShape};

/// Activations and their backward passes. [`ActivationOps::bias_act_backward`] and
/// [`ActivationOps::bias_act_backward_product`] are compositions of the other ops by default;
/// a backend overrides them where it has a fused kernel.
///
/// Typing (docs/architecture.md, "Typed storage"): `bias_act_forward` (z, bias, y),
/// `activation` and `act_backward` take views of one float type T (f32, bf16 or f16), computed
/// in f32 and rounded to T; the bias-gradient ops are f32 only in this version.
pub trait ActivationOps: LinalgOps + ReduceOps {
    /// Fused bias + activation forward over a `rows x cols` matrix (`shape`): `z[r,c] += bias[c]`,
    /// then `y = act(z)` (`f`). `y` may be the same view as `z` (then `z` is not kept for the
    /// backward pass, which is fine when [`Activation::derivative_from_output`]).
    fn bias_act_forward(&self, f: Activated<'_>, bias: View<'_>, shape: MatShape) -> Result<()>;

    /// `y = act(x)` elementwise; `y` may be the same view as `x`.
    fn activation(&self, x: View<'_>, y: View<'_>, act: Activation) -> Result<()>;

    /// `dz = dy * act'(z)` for the forward pass `f`; `y = act(z)` is passed too since some
    /// derivatives are cheaper from it. When `act.derivative_from_output()`, `z` is not read and
    /// may be the same view as `y`. `dz` may be the same view as `dy`.
    fn act_backward(&self, dy: View<'_>, f: Activated<'_>, dz: View<'_>) -> Result<()>;

    /// The backward of [`ActivationOps::bias_act_forward`] over a `rows x cols` pre-activation
    /// (`shape`): `grads.dz = dy * act'(z)` (as [`ActivationOps::act_backward`], with its rules:
    /// `dz` may be the same view as `dy`, and `z` is not read and may be `y` when
    /// `act.derivative_from_output()`) and the bias gradient `grads.dbias[c] = Σ_r dz[r, c]`
    /// (overwritten), in one pass over the matrix where the backend has a kernel for it. With
    /// [`Activation::Identity`], `dz` gets `dy`.
    fn bias_act_backward(&self, a: BiasActBackward<'_>) -> Result<()> {
        let (op, dy, f, BiasActGrads { dz, dbias }) = ("bias_act_backward", a.dy, a.f, a.grads);
        let views = [
            ("dy", &dy),
            ("z", &f.z),
            ("y", &f.y),
            ("dz", &dz),
            ("dbias", &dbias),
        ];
        check::all_f32(op, &views)?;
        check::len(op, "dy", &dy, check::area(op, a.shape.rows, a.shape.cols)?)?;
        if f.act != Activation::Identity {
            self.act_backward(dy, f, dz)?;
        } else if !dz.same_as(&dy) {
            self.copy(dy, dz)?;
        }
        self.sum_rows(dz, dbias, a.shape, 0.0)
    }

    /// [`ActivationOps::bias_act_backward`] with `dy` given as the product `g w` (`g` `rows x k`,
    /// `w` `k x cols`, both row-major; `shape` is `rows x cols`): a hidden dense layer's backward
    /// whose output gradient is the input gradient of the dense layer after it (`g` that layer's
    /// pre-activation gradient, `w` its weight). `grads.dz = (g w) * act'(z)` and
    /// `grads.dbias[c] = Σ_r dz[r, c]` (overwritten); `dy` is never stored. `dz` must not overlap `g`, `w`, `y`, or `z` where the
    /// derivative reads it. The same as [`LinalgOps::gemm`] into `dz` then
    /// [`ActivationOps::bias_act_backward`] in place, which is what it does where the backend has
    /// nothing faster; GPU backends form the product inside the column-sum pass where `k <= 16` (a
    /// classifier head), saving the product's launch and a pass over the matrix.
    fn bias_act_backward_product(&self, a: BiasActBackwardProduct<'_>) -> Result<()> {
        a.check()?;
        composed_product_backward(self, a)
    }
}

/// [`ActivationOps::bias_act_backward_product`] as the product into `dz`, then
/// [`ActivationOps::bias_act_backward`] in place.
pub(crate) fn composed_product_backward(
    ops: &(impl ActivationOps + ?Sized),
    a: BiasActBackwardProduct<'_>,
) -> Result<()> {
    let dz = a.grads.dz;
    ops.gemm(a.product_gemm(), a.g, a.w, dz)?;
    ops.bias_act_backward(BiasActBackward::new(dz, a.f, a.grads, a.shape))
}
