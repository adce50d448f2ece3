//! The fused Elman time steps: the recurrent product through the packed GEMM straight into the
//! output, each block of it then finished by the bias + activation (forward) or activation
//! derivative (backward) epilogue on the thread that computed it, all under one lock of the
//! views.

use super::CpuOps;
use super::access::lock;
use super::activation::with_act;
use super::gemm;
use super::par::chunks;
use super::simd;
use crate::buffer::View;
use crate::error::Result;
use crate::ops::RecurrentWeights;
use crate::ops::SeqShape;
use crate::ops::prelude::*;
use crate::ops::rnn_seq;
use crate::ops::{Activation, Gemm, check};

/// `dpre = act'(h) * (dh + dpre_next W_hh)` (no product without `dpre_next`), the product
/// going straight into `dpre` and each block's epilogue reading it back; `grad` gives act'
/// from the output.
#[allow(clippy::too_many_arguments)]
fn backward(
    ctx: u64,
    dh: View<'_>,
    dpre_next: Option<View<'_>>,
    w_hh: View<'_>,
    h: View<'_>,
    dpre: View<'_>,
    batch: usize,
    hidden: usize,
    grad: impl Fn(f32) -> f32 + Sync + Send + Copy,
) -> Result<()> {
    let op = "rnn_step_backward";
    match dpre_next {
        Some(next) => {
            let g = Gemm::new(batch, hidden, hidden);
            let ins = [dh, h, next, w_hh];
            lock(op, ctx, ins, [dpre], |[dh, h, nx, w], [dp]| {
                gemm::run(
                    &g,
                    nx,
                    w,
                    dp,
                    Some(&|i, j0, seg: &mut [f32]| {
                        let s = i * hidden + j0;
                        let (d, y) = (&dh[s..s + seg.len()], &h[s..s + seg.len()]);
                        simd::zip2(seg, d, y, |v, d, y| grad(y) * (v + d));
                    }),
                )
            })
        }
        None => lock(op, ctx, [dh, h], [dpre], |[dh, h], [dp]| {
            chunks(dp, |s, o| {
                let e = s + o.len();
                simd::zip2(o, &dh[s..e], &h[s..e], |_, d, y| grad(y) * d);
            })
        }),
    }
}

impl ElmanOps for CpuOps {
    fn rnn_step_forward(
        &self,
        pre: View<'_>,
        h_prev: View<'_>,
        weights: RecurrentWeights<'_>,
        h: View<'_>,
        act: Activation,
        shape: SeqShape,
    ) -> Result<()> {
        let RecurrentWeights { w_hh, b_ih, b_hh } = weights;
        let SeqShape { batch, hidden, .. } = shape;
        let ctx = self.context;
        let op = "rnn_step_forward";
        if check::rnn_step_forward(&pre, &h_prev, &weights, &h, act, shape)? == 0 {
            return Ok(());
        }
        let g = Gemm::new(batch, hidden, hidden).tb();
        let ins = [pre, h_prev, w_hh, b_ih, b_hh];
        lock(op, ctx, ins, [h], |[pre, hp, w, bi, bh], [h]| {
            // Two vectorized passes over each (cache-resident) segment keep the reference order of
            // the sum, ((v + pre) + b_ih) + b_hh.
            with_act!(act, f => gemm::run(&g, hp, w, h, Some(&|i, j0, seg: &mut [f32]| {
                let e = j0 + seg.len();
                let (pr, bi, bh) = (&pre[i * hidden + j0..i * hidden + e], &bi[j0..e], &bh[j0..e]);
                simd::zip2(seg, pr, bi, |v, p, a| v + p + a);
                simd::zip1(seg, bh, |v, b| f(v + b));
            })))
        })
    }

    fn rnn_step_backward(
        &self,
        dh: View<'_>,
        dpre_next: Option<View<'_>>,
        w_hh: View<'_>,
        h: View<'_>,
        dpre: View<'_>,
        act: Activation,
        shape: SeqShape,
    ) -> Result<()> {
        let SeqShape { batch, hidden, .. } = shape;
        let ctx = self.context;
        let next = dpre_next.as_ref();
        if check::rnn_step_backward(&dh, next, &w_hh, &h, &dpre, act, shape)? == 0 {
            return Ok(());
        }
        // act' from the output: the step ops take tanh or relu only (`check::rnn_step`).
        match act {
            Activation::Relu => backward(ctx, dh, dpre_next, w_hh, h, dpre, batch, hidden, |y| {
                if y > 0.0 { 1.0 } else { 0.0 }
            }),
            _ => backward(ctx, dh, dpre_next, w_hh, h, dpre, batch, hidden, |y| {
                1.0 - y * y
            }),
        }
    }

    fn rnn_sequence_forward(
        &self,
        pre: View<'_>,
        hs: View<'_>,
        weights: RecurrentWeights<'_>,
        act: Activation,
        shape: SeqShape,
    ) -> Result<()> {
        let RecurrentWeights { w_hh, b_ih, b_hh } = weights;
        let op = "rnn_sequence_forward";
        check::same_context(op, self.context, &[&pre, &hs, &w_hh, &b_ih, &b_hh])?;
        if check::rnn_sequence_forward(pre, hs, weights, act, shape)? == 0 {
            return Ok(());
        }
        rnn_seq::forward_by_steps(self, [pre, hs], weights, act, shape)
    }

    fn rnn_sequence_backward(
        &self,
        dh: View<'_>,
        hs: View<'_>,
        w_hh: View<'_>,
        dpre: View<'_>,
        act: Activation,
        shape: SeqShape,
    ) -> Result<()> {
        let op = "rnn_sequence_backward";
        check::same_context(op, self.context, &[&dh, &hs, &w_hh, &dpre])?;
        if check::rnn_sequence_backward(dh, hs, w_hh, dpre, act, shape)? == 0 {
            return Ok(());
        }
        rnn_seq::backward_by_steps(self, [dh, hs, w_hh, dpre], act, shape)
    }
}
