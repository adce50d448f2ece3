//! The GEMM and dense-layer ops on bf16/f16 views (docs/architecture.md, "Typed storage"): the
//! T views read into f32, the f32 GEMM of [`super::gemm`], and each T output rounded once, with
//! the epilogues of the GPU kernels (kernels-cu/hgemm.cu) element for element: a T output's
//! value from a given f32 sum is the GPUs' bit for bit; only the sums' order differs.

use super::CpuOps;
use super::activation::{gelu_grad, with_act};
use super::float_views::{round_to, staged};
use super::gemm::run;
use super::par::chunks;
use crate::buffer::View;
use crate::dtype::DType;
use crate::error::Result;
use crate::ops::{
    Activated, Activation, BiasActBackwardProduct, BiasActGrads, DenseForward, DenseParamGrads,
    DenseParams, Gemm, check,
};

/// `op(A) op(B)` summed in f32, unscaled.
fn product(g: &Gemm, a: &[f32], b: &[f32]) -> Vec<f32> {
    let mut c = vec![0.0f32; g.m * g.n];
    run(&g.scaled(1.0, 0.0), a, b, &mut c, None);
    c
}

/// `out[c] = Σ_r x[r][c]` over the rows of `cols` values of `x`, in row order.
fn column_sums(x: &[f32], cols: usize, out: &mut [f32]) {
    out.fill(0.0);
    for row in x.chunks_exact(cols.max(1)) {
        for (o, &v) in out.iter_mut().zip(row) {
            *o += v;
        }
    }
}

/// `act'(z, y)`, reading y where the derivative is a function of the output (the GPU kernels'
/// `act_grad` of kernels-common/scalar_core.h).
fn act_grad(act: Activation, z: f32, y: f32) -> f32 {
    match act {
        Activation::Identity => 1.0,
        Activation::Relu => {
            if y > 0.0 {
                1.0
            } else {
                0.0
            }
        }
        Activation::Sigmoid => y * (1.0 - y),
        Activation::Tanh => 1.0 - y * y,
        Activation::Gelu => gelu_grad(z),
        Activation::LeakyRelu { slope } => {
            if z > 0.0 {
                1.0
            } else {
                slope
            }
        }
    }
}

impl CpuOps {
    /// [`crate::ops::LinalgOps::gemm`] of T operands into an f32 or T `c` (types checked by
    /// the caller): the f32 GEMM into an f32 `c`; into a T one the unscaled product, then
    /// `alpha Σ + beta c` rounded.
    pub(super) fn half_gemm(&self, g: Gemm, [a, b, c]: [View<'_>; 3]) -> Result<()> {
        check::gemm(&g, &a, &b, &c)?;
        let t = c.dtype();
        staged("gemm", self.context, [a, b], [c], |[a, b], [c]| {
            if t == DType::F32 {
                return run(&g, a, b, c, None);
            }
            let sums = product(&g, a, b);
            chunks(c, |start, c| {
                for (c, &v) in c.iter_mut().zip(&sums[start..]) {
                    let mut r = g.alpha * v;
                    if g.beta != 0.0 {
                        r += g.beta * *c;
                    }
                    *c = r;
                }
            });
        })
    }

    /// [`crate::ops::DenseOps::dense_forward`] of T views: `z = round(Σ + bias)`, `y =
    /// round(act(z))`.
    pub(super) fn half_dense_forward(&self, a: DenseForward<'_>, t: DType) -> Result<()> {
        let op = "dense_forward";
        let DenseParams { w, bias } = a.params;
        let (x, z, y, act) = (a.x, a.z, a.y, a.act);
        let g = a.shape.forward_gemm();
        let cols = a.shape.outputs;
        check::gemm(&g, &x, &w, &z)?;
        check::len(op, "bias", &bias, cols)?;
        check::len(op, "y", &y, z.len())?;
        check::no_overlap(op, &y, &z, true)?;
        for input in [&x, &w, &bias] {
            check::no_overlap(op, &y, input, false)?;
        }
        check::no_overlap(op, &z, &bias, false)?;
        if cols == 0 {
            return Ok(());
        }
        // z rounded, as stored; `f` of it rounded when y is stored.
        let pre = |sums: &[f32], bias: &[f32], i: usize| round_to(t, sums[i] + bias[i % cols]);
        if y.same_as(&z) {
            staged(op, self.context, [x, w, bias], [y], |[x, w, bias], [y]| {
                let sums = product(&g, x, w);
                with_act!(act, f => chunks(y, |start, y| {
                    for (i, y) in y.iter_mut().enumerate() {
                        *y = f(pre(&sums, bias, start + i));
                    }
                }));
            })
        } else {
            staged(
                op,
                self.context,
                [x, w, bias],
                [z, y],
                |[x, w, bias], [z, y]| {
                    let sums = product(&g, x, w);
                    with_act!(act, f => for (i, (z, y)) in z.iter_mut().zip(y.iter_mut()).enumerate() {
                        *z = pre(&sums, bias, i);
                        *y = f(*z);
                    });
                },
            )
        }
    }

    /// [`crate::ops::DenseOps::dense_param_grads`] of T views: the f32 `dw = dz^T x` and
    /// `dbias`, the column sums of `dz`.
    pub(super) fn half_param_grads(&self, a: DenseParamGrads<'_>) -> Result<()> {
        let op = "dense_param_grads";
        let DenseParams { w: dw, bias: dbias } = a.grads;
        let g = a.shape.weight_grad_gemm();
        let cols = a.shape.outputs;
        check::gemm(&g, &a.dz, &a.x, &dw)?;
        check::len(op, "dbias", &dbias, cols)?;
        for other in [&a.dz, &a.x, &dw] {
            check::no_overlap(op, &dbias, other, false)?;
        }
        staged(
            op,
            self.context,
            [a.dz, a.x],
            [dw, dbias],
            |[dz, x], [dw, dbias]| {
                run(&g, dz, x, dw, None);
                column_sums(dz, cols, dbias);
            },
        )
    }

    /// [`crate::ops::ActivationOps::bias_act_backward_product`] of T views: `dz = round((g w)
    /// act'(z, y))` and `dbias` the f32 column sums of that rounded `dz`.
    pub(super) fn half_product_backward(
        &self,
        a: BiasActBackwardProduct<'_>,
        t: DType,
    ) -> Result<()> {
        a.check()?;
        let Activated { z, y, act } = a.f;
        let BiasActGrads { dz, dbias } = a.grads;
        let gemm = a.product_gemm();
        let cols = a.shape.cols;
        let ins = [a.g, a.w, z, y];
        staged(
            BiasActBackwardProduct::OP,
            self.context,
            ins,
            [dz, dbias],
            |[g, w, z, y], [dz, dbias]| {
                let sums = product(&gemm, g, w);
                chunks(dz, |start, dz| {
                    for (i, dz) in dz.iter_mut().enumerate() {
                        let at = start + i;
                        *dz = round_to(t, sums[at] * act_grad(act, z[at], y[at]));
                    }
                });
                column_sums(dz, cols, dbias);
            },
        )
    }
}
