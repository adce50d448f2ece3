//! Optimizer steps over the flat parameter buffer: one fused pass each.

use super::CpuOps;
use crate::ops::prelude::*;
use rayon::prelude::*;

use super::access::lock;
use super::par::PAR_MIN;
use crate::buffer::View;
use crate::error::Result;
use crate::ops::{AdamStep, MixedUpdate, OptimBuffers, ScaleUpdate, SgdStep, check};

const CHUNK: usize = 16 * 1024;

/// Reads the learning rate and takes the next step of the optimizer `state` (see
/// [`crate::ops::OPTIMIZER_STATE_LEN`]): returns `(lr, step)` after storing the new step and
/// its bias corrections `1 - beta^step` (f64 arithmetic, as the update uses).
fn advance_state(
    op: &str,
    ctx: u64,
    state: View<'_>,
    beta1: f64,
    beta2: f64,
) -> Result<(f32, f64)> {
    lock(op, ctx, [], [state], |[], [st]| {
        let step = st[1] + 1.0;
        let t = step as f64;
        st[1] = step;
        st[2] = (1.0 - beta1.powf(t)) as f32;
        st[3] = (1.0 - beta2.powf(t)) as f32;
        (st[0], t)
    })
}

/// The per-step constants of one Adam update.
struct Adam {
    b1: f32,
    b2: f32,
    eps: f32,
    l2: f32,
    decay: f32,
    step_size: f32,
    inv_sqrt_bc2: f32,
}

impl Adam {
    fn run(&self, p: &mut [f32], m: &mut [f32], v: &mut [f32], g: &[f32]) {
        super::simd::vectorized(AdamLanes {
            adam: self,
            p,
            m,
            v,
            g,
        })
    }

    #[inline(always)]
    fn lanes(&self, p: &mut [f32], m: &mut [f32], v: &mut [f32], g: &[f32]) {
        let (b1, b2) = (self.b1, self.b2);
        for (((p, m), v), &g) in p.iter_mut().zip(m.iter_mut()).zip(v.iter_mut()).zip(g) {
            let g = g + self.l2 * *p;
            *p *= self.decay;
            *m = b1 * *m + (1.0 - b1) * g;
            *v = b2 * *v + (1.0 - b2) * g * g;
            *p -= self.step_size * *m / (v.sqrt() * self.inv_sqrt_bc2 + self.eps);
        }
    }
}

/// One chunk of the Adam update, compiled for the widest vector instructions (the square root
/// and division per element make it compute-bound at SSE width).
struct AdamLanes<'a> {
    adam: &'a Adam,
    p: &'a mut [f32],
    m: &'a mut [f32],
    v: &'a mut [f32],
    g: &'a [f32],
}

impl super::simd::Lanes for AdamLanes<'_> {
    #[inline(always)]
    fn run(self) {
        self.adam.lanes(self.p, self.m, self.v, self.g)
    }
}

impl OptimOps for CpuOps {
    fn sgd_step(&self, b: OptimBuffers<'_>, velocity: View<'_>, s: SgdStep) -> Result<()> {
        let (params, grads, state) = (b.params, b.grads, b.state);
        let ctx = self.context;
        let op = "sgd_step";
        // Every view before the state advances.
        check::same_context(op, ctx, &[&params, &grads, &velocity, &state])?;
        let n = check::sgd_step(&params, &grads, &velocity, &state, &s)? as usize;
        let (lr, _) = advance_state(op, ctx, state, 0.0, 0.0)?;
        if s.momentum == 0.0 {
            return lock(op, ctx, [grads], [params], |[g], [p]| {
                super::par::chunks(p, |st, p| {
                    let n = p.len();
                    for (p, &g) in p.iter_mut().zip(&g[st..st + n]) {
                        *p -= lr * (g + s.weight_decay * *p);
                    }
                })
            });
        }
        lock(op, ctx, [grads], [params, velocity], |[g], [p, v]| {
            let body = |((p, v), g): ((&mut [f32], &mut [f32]), &[f32])| {
                for ((p, v), &g) in p.iter_mut().zip(v.iter_mut()).zip(g) {
                    let g = g + s.weight_decay * *p;
                    *v = s.momentum * *v + g;
                    let step = if s.nesterov { g + s.momentum * *v } else { *v };
                    *p -= lr * step;
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

    fn adam_step(&self, b: OptimBuffers<'_>, m: View<'_>, v: View<'_>, s: AdamStep) -> Result<()> {
        let (params, grads, state) = (b.params, b.grads, b.state);
        let ctx = self.context;
        let op = "adam_step";
        // Every view before the state advances.
        check::same_context(op, ctx, &[&params, &grads, &m, &v, &state])?;
        let n = check::adam_step(&params, &grads, &m, &v, &state)? as usize;
        let (b1, b2) = (s.beta1 as f64, s.beta2 as f64);
        let (lr, t) = advance_state(op, ctx, state, b1, b2)?;
        // PyTorch's arithmetic: denom = sqrt(v) / sqrt(1 - b2^t) + eps, p -= lr / (1 - b1^t) * m / denom.
        let bc1 = 1.0 - b1.powf(t);
        let bc2 = 1.0 - b2.powf(t);
        let step_size = (lr as f64 / bc1) as f32;
        let inv_sqrt_bc2 = (1.0 / bc2.sqrt()) as f32;
        let decay = if s.decoupled {
            1.0 - lr * s.weight_decay
        } else {
            1.0
        };
        let l2 = if s.decoupled { 0.0 } else { s.weight_decay };
        let adam = Adam {
            b1: s.beta1,
            b2: s.beta2,
            eps: s.eps,
            l2,
            decay,
            step_size,
            inv_sqrt_bc2,
        };
        lock(op, ctx, [grads], [params, m, v], |[g], [p, m, v]| {
            if n < PAR_MIN {
                adam.run(p, m, v, g);
            } else {
                p.par_chunks_mut(CHUNK)
                    .zip(m.par_chunks_mut(CHUNK))
                    .zip(v.par_chunks_mut(CHUNK))
                    .zip(g.par_chunks(CHUNK))
                    .for_each(|(((p, m), v), g)| adam.run(p, m, v, g));
            }
        })
    }

    fn unscale_and_check(
        &self,
        grads: View<'_>,
        scaler: View<'_>,
        found_inf: View<'_>,
    ) -> Result<()> {
        let op = "unscale_and_check";
        check::loss_scale(op, self.context, &grads, &scaler, &found_inf)?;
        lock(
            op,
            self.context,
            [scaler],
            [grads, found_inf],
            |[s], [g, f]| {
                let inv = 1.0 / s[0];
                let unscale = |g: &mut [f32]| {
                    let mut bad = false;
                    for x in g {
                        bad |= !x.is_finite();
                        *x *= inv;
                    }
                    bad
                };
                let bad = if g.len() < PAR_MIN {
                    unscale(g)
                } else {
                    g.par_chunks_mut(CHUNK)
                        .map(unscale)
                        .reduce(|| false, |a, b| a || b)
                };
                f[0] = if bad { 1.0 } else { 0.0 };
            },
        )
    }

    fn update_scale(&self, scaler: View<'_>, found_inf: View<'_>, u: ScaleUpdate) -> Result<()> {
        let op = "update_scale";
        check::scale_update(&u)?;
        let none = scaler.buffer().slice(0, 0)?;
        check::loss_scale(op, self.context, &none, &scaler, &found_inf)?;
        lock(op, self.context, [found_inf], [scaler], |[f], [s]| {
            if f[0] != 0.0 {
                s[0] *= u.backoff;
                s[1] = 0.0;
                return;
            }
            let clean = s[1] + 1.0;
            if clean >= u.interval as f32 {
                let grown = s[0] * u.growth;
                if grown.is_finite() {
                    s[0] = grown;
                }
                s[1] = 0.0;
            } else {
                s[1] = clean;
            }
        })
    }

    fn sgd_step_mixed(
        &self,
        b: OptimBuffers<'_>,
        velocity: View<'_>,
        s: SgdStep,
        mp: MixedUpdate<'_>,
    ) -> Result<()> {
        let op = "sgd_step_mixed";
        let views = [&b.params, &b.grads, &velocity, &b.state];
        check::same_context(op, self.context, &views)?;
        let n = check::sgd_step(&b.params, &b.grads, &velocity, &b.state, &s)?;
        check::mixed_update(op, self.context, &mp, n as usize, &views)?;
        if self.skips(op, mp.found_inf)? {
            return Ok(());
        }
        self.sgd_step(b, velocity, s)?;
        self.cast(b.params, mp.low)
    }

    fn adam_step_mixed(
        &self,
        b: OptimBuffers<'_>,
        m: View<'_>,
        v: View<'_>,
        s: AdamStep,
        mp: MixedUpdate<'_>,
    ) -> Result<()> {
        let op = "adam_step_mixed";
        let views = [&b.params, &b.grads, &m, &v, &b.state];
        check::same_context(op, self.context, &views)?;
        let n = check::adam_step(&b.params, &b.grads, &m, &v, &b.state)?;
        check::mixed_update(op, self.context, &mp, n as usize, &views)?;
        if self.skips(op, mp.found_inf)? {
            return Ok(());
        }
        self.adam_step(b, m, v, s)?;
        self.cast(b.params, mp.low)
    }
}

impl CpuOps {
    /// Whether the flag of a mixed-precision step is set (the step is skipped).
    fn skips(&self, op: &str, found_inf: View<'_>) -> Result<bool> {
        lock(op, self.context, [found_inf], [], |[f], []| f[0] != 0.0)
    }
}
