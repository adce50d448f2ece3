//! Softmax, log-softmax and the losses on every GPU target against the CPU backend.

use proptest::prelude::*;
use rnn::ops::Mse;
use rnn::ops::SoftmaxCrossEntropy;
use rnn::ops::{LossOutputs, MatShape};

use super::{Values, compare, compare_ids, nan, prop};
use crate::support::Target;

pub fn softmax_losses(t: Target) {
    let s = (
        prop_oneof![Just(1usize), 2..=70usize],
        // Widths on both sides of 128, up to which the GPU kernels of softmax_xent keep a row
        // in registers.
        prop_oneof![Just(1usize), 2..=40usize, 90..=140usize, 250..=700usize],
        any::<u64>(),
    );
    prop(t, "gpu_softmax_losses", 10, s, |ctx, (rows, cols, seed)| {
        let mut r = Values(seed);
        let n = rows * cols;
        let x = r.vec(n, -8.0, 8.0);
        let tol = 1e-5;
        compare(ctx, "softmax", &[x.clone(), nan(n)], &[1], tol, &|o, v| {
            o.softmax(v[0], v[1], rows, cols)
        })?;
        compare(
            ctx,
            "softmax in place",
            std::slice::from_ref(&x),
            &[0],
            tol,
            &|o, v| o.softmax(v[0], v[0], rows, cols),
        )?;
        compare(
            ctx,
            "log_softmax",
            &[x.clone(), nan(n)],
            &[1],
            tol,
            &|o, v| o.log_softmax(v[0], v[1], rows, cols),
        )?;
        let labels = r.ints(rows, cols);
        let scale = r.uniform(0.1, 2.0);
        let bufs = [x.clone(), labels.clone(), nan(n), nan(rows), nan(rows)];
        compare_ids(
            ctx,
            &format!("softmax_cross_entropy {rows}x{cols}"),
            (&bufs, &[1]),
            &[2, 3, 4],
            1e-5,
            &|o, v| {
                o.softmax_cross_entropy(SoftmaxCrossEntropy::new(
                    v[0],
                    v[1],
                    LossOutputs::new(v[2], v[3], None),
                    v[4],
                    MatShape::new(rows, cols),
                    scale,
                ))
            },
        )?;
        // With totals: the loss sum and correct count added to what the buffer held (a third
        // element past them stays untouched).
        let totals = vec![
            r.uniform(-3.0, 3.0),
            r.uniform(0.0, 5.0),
            r.uniform(-1.0, 1.0),
        ];
        let bufs = [
            x.clone(),
            labels,
            nan(n),
            nan(rows),
            nan(rows),
            totals.clone(),
        ];
        compare_ids(
            ctx,
            &format!("softmax_cross_entropy {rows}x{cols} with totals"),
            (&bufs, &[1]),
            &[2, 3, 4, 5],
            1e-5,
            &|o, v| {
                o.softmax_cross_entropy(SoftmaxCrossEntropy::new(
                    v[0],
                    v[1],
                    LossOutputs::new(v[2], v[3], Some(v[5])),
                    v[4],
                    MatShape::new(rows, cols),
                    scale,
                ))
            },
        )?;
        let bufs = [x.clone(), r.vec(n, -8.0, 8.0), nan(n), nan(rows)];
        compare(ctx, "mse", &bufs, &[2, 3], tol, &|o, v| {
            o.mse(Mse::new(
                v[0],
                v[1],
                LossOutputs::new(v[2], v[3], None),
                MatShape::new(rows, cols),
                scale,
            ))
        })?;
        let bufs = [x, r.vec(n, -8.0, 8.0), nan(n), nan(rows), totals];
        compare(ctx, "mse with totals", &bufs, &[2, 3, 4], tol, &|o, v| {
            o.mse(Mse::new(
                v[0],
                v[1],
                LossOutputs::new(v[2], v[3], Some(v[4])),
                MatShape::new(rows, cols),
                scale,
            ))
        })
    });
}
