//! The variable-length sequence ops against loops written here.

use super::*;
use rnn::ops::{LengthLayout, LossWeights};

fn upload_u32(ctx: &Context, v: &[u32]) -> Buffer {
    let b = ctx.ops().alloc_as(DType::U32, v.len()).unwrap();
    ctx.ops().upload_as(b.view(), v).unwrap();
    b
}

fn read_u32(ctx: &Context, b: &Buffer) -> Vec<u32> {
    let mut v = vec![0u32; b.len()];
    ctx.ops().download_as(b.view(), &mut v).unwrap();
    v
}

proptest! {
    #![proptest_config(cfg())]

    #[test]
    fn cpu_sequence_masks(steps in 1usize..40, batch in 1usize..30, cols in 1usize..9, seed in any::<u64>()) {
        let ctx = Context::cpu();
        let ops = ctx.ops();
        let mut r = rng(seed);
        // Lengths of 0 and past the steps clamp into 1..=steps.
        let lens: Vec<u32> = (0..batch).map(|_| r.below(steps + 3) as u32).collect();
        let n = steps * batch;
        let (bl, bm) = (upload_u32(&ctx, &lens), upload(&ctx, &vec![f32::NAN; n]));
        let (brev, blast) = (upload_u32(&ctx, &vec![7; n]), upload_u32(&ctx, &vec![7; batch]));
        ops.length_layout(LengthLayout::new(bl.view(), bm.view(), brev.view(), blast.view(), steps)).unwrap();
        let (mask, rev, last) = (read(&ctx, &bm), read_u32(&ctx, &brev), read_u32(&ctx, &blast));
        for b in 0..batch {
            let len = (lens[b] as usize).clamp(1, steps);
            prop_assert_eq!(last[b] as usize, (len - 1) * batch + b);
            for t in 0..steps {
                let row = t * batch + b;
                prop_assert_eq!(mask[row], if t < len { 1.0 } else { 0.0 });
                let want = if t < len { (len - 1 - t) * batch + b } else { row };
                prop_assert_eq!(rev[row] as usize, want);
                // Its own inverse.
                prop_assert_eq!(rev[rev[row] as usize] as usize, row);
            }
        }

        // Row scaling: a weight of 0 zeroes the row, NaN included.
        let mut x = r.vec(n * cols, -1.0, 1.0);
        x[0] = f32::NAN;
        let w: Vec<f32> = (0..n).map(|i| if i == 0 { 0.0 } else { r.vec(1, -2.0, 2.0)[0] }).collect();
        let (bx, bw) = (upload(&ctx, &x), upload(&ctx, &w));
        ops.scale_rows(bx.view(), bw.view(), cols).unwrap();
        let want: Vec<f64> = (0..n * cols)
            .map(|i| if w[i / cols] == 0.0 { 0.0 } else { w[i / cols] as f64 * x[i] as f64 })
            .collect();
        assert_close("scale_rows", &read(&ctx, &bx), &want);

        // Loss weights: valid = label not ignored and mask set.
        let ignore = 2u32;
        let labels: Vec<u32> = (0..n).map(|_| r.below(4) as u32).collect();
        let loss: Vec<f32> = labels.iter().map(|&l| if l == ignore { f32::NAN } else { r.vec(1, 0.0, 3.0)[0] }).collect();
        let correct: Vec<f32> = (0..n).map(|_| r.below(2) as f32).collect();
        let valid: Vec<bool> = (0..n).map(|i| labels[i] != ignore && mask[i] != 0.0).collect();
        let count = valid.iter().filter(|&&v| v).count();
        let wv = if count == 0 { 0.0 } else { n as f64 / count as f64 };
        let (bloss, bcorrect, blab) = (upload(&ctx, &loss), upload(&ctx, &correct), upload_u32(&ctx, &labels));
        let (bweights, btotals) = (upload(&ctx, &vec![f32::NAN; n]), upload(&ctx, &[1.0, 2.0, 3.0]));
        ops.loss_weights(LossWeights::new(
            bloss.view(), Some(bcorrect.view()), Some((blab.view(), ignore)), Some(bm.view()),
            bweights.view(), Some(btotals.view()),
        )).unwrap();
        let want_w: Vec<f64> = valid.iter().map(|&v| if v { wv } else { 0.0 }).collect();
        assert_close("loss_weights", &read(&ctx, &bweights), &want_w);
        let sum = |v: &[f32]| -> f64 { (0..n).filter(|&i| valid[i]).map(|i| wv * v[i] as f64).sum() };
        assert_close("loss_weights totals", &read(&ctx, &btotals), &[1.0 + sum(&loss), 2.0 + sum(&correct), 3.0]);
    }
}

#[test]
fn cpu_sequence_mask_errors() {
    let ctx = Context::cpu();
    let ops = ctx.ops();
    let (l, m) = (upload_u32(&ctx, &[1, 2]), upload(&ctx, &[0.0; 6]));
    let (rev, last) = (upload_u32(&ctx, &[0; 6]), upload_u32(&ctx, &[0; 2]));
    // 3 steps x 2 samples need 6 rows; 4 steps do not fit.
    let e = ops
        .length_layout(LengthLayout::new(
            l.view(),
            m.view(),
            rev.view(),
            last.view(),
            4,
        ))
        .unwrap_err();
    assert!(matches!(e, Error::Shape { .. }), "{e}");
    // The reversal must be u32.
    let e = ops
        .length_layout(LengthLayout::new(
            l.view(),
            m.view(),
            m.view(),
            last.view(),
            3,
        ))
        .unwrap_err();
    assert!(matches!(e, Error::DTypeMismatch { .. }), "{e}");
    // Weights of another length.
    let x = upload(&ctx, &[0.0; 6]);
    assert!(ops.scale_rows(x.view(), m.slice(0, 4).unwrap(), 2).is_err());
    // Totals too short for the correct-row sum.
    let e = ops
        .loss_weights(LossWeights::new(
            m.slice(0, 2).unwrap(),
            Some(m.slice(2, 2).unwrap()),
            None,
            None,
            x.slice(0, 2).unwrap(),
            Some(x.slice(2, 1).unwrap()),
        ))
        .unwrap_err();
    assert!(e.to_string().contains("totals"), "{e}");
}
