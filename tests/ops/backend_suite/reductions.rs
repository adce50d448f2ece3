//! The reductions (column, row and whole sums, gradient-norm clipping) on every GPU target
//! against the CPU backend; sums that may cancel are held to their terms' magnitudes.

use proptest::prelude::*;

use rnn::ops::MatShape;

use super::{Values, compare, compare_sums, dim, nan, prop};
use crate::support::Target;

pub fn reductions(t: Target) {
    let s = (
        dim(),
        prop_oneof![Just(1usize), 2..=100usize, 200..=600usize],
        prop_oneof![1..=1000usize, 60_000..=300_000usize],
        any::<u64>(),
    );
    prop(
        t,
        "gpu_reductions",
        10,
        s,
        |ctx, (rows, cols, len, seed)| {
            let mut r = Values(seed);
            let n = rows * cols;
            let x = r.vec(n, -1.0, 1.0);
            let beta = r.uniform(0.5, 1.5);
            let tol = 1e-5;
            // Sums of mixed signs cancel: held to the magnitudes of their terms.
            let magnitudes = |by_rows: bool, prior: &[f32]| {
                let mut scale = vec![0.0f32; if by_rows { cols } else { rows }];
                for (i, v) in x.iter().enumerate() {
                    scale[if by_rows { i % cols } else { i / cols }] += v.abs();
                }
                for (s, p) in scale.iter_mut().zip(prior) {
                    *s += (beta * p).abs();
                }
                scale
            };
            // Column sums (`sum_rows`) and row sums (`sum_cols`), each overwriting (`beta == 0`,
            // over NaN) and accumulating into a prior.
            for by_rows in [true, false] {
                let (op, out_len) = if by_rows {
                    ("sum_rows", cols)
                } else {
                    ("sum_cols", rows)
                };
                let prior = r.vec(out_len, -1.0, 1.0);
                for (what, beta, out) in [
                    (format!("{op} beta=0"), 0.0, nan(out_len)),
                    (op.to_string(), beta, prior.clone()),
                ] {
                    let scale = magnitudes(by_rows, if beta == 0.0 { &[] } else { &prior });
                    compare_sums(
                        ctx,
                        &what,
                        &[x.clone(), out],
                        &[],
                        &[(1, scale)],
                        tol,
                        &|o, v| {
                            if by_rows {
                                o.sum_rows(v[0], v[1], MatShape::new(rows, cols), beta)
                            } else {
                                o.sum_cols(v[0], v[1], MatShape::new(rows, cols), beta)
                            }
                        },
                    )?;
                }
            }
            let big = r.vec(len, 0.0, 1.0);
            compare(
                ctx,
                "sum_all beta=0",
                &[big.clone(), nan(1)],
                &[1],
                tol,
                &|o, v| o.sum_all(v[0], v[1], 0.0),
            )?;
            compare(
                ctx,
                "sum_all",
                &[big.clone(), vec![3.0]],
                &[1],
                tol,
                &|o, v| o.sum_all(v[0], v[1], beta),
            )?;
            let norm: f64 = big.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
            for max_norm in [(norm * 0.5) as f32, (norm * 2.0) as f32] {
                compare(
                    ctx,
                    &format!("clip_grad_norm {max_norm}"),
                    &[big.clone(), nan(1)],
                    &[0, 1],
                    tol,
                    &|o, v| o.clip_grad_norm(v[0], max_norm, v[1]),
                )?;
            }
            Ok(())
        },
    );
}
