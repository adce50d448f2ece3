//! Activations: elementwise forward and backward, and the fused bias + activation forward.
//!
//! `with_act!`/`with_grad!` match on the activation once, outside the loop, so each arm's loop is
//! compiled for one concrete function and vectorizes.

use super::CpuOps;
use crate::ops::prelude::*;
use rayon::prelude::*;

use super::access::{Src, lock, lock_inplace};
use super::elementwise::unary;
use super::float_views;
use super::par::{chunks, min_rows};
use crate::buffer::View;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::ops::{Activated, Activation, BiasActBackwardProduct, MatShape, check};

const FRAC_1_SQRT_2: f32 = std::f32::consts::FRAC_1_SQRT_2;
/// 1 / sqrt(2 pi).
const INV_SQRT_2PI: f32 = 0.398_942_3;

pub(super) use super::fastmath::sigmoid;

#[inline(always)]
pub(super) fn gelu(z: f32) -> f32 {
    // 1 + erf(x) as erfc(-x): the sum cancels for z below about -3 (1e-3 relative at -4).
    0.5 * z * libm::erfcf(-z * FRAC_1_SQRT_2)
}

#[inline(always)]
pub(super) fn gelu_grad(z: f32) -> f32 {
    let cdf = 0.5 * libm::erfcf(-z * FRAC_1_SQRT_2);
    cdf + z * INV_SQRT_2PI * super::fastmath::exp(-0.5 * z * z)
}

/// Binds `$f` to the forward function of `$act` and evaluates `$body` once per activation.
macro_rules! with_act {
    ($act:expr, $f:ident => $body:expr) => {
        match $act {
            Activation::Identity => {
                let $f = |z: f32| z;
                $body
            }
            Activation::Relu => {
                let $f = |z: f32| if z > 0.0 { z } else { 0.0 };
                $body
            }
            Activation::Sigmoid => {
                let $f = $crate::backend::cpu::activation::sigmoid;
                $body
            }
            Activation::Tanh => {
                let $f = $crate::backend::cpu::fastmath::tanh;
                $body
            }
            Activation::Gelu => {
                let $f = $crate::backend::cpu::activation::gelu;
                $body
            }
            Activation::LeakyRelu { slope } => {
                let $f = move |z: f32| if z > 0.0 { z } else { slope * z };
                $body
            }
        }
    };
}
pub(super) use with_act;

/// `f(row)` for every row of `cols` elements of `x`, in parallel when large.
pub(super) fn rows_of(x: &mut [f32], cols: usize, f: impl Fn(&mut [f32]) + Sync + Send) {
    if x.len() < super::par::PAR_MIN {
        x.chunks_mut(cols).for_each(f);
    } else {
        x.par_chunks_mut(cols)
            .with_min_len(min_rows(cols))
            .for_each(f);
    }
}

/// `dz[i] = dy[i] * g(w[i])`, where `dy` may be `dz` itself.
fn scaled(dy: Src<'_>, dz: &mut [f32], w: &[f32], g: impl Fn(f32) -> f32 + Sync + Send) {
    match dy {
        Src::Slice(dy) => chunks(dz, |s, o| {
            let n = o.len();
            for ((o, &d), &w) in o.iter_mut().zip(&dy[s..s + n]).zip(&w[s..s + n]) {
                *o = d * g(w);
            }
        }),
        Src::Out => chunks(dz, |s, o| {
            let n = o.len();
            for (o, &w) in o.iter_mut().zip(&w[s..s + n]) {
                *o *= g(w);
            }
        }),
    }
}

impl ActivationOps for CpuOps {
    fn bias_act_forward(&self, f: Activated<'_>, bias: View<'_>, shape: MatShape) -> Result<()> {
        let Activated { z, y, act } = f;
        let MatShape { rows, cols } = shape;
        let ctx = self.context;
        let op = "bias_act_forward";
        let n = check::area(op, rows, cols)?;
        check::len(op, "z", &z, n)?;
        check::len(op, "bias", &bias, cols)?;
        check::len(op, "y", &y, n)?;
        if cols == 0 {
            return Ok(());
        }
        let t = [("z", &z), ("bias", &bias), ("y", &y)];
        let staged = check::float_t(op, ctx, &t, &[])? != DType::F32;
        match (y.same_as(&z), staged) {
            (true, false) => lock(op, ctx, [bias], [z], |[bias], [z]| {
                bias_act_in_place(act, bias, z, cols)
            }),
            (true, true) => float_views::staged(op, ctx, [bias], [z], |[bias], [z]| {
                bias_act_in_place(act, bias, z, cols)
            }),
            (false, false) => lock(op, ctx, [bias], [z, y], |[bias], [z, y]| {
                bias_act(act, bias, z, y, cols)
            }),
            (false, true) => float_views::staged(op, ctx, [bias], [z, y], |[bias], [z, y]| {
                bias_act(act, bias, z, y, cols)
            }),
        }
    }

    fn activation(&self, x: View<'_>, y: View<'_>, act: Activation) -> Result<()> {
        let ctx = self.context;
        check::len("activation", "y", &y, x.len())?;
        if check::float_t("activation", ctx, &[("x", &x), ("y", &y)], &[])? != DType::F32 {
            return float_views::staged(
                "activation",
                ctx,
                [x],
                [y],
                |[x], [y]| with_act!(act, f => unary(Src::Slice(x), y, f)),
            );
        }
        lock_inplace(
            "activation",
            ctx,
            [x],
            [y],
            0b1,
            |[x], [y]| with_act!(act, f => unary(x, y, f)),
        )
    }

    fn bias_act_backward_product(&self, a: BiasActBackwardProduct<'_>) -> Result<()> {
        match a.float_type(self.context)? {
            crate::dtype::DType::F32 => {
                a.check()?;
                crate::ops::activation::composed_product_backward(self, a)
            }
            t => self.half_product_backward(a, t),
        }
    }

    fn act_backward(&self, dy: View<'_>, f: Activated<'_>, dz: View<'_>) -> Result<()> {
        let Activated { z, y, act } = f;
        let ctx = self.context;
        let op = "act_backward";
        let n = dy.len();
        check::len(op, "z", &z, n)?;
        check::len(op, "y", &y, n)?;
        check::len(op, "dz", &dz, n)?;
        let t = [("dy", &dy), ("z", &z), ("y", &y), ("dz", &dz)];
        if check::float_t(op, ctx, &t, &[])? != DType::F32 {
            check::no_overlap(op, &dz, &z, false)?;
            check::no_overlap(op, &dz, &y, false)?;
            return float_views::staged(op, ctx, [dy, z, y], [dz], |[dy, z, y], [dz]| {
                act_backward_into(act, Src::Slice(dy), z, y, dz)
            });
        }
        lock_inplace(op, ctx, [dy, z, y], [dz], 0b001, |[dy, z, y], [dz]| {
            let (Src::Slice(z), Src::Slice(y)) = (z, y) else {
                return Err(Error::InvalidArgument(format!(
                    "{op}: dz may alias dy only"
                )));
            };
            act_backward_into(act, dy, z, y, dz);
            Ok(())
        })?
    }
}

/// `z[r,:] = act(z[r,:] + bias)` over the rows of `z`.
fn bias_act_in_place(act: Activation, bias: &[f32], z: &mut [f32], cols: usize) {
    with_act!(act, f => rows_of(z, cols, |zr| {
        for (v, &b) in zr.iter_mut().zip(bias) {
            *v = f(*v + b);
        }
    }))
}

/// `z[r,:] += bias`, `y = act(z)` over the rows of `z` and `y`.
fn bias_act(act: Activation, bias: &[f32], z: &mut [f32], y: &mut [f32], cols: usize) {
    with_act!(act, f => {
        let body = |(zr, yr): (&mut [f32], &mut [f32])| {
            for ((v, o), &b) in zr.iter_mut().zip(yr.iter_mut()).zip(bias) {
                *v += b;
                *o = f(*v);
            }
        };
        if z.len() < super::par::PAR_MIN {
            z.chunks_mut(cols).zip(y.chunks_mut(cols)).for_each(body);
        } else {
            z.par_chunks_mut(cols)
                .zip(y.par_chunks_mut(cols))
                .with_min_len(min_rows(cols))
                .for_each(body);
        }
    })
}

/// `dz = dy * act'(...)`: each arm reads y, or z where the output cannot tell.
fn act_backward_into(act: Activation, dy: Src<'_>, z: &[f32], y: &[f32], dz: &mut [f32]) {
    match act {
        Activation::Identity => unary(dy, dz, |d| d),
        Activation::Relu => scaled(dy, dz, y, |y| if y > 0.0 { 1.0 } else { 0.0 }),
        Activation::Sigmoid => scaled(dy, dz, y, |y| y * (1.0 - y)),
        Activation::Tanh => scaled(dy, dz, y, |y| 1.0 - y * y),
        Activation::Gelu => scaled(dy, dz, z, gelu_grad),
        Activation::LeakyRelu { slope } => {
            scaled(dy, dz, z, move |z| if z > 0.0 { 1.0 } else { slope })
        }
    }
}
