//! The optimizer steps (SGD with and without momentum, Adam, AdamW) on every GPU target against
//! the CPU backend, from any step number.

use proptest::prelude::*;
use rnn::ops::OptimBuffers;
use rnn::{AdamStep, SgdStep};

use super::{Values, compare, prop};
use crate::support::Target;

pub fn optimizers(t: Target) {
    let s = (
        prop_oneof![1..=300usize, 5000..=70_000usize],
        1..=50u64,
        any::<u64>(),
    );
    prop(t, "gpu_optimizers", 8, s, |ctx, (n, step, seed)| {
        let mut r = Values(seed);
        let (p, g, m) = (
            r.vec(n, -1.0, 1.0),
            r.vec(n, -1.0, 1.0),
            r.vec(n, -0.1, 0.1),
        );
        let v = r.vec(n, 0.0, 0.01);
        let tol = 1e-5;
        // The device-side state: learning rate, steps already taken (this op takes `step`),
        // stale bias corrections the op must overwrite.
        let state = |lr: f32| vec![lr, (step - 1) as f32, -1.0, -1.0];
        for (momentum, nesterov) in [(0.0, false), (0.9, false), (0.9, true)] {
            let s = SgdStep {
                momentum,
                weight_decay: 0.01,
                nesterov,
            };
            let check: &[usize] = if momentum == 0.0 { &[0, 3] } else { &[0, 2, 3] };
            compare(
                ctx,
                &format!("sgd_step {s:?} step {step}"),
                &[p.clone(), g.clone(), m.clone(), state(0.1)],
                check,
                tol,
                &|o, b| o.sgd_step(OptimBuffers::new(b[0], b[1], b[3]), b[2], s),
            )?;
        }
        for decoupled in [false, true] {
            let s = AdamStep {
                beta1: 0.9,
                beta2: 0.999,
                eps: 1e-8,
                weight_decay: 0.01,
                decoupled,
            };
            let bufs = [p.clone(), g.clone(), m.clone(), v.clone(), state(1e-3)];
            compare(
                ctx,
                &format!("adam_step {s:?} step {step}"),
                &bufs,
                &[0, 2, 3, 4],
                tol,
                &|o, b| o.adam_step(OptimBuffers::new(b[0], b[1], b[4]), b[2], b[3], s),
            )?;
        }
        Ok(())
    });
}
