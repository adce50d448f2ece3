//! The fused Elman steps on every GPU target against the CPU backend: shapes on and across the
//! 16 x 32 output tiles and the 64-wide K slices, both activations, with and without
//! `dpre_next`, views aligned (vector loads) and not (scalar loads), outputs poisoned.

use proptest::prelude::*;
use rnn::Activation;
use rnn::ops::RecurrentWeights;
use rnn::ops::RnnStepBackward;
use rnn::ops::RnnStepForward;
use rnn::ops::SeqShape;

use super::{Values, compare_at, nan, prop};
use crate::support::Target;

pub fn rnn_steps(t: Target) {
    let s = (
        prop_oneof![Just(1usize), 2..=40usize, 60..=90usize],
        prop_oneof![Just(1usize), 2..=70usize, 250..=300usize],
        prop_oneof![Just(0usize), Just(3usize)],
        any::<u64>(),
    );
    prop(
        t,
        "gpu_rnn_steps",
        10,
        s,
        |ctx, (batch, hidden, pad, seed)| {
            let mut r = Values(seed);
            let n = batch * hidden;
            let w = r.recurrent_w(1, hidden);
            let tol = 1e-5;
            for act in [Activation::Tanh, Activation::Relu] {
                let fwd = [
                    r.vec(n, -2.0, 2.0),
                    r.vec(n, -1.0, 1.0),
                    w.clone(),
                    r.vec(hidden, -1.0, 1.0),
                    r.vec(hidden, -1.0, 1.0),
                    nan(n),
                ];
                compare_at(
                    ctx,
                    &format!("rnn_step_forward {act:?} pad {pad}"),
                    &fwd,
                    pad,
                    &[5],
                    tol,
                    &|o, v| {
                        o.rnn_step_forward(RnnStepForward::new(
                            v[0],
                            v[1],
                            RecurrentWeights::new(v[2], v[3], v[4]),
                            v[5],
                            act,
                            SeqShape::step(batch, hidden),
                        ))
                    },
                )?;
                // `h` as the forward would leave it: in (-1, 1) for tanh, >= 0 (some exact 0) for relu.
                let mut h = r.vec(n, -1.0, 1.0);
                if act == Activation::Relu {
                    h.iter_mut().for_each(|x| *x = x.max(0.0));
                }
                let bwd = [
                    r.vec(n, -1.0, 1.0),
                    r.vec(n, -1.0, 1.0),
                    w.clone(),
                    h,
                    nan(n),
                ];
                compare_at(
                    ctx,
                    &format!("rnn_step_backward {act:?} pad {pad}"),
                    &bwd,
                    pad,
                    &[4],
                    tol,
                    &|o, v| {
                        o.rnn_step_backward(RnnStepBackward::new(
                            v[0],
                            Some(v[1]),
                            v[2],
                            v[3],
                            v[4],
                            act,
                            SeqShape::step(batch, hidden),
                        ))
                    },
                )?;
                compare_at(
                    ctx,
                    &format!("rnn_step_backward {act:?} last step pad {pad}"),
                    &bwd,
                    pad,
                    &[4],
                    tol,
                    &|o, v| {
                        o.rnn_step_backward(RnnStepBackward::new(
                            v[0],
                            None,
                            v[2],
                            v[3],
                            v[4],
                            act,
                            SeqShape::step(batch, hidden),
                        ))
                    },
                )?;
            }
            Ok(())
        },
    );
}
