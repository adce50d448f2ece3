//! The whole-sequence Elman ops against f64 loops over time.

use super::*;
use rnn::ops::RecurrentWeights;
use rnn::ops::RnnSequenceBackward;
use rnn::ops::RnnSequenceForward;
use rnn::ops::SeqShape;

use super::cells::{rnn_bwd_ref, rnn_fwd_ref};

/// `(steps, batch, hidden)`: one step, short odd sequences, and steps past the parallel
/// threshold.
fn seq_shape() -> impl Strategy<Value = (usize, usize, usize)> {
    prop_oneof![
        (1usize..3, 1usize..4, 1usize..9),
        (1usize..12, 1usize..20, 1usize..40),
        (2usize..5, 64usize..80, 100usize..140),
    ]
}

/// All `steps + 1` state blocks in f64 (block 0 is `h0`): the cell's reference, step by step.
fn seq_fwd_ref(
    act: Activation,
    pre: &[f64],
    h0: &[f64],
    w: &[f64],
    bi: &[f64],
    bh: &[f64],
    shape: SeqShape,
) -> Vec<f64> {
    let n = shape.batch * shape.hidden;
    let mut hs = h0.to_vec();
    for t in 0..shape.steps {
        let h = rnn_fwd_ref(act, &pre[t * n..], &hs[t * n..], w, bi, bh, shape);
        hs.extend(h);
    }
    hs
}

/// `dpre` for every step in f64, from the states `hs` (`steps + 1` blocks): the cell's
/// reference, from the last step back.
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
        let next = (t + 1 < steps).then(|| dpre[(t + 1) * n..(t + 2) * n].to_vec());
        let h = &hs[(t + 1) * n..];
        let d = rnn_bwd_ref(act, &dh[t * n..], next.as_deref(), w, h, b, hd);
        dpre[t * n..(t + 1) * n].copy_from_slice(&d);
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
        let [w, bi, bh] = params(&mut r, 1, hidden);
        let pre = r.vec(steps * n, -2.0, 2.0);
        let hs0 = states(&mut r, steps, n);
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
    let bwd = |hs: &Buffer, dpre: &Buffer, act: Activation| {
        ops.rnn_sequence_backward(RnnSequenceBackward::new(
            dh.view(),
            hs.view(),
            w.view(),
            dpre.view(),
            act,
            SeqShape::new(t, b, h),
        ))
    };
    // dpre may not be dh; hs must hold steps + 1 blocks; tanh and relu have a backward, sigmoid
    // none.
    let r = bwd(&hs, &dh, Activation::Tanh);
    assert!(matches!(r, Err(Error::InvalidArgument(_))), "{r:?}");
    let r = bwd(&dpre, &hs, Activation::Tanh);
    assert!(matches!(r, Err(Error::Shape { .. })), "{r:?}");
    let r = bwd(&hs, &dpre, Activation::Sigmoid);
    assert!(matches!(r, Err(Error::InvalidArgument(_))), "{r:?}");
}
