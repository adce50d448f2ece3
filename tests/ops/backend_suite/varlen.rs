//! The variable-length sequence ops on every GPU target against the CPU backend: the lengths'
//! layout (lengths of 0 and past the steps clamp), row scaling (a weight of 0 zeroes NaN rows),
//! and the loss weights with and without labels, mask and totals.

use proptest::prelude::*;
use rnn::ops::{LengthLayout, LossWeights};

use super::{Values, compare, compare_ids, nan, prop};
use crate::support::Target;

pub fn sequence_masks(t: Target) {
    let s = (1..=40usize, 1..=24usize, 1..=70usize, any::<u64>());
    prop(
        t,
        "gpu_sequence_masks",
        10,
        s,
        |ctx, (steps, batch, cols, seed)| {
            let mut r = Values(seed);
            let n = steps * batch;
            // 0 and steps + 1.. clamp into 1..=steps.
            let lengths = r.ints(batch, steps + 3);
            compare_ids(
                ctx,
                &format!("length_layout {steps}x{batch} {lengths:?}"),
                (
                    &[lengths, nan(n), vec![7.0; n], vec![7.0; batch]],
                    &[0, 2, 3],
                ),
                &[1, 2, 3],
                0.0,
                &|o, v| o.length_layout(LengthLayout::new(v[0], v[1], v[2], v[3], steps)),
            )?;

            // Weights of 0 (on rows of NaN, which must become 0), 1 and others.
            let mut x = r.vec(n * cols, -2.0, 2.0);
            let w: Vec<f32> = (0..n)
                .map(|i| match r.next() % 3 {
                    0 => {
                        x[i * cols..(i + 1) * cols].fill(f32::NAN);
                        0.0
                    }
                    1 => 1.0,
                    _ => r.uniform(0.1, 3.0),
                })
                .collect();
            compare(ctx, "scale_rows", &[x, w], &[0], 1e-6, &|o, v| {
                o.scale_rows(v[0], v[1], cols)
            })?;

            // Loss weights over n rows: ignored labels (some rows' losses NaN, as the loss
            // gives an ignored out-of-range label), a 0/1 mask, totals with a third element
            // that stays untouched.
            let ignore = 3u32;
            let labels = r.ints(n, 5);
            let loss = r.vec(n, 0.0, 4.0);
            let mut loss_nan = loss.clone();
            for (l, &lab) in loss_nan.iter_mut().zip(&labels) {
                if lab as u32 == ignore {
                    *l = f32::NAN;
                }
            }
            let correct: Vec<f32> = (0..n).map(|_| (r.next() % 2) as f32).collect();
            let mask: Vec<f32> = (0..n).map(|_| (r.next() % 4 != 0) as u32 as f32).collect();
            let totals = vec![r.uniform(-3.0, 3.0), r.uniform(0.0, 5.0), 0.5];
            for (use_labels, use_mask, use_totals) in [
                (true, true, true),
                (true, false, true),
                (false, true, true),
                (true, true, false),
                (false, false, false),
            ] {
                let bufs = [
                    if use_labels {
                        loss_nan.clone()
                    } else {
                        loss.clone()
                    },
                    correct.clone(),
                    labels.clone(),
                    mask.clone(),
                    nan(n),
                    totals.clone(),
                ];
                let check: &[usize] = if use_totals { &[4, 5] } else { &[4] };
                compare_ids(
                    ctx,
                    &format!(
                        "loss_weights labels {use_labels} mask {use_mask} totals {use_totals}"
                    ),
                    (&bufs, &[2]),
                    check,
                    1e-5,
                    &|o, v| {
                        o.loss_weights(LossWeights::new(
                            v[0],
                            use_totals.then_some(v[1]),
                            use_labels.then_some((v[2], ignore)),
                            use_mask.then_some(v[3]),
                            v[4],
                            use_totals.then_some(v[5]),
                        ))
                    },
                )?;
            }
            Ok(())
        },
    );
}
