//! Recurrent cells; backward steps checked against central differences of f64 forwards.

use super::*;
use rnn::ops::GruCellBackward;
use rnn::ops::GruCellForward;
use rnn::ops::GruGateGrads;
use rnn::ops::LstmCellBackward;
use rnn::ops::LstmCellForward;
use rnn::ops::RecurrentWeights;
use rnn::ops::RnnStepBackward;
use rnn::ops::RnnStepForward;
use rnn::ops::SeqShape;

// ---- recurrent cells --------------------------------------------------------------------

/// `(batch, hidden)`: tiny, odd, and past the parallel threshold.
fn cell_shape() -> impl Strategy<Value = (usize, usize)> {
    prop_oneof![
        (1usize..4, 1usize..9),
        (1usize..40, 1usize..70),
        (64usize..100, 100usize..160),
        // Past 2^21 multiply-adds: the recurrent product split into per-thread blocks, each
        // finished by its own epilogue.
        (48usize..80, 200usize..270),
    ]
}

/// `act(pre + hp W^T + bi + bh)` in f64, W `hd x hd` row-major.
pub(super) fn rnn_fwd_ref(
    act: Activation,
    pre: &[f64],
    hp: &[f64],
    w: &[f64],
    bi: &[f64],
    bh: &[f64],
    shape: SeqShape,
) -> Vec<f64> {
    let (_, b, hd, _) = dims(shape);
    let mut out = vec![0.0; b * hd];
    for r in 0..b {
        for j in 0..hd {
            let z: f64 = (0..hd).map(|k| hp[r * hd + k] * w[j * hd + k]).sum();
            out[r * hd + j] = act_ref(act, pre[r * hd + j] + bi[j] + bh[j] + z);
        }
    }
    out
}

/// `act'(h) * (dh + next W)` in f64 (`next` None: `act'(h) * dh`).
pub(super) fn rnn_bwd_ref(
    act: Activation,
    dh: &[f64],
    next: Option<&[f64]>,
    w: &[f64],
    h: &[f64],
    b: usize,
    hd: usize,
) -> Vec<f64> {
    let mut out = vec![0.0; b * hd];
    for r in 0..b {
        for j in 0..hd {
            let z: f64 = next.map_or(0.0, |nx| {
                (0..hd).map(|k| nx[r * hd + k] * w[k * hd + j]).sum()
            });
            let y = h[r * hd + j];
            let d = if act == Activation::Relu {
                (y > 0.0) as u8 as f64
            } else {
                1.0 - y * y
            };
            out[r * hd + j] = d * (dh[r * hd + j] + z);
        }
    }
    out
}

/// LSTM forward in f64 from pre-activation gates: (activated gates, c, h).
fn lstm_fwd_ref(pre: &[f64], cp: &[f64], b: usize, hd: usize) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let (mut g, mut c, mut h) = (vec![0.0; 4 * b * hd], vec![0.0; b * hd], vec![0.0; b * hd]);
    for r in 0..b {
        for j in 0..hd {
            let at = |k: usize| pre[r * 4 * hd + k * hd + j];
            let (i, f, gg, o) = (sig(at(0)), sig(at(1)), at(2).tanh(), sig(at(3)));
            for (k, v) in [i, f, gg, o].into_iter().enumerate() {
                g[r * 4 * hd + k * hd + j] = v;
            }
            c[r * hd + j] = f * cp[r * hd + j] + i * gg;
            h[r * hd + j] = o * c[r * hd + j].tanh();
        }
    }
    (g, c, h)
}

/// GRU forward in f64: (h, cache).
fn gru_fwd_ref(gx: &[f64], gh: &[f64], hp: &[f64], b: usize, hd: usize) -> (Vec<f64>, Vec<f64>) {
    let (mut h, mut cache) = (vec![0.0; b * hd], vec![0.0; 4 * b * hd]);
    for r in 0..b {
        for j in 0..hd {
            let x = |k: usize| gx[r * 3 * hd + k * hd + j];
            let y = |k: usize| gh[r * 3 * hd + k * hd + j];
            let rr = sig(x(0) + y(0));
            let z = sig(x(1) + y(1));
            let n = (x(2) + rr * y(2)).tanh();
            h[r * hd + j] = (1.0 - z) * n + z * hp[r * hd + j];
            for (k, v) in [rr, z, n, y(2)].into_iter().enumerate() {
                cache[r * 4 * hd + k * hd + j] = v;
            }
        }
    }
    (h, cache)
}

/// Central differences of `loss` with respect to every element of `x` (f64, so exact enough).
fn numeric_grad(x: &[f64], loss: impl Fn(&[f64]) -> f64) -> Vec<f64> {
    let h = 1e-6;
    let mut x = x.to_vec();
    (0..x.len())
        .map(|i| {
            let v = x[i];
            x[i] = v + h;
            let up = loss(&x);
            x[i] = v - h;
            let down = loss(&x);
            x[i] = v;
            (up - down) / (2.0 * h)
        })
        .collect()
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

proptest! {
    #![proptest_config(cfg())]

    #[test]
    fn cpu_rnn_step((batch, hidden) in cell_shape(), relu in any::<bool>(), seed in any::<u64>()) {
        let act = if relu { Activation::Relu } else { Activation::Tanh };
        let ctx = Context::cpu();
        let ops = ctx.ops();
        let mut r = rng(seed);
        let n = batch * hidden;
        let [w, bi, bh] = params(&mut r, 1, hidden);
        let (pre, hp) = (r.vec(n, -2.0, 2.0), r.vec(n, -1.0, 1.0));
        let want = rnn_fwd_ref(act, &to64(&pre), &to64(&hp), &to64(&w), &to64(&bi), &to64(&bh), SeqShape::step(batch, hidden));
        let bw = upload(&ctx, &w);
        let (bp, bhp, bbi, bbh, out) = (upload(&ctx, &pre), upload(&ctx, &hp), upload(&ctx, &bi), upload(&ctx, &bh), poisoned(&ctx, n));
        ops.rnn_step_forward(RnnStepForward::new(bp.view(), bhp.view(), RecurrentWeights::new(bw.view(), bbi.view(), bbh.view()), out.view(), act, SeqShape::step(batch, hidden))).unwrap();
        assert_close("rnn step forward", &read(&ctx, &out), &want);

        // `h` as the forward leaves it, so act' is taken where the op takes it.
        let h = read(&ctx, &out);
        let (dh, next) = (r.vec(n, -1.0, 1.0), r.vec(n, -1.0, 1.0));
        let (bdh, bnext) = (upload(&ctx, &dh), upload(&ctx, &next));
        for with_next in [true, false] {
            let dpre = poisoned(&ctx, n);
            let nv = with_next.then(|| bnext.view());
            ops.rnn_step_backward(RnnStepBackward::new(bdh.view(), nv, bw.view(), out.view(), dpre.view(), act, SeqShape::step(batch, hidden))).unwrap();
            let nx = with_next.then(|| to64(&next));
            let want = rnn_bwd_ref(act, &to64(&dh), nx.as_deref(), &to64(&w), &to64(&h), batch, hidden);
            assert_close(&format!("rnn step backward (next: {with_next})"), &read(&ctx, &dpre), &want);
        }
    }

    #[test]
    fn cpu_lstm_cell((batch, hidden) in cell_shape(), seed in any::<u64>()) {
        let ctx = Context::cpu();
        let ops = ctx.ops();
        let mut r = rng(seed);
        let (n, n4) = (batch * hidden, 4 * batch * hidden);
        let pre = r.vec(n4, -2.0, 2.0);
        let cp = r.vec(n, -1.0, 1.0);
        let dh = r.vec(n, -1.0, 1.0);
        let dc = r.vec(n, -1.0, 1.0);
        let (g_want, c_want, h_want) = lstm_fwd_ref(&to64(&pre), &to64(&cp), batch, hidden);
        let (bg, bcp, bc, bh) = (upload(&ctx, &pre), upload(&ctx, &cp), poisoned(&ctx, n), poisoned(&ctx, n));
        ops.lstm_cell_forward(LstmCellForward::new(bg.view(), bcp.view(), bc.view(), bh.view(), SeqShape::step(batch, hidden))).unwrap();
        assert_close("lstm gates", &read(&ctx, &bg), &g_want);
        assert_close("lstm c", &read(&ctx, &bc), &c_want);
        assert_close("lstm h", &read(&ctx, &bh), &h_want);

        let (bdh, bdc, bdg) = (upload(&ctx, &dh), upload(&ctx, &dc), poisoned(&ctx, n4));
        ops.lstm_cell_backward(LstmCellBackward::new(bg.view(), bcp.view(), bc.view(), bdh.view(), bdc.view(), bdg.view(), SeqShape::step(batch, hidden))).unwrap();
        // Reference gradients: the loss dh.h + dc.c is linear in (h, c), so its gradient w.r.t.
        // the pre-activations and c_prev is exactly what the backward step must produce. Each
        // row is independent, so the sums stay cheap for the large shapes too.
        let (dh64, dc64) = (to64(&dh), to64(&dc));
        let mut dg_want = vec![0.0; n4];
        let mut dcp_want = vec![0.0; n];
        let (pre64, cp64) = (to64(&pre), to64(&cp));
        for row in 0..batch {
            let rs = |v: &[f64], w: usize| v[row * w * hidden..(row + 1) * w * hidden].to_vec();
            let (p, c0, dhr, dcr) = (rs(&pre64, 4), rs(&cp64, 1), rs(&dh64, 1), rs(&dc64, 1));
            let loss = |p: &[f64], c0: &[f64]| {
                let (_, c, h) = lstm_fwd_ref(p, c0, 1, hidden);
                dot(&dhr, &h) + dot(&dcr, &c)
            };
            let gp = numeric_grad(&p, |p| loss(p, &c0));
            let gc = numeric_grad(&c0, |c0| loss(&p, c0));
            dg_want[row * 4 * hidden..(row + 1) * 4 * hidden].copy_from_slice(&gp);
            dcp_want[row * hidden..(row + 1) * hidden].copy_from_slice(&gc);
        }
        let tol = 1e-4;
        let e1 = rel_err(&read(&ctx, &bdg), &dg_want.iter().map(|&v| v as f32).collect::<Vec<_>>());
        let e2 = rel_err(&read(&ctx, &bdc), &dcp_want.iter().map(|&v| v as f32).collect::<Vec<_>>());
        prop_assert!(e1 < tol && e2 < tol, "lstm backward: dgates {e1}, dc_prev {e2}");
    }

    #[test]
    fn cpu_gru_cell((batch, hidden) in cell_shape(), seed in any::<u64>()) {
        let ctx = Context::cpu();
        let ops = ctx.ops();
        let mut r = rng(seed);
        let (n, n3) = (batch * hidden, 3 * batch * hidden);
        let gx = r.vec(n3, -2.0, 2.0);
        let gh = r.vec(n3, -2.0, 2.0);
        let hp = r.vec(n, -1.0, 1.0);
        let dh = r.vec(n, -1.0, 1.0);
        let (h_want, cache_want) = gru_fwd_ref(&to64(&gx), &to64(&gh), &to64(&hp), batch, hidden);
        let (bgx, bgh, bhp) = (upload(&ctx, &gx), upload(&ctx, &gh), upload(&ctx, &hp));
        let (bh, bcache) = (poisoned(&ctx, n), poisoned(&ctx, 4 * n));
        ops.gru_cell_forward(GruCellForward::new(bgx.view(), bgh.view(), bhp.view(), bh.view(), bcache.view(), SeqShape::step(batch, hidden))).unwrap();
        assert_close("gru h", &read(&ctx, &bh), &h_want);
        assert_close("gru cache", &read(&ctx, &bcache), &cache_want);

        let (bdh, bdgx, bdgh, bdhp) = (upload(&ctx, &dh), poisoned(&ctx, n3), poisoned(&ctx, n3), poisoned(&ctx, n));
        ops.gru_cell_backward(GruCellBackward::new(bcache.view(), bhp.view(), bdh.view(), GruGateGrads::new(bdgx.view(), bdgh.view()), bdhp.view(), SeqShape::step(batch, hidden))).unwrap();
        let (gx64, gh64, hp64, dh64) = (to64(&gx), to64(&gh), to64(&hp), to64(&dh));
        let (mut wx, mut wh, mut whp) = (vec![0.0; n3], vec![0.0; n3], vec![0.0; n]);
        for row in 0..batch {
            let rs = |v: &[f64], w: usize| v[row * w * hidden..(row + 1) * w * hidden].to_vec();
            let (x, y, h0, d) = (rs(&gx64, 3), rs(&gh64, 3), rs(&hp64, 1), rs(&dh64, 1));
            let loss = |x: &[f64], y: &[f64]| dot(&d, &gru_fwd_ref(x, y, &h0, 1, hidden).0);
            wx[row * 3 * hidden..(row + 1) * 3 * hidden].copy_from_slice(&numeric_grad(&x, |x| loss(x, &y)));
            wh[row * 3 * hidden..(row + 1) * 3 * hidden].copy_from_slice(&numeric_grad(&y, |y| loss(&x, y)));
            // The direct part only: dh * z.
            for j in 0..hidden {
                whp[row * hidden + j] = d[j] * sig(x[hidden + j] + y[hidden + j]);
            }
        }
        let f32s = |v: &[f64]| v.iter().map(|&x| x as f32).collect::<Vec<_>>();
        let tol = 1e-4;
        let (e1, e2, e3) = (rel_err(&read(&ctx, &bdgx), &f32s(&wx)), rel_err(&read(&ctx, &bdgh), &f32s(&wh)), rel_err(&read(&ctx, &bdhp), &f32s(&whp)));
        prop_assert!(e1 < tol && e2 < tol && e3 < tol, "gru backward: dgx {e1}, dgh {e2}, dh_prev {e3}");
    }
}

#[test]
fn cpu_rnn_step_rejects_bad_arguments() {
    let ctx = Context::cpu();
    let ops = ctx.ops();
    let (b, h) = (3, 5);
    let buf = |n: usize| upload(&ctx, &vec![0.5; n]);
    let (pre, hp, w, bi, bh, out) = (
        buf(b * h),
        buf(b * h),
        buf(h * h),
        buf(h),
        buf(h),
        buf(b * h),
    );
    let sig = ops.rnn_step_forward(RnnStepForward::new(
        pre.view(),
        hp.view(),
        RecurrentWeights::new(w.view(), bi.view(), bh.view()),
        out.view(),
        Activation::Sigmoid,
        SeqShape::step(b, h),
    ));
    assert!(matches!(sig, Err(Error::InvalidArgument(_))), "{sig:?}");
    let short = buf(h * h - 1);
    let len = ops.rnn_step_forward(RnnStepForward::new(
        pre.view(),
        hp.view(),
        RecurrentWeights::new(short.view(), bi.view(), bh.view()),
        out.view(),
        Activation::Tanh,
        SeqShape::step(b, h),
    ));
    assert!(matches!(len, Err(Error::Shape { .. })), "{len:?}");
    // h_prev is read by every output row: writing it in place is refused.
    let alias = ops.rnn_step_forward(RnnStepForward::new(
        pre.view(),
        hp.view(),
        RecurrentWeights::new(w.view(), bi.view(), bh.view()),
        hp.view(),
        Activation::Tanh,
        SeqShape::step(b, h),
    ));
    assert!(matches!(alias, Err(Error::InvalidArgument(_))), "{alias:?}");
    let alias = ops.rnn_step_backward(RnnStepBackward::new(
        pre.view(),
        Some(out.view()),
        w.view(),
        hp.view(),
        out.view(),
        Activation::Relu,
        SeqShape::step(b, h),
    ));
    assert!(matches!(alias, Err(Error::InvalidArgument(_))), "{alias:?}");
}
