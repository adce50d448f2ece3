//! u32 index data that breaks the rule (`v` is valid iff `v < n`): just past the table, far
//! past it, at 2^24 and beyond (where f32 indices were inexact), at 2^31 (negative as a signed
//! int) and `u32::MAX`, mixed with valid ones. No backend may read out of bounds; `one_hot` and
//! the cross-entropy labels behave exactly as on the CPU; `gather_rows` is an error on the CPU
//! and a NaN row (a `u32::MAX` row for u32 rows) on a GPU (a kernel cannot return an error), as
//! `IndexOps::gather_rows` documents. Index buffers are u32 ([`run_ids`]), their values written
//! here as f32 that convert exactly.

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use rnn::ops::IndexedRows;
use rnn::ops::SoftmaxCrossEntropy;
use rnn::ops::TypedMemory;
use rnn::ops::{LossOutputs, MatShape};
use rnn::{Context, DType, Error};

use super::{Values, compare_ids, contexts, nan, prop, run_ids};
use crate::support::{Target, rel_err};

/// An invalid u32 index for a table of `n` entries, chosen by `k` (as an f32 that converts to
/// it exactly; 2^32 saturates to `u32::MAX`).
fn invalid(n: usize, k: u64) -> f32 {
    let n = n as f32;
    match k % 7 {
        0 => n,
        1 => n + 1.0,
        2 => n + 1000.0,
        3 => 16_777_216.0,
        4 => 16_777_218.0,
        5 => 2_147_483_648.0,
        _ => 4_294_967_296.0,
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
            compare_ids(
                ctx,
                &format!("one_hot {idx:?}"),
                (&[idx.clone(), nan(len * n)], &[0]),
                &[1],
                0.0,
                &|o, v| o.one_hot(v[0], v[1], n),
            )?;

            // gather_rows: the CPU refuses before writing; a GPU writes NaN rows for the bad
            // indices and gathers the others.
            let src = r.vec(n * cols, -1.0, 1.0);
            let bufs = [src.clone(), idx.clone(), nan(len * cols)];
            let gather = |o: &dyn rnn::Ops, v: &[rnn::View<'_>]| {
                o.gather_rows(IndexedRows::new(v[0], v[1], v[2], cols))
            };
            match run_ids(&Context::cpu(), &bufs, &[1], &gather) {
                Err(Error::InvalidArgument(_)) => {}
                other => return Err(fail("gather_rows", &Context::cpu(), format!("{other:?}"))),
            }
            let got =
                run_ids(ctx, &bufs, &[1], &gather).map_err(|e| fail("gather_rows", ctx, e))?;
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
            // u32 rows: the same, with a `u32::MAX` row for a bad index on a GPU.
            let ids = r.ints(n * cols, 1 << 24);
            let bufs = [ids.clone(), idx.clone(), vec![0.0; len * cols]];
            match run_ids(&Context::cpu(), &bufs, &[0, 1, 2], &gather) {
                Err(Error::InvalidArgument(_)) => {}
                other => {
                    return Err(fail(
                        "gather_rows u32",
                        &Context::cpu(),
                        format!("{other:?}"),
                    ));
                }
            }
            let got = run_ids(ctx, &bufs, &[0, 1, 2], &gather)
                .map_err(|e| fail("gather_rows u32", ctx, e))?;
            for (i, row) in got[2].chunks(cols).enumerate() {
                if bad[i] {
                    let max = u32::MAX as f32;
                    prop_assert!(row.iter().all(|&x| x == max), "index {}: {:?}", idx[i], row);
                } else {
                    let s = idx[i] as usize;
                    prop_assert_eq!(row, &ids[s * cols..(s + 1) * cols]);
                }
            }

            // Cross-entropy labels: the same rule, the same results as on the CPU (NaN loss,
            // not correct, gradient without the one-hot).
            let rows = len;
            let logits = r.vec(rows * n, -4.0, 4.0);
            let scale = r.uniform(0.1, 2.0);
            let bufs = [logits, idx.clone(), nan(rows * n), nan(rows), nan(rows)];
            let xent = |o: &dyn rnn::Ops, v: &[rnn::View<'_>]| {
                o.softmax_cross_entropy(SoftmaxCrossEntropy::new(
                    v[0],
                    v[1],
                    LossOutputs::new(v[2], v[3], None),
                    v[4],
                    MatShape::new(rows, n),
                    scale,
                ))
            };
            let want = run_ids(&Context::cpu(), &bufs, &[1], &xent)
                .map_err(|e| fail("softmax_cross_entropy", &Context::cpu(), e))?;
            let got = run_ids(ctx, &bufs, &[1], &xent)
                .map_err(|e| fail("softmax_cross_entropy", ctx, e))?;
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

/// Indices past 2^24, which f32 index data could not hold exactly (2^24 + 1 rounds to 2^24):
/// a gather of f32 and of u32 rows, a scatter-add, a one-hot row and a cross-entropy label,
/// each naming row or class 2^24 + 1 of a table of 2^24 + 2, on every backend.
pub fn beyond_2_24(t: Target) {
    const ROWS: usize = (1 << 24) + 2;
    const FAR: u32 = (1 << 24) + 1;
    for ctx in contexts(t, "indices_beyond_2_24") {
        let ops = ctx.ops();
        let u32s = |v: &[u32]| {
            let b = ops.alloc_as(DType::U32, v.len()).unwrap();
            ops.upload_as(b.view(), v).unwrap();
            b
        };
        let f32s = |v: &[f32]| {
            let b = ops.alloc(v.len()).unwrap();
            ops.upload(b.view(), v).unwrap();
            b
        };
        let read = |b: &rnn::Buffer| {
            let mut out = vec![0.0f32; b.len()];
            ops.download(b.view(), &mut out).unwrap();
            out
        };
        let idx = u32s(&[FAR, FAR - 1, 3, FAR]);

        // One column, row i holding (i % 1000) + 0.5: rows 2^24 and 2^24 + 1 differ.
        let col: Vec<f32> = (0..ROWS).map(|i| (i % 1000) as f32 + 0.5).collect();
        let src = f32s(&col);
        let dst = f32s(&[f32::NAN; 4]);
        ops.gather_rows(IndexedRows::new(src.view(), idx.view(), dst.view(), 1))
            .unwrap();
        assert_eq!(read(&dst), [217.5, 216.5, 3.5, 217.5], "{}", ctx.id());

        let ids: Vec<u32> = (0..ROWS as u32).collect();
        let src_ids = u32s(&ids);
        let dst_ids = u32s(&[0; 4]);
        ops.gather_rows(IndexedRows::new(
            src_ids.view(),
            idx.view(),
            dst_ids.view(),
            1,
        ))
        .unwrap();
        let mut got = [0u32; 4];
        ops.download_as(dst_ids.view(), &mut got).unwrap();
        assert_eq!(got, [FAR, FAR - 1, 3, FAR], "{}", ctx.id());

        let table = f32s(&vec![0.0; ROWS]);
        let grads = f32s(&[1.0, 2.0, 4.0, 8.0]);
        ops.scatter_add_rows(IndexedRows::new(grads.view(), idx.view(), table.view(), 1))
            .unwrap();
        let sums = read(&table);
        let far = FAR as usize;
        assert_eq!(
            (sums[far], sums[far - 1], sums[3]),
            (9.0, 2.0, 4.0),
            "{}",
            ctx.id()
        );
        assert_eq!(sums.iter().sum::<f32>(), 15.0, "{}", ctx.id());

        let hot = f32s(&vec![f32::NAN; ROWS]);
        ops.one_hot(idx.slice(0, 1).unwrap(), hot.view(), ROWS)
            .unwrap();
        let hot = read(&hot);
        assert_eq!(hot[far], 1.0, "{}", ctx.id());
        assert_eq!(hot.iter().sum::<f32>(), 1.0, "{}", ctx.id());

        // One row of 2^24 + 2 classes whose arg-max is its label 2^24 + 1.
        let mut logits = vec![0.0f32; ROWS];
        logits[far] = 5.0;
        let (logits, dlogits) = (f32s(&logits), f32s(&vec![f32::NAN; ROWS]));
        let (loss, correct) = (f32s(&[f32::NAN]), f32s(&[f32::NAN]));
        ops.softmax_cross_entropy(SoftmaxCrossEntropy::new(
            logits.view(),
            idx.slice(0, 1).unwrap(),
            LossOutputs::new(dlogits.view(), loss.view(), None),
            correct.view(),
            MatShape::new(1, ROWS),
            1.0,
        ))
        .unwrap();
        assert_eq!(read(&correct), [1.0], "{}", ctx.id());
        let loss = read(&loss)[0];
        // -log(e^5 / (e^5 + 2^24 + 1)); the 2^24 terms of the row's sum are added in f32, so
        // only to about a percent.
        let want = ((1u64 << 24) as f64 + 1.0 + 5f64.exp()).ln() - 5.0;
        assert!(
            (loss as f64 - want).abs() < 2e-2 * want,
            "{}: loss {loss}, want {want}",
            ctx.id()
        );
    }
}
