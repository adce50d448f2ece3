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
use crate::error::Result;
use crate::ops::RecurrentWeights;
use crate::ops::SeqShape;
use crate::ops::prelude::*;
use crate::ops::rnn_seq;
use crate::ops::{Activation, Gemm};
use crate::ops::{RnnSequenceBackward, RnnSequenceForward, RnnStepBackward, RnnStepForward};

/// `dpre = act'(h) * (dh + dpre_next W_hh)` (no product without `dpre_next`), the product
/// going straight into `dpre` and each block's epilogue reading it back; `grad` gives act'
/// from the output.
fn backward(
    ctx: u64,
    a: &RnnStepBackward<'_>,
    grad: impl Fn(f32) -> f32 + Sync + Send + Copy,
) -> Result<()> {
    let (op, hidden) = (RnnStepBackward::OP, a.shape.hidden);
    let (dh, h, dpre) = (a.dh, a.h, a.dpre);
    match a.dpre_next {
        Some(next) => {
            let g = Gemm::new(a.shape.batch, hidden, hidden);
            let ins = [dh, h, next, a.w_hh];
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
    fn rnn_step_forward(&self, a: RnnStepForward<'_>) -> Result<()> {
        if a.check(self.context)? == 0 {
            return Ok(());
        }
        let RecurrentWeights { w_hh, b_ih, b_hh } = a.weights;
        let SeqShape { batch, hidden, .. } = a.shape;
        let g = Gemm::new(batch, hidden, hidden).tb();
        let ins = [a.pre, a.h_prev, w_hh, b_ih, b_hh];
        let act = a.act;
        lock(
            RnnStepForward::OP,
            self.context,
            ins,
            [a.h],
            |[pre, hp, w, bi, bh], [h]| {
                // Two vectorized passes over each (cache-resident) segment keep the reference order of
                // the sum, ((v + pre) + b_ih) + b_hh.
                with_act!(act, f => gemm::run(&g, hp, w, h, Some(&|i, j0, seg: &mut [f32]| {
                    let e = j0 + seg.len();
                    let (pr, bi, bh) = (&pre[i * hidden + j0..i * hidden + e], &bi[j0..e], &bh[j0..e]);
                    simd::zip2(seg, pr, bi, |v, p, a| v + p + a);
                    simd::zip1(seg, bh, |v, b| f(v + b));
                })))
            },
        )
    }

    fn rnn_step_backward(&self, a: RnnStepBackward<'_>) -> Result<()> {
        if a.check(self.context)? == 0 {
            return Ok(());
        }
        // act' from the output: the step ops take tanh or relu only (`check::elman`).
        match a.act {
            Activation::Relu => backward(self.context, &a, |y| if y > 0.0 { 1.0 } else { 0.0 }),
            _ => backward(self.context, &a, |y| 1.0 - y * y),
        }
    }

    fn rnn_sequence_forward(&self, a: RnnSequenceForward<'_>) -> Result<()> {
        if a.check(self.context)? == 0 {
            return Ok(());
        }
        rnn_seq::forward_by_steps(self, a)
    }

    fn rnn_sequence_backward(&self, a: RnnSequenceBackward<'_>) -> Result<()> {
        if a.check(self.context)? == 0 {
            return Ok(());
        }
        rnn_seq::backward_by_steps(self, a)
    }
}
