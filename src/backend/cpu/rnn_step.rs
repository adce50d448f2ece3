//! The fused Elman time steps: the recurrent product through the packed GEMM straight into the
//! output, then one pass of bias + activation (forward) or activation derivative (backward)
//! over it, all under one lock of the views.

use rayon::prelude::*;

use super::access::lock;
use super::activation::with_act;
use super::gemm;
use super::par::{PAR_MIN, chunks, min_rows};
use crate::buffer::View;
use crate::error::Result;
use crate::ops::{Activation, Gemm, check};

/// `f(out_row, in_row)` over matching rows of `hidden` elements, in parallel when large.
fn rows2(out: &mut [f32], input: &[f32], hidden: usize, f: impl Fn(&mut [f32], &[f32]) + Sync) {
    if out.len() < PAR_MIN {
        out.chunks_mut(hidden)
            .zip(input.chunks(hidden))
            .for_each(|(o, i)| f(o, i));
    } else {
        out.par_chunks_mut(hidden)
            .zip(input.par_chunks(hidden))
            .with_min_len(min_rows(hidden))
            .for_each(|(o, i)| f(o, i));
    }
}

#[allow(clippy::too_many_arguments)]
pub(super) fn rnn_step_forward(
    ctx: u64,
    pre: View<'_>,
    h_prev: View<'_>,
    w_hh: View<'_>,
    b_ih: View<'_>,
    b_hh: View<'_>,
    h: View<'_>,
    act: Activation,
    batch: usize,
    hidden: usize,
) -> Result<()> {
    let op = "rnn_step_forward";
    let n = batch.saturating_mul(hidden);
    let inputs = [
        ("pre", &pre, n),
        ("h_prev", &h_prev, n),
        ("w_hh", &w_hh, hidden.saturating_mul(hidden)),
        ("b_ih", &b_ih, hidden),
        ("b_hh", &b_hh, hidden),
    ];
    if check::rnn_step(op, act, batch, hidden, &inputs, ("h", &h))? == 0 {
        return Ok(());
    }
    let g = Gemm::new(batch, hidden, hidden).tb();
    let ins = [pre, h_prev, w_hh, b_ih, b_hh];
    lock(op, ctx, ins, [h], |[pre, hp, w, bi, bh], [h]| {
        gemm::run(&g, hp, w, h);
        with_act!(act, f => rows2(h, pre, hidden, |hr, pr| {
            for (((v, &p), &a), &b) in hr.iter_mut().zip(pr).zip(bi).zip(bh) {
                *v = f(*v + p + a + b);
            }
        }))
    })
}

#[allow(clippy::too_many_arguments)]
pub(super) fn rnn_step_backward(
    ctx: u64,
    dh: View<'_>,
    dpre_next: Option<View<'_>>,
    w_hh: View<'_>,
    h: View<'_>,
    dpre: View<'_>,
    act: Activation,
    batch: usize,
    hidden: usize,
) -> Result<()> {
    let op = "rnn_step_backward";
    let n = batch.saturating_mul(hidden);
    let mut inputs = vec![
        ("dh", &dh, n),
        ("w_hh", &w_hh, hidden.saturating_mul(hidden)),
        ("h", &h, n),
    ];
    if let Some(next) = &dpre_next {
        inputs.push(("dpre_next", next, n));
    }
    if check::rnn_step(op, act, batch, hidden, &inputs, ("dpre", &dpre))? == 0 {
        return Ok(());
    }
    // The product goes straight into `dpre`; the epilogue then reads it back (`with_next`).
    let body = |[dh, h]: [&[f32]; 2], [dp]: [&mut [f32]; 1], with_next: bool| match act {
        Activation::Relu => {
            epilogue_backward(dp, dh, h, with_next, |y| if y > 0.0 { 1.0 } else { 0.0 })
        }
        _ => epilogue_backward(dp, dh, h, with_next, |y| 1.0 - y * y),
    };
    match dpre_next {
        Some(next) => {
            let g = Gemm::new(batch, hidden, hidden);
            lock(
                op,
                ctx,
                [dh, h, next, w_hh],
                [dpre],
                |[dh, h, nx, w], [dp]| {
                    gemm::run(&g, nx, w, dp);
                    body([dh, h], [dp], true)
                },
            )
        }
        None => lock(op, ctx, [dh, h], [dpre], |ins, outs| body(ins, outs, false)),
    }
}

/// `dp = act'(h) * (dp + dh)` (`with_next`) or `act'(h) * dh`, `grad` giving act' from the
/// output.
fn epilogue_backward(
    dp: &mut [f32],
    dh: &[f32],
    h: &[f32],
    with_next: bool,
    grad: impl Fn(f32) -> f32 + Sync + Send,
) {
    chunks(dp, |s, o| {
        let e = s + o.len();
        let it = o.iter_mut().zip(&dh[s..e]).zip(&h[s..e]);
        if with_next {
            it.for_each(|((v, &d), &y)| *v = grad(y) * (*v + d));
        } else {
            it.for_each(|((v, &d), &y)| *v = grad(y) * d);
        }
    });
}
