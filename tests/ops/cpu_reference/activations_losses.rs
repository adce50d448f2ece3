//! Activations (fused bias, in place, backward), softmax, cross-entropy and MSE.

use super::*;
use rnn::ops::Mse;
use rnn::ops::SoftmaxCrossEntropy;
use rnn::ops::{Activated, LossOutputs, MatShape};

// ---- activations ------------------------------------------------------------------------

proptest! {
    #![proptest_config(cfg())]

    #[test]
    fn cpu_activations((rows, cols) in shape(), which in 0usize..6, seed in any::<u64>()) {
        let act = ACTS[which];
        let ctx = Context::cpu();
        let ops = ctx.ops();
        let n = rows * cols;
        let mut r = rng(seed);
        let z = r.vec(n, -4.0, 4.0);
        let bias = r.vec(cols, -1.0, 1.0);
        let dy = r.vec(n, -1.0, 1.0);
        let zb: Vec<f64> = (0..n).map(|i| z[i] as f64 + bias[i % cols] as f64).collect();
        let y_want: Vec<f64> = zb.iter().map(|&v| act_ref(act, v)).collect();

        // Fused bias + activation, separate output: z is updated too.
        let (bz, bb, by) = (upload(&ctx, &z), upload(&ctx, &bias), poisoned(&ctx, n));
        ops.bias_act_forward(Activated::new(bz.view(), by.view(), act), bb.view(), MatShape::new(rows, cols)).unwrap();
        assert_close("bias_act y", &read(&ctx, &by), &y_want);
        assert_close("bias_act z", &read(&ctx, &bz), &zb);
        // In place (y is z).
        let bz2 = upload(&ctx, &z);
        ops.bias_act_forward(Activated::new(bz2.view(), bz2.view(), act), bb.view(), MatShape::new(rows, cols)).unwrap();
        assert_close("bias_act in place", &read(&ctx, &bz2), &y_want);

        // Plain activation, separate and in place.
        let x_want: Vec<f64> = z.iter().map(|&v| act_ref(act, v as f64)).collect();
        let (bx, out) = (upload(&ctx, &z), poisoned(&ctx, n));
        ops.activation(bx.view(), out.view(), act).unwrap();
        assert_close("activation", &read(&ctx, &out), &x_want);
        ops.activation(bx.view(), bx.view(), act).unwrap();
        assert_close("activation in place", &read(&ctx, &bx), &x_want);

        // Backward from (z, y): bz now holds z + bias, by holds y.
        let dz_want: Vec<f64> = (0..n).map(|i| dy[i] as f64 * act_grad_ref(act, zb[i])).collect();
        let (bdy, bdz) = (upload(&ctx, &dy), poisoned(&ctx, n));
        ops.act_backward(bdy.view(), Activated::new(bz.view(), by.view(), act), bdz.view()).unwrap();
        assert_close("act_backward", &read(&ctx, &bdz), &dz_want);
        ops.act_backward(bdy.view(), Activated::new(bz.view(), by.view(), act), bdy.view()).unwrap();
        assert_close("act_backward dz=dy", &read(&ctx, &bdy), &dz_want);
        if act.derivative_from_output() {
            let bdy = upload(&ctx, &dy);
            ops.act_backward(bdy.view(), Activated::new(by.view(), by.view(), act), bdz.view()).unwrap();
            assert_close("act_backward z=y", &read(&ctx, &bdz), &dz_want);
        }
    }
}

/// GELU's left tail element by element: `1 + erf` cancels there (1e-3 relative error at z = -4,
/// every digit by -6), which a normwise error over a random vector hides.
#[test]
fn cpu_gelu_tail_is_accurate() {
    let ctx = Context::cpu();
    let z: Vec<f32> = (0..=120).map(|i| -9.0 + 0.05 * i as f32).collect();
    let (bz, by) = (upload(&ctx, &z), poisoned(&ctx, z.len()));
    ctx.ops()
        .activation(bz.view(), by.view(), Activation::Gelu)
        .unwrap();
    for (zi, yi) in z.iter().zip(read(&ctx, &by)) {
        let want = act_ref(Activation::Gelu, *zi as f64);
        let err = ((yi as f64 - want) / want).abs();
        assert!(
            err < 1e-5,
            "gelu({zi}) = {yi:e}, want {want:e} (rel err {err:e})"
        );
    }
}

// ---- softmax and losses -----------------------------------------------------------------

fn softmax_ref(x: &[f32], cols: usize, log: bool) -> Vec<f64> {
    let mut out = Vec::with_capacity(x.len());
    for row in x.chunks(cols) {
        let max = row.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
        let sum: f64 = row.iter().map(|&v| (v as f64 - max).exp()).sum();
        for &v in row {
            let l = v as f64 - max - sum.ln();
            out.push(if log { l } else { l.exp() });
        }
    }
    out
}

proptest! {
    #![proptest_config(cfg())]

    #[test]
    fn cpu_softmax((rows, cols) in shape(), offset in prop_oneof![Just(0.0f32), Just(500.0f32)], seed in any::<u64>()) {
        let ctx = Context::cpu();
        let ops = ctx.ops();
        let mut r = rng(seed);
        // A large offset would overflow an unshifted exp.
        let x = r.vec(rows * cols, offset - 5.0, offset + 5.0);
        for log in [false, true] {
            let want = softmax_ref(&x, cols, log);
            let (bx, by) = (upload(&ctx, &x), poisoned(&ctx, x.len()));
            let run = |a: &Buffer, b: &Buffer| if log {
                ops.log_softmax(a.view(), b.view(), rows, cols)
            } else {
                ops.softmax(a.view(), b.view(), rows, cols)
            };
            run(&bx, &by).unwrap();
            assert_close(&format!("softmax log={log}"), &read(&ctx, &by), &want);
            run(&bx, &bx).unwrap();
            assert_close(&format!("softmax in place log={log}"), &read(&ctx, &bx), &want);
        }
    }

    #[test]
    fn cpu_softmax_cross_entropy((rows, cols) in shape(), scale in 0.1f32..2.0, seed in any::<u64>()) {
        let ctx = Context::cpu();
        let mut r = rng(seed);
        let x = r.vec(rows * cols, -4.0, 4.0);
        let labels: Vec<f32> = (0..rows).map(|_| r.below(cols) as f32).collect();
        let (bx, bl) = (upload(&ctx, &x), ids(&ctx, &labels));
        let (bd, bloss, bc) = (poisoned(&ctx, x.len()), poisoned(&ctx, rows), poisoned(&ctx, rows));
        let totals = upload(&ctx, &[0.5, 1.0]);
        ctx.ops().softmax_cross_entropy(SoftmaxCrossEntropy::new(bx.view(), bl.view(), LossOutputs::new(bd.view(), bloss.view(), Some(totals.view())), bc.view(), MatShape::new(rows, cols), scale)).unwrap();
        let logp = softmax_ref(&x, cols, true);
        let mut dwant = Vec::new();
        let mut lwant = Vec::new();
        let mut cwant = Vec::new();
        for rr in 0..rows {
            let t = labels[rr] as usize;
            let row = &x[rr * cols..(rr + 1) * cols];
            let arg = (0..cols).fold(0, |best, j| if row[j] > row[best] { j } else { best });
            lwant.push(-logp[rr * cols + t]);
            cwant.push((arg == t) as u8 as f64);
            for j in 0..cols {
                let onehot = (j == t) as u8 as f64;
                dwant.push(scale as f64 * (logp[rr * cols + j].exp() - onehot));
            }
        }
        assert_close("ce dlogits", &read(&ctx, &bd), &dwant);
        assert_close("ce loss", &read(&ctx, &bloss), &lwant);
        prop_assert_eq!(read(&ctx, &bc), cwant.iter().map(|&v| v as f32).collect::<Vec<_>>());
        let sums = [0.5 + lwant.iter().sum::<f64>(), 1.0 + cwant.iter().sum::<f64>()];
        assert_close("ce totals", &read(&ctx, &totals), &sums);
    }

    #[test]
    fn cpu_mse((rows, cols) in shape(), scale in 0.1f32..2.0, seed in any::<u64>()) {
        let ctx = Context::cpu();
        let mut r = rng(seed);
        let p = r.vec(rows * cols, -2.0, 2.0);
        let t = r.vec(rows * cols, -2.0, 2.0);
        let (bp, bt, bd, bl) = (upload(&ctx, &p), upload(&ctx, &t), poisoned(&ctx, p.len()), poisoned(&ctx, rows));
        let totals = upload(&ctx, &[2.0]);
        ctx.ops().mse(Mse::new(bp.view(), bt.view(), LossOutputs::new(bd.view(), bl.view(), Some(totals.view())), MatShape::new(rows, cols), scale)).unwrap();
        let e: Vec<f64> = p.iter().zip(&t).map(|(&a, &b)| a as f64 - b as f64).collect();
        let dwant: Vec<f64> = e.iter().map(|&v| scale as f64 * 2.0 * v / cols as f64).collect();
        let lwant: Vec<f64> = e.chunks(cols).map(|r| r.iter().map(|v| v * v).sum::<f64>() / cols as f64).collect();
        assert_close("mse grad", &read(&ctx, &bd), &dwant);
        assert_close("mse loss", &read(&ctx, &bl), &lwant);
        assert_close("mse totals", &read(&ctx, &totals), &[2.0 + lwant.iter().sum::<f64>()]);
    }
}

/// `softmax_cross_entropy` of `x` (`shape`) with `labels` on `ctx`, no totals: the gradient,
/// the per-row loss and the per-row correct flags, each output poisoned before the op runs.
fn cross_entropy(
    ctx: &Context,
    x: &[f32],
    labels: &[f32],
    shape: MatShape,
    scale: f32,
) -> [Vec<f32>; 3] {
    let (bx, bl) = (upload(ctx, x), ids(ctx, labels));
    let rows = shape.rows;
    let (bd, bloss, bc) = (
        poisoned(ctx, x.len()),
        poisoned(ctx, rows),
        poisoned(ctx, rows),
    );
    ctx.ops()
        .softmax_cross_entropy(SoftmaxCrossEntropy::new(
            bx.view(),
            bl.view(),
            LossOutputs::new(bd.view(), bloss.view(), None),
            bc.view(),
            shape,
            scale,
        ))
        .unwrap();
    [read(ctx, &bd), read(ctx, &bloss), read(ctx, &bc)]
}

/// Confident rows element by element: the label's gradient p_t - 1 and the loss -ln p_t are
/// tiny there, and forming them from p_t (0.99999 - 1) keeps two digits, or none once p_t
/// rounds to 1 (row 2); a normwise error over a random batch hides that.
#[test]
fn cpu_cross_entropy_confident_rows_are_accurate() {
    let ctx = Context::cpu();
    let (rows, cols, scale) = (4, 4, 0.7f32);
    let x = [
        12.0, 0.0, -1.0, 1.0, 0.5, 9.0, 0.0, -3.0, 0.0, 0.0, 21.0, 1.0, 2.0, 1.0, 0.0, 2.5,
    ];
    let labels = [0.0, 1.0, 2.0, 0.0];
    let [grad, loss, _] = cross_entropy(&ctx, &x, &labels, MatShape::new(rows, cols), scale);
    let close = |what: String, got: f32, want: f64| {
        let err = ((got as f64 - want) / want).abs();
        assert!(
            err < 1e-5,
            "{what}: {got:e}, want {want:e} (rel err {err:e})"
        );
    };
    for r in 0..rows {
        let row: Vec<f64> = x[r * cols..(r + 1) * cols]
            .iter()
            .map(|&v| v as f64)
            .collect();
        let t = labels[r] as usize;
        let max = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let e: Vec<f64> = row.iter().map(|v| (v - max).exp()).collect();
        let sum: f64 = e.iter().sum();
        let others = sum - e[t];
        for j in 0..cols {
            let want = scale as f64 * if j == t { -others } else { e[j] } / sum;
            close(format!("row {r} gradient {j}"), grad[r * cols + j], want);
        }
        close(format!("row {r} loss"), loss[r], (others / e[t]).ln_1p());
    }
}

#[test]
fn cpu_cross_entropy_ties_and_bad_labels() {
    let ctx = Context::cpu();
    // Row 0: tie between classes 1 and 2, label 2 -> not correct (the first maximum wins).
    // Row 1: tie, label 1 -> correct. Row 2: label out of range -> NaN loss.
    let x = [0.0, 3.0, 3.0, 1.0, 5.0, 5.0, 1.0, 2.0, 3.0];
    let labels = [2.0, 1.0, 7.0];
    let [_, loss, correct] = cross_entropy(&ctx, &x, &labels, MatShape::new(3, 3), 1.0);
    assert_eq!(correct, vec![0.0, 1.0, 0.0]);
    assert!(loss[0].is_finite() && loss[1].is_finite() && loss[2].is_nan());
}
