//! What the recurrent-layer suites share: the f64 reference helpers, and the check that a GPU
//! backend follows the CPU (loss, gradients, outputs, then a few training steps).

use rnn::Context;
use rnn::nn::{Dataset, Network, Rng, Targets, TrainingHistory};

use crate::gradcheck::{classes, random};
use crate::support::rel_err;

pub(crate) fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// `W v + b` for a row-major `b.len() x v.len()` matrix.
pub(crate) fn affine(w: &[f32], b: &[f32], v: &[f64]) -> Vec<f64> {
    b.iter()
        .enumerate()
        .map(|(r, &bias)| {
            let row = &w[r * v.len()..(r + 1) * v.len()];
            bias as f64 + row.iter().zip(v).map(|(&a, &x)| a as f64 * x).sum::<f64>()
        })
        .collect()
}

/// `n` random sequences of `t` steps of `i` inputs twice: with a class of `c` per step, and with
/// a 2-value regression target per sequence (for `RnnOutput::Last`).
pub(crate) fn sequence_and_last_data(
    rng: &mut Rng,
    (n, t, i, c): (usize, usize, usize, usize),
) -> (Dataset, Dataset) {
    let targets = Targets::Classes {
        labels: classes(rng, n * t, c),
        classes: c,
        per_sample: t,
    };
    let seq = Dataset::new(random(rng, n * t * i), t * i, targets).unwrap();
    let last = Dataset::regression(random(rng, n * t * i), t * i, random(rng, n * 2), 2).unwrap();
    (seq, last)
}

/// On every context: the loss, gradients and outputs of `model(ctx, last)` on each
/// `(last, data)` case agree with the CPU's, and the losses of `train(ctx)` (a few steps,
/// recorded as graphs where the device can) with those of `train(cpu)`.
pub(crate) fn assert_follows_cpu(
    contexts: &[Context],
    what: &str,
    cases: [(bool, &Dataset); 2],
    model: impl Fn(&Context, bool) -> Network,
    train: impl Fn(&Context) -> TrainingHistory,
) {
    let cpu = Context::cpu();
    let reference: Vec<_> = cases
        .iter()
        .map(|&(last, data)| {
            let mut net = model(&cpu, last);
            let loss = net.compute_gradients(data).unwrap();
            let out = net.predict(data.features()).unwrap();
            (loss, net.gradients().unwrap(), out)
        })
        .collect();
    let ref_losses = train(&cpu).losses();
    for ctx in contexts {
        let id = ctx.id();
        for ((last, data), (loss, grads, out)) in cases.into_iter().zip(&reference) {
            let mut net = model(ctx, last);
            let got_loss = net.compute_gradients(data).unwrap();
            assert!(
                (got_loss - loss).abs() <= 1e-4 * loss.abs() + 1e-6,
                "{id} {what} last={last}: loss {got_loss} vs CPU {loss}"
            );
            let e = rel_err(&net.gradients().unwrap(), grads);
            assert!(e < 1e-3, "{id} {what} last={last}: gradient rel err {e}");
            let e = rel_err(&net.predict(data.features()).unwrap(), out);
            assert!(e < 1e-4, "{id} {what} last={last}: output rel err {e}");
        }
        let got = train(ctx);
        assert_eq!(got.device, id);
        for (a, b) in got.losses().iter().zip(&ref_losses) {
            assert!(
                (a - b).abs() <= 0.02 * b.abs() + 1e-3,
                "{id} {what}: losses {:?} vs CPU {ref_losses:?}",
                got.losses()
            );
        }
    }
}
