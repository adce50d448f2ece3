//! The whole-sequence LSTM and GRU ops against f64 loops over time (PyTorch's equations, gate
//! order i, f, g, o and r, z, n), and their argument checks.

use super::*;
use rnn::View;
use rnn::ops::GruGateGrads;
use rnn::ops::GruSequenceBackward;
use rnn::ops::GruSequenceForward;
use rnn::ops::LstmSequenceBackward;
use rnn::ops::LstmSequenceForward;
use rnn::ops::RecurrentWeights;
use rnn::ops::SeqShape;

/// `(steps, batch, hidden)`: one step, short odd sequences, and a batch past the parallel
/// threshold of the row passes.
fn seq_shape() -> impl Strategy<Value = (usize, usize, usize)> {
    prop_oneof![
        (1usize..3, 1usize..4, 1usize..9),
        (1usize..8, 1usize..20, 1usize..33),
        (2usize..4, 64usize..80, 60usize..90),
    ]
}

/// `x[r] . w[row]` over `hd`: row `row` of a `rows x hd` matrix times state row `x`.
fn dot(x: &[f64], w: &[f64], row: usize, hd: usize) -> f64 {
    (0..hd).map(|k| x[k] * w[row * hd + k]).sum()
}

/// LSTM forward in f64: `(hs, cs, activated gates)`, `hs`/`cs` with `steps + 1` blocks.
fn lstm_fwd_ref(
    xg: &[f64],
    h0: &[f64],
    c0: &[f64],
    w: &[f64],
    bi: &[f64],
    bh: &[f64],
    shape: SeqShape,
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let (steps, b, hd, n) = dims(shape);
    let (mut hs, mut cs) = (h0.to_vec(), c0.to_vec());
    let mut gates = vec![0.0; steps * 4 * n];
    for t in 0..steps {
        for r in 0..b {
            let hp = hs[t * n + r * hd..t * n + (r + 1) * hd].to_vec();
            for j in 0..hd {
                let z = |g: usize| {
                    let q = g * hd + j;
                    xg[t * 4 * n + r * 4 * hd + q] + bi[q] + bh[q] + dot(&hp, w, q, hd)
                };
                let (i, f, g, o) = (sig(z(0)), sig(z(1)), z(2).tanh(), sig(z(3)));
                for (k, v) in [i, f, g, o].into_iter().enumerate() {
                    gates[t * 4 * n + r * 4 * hd + k * hd + j] = v;
                }
                let c = f * cs[t * n + r * hd + j] + i * g;
                cs.push(c);
                hs.push(o * c.tanh());
            }
        }
    }
    (hs, cs, gates)
}

/// LSTM backward in f64 from the activated gates and cell states: `dgates`.
/// The gate gradients and the gradient for the initial cell state, given `dc_n` (the gradient
/// reaching the last cell state from outside).
fn lstm_bwd_ref(
    dh: &[f64],
    gates: &[f64],
    cs: &[f64],
    w: &[f64],
    dc_n: &[f64],
    shape: SeqShape,
) -> (Vec<f64>, Vec<f64>) {
    let (steps, b, hd) = (shape.steps, shape.batch, shape.hidden);
    let n = b * hd;
    let mut dg = vec![0.0; steps * 4 * n];
    let mut dc_next = dc_n.to_vec();
    for t in (0..steps).rev() {
        let mut dc_now = vec![0.0; n];
        for r in 0..b {
            for j in 0..hd {
                let at = r * hd + j;
                // dh_t = dh[t] + sum over the 4H gate columns of dgates[t+1] W_hh[:, j].
                let rec: f64 = if t + 1 < steps {
                    (0..4 * hd)
                        .map(|q| dg[(t + 1) * 4 * n + r * 4 * hd + q] * w[q * hd + j])
                        .sum()
                } else {
                    0.0
                };
                let dht = dh[t * n + at] + rec;
                let g4 = |k: usize| gates[t * 4 * n + r * 4 * hd + k * hd + j];
                let (i, f, g, o) = (g4(0), g4(1), g4(2), g4(3));
                let tc = cs[(t + 1) * n + at].tanh();
                let carry = dc_next[at];
                let dct = carry + dht * o * (1.0 - tc * tc);
                let cp = cs[t * n + at];
                let out = [
                    dct * g * i * (1.0 - i),
                    dct * cp * f * (1.0 - f),
                    dct * i * (1.0 - g * g),
                    dht * tc * o * (1.0 - o),
                ];
                for (k, v) in out.into_iter().enumerate() {
                    dg[t * 4 * n + r * 4 * hd + k * hd + j] = v;
                }
                dc_now[at] = dct * f;
            }
        }
        dc_next = dc_now;
    }
    (dg, dc_next)
}

/// GRU forward in f64: `(hs, cache)`, `hs` with `steps + 1` blocks, `cache = [r, z, n, gh_n]`.
fn gru_fwd_ref(
    gx: &[f64],
    h0: &[f64],
    w: &[f64],
    bi: &[f64],
    bh: &[f64],
    shape: SeqShape,
) -> (Vec<f64>, Vec<f64>) {
    let (steps, b, hd, n) = dims(shape);
    let mut hs = h0.to_vec();
    let mut cache = vec![0.0; steps * 4 * n];
    for t in 0..steps {
        for r in 0..b {
            let hp = hs[t * n + r * hd..t * n + (r + 1) * hd].to_vec();
            for j in 0..hd {
                let x = |g: usize| gx[t * 3 * n + r * 3 * hd + g * hd + j] + bi[g * hd + j];
                let gh = |g: usize| dot(&hp, w, g * hd + j, hd) + bh[g * hd + j];
                let rg = sig(x(0) + gh(0));
                let z = sig(x(1) + gh(1));
                let nn = (x(2) + rg * gh(2)).tanh();
                hs.push((1.0 - z) * nn + z * hp[j]);
                for (k, v) in [rg, z, nn, gh(2)].into_iter().enumerate() {
                    cache[t * 4 * n + r * 4 * hd + k * hd + j] = v;
                }
            }
        }
    }
    (hs, cache)
}

/// GRU backward in f64: `(dgx, dgh)`.
fn gru_bwd_ref(
    dh: &[f64],
    hs: &[f64],
    cache: &[f64],
    w: &[f64],
    steps: usize,
    b: usize,
    hd: usize,
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let n = b * hd;
    let (mut dgx, mut dgh) = (vec![0.0; steps * 3 * n], vec![0.0; steps * 3 * n]);
    let mut dh_next = vec![0.0; n];
    for t in (0..steps).rev() {
        let mut dh_now = vec![0.0; n];
        for r in 0..b {
            for j in 0..hd {
                let at = r * hd + j;
                let (rec, direct) = if t + 1 < steps {
                    let rec: f64 = (0..3 * hd)
                        .map(|q| dgh[(t + 1) * 3 * n + r * 3 * hd + q] * w[q * hd + j])
                        .sum();
                    let z_next = cache[(t + 1) * 4 * n + r * 4 * hd + hd + j];
                    (rec, dh_next[at] * z_next)
                } else {
                    (0.0, 0.0)
                };
                let d = dh[t * n + at] + rec + direct;
                let k = |g: usize| cache[t * 4 * n + r * 4 * hd + g * hd + j];
                let (rg, z, nn, ghn) = (k(0), k(1), k(2), k(3));
                let dn = d * (1.0 - z) * (1.0 - nn * nn);
                let dz = d * (hs[t * n + at] - nn) * z * (1.0 - z);
                let dr = dn * ghn * rg * (1.0 - rg);
                let base = t * 3 * n + r * 3 * hd + j;
                for (g, (x, hh)) in [(dr, dr), (dz, dz), (dn, dn * rg)].into_iter().enumerate() {
                    dgx[base + g * hd] = x;
                    dgh[base + g * hd] = hh;
                }
                dh_now[at] = d;
            }
        }
        dh_next = dh_now;
    }
    // The direct part of the gradient for the initial state: dh_0 z_0.
    let z0 = |at: usize| cache[(at / hd) * 4 * hd + hd + at % hd];
    let dh0 = (0..n).map(|at| dh_next[at] * z0(at)).collect();
    (dgx, dgh, dh0)
}

proptest! {
    #![proptest_config(cfg())]

    #[test]
    fn cpu_lstm_sequence((steps, batch, hidden) in seq_shape(), seed in any::<u64>()) {
        let (ctx, mut r) = (Context::cpu(), rng(seed));
        let [w, bi, bh] = params(&mut r, 4, hidden);
        let (ops, n) = (ctx.ops(), batch * hidden);
        let xg = r.vec(steps * 4 * n, -2.0, 2.0);
        let (hs0, cs0) = (states(&mut r, steps, n), states(&mut r, steps, n));
        let (want_h, want_c, want_g) = lstm_fwd_ref(&to64(&xg), &to64(&hs0[..n]), &to64(&cs0[..n]), &to64(&w), &to64(&bi), &to64(&bh), SeqShape::new(steps, batch, hidden));
        let (bg, bhs, bcs) = (upload(&ctx, &xg), upload(&ctx, &hs0), upload(&ctx, &cs0));
        let (bw, bbi, bbh) = (upload(&ctx, &w), upload(&ctx, &bi), upload(&ctx, &bh));
        ops.lstm_sequence_forward(LstmSequenceForward::new(bg.view(), bhs.view(), bcs.view(), RecurrentWeights::new(bw.view(), bbi.view(), bbh.view()), SeqShape::new(steps, batch, hidden))).unwrap();
        let (hs, cs, gates) = (read(&ctx, &bhs), read(&ctx, &bcs), read(&ctx, &bg));
        assert_eq!(&hs[..n], &hs0[..n], "block 0 of hs must be left as it was");
        assert_eq!(&cs[..n], &cs0[..n], "block 0 of cs must be left as it was");
        assert_close("lstm sequence forward hs", &hs, &want_h);
        assert_close("lstm sequence forward cs", &cs, &want_c);
        assert_close("lstm sequence forward gates", &gates, &want_g);

        // At the point the forward produced, so both sides differentiate the same thing.
        let dh = r.vec(steps * n, -1.0, 1.0);
        let (want, _) = lstm_bwd_ref(&to64(&dh), &to64(&gates), &to64(&cs), &to64(&w), &vec![0.0; n], SeqShape::new(steps, batch, hidden));
        let (bdh, dg) = (upload(&ctx, &dh), poisoned(&ctx, steps * 4 * n));
        ops.lstm_sequence_backward(LstmSequenceBackward::new(bdh.view(), bg.view(), bcs.view(), bw.view(), dg.view(), None, SeqShape::new(steps, batch, hidden))).unwrap();
        assert_close("lstm sequence backward", &read(&ctx, &dg), &want);
        // With a gradient reaching c_n from outside, and the one for c_0 back.
        let dc_n = r.vec(n, -1.0, 1.0);
        let (want, want_dc0) = lstm_bwd_ref(&to64(&dh), &to64(&gates), &to64(&cs), &to64(&w), &to64(&dc_n), SeqShape::new(steps, batch, hidden));
        let (dg, dc) = (poisoned(&ctx, steps * 4 * n), upload(&ctx, &dc_n));
        ops.lstm_sequence_backward(LstmSequenceBackward::new(bdh.view(), bg.view(), bcs.view(), bw.view(), dg.view(), Some(dc.view()), SeqShape::new(steps, batch, hidden))).unwrap();
        assert_close("lstm sequence backward with dc_n", &read(&ctx, &dg), &want);
        assert_close("lstm sequence backward dc_0", &read(&ctx, &dc), &want_dc0);
    }

    #[test]
    fn cpu_gru_sequence((steps, batch, hidden) in seq_shape(), seed in any::<u64>()) {
        let (ctx, mut r) = (Context::cpu(), rng(seed));
        let [w, bi, bh] = params(&mut r, 3, hidden);
        let (ops, n) = (ctx.ops(), batch * hidden);
        let gx = r.vec(steps * 3 * n, -2.0, 2.0);
        let hs0 = states(&mut r, steps, n);
        let (want_h, want_k) = gru_fwd_ref(&to64(&gx), &to64(&hs0[..n]), &to64(&w), &to64(&bi), &to64(&bh), SeqShape::new(steps, batch, hidden));
        let (bgx, bhs, bk) = (upload(&ctx, &gx), upload(&ctx, &hs0), poisoned(&ctx, steps * 4 * n));
        let (bw, bbi, bbh) = (upload(&ctx, &w), upload(&ctx, &bi), upload(&ctx, &bh));
        ops.gru_sequence_forward(GruSequenceForward::new(bgx.view(), bhs.view(), RecurrentWeights::new(bw.view(), bbi.view(), bbh.view()), bk.view(), SeqShape::new(steps, batch, hidden))).unwrap();
        let (hs, cache) = (read(&ctx, &bhs), read(&ctx, &bk));
        assert_eq!(&hs[..n], &hs0[..n], "block 0 of hs must be left as it was");
        assert_eq!(read(&ctx, &bgx), gx, "gx is read only");
        assert_close("gru sequence forward hs", &hs, &want_h);
        assert_close("gru sequence forward cache", &cache, &want_k);

        let dh = r.vec(steps * n, -1.0, 1.0);
        let (want_x, want_h, want_dh0) = gru_bwd_ref(&to64(&dh), &to64(&hs), &to64(&cache), &to64(&w), steps, batch, hidden);
        let (bdh, dgx, dgh) = (upload(&ctx, &dh), poisoned(&ctx, steps * 3 * n), poisoned(&ctx, steps * 3 * n));
        ops.gru_sequence_backward(GruSequenceBackward::new(bdh.view(), bhs.view(), bk.view(), bw.view(), GruGateGrads::new(dgx.view(), dgh.view()), None, SeqShape::new(steps, batch, hidden))).unwrap();
        assert_close("gru sequence backward dgx", &read(&ctx, &dgx), &want_x);
        assert_close("gru sequence backward dgh", &read(&ctx, &dgh), &want_h);
        let (dgx, dgh, dh0) = (poisoned(&ctx, steps * 3 * n), poisoned(&ctx, steps * 3 * n), poisoned(&ctx, n));
        ops.gru_sequence_backward(GruSequenceBackward::new(bdh.view(), bhs.view(), bk.view(), bw.view(), GruGateGrads::new(dgx.view(), dgh.view()), Some(dh0.view()), SeqShape::new(steps, batch, hidden))).unwrap();
        assert_close("gru sequence backward dgx with dh_state", &read(&ctx, &dgx), &want_x);
        assert_close("gru sequence backward dh_state", &read(&ctx, &dh0), &want_dh0);
    }
}

#[test]
fn cpu_gated_sequence_rejects_bad_arguments() {
    let ctx = Context::cpu();
    let ops = ctx.ops();
    let (t, b, h) = (3, 2, 5);
    let n = b * h;
    let buf = |len: usize| upload(&ctx, &vec![0.5; len]);
    let shape = |r: rnn::Result<()>| assert!(matches!(r, Err(Error::Shape { .. })), "{r:?}");
    let overlap =
        |r: rnn::Result<()>| assert!(matches!(r, Err(Error::InvalidArgument(_))), "{r:?}");

    // LSTM forward.
    let (g, hs, cs) = (buf(t * 4 * n), buf((t + 1) * n), buf((t + 1) * n));
    let (w4, b4) = (buf(4 * h * h), buf(4 * h));
    let lf = |g: &Buffer, hs: &Buffer, cs: &Buffer, w: &Buffer, steps: usize| {
        ops.lstm_sequence_forward(LstmSequenceForward::new(
            g.view(),
            hs.view(),
            cs.view(),
            RecurrentWeights::new(w.view(), b4.view(), b4.view()),
            SeqShape::new(steps, b, h),
        ))
    };
    // hs must hold steps + 1 blocks; W_hh must be 4H x H; the gates steps blocks of 4H.
    shape(lf(&g, &buf(t * n), &cs, &w4, t));
    shape(lf(&g, &hs, &cs, &buf(3 * h * h), t));
    shape(lf(&g, &hs, &cs, &w4, t + 1));
    // The two state buffers may not be one buffer.
    overlap(ops.lstm_sequence_forward(LstmSequenceForward::new(
        g.view(),
        hs.view(),
        hs.view(),
        RecurrentWeights::new(w4.view(), b4.view(), b4.view()),
        SeqShape::new(t, b, h),
    )));
    // No steps: nothing to do, nothing written.
    let (h1, c1) = (buf(n), buf(n));
    lf(&buf(0), &h1, &c1, &w4, 0).unwrap();
    assert!(
        read(&ctx, &h1)
            .iter()
            .chain(&read(&ctx, &c1))
            .all(|v| *v == 0.5)
    );

    // LSTM backward: dgates may not overlap the gates it is computed from.
    let (dh, dg) = (buf(t * n), buf(t * 4 * n));
    let lb_with = |dg: &Buffer, dc: Option<View<'_>>, steps: usize| {
        ops.lstm_sequence_backward(LstmSequenceBackward::new(
            dh.view(),
            g.view(),
            cs.view(),
            w4.view(),
            dg.view(),
            dc,
            SeqShape::new(steps, b, h),
        ))
    };
    let lb = |dg: &Buffer, steps: usize| lb_with(dg, None, steps);
    lb(&dg, t).unwrap();
    overlap(lb(&g, t));
    shape(lb(&dg, t + 1));
    // The state gradient is one batch x hidden block, apart from every other view.
    let lb_state = |dc: View<'_>| lb_with(&dg, Some(dc), t);
    lb_state(buf(n).view()).unwrap();
    shape(lb_state(buf(n + 1).view()));
    overlap(lb_state(dg.slice(0, n).unwrap()));
    overlap(lb_state(cs.slice(0, n).unwrap()));

    // GRU forward and backward.
    let (gx, k, w3, b3) = (buf(t * 3 * n), buf(t * 4 * n), buf(3 * h * h), buf(3 * h));
    let gf = |gx: &Buffer, k: &Buffer, w: &Buffer| {
        ops.gru_sequence_forward(GruSequenceForward::new(
            gx.view(),
            hs.view(),
            RecurrentWeights::new(w.view(), b3.view(), b3.view()),
            k.view(),
            SeqShape::new(t, b, h),
        ))
    };
    gf(&gx, &k, &w3).unwrap();
    shape(gf(&gx, &k, &w4));
    shape(gf(&gx, &buf(t * 3 * n), &w3));
    // The cache may not alias the input projection.
    let big = buf(t * 4 * n);
    overlap(ops.gru_sequence_forward(GruSequenceForward::new(
        big.slice(0, t * 3 * n).unwrap(),
        hs.view(),
        RecurrentWeights::new(w3.view(), b3.view(), b3.view()),
        big.view(),
        SeqShape::new(t, b, h),
    )));
    let (dgx, dgh) = (buf(t * 3 * n), buf(t * 3 * n));
    let gb_with = |dgx: &Buffer, dgh: &Buffer, d: Option<View<'_>>| {
        ops.gru_sequence_backward(GruSequenceBackward::new(
            dh.view(),
            hs.view(),
            k.view(),
            w3.view(),
            GruGateGrads::new(dgx.view(), dgh.view()),
            d,
            SeqShape::new(t, b, h),
        ))
    };
    let gb = |dgx: &Buffer, dgh: &Buffer| gb_with(dgx, dgh, None);
    gb(&dgx, &dgh).unwrap();
    let gb_state = |d: View<'_>| gb_with(&dgx, &dgh, Some(d));
    gb_state(buf(n).view()).unwrap();
    shape(gb_state(buf(2 * n).view()));
    overlap(gb_state(dgh.slice(n, n).unwrap()));
    overlap(gb_state(hs.slice(0, n).unwrap()));
    overlap(gb(&dgx, &dgx));
    shape(gb(&dgx, &buf(t * 4 * n)));
}
