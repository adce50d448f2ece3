//! The whole-sequence Elman ops against f64 loops over time.

use super::*;
use rnn::ops::RecurrentWeights;
use rnn::ops::RnnSequenceBackward;
use rnn::ops::RnnSequenceForward;
use rnn::ops::SeqShape;

/// `(steps, batch, hidden)`: one step, short odd sequences, and steps past the parallel
/// threshold.
fn seq_shape() -> impl Strategy<Value = (usize, usize, usize)> {
    prop_oneof![
        (1usize..3, 1usize..4, 1usize..9),
        (1usize..12, 1usize..20, 1usize..40),
        (2usize..5, 64usize..80, 100usize..140),
    ]
}

fn act_grad_from_output(act: Activation, y: f64) -> f64 {
    if act == Activation::Relu {
        (y > 0.0) as u8 as f64
    } else {
        1.0 - y * y
    }
}

/// All `steps + 1` state blocks in f64 (block 0 is `h0`).
fn seq_fwd_ref(
    act: Activation,
    pre: &[f64],
    h0: &[f64],
    w: &[f64],
    bi: &[f64],
    bh: &[f64],
    shape: SeqShape,
) -> Vec<f64> {
    let SeqShape {
        steps,
        batch: b,
        hidden: hd,
    } = shape;
    let n = b * hd;
    let mut hs = h0.to_vec();
    for t in 0..steps {
        for r in 0..b {
            for j in 0..hd {
                let hp = &hs[t * n + r * hd..t * n + (r + 1) * hd];
                let z: f64 = (0..hd).map(|k| hp[k] * w[j * hd + k]).sum();
                let v = act_ref(act, pre[t * n + r * hd + j] + bi[j] + bh[j] + z);
                hs.push(v);
            }
        }
    }
    hs
}

/// `dpre` for every step in f64, from the states `hs` (`steps + 1` blocks).
fn seq_bwd_ref(
    act: Activation,
    dh: &[f64],
    hs: &[f64],
    w: &[f64],
    steps: usize,
    b: usize,
    hd: usize,
) -> Vec<f64> {
    let n = b * hd;
    let mut dpre = vec![0.0; steps * n];
    for t in (0..steps).rev() {
        for r in 0..b {
            for j in 0..hd {
                let z: f64 = if t + 1 < steps {
                    let nx = &dpre[(t + 1) * n + r * hd..(t + 1) * n + (r + 1) * hd];
                    (0..hd).map(|k| nx[k] * w[k * hd + j]).sum()
                } else {
                    0.0
                };
                let at = r * hd + j;
                let g = act_grad_from_output(act, hs[(t + 1) * n + at]);
                dpre[t * n + at] = g * (dh[t * n + at] + z);
            }
        }
    }
    dpre
}

proptest! {
    #![proptest_config(cfg())]

    #[test]
    fn cpu_rnn_sequence((steps, batch, hidden) in seq_shape(), relu in any::<bool>(), seed in any::<u64>()) {
        let act = if relu { Activation::Relu } else { Activation::Tanh };
        let ctx = Context::cpu();
        let ops = ctx.ops();
        let mut r = rng(seed);
        let n = batch * hidden;
        let bound = 1.0 / (hidden as f32).sqrt();
        let w = r.vec(hidden * hidden, -bound, bound);
        let pre = r.vec(steps * n, -2.0, 2.0);
        let (bi, bh) = (r.vec(hidden, -1.0, 1.0), r.vec(hidden, -1.0, 1.0));
        // A random initial state; every later block poisoned.
        let mut hs0 = r.vec(n, -1.0, 1.0);
        hs0.extend(vec![f32::NAN; steps * n]);
        let want = seq_fwd_ref(act, &to64(&pre), &to64(&hs0[..n]), &to64(&w), &to64(&bi), &to64(&bh), SeqShape::new(steps, batch, hidden));
        let (bp, bw, bbi, bbh, bhs) = (upload(&ctx, &pre), upload(&ctx, &w), upload(&ctx, &bi), upload(&ctx, &bh), upload(&ctx, &hs0));
        ops.rnn_sequence_forward(RnnSequenceForward::new(bp.view(), bhs.view(), RecurrentWeights::new(bw.view(), bbi.view(), bbh.view()), act, SeqShape::new(steps, batch, hidden))).unwrap();
        let hs = read(&ctx, &bhs);
        assert_eq!(&hs[..n], &hs0[..n], "block 0 (h_0) must be left as it was");
        assert_close("rnn sequence forward", &hs, &want);

        // The gradient at the states the forward produced, so act' is taken where the op takes it.
        let dh = r.vec(steps * n, -1.0, 1.0);
        let want = seq_bwd_ref(act, &to64(&dh), &to64(&hs), &to64(&w), steps, batch, hidden);
        let (bdh, dpre) = (upload(&ctx, &dh), poisoned(&ctx, steps * n));
        ops.rnn_sequence_backward(RnnSequenceBackward::new(bdh.view(), bhs.view(), bw.view(), dpre.view(), act, SeqShape::new(steps, batch, hidden))).unwrap();
        assert_close("rnn sequence backward", &read(&ctx, &dpre), &want);
    }
}

#[test]
fn cpu_rnn_sequence_rejects_bad_arguments() {
    let ctx = Context::cpu();
    let ops = ctx.ops();
    let (t, b, h) = (3, 2, 5);
    let buf = |n: usize| upload(&ctx, &vec![0.5; n]);
    let (pre, hs, w, bi, bh) = (
        buf(t * b * h),
        buf((t + 1) * b * h),
        buf(h * h),
        buf(h),
        buf(h),
    );
    let fwd = |pre: &Buffer, hs: &Buffer, act: Activation, steps: usize| {
        ops.rnn_sequence_forward(RnnSequenceForward::new(
            pre.view(),
            hs.view(),
            RecurrentWeights::new(w.view(), bi.view(), bh.view()),
            act,
            SeqShape::new(steps, b, h),
        ))
    };
    let r = fwd(&pre, &hs, Activation::Gelu, t);
    assert!(matches!(r, Err(Error::InvalidArgument(_))), "{r:?}");
    // hs must hold steps + 1 blocks.
    let r = fwd(&pre, &pre, Activation::Tanh, t);
    assert!(matches!(r, Err(Error::Shape { .. })), "{r:?}");
    let r = fwd(&pre, &hs, Activation::Tanh, t + 1);
    assert!(matches!(r, Err(Error::Shape { .. })), "{r:?}");
    // The states may not alias the input projection.
    let r = ops.rnn_sequence_forward(RnnSequenceForward::new(
        hs.slice(0, t * b * h).unwrap(),
        hs.view(),
        RecurrentWeights::new(w.view(), bi.view(), bh.view()),
        Activation::Tanh,
        SeqShape::new(t, b, h),
    ));
    assert!(matches!(r, Err(Error::InvalidArgument(_))), "{r:?}");
    // No steps: nothing to do, nothing written.
    let one = buf(b * h);
    let empty = buf(0);
    fwd(&empty, &one, Activation::Relu, 0).unwrap();
    assert!(read(&ctx, &one).iter().all(|v| *v == 0.5));

    let (dh, dpre) = (buf(t * b * h), buf(t * b * h));
    let r = ops.rnn_sequence_backward(RnnSequenceBackward::new(
        dh.view(),
        hs.view(),
        w.view(),
        dh.view(),
        Activation::Tanh,
        SeqShape::new(t, b, h),
    ));
    assert!(matches!(r, Err(Error::InvalidArgument(_))), "{r:?}");
    let r = ops.rnn_sequence_backward(RnnSequenceBackward::new(
        dh.view(),
        dpre.view(),
        w.view(),
        hs.view(),
        Activation::Tanh,
        SeqShape::new(t, b, h),
    ));
    assert!(matches!(r, Err(Error::Shape { .. })), "{r:?}");
    let r = ops.rnn_sequence_backward(RnnSequenceBackward::new(
        dh.view(),
        hs.view(),
        w.view(),
        dpre.view(),
        Activation::Sigmoid,
        SeqShape::new(t, b, h),
    ));
    assert!(matches!(r, Err(Error::InvalidArgument(_))), "{r:?}");
}
