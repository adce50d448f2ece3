//! Index data that breaks the rule (`v` is valid iff `v >= 0 && v < n && v == floor(v)`):
//! negative, fractional, too large, huge (an undefined float-to-int conversion in C), infinite
//! and NaN values, mixed with valid ones. No backend may read out of bounds; `one_hot` and the
//! cross-entropy labels behave exactly as on the CPU; `gather_rows` is an error on the CPU and a
//! NaN row on a GPU (a kernel cannot return an error), as `IndexOps::gather_rows` documents.

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use rnn::ops::{LossOutputs, MatShape};
use rnn::{Context, Error};

use super::{Values, compare, nan, prop, run_on};
use crate::support::{Target, rel_err};

/// An invalid index for a table of `n` entries, chosen by `k`.
fn invalid(n: usize, k: u64) -> f32 {
    let n = n as f32;
    match k % 12 {
        0 => -1.0,
        1 => -0.5,
        2 => 0.5,
        3 => (n - 1.0).max(0.0) + 0.5,
        4 => n,
        5 => n + 1.0,
        6 => 1e10,
        7 => 4_294_967_296.0,
        8 => -2_147_483_648.0,
        9 => f32::INFINITY,
        10 => f32::NEG_INFINITY,
        _ => f32::NAN,
    }
}

/// `len` indices into `n` entries, about a third of them invalid (at least one).
fn mixed(r: &mut Values, len: usize, n: usize) -> (Vec<f32>, Vec<bool>) {
    let mut idx = r.ints(len, n);
    let mut bad = vec![false; len];
    for i in 0..len {
        if i == 0 || r.next() % 3 == 0 {
            let k = r.next();
            idx[i] = invalid(n, k);
            bad[i] = true;
        }
    }
    (idx, bad)
}

fn fail(what: &str, ctx: &Context, e: impl std::fmt::Display) -> TestCaseError {
    TestCaseError::fail(format!("{what} on {}: {e}", ctx.id()))
}

pub fn invalid_indices(t: Target) {
    let s = (1..=20usize, 1..=12usize, 1..=70usize, any::<u64>());
    prop(
        t,
        "gpu_invalid_indices",
        10,
        s,
        |ctx, (n, len, cols, seed)| {
            let mut r = Values(seed);
            let (idx, bad) = mixed(&mut r, len, n);

            // one_hot: an all-zero row for an invalid index, exactly as on the CPU.
            compare(
                ctx,
                &format!("one_hot {idx:?}"),
                &[idx.clone(), nan(len * n)],
                &[1],
                0.0,
                &|o, v| o.one_hot(v[0], v[1], n),
            )?;

            // gather_rows: the CPU refuses before writing; a GPU writes NaN rows for the bad
            // indices and gathers the others.
            let src = r.vec(n * cols, -1.0, 1.0);
            let bufs = [src.clone(), idx.clone(), nan(len * cols)];
            let gather =
                |o: &dyn rnn::Ops, v: &[rnn::View<'_>]| o.gather_rows(v[0], v[1], v[2], cols);
            match run_on(&Context::cpu(), &bufs, &gather) {
                Err(Error::InvalidArgument(_)) => {}
                other => return Err(fail("gather_rows", &Context::cpu(), format!("{other:?}"))),
            }
            let got = run_on(ctx, &bufs, &gather).map_err(|e| fail("gather_rows", ctx, e))?;
            for (i, row) in got[2].chunks(cols).enumerate() {
                if bad[i] {
                    prop_assert!(
                        row.iter().all(|x| x.is_nan()),
                        "gather_rows on {}: index {} should give a NaN row, got {:?}",
                        ctx.id(),
                        idx[i],
                        row
                    );
                } else {
                    let s = idx[i] as usize;
                    prop_assert_eq!(row, &src[s * cols..(s + 1) * cols]);
                }
            }

            // Cross-entropy labels: the same rule, the same results as on the CPU (NaN loss,
            // not correct, gradient without the one-hot).
            let rows = len;
            let logits = r.vec(rows * n, -4.0, 4.0);
            let scale = r.uniform(0.1, 2.0);
            let bufs = [logits, idx.clone(), nan(rows * n), nan(rows), nan(rows)];
            let xent = |o: &dyn rnn::Ops, v: &[rnn::View<'_>]| {
                o.softmax_cross_entropy(
                    v[0],
                    v[1],
                    LossOutputs::new(v[2], v[3], None),
                    v[4],
                    MatShape::new(rows, n),
                    scale,
                )
            };
            let want = run_on(&Context::cpu(), &bufs, &xent)
                .map_err(|e| fail("softmax_cross_entropy", &Context::cpu(), e))?;
            let got =
                run_on(ctx, &bufs, &xent).map_err(|e| fail("softmax_cross_entropy", ctx, e))?;
            let what = format!(
                "softmax_cross_entropy {rows}x{n} labels {idx:?} on {}",
                ctx.id()
            );
            let err = rel_err(&got[2], &want[2]);
            prop_assert!(err <= 1e-5, "{what}: dlogits rel err {err:e}");
            prop_assert_eq!(&got[4], &want[4], "{}: row_correct", what);
            for (i, (g, w)) in got[3].iter().zip(&want[3]).enumerate() {
                prop_assert_eq!(w.is_nan(), bad[i], "{}: cpu loss of row {}", what, i);
                if bad[i] {
                    prop_assert!(g.is_nan(), "{what}: row {i} loss {g}, want NaN");
                } else {
                    prop_assert!(
                        (g - w).abs() <= 1e-5 * w.abs().max(1.0),
                        "{what}: row {i} loss {g}, want {w}"
                    );
                }
            }
            Ok(())
        },
    );
}
