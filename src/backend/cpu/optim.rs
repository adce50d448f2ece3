//! Optimizer steps over the flat parameter buffer: one fused pass each.

use rayon::prelude::*;

use super::access::lock;
use super::par::PAR_MIN;
use crate::buffer::View;
use crate::error::{Error, Result};
use crate::ops::{AdamStep, SgdStep, check};

const CHUNK: usize = 16 * 1024;

pub(super) fn sgd_step(
    ctx: u64,
    params: View<'_>,
    grads: View<'_>,
    velocity: View<'_>,
    s: SgdStep,
) -> Result<()> {
    let op = "sgd_step";
    let n = params.len();
    check::len(op, "grads", &grads, n)?;
    if s.momentum == 0.0 {
        return lock(op, ctx, [grads], [params], |[g], [p]| {
            super::par::chunks(p, |st, p| {
                let n = p.len();
                for (p, &g) in p.iter_mut().zip(&g[st..st + n]) {
                    *p -= s.lr * (g + s.weight_decay * *p);
                }
            })
        });
    }
    check::len(op, "velocity", &velocity, n)?;
    lock(op, ctx, [grads], [params, velocity], |[g], [p, v]| {
        let body = |((p, v), g): ((&mut [f32], &mut [f32]), &[f32])| {
            for ((p, v), &g) in p.iter_mut().zip(v.iter_mut()).zip(g) {
                let g = g + s.weight_decay * *p;
                *v = s.momentum * *v + g;
                let step = if s.nesterov { g + s.momentum * *v } else { *v };
                *p -= s.lr * step;
            }
        };
        if n < PAR_MIN {
            body(((p, v), g));
        } else {
            p.par_chunks_mut(CHUNK)
                .zip(v.par_chunks_mut(CHUNK))
                .zip(g.par_chunks(CHUNK))
                .for_each(body);
        }
    })
}

pub(super) fn adam_step(
    ctx: u64,
    params: View<'_>,
    grads: View<'_>,
    m: View<'_>,
    v: View<'_>,
    s: AdamStep,
) -> Result<()> {
    let op = "adam_step";
    let n = params.len();
    check::len(op, "grads", &grads, n)?;
    check::len(op, "m", &m, n)?;
    check::len(op, "v", &v, n)?;
    if s.step == 0 {
        return Err(Error::InvalidArgument(format!(
            "{op}: step counts from 1 (bias corrections divide by 1 - beta^step)"
        )));
    }
    // PyTorch's arithmetic: denom = sqrt(v) / sqrt(1 - b2^t) + eps, p -= lr / (1 - b1^t) * m / denom.
    let t = s.step.min(i32::MAX as u64) as i32;
    let bc1 = 1.0 - (s.beta1 as f64).powi(t);
    let bc2 = 1.0 - (s.beta2 as f64).powi(t);
    let step_size = (s.lr as f64 / bc1) as f32;
    let inv_sqrt_bc2 = (1.0 / bc2.sqrt()) as f32;
    let decay = if s.decoupled {
        1.0 - s.lr * s.weight_decay
    } else {
        1.0
    };
    let l2 = if s.decoupled { 0.0 } else { s.weight_decay };
    let (b1, b2) = (s.beta1, s.beta2);
    lock(op, ctx, [grads], [params, m, v], |[g], [p, m, v]| {
        let body = |(((p, m), v), g): (((&mut [f32], &mut [f32]), &mut [f32]), &[f32])| {
            for (((p, m), v), &g) in p.iter_mut().zip(m.iter_mut()).zip(v.iter_mut()).zip(g) {
                let g = g + l2 * *p;
                *p *= decay;
                *m = b1 * *m + (1.0 - b1) * g;
                *v = b2 * *v + (1.0 - b2) * g * g;
                *p -= step_size * *m / (v.sqrt() * inv_sqrt_bc2 + s.eps);
            }
        };
        if n < PAR_MIN {
            body((((p, m), v), g));
        } else {
            p.par_chunks_mut(CHUNK)
                .zip(m.par_chunks_mut(CHUNK))
                .zip(v.par_chunks_mut(CHUNK))
                .zip(g.par_chunks(CHUNK))
                .for_each(body);
        }
    })
}
