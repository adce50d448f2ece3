//! The CPU backend against plain reference loops (f64 accumulation) written here: every op,
//! random shapes (1, odd sizes, and sizes past the parallel thresholds), NaN-poisoned outputs,
//! in-place variants, and the error paths.

use proptest::prelude::*;
use rnn::{Activation, AdamStep, Buffer, Context, Error, Gemm, SgdStep};

use crate::support::rel_err;

const TOL: f64 = 2e-5;

fn cfg() -> ProptestConfig {
    ProptestConfig {
        cases: 24,
        ..ProptestConfig::default()
    }
}

/// Deterministic values from a proptest-drawn seed (fresh every case).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
    fn vec(&mut self, n: usize, lo: f32, hi: f32) -> Vec<f32> {
        (0..n)
            .map(|_| lo + (hi - lo) * self.next() as f32)
            .collect()
    }
    fn below(&mut self, n: usize) -> usize {
        ((self.next() * n as f64) as usize).min(n - 1)
    }
}

fn rng(seed: u64) -> Rng {
    Rng(seed | 1)
}

fn upload(ctx: &Context, data: &[f32]) -> Buffer {
    let b = ctx.alloc(data.len()).unwrap();
    ctx.ops().upload(b.view(), data).unwrap();
    b
}

fn poisoned(ctx: &Context, n: usize) -> Buffer {
    upload(ctx, &vec![f32::NAN; n])
}

fn read(ctx: &Context, b: &Buffer) -> Vec<f32> {
    let mut out = vec![0.0; b.len()];
    ctx.ops().download(b.view(), &mut out).unwrap();
    out
}

fn assert_close(what: &str, got: &[f32], want: &[f64]) {
    let want32: Vec<f32> = want.iter().map(|&v| v as f32).collect();
    let e = rel_err(got, &want32);
    assert!(e < TOL, "{what}: relative error {e}");
}

/// A length: 1, small odd, or past the 32K parallel threshold.
fn length() -> impl Strategy<Value = usize> {
    prop_oneof![Just(1usize), 1usize..200, 33_000usize..70_000]
}

/// A `rows x cols` shape, sometimes past the parallel threshold.
fn shape() -> impl Strategy<Value = (usize, usize)> {
    prop_oneof![
        (1usize..8, 1usize..40),
        (1usize..70, 1usize..130),
        // At least 33K elements and 165 columns: past every parallel threshold.
        (200usize..400, 165usize..200),
    ]
}

const ACTS: [Activation; 6] = [
    Activation::Identity,
    Activation::Relu,
    Activation::Sigmoid,
    Activation::Tanh,
    Activation::Gelu,
    Activation::LeakyRelu { slope: 0.07 },
];

fn erf(x: f64) -> f64 {
    // Abramowitz-Stegun 7.1.26 is too coarse for a reference; integrate the series instead.
    let mut sum = 0.0f64;
    let mut term = x;
    let mut n = 0.0;
    while term.abs() > 1e-17 * sum.abs().max(1e-300) || n < 3.0 {
        sum += term / (2.0 * n + 1.0);
        n += 1.0;
        term *= -x * x / n;
        if n > 200.0 {
            break;
        }
    }
    sum * 2.0 / std::f64::consts::PI.sqrt()
}

fn act_ref(act: Activation, z: f64) -> f64 {
    match act {
        Activation::Identity => z,
        Activation::Relu => z.max(0.0),
        Activation::Sigmoid => 1.0 / (1.0 + (-z).exp()),
        Activation::Tanh => z.tanh(),
        Activation::Gelu => 0.5 * z * (1.0 + erf(z / 2f64.sqrt())),
        Activation::LeakyRelu { slope } => {
            if z > 0.0 {
                z
            } else {
                slope as f64 * z
            }
        }
    }
}

/// act'(z) by a central difference of the reference (away from the kinks).
fn act_grad_ref(act: Activation, z: f64) -> f64 {
    match act {
        Activation::Relu => (z > 0.0) as u8 as f64,
        Activation::LeakyRelu { slope } => {
            if z > 0.0 {
                1.0
            } else {
                slope as f64
            }
        }
        _ => {
            let h = 1e-5;
            (act_ref(act, z + h) - act_ref(act, z - h)) / (2.0 * h)
        }
    }
}

fn sig(z: f64) -> f64 {
    1.0 / (1.0 + (-z).exp())
}

// ---- elementwise ------------------------------------------------------------------------

proptest! {
    #![proptest_config(cfg())]

    #[test]
    fn cpu_elementwise(n in length(), seed in any::<u64>(), alpha in -2.0f32..2.0) {
        let ctx = Context::cpu();
        let ops = ctx.ops();
        let mut r = rng(seed);
        let a = r.vec(n, -3.0, 3.0);
        let b = r.vec(n, -3.0, 3.0);
        let (ba, bb) = (upload(&ctx, &a), upload(&ctx, &b));
        let f64s = |v: &[f32]| v.iter().map(|&x| x as f64).collect::<Vec<_>>();

        let out = poisoned(&ctx, n);
        ops.fill(out.view(), alpha).unwrap();
        assert_close("fill", &read(&ctx, &out), &vec![alpha as f64; n]);

        let out = poisoned(&ctx, n);
        ops.copy(ba.view(), out.view()).unwrap();
        assert_close("copy", &read(&ctx, &out), &f64s(&a));

        let x = upload(&ctx, &a);
        ops.scale(x.view(), alpha).unwrap();
        let want: Vec<f64> = a.iter().map(|&v| v as f64 * alpha as f64).collect();
        assert_close("scale", &read(&ctx, &x), &want);

        let y = upload(&ctx, &b);
        ops.axpy(alpha, ba.view(), y.view()).unwrap();
        let want: Vec<f64> = a.iter().zip(&b).map(|(&x, &y)| y as f64 + alpha as f64 * x as f64).collect();
        assert_close("axpy", &read(&ctx, &y), &want);

        let sum: Vec<f64> = a.iter().zip(&b).map(|(&x, &y)| x as f64 + y as f64).collect();
        let prod: Vec<f64> = a.iter().zip(&b).map(|(&x, &y)| x as f64 * y as f64).collect();
        let out = poisoned(&ctx, n);
        ops.add(ba.view(), bb.view(), out.view()).unwrap();
        assert_close("add", &read(&ctx, &out), &sum);
        ops.mul(ba.view(), bb.view(), out.view()).unwrap();
        assert_close("mul", &read(&ctx, &out), &prod);

        // In place: out is a, out is b, and all three the same view.
        let x = upload(&ctx, &a);
        ops.add(x.view(), bb.view(), x.view()).unwrap();
        assert_close("add out=a", &read(&ctx, &x), &sum);
        let x = upload(&ctx, &b);
        ops.mul(ba.view(), x.view(), x.view()).unwrap();
        assert_close("mul out=b", &read(&ctx, &x), &prod);
        let x = upload(&ctx, &a);
        ops.add(x.view(), x.view(), x.view()).unwrap();
        let twice: Vec<f64> = a.iter().map(|&v| 2.0 * v as f64).collect();
        assert_close("add a=b=out", &read(&ctx, &x), &twice);

        // Disjoint views of one flat buffer: [a | b | out].
        let flat = upload(&ctx, &[a.clone(), b.clone(), vec![f32::NAN; n]].concat());
        let v = |i: usize| flat.slice(i * n, n).unwrap();
        ops.mul(v(0), v(1), v(2)).unwrap();
        assert_close("mul flat", &read(&ctx, &flat)[2 * n..], &prod);
    }
}

// ---- GEMM -------------------------------------------------------------------------------

fn gemm_dims() -> impl Strategy<Value = (usize, usize, usize)> {
    prop_oneof![
        (1usize..9, 1usize..9, 1usize..9),
        (1usize..70, 1usize..70, 1usize..70),
        // Over 2^22 multiply-adds: the multi-threaded path.
        (170usize..240, 170usize..240, 170usize..240),
    ]
}

proptest! {
    #![proptest_config(cfg())]

    #[test]
    fn cpu_gemm(
        (m, n, k) in gemm_dims(),
        ta in any::<bool>(),
        tb in any::<bool>(),
        alpha in prop_oneof![Just(1.0f32), -2.0f32..2.0],
        beta in prop_oneof![Just(0.0f32), Just(1.0f32), -2.0f32..2.0],
        seed in any::<u64>(),
    ) {
        let ctx = Context::cpu();
        let mut r = rng(seed);
        let a = r.vec(m * k, -1.0, 1.0);
        let b = r.vec(k * n, -1.0, 1.0);
        let c0 = if beta == 0.0 { vec![f32::NAN; m * n] } else { r.vec(m * n, -1.0, 1.0) };
        let (ba, bb, bc) = (upload(&ctx, &a), upload(&ctx, &b), upload(&ctx, &c0));
        let mut g = Gemm::new(m, n, k).scaled(alpha, beta);
        g.trans_a = ta;
        g.trans_b = tb;
        ctx.ops().gemm(g, ba.view(), bb.view(), bc.view()).unwrap();
        let mut want = vec![0.0f64; m * n];
        for i in 0..m {
            for j in 0..n {
                let mut s = 0.0f64;
                for p in 0..k {
                    let av = if ta { a[p * m + i] } else { a[i * k + p] };
                    let bv = if tb { b[j * k + p] } else { b[p * n + j] };
                    s += av as f64 * bv as f64;
                }
                let old = if beta == 0.0 { 0.0 } else { beta as f64 * c0[i * n + j] as f64 };
                want[i * n + j] = alpha as f64 * s + old;
            }
        }
        assert_close(&format!("gemm {m}x{n}x{k} ta={ta} tb={tb}"), &read(&ctx, &bc), &want);
    }
}

#[test]
fn cpu_gemm_views_of_one_buffer() {
    // A, B and C as disjoint views of one flat buffer (a parameter buffer pattern).
    let ctx = Context::cpu();
    let (m, n, k) = (3, 4, 5);
    let mut r = rng(7);
    let a = r.vec(m * k, -1.0, 1.0);
    let b = r.vec(k * n, -1.0, 1.0);
    let flat = upload(
        &ctx,
        &[a.clone(), b.clone(), vec![f32::NAN; m * n]].concat(),
    );
    let va = flat.slice(0, m * k).unwrap();
    let vb = flat.slice(m * k, k * n).unwrap();
    let vc = flat.slice(m * k + k * n, m * n).unwrap();
    ctx.ops().gemm(Gemm::new(m, n, k), va, vb, vc).unwrap();
    let mut want = vec![0.0f64; m * n];
    for i in 0..m {
        for j in 0..n {
            want[i * n + j] = (0..k)
                .map(|p| a[i * k + p] as f64 * b[p * n + j] as f64)
                .sum();
        }
    }
    assert_close("gemm flat", &read(&ctx, &flat)[m * k + k * n..], &want);
    // C overlapping A is rejected.
    let err = ctx
        .ops()
        .gemm(Gemm::new(m, n, k), va, vb, flat.slice(0, m * n).unwrap());
    assert!(matches!(err, Err(Error::InvalidArgument(_))), "{err:?}");
}

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
        ops.bias_act_forward(bz.view(), bb.view(), by.view(), act, rows, cols).unwrap();
        assert_close("bias_act y", &read(&ctx, &by), &y_want);
        assert_close("bias_act z", &read(&ctx, &bz), &zb);
        // In place (y is z).
        let bz2 = upload(&ctx, &z);
        ops.bias_act_forward(bz2.view(), bb.view(), bz2.view(), act, rows, cols).unwrap();
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
        ops.act_backward(bdy.view(), bz.view(), by.view(), bdz.view(), act).unwrap();
        assert_close("act_backward", &read(&ctx, &bdz), &dz_want);
        ops.act_backward(bdy.view(), bz.view(), by.view(), bdy.view(), act).unwrap();
        assert_close("act_backward dz=dy", &read(&ctx, &bdy), &dz_want);
        if act.derivative_from_output() {
            let bdy = upload(&ctx, &dy);
            ops.act_backward(bdy.view(), by.view(), by.view(), bdz.view(), act).unwrap();
            assert_close("act_backward z=y", &read(&ctx, &bdz), &dz_want);
        }
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
        let (bx, bl) = (upload(&ctx, &x), upload(&ctx, &labels));
        let (bd, bloss, bc) = (poisoned(&ctx, x.len()), poisoned(&ctx, rows), poisoned(&ctx, rows));
        ctx.ops().softmax_cross_entropy(bx.view(), bl.view(), bd.view(), bloss.view(), bc.view(), rows, cols, scale).unwrap();
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
    }

    #[test]
    fn cpu_mse((rows, cols) in shape(), scale in 0.1f32..2.0, seed in any::<u64>()) {
        let ctx = Context::cpu();
        let mut r = rng(seed);
        let p = r.vec(rows * cols, -2.0, 2.0);
        let t = r.vec(rows * cols, -2.0, 2.0);
        let (bp, bt, bd, bl) = (upload(&ctx, &p), upload(&ctx, &t), poisoned(&ctx, p.len()), poisoned(&ctx, rows));
        ctx.ops().mse(bp.view(), bt.view(), bd.view(), bl.view(), rows, cols, scale).unwrap();
        let e: Vec<f64> = p.iter().zip(&t).map(|(&a, &b)| a as f64 - b as f64).collect();
        let dwant: Vec<f64> = e.iter().map(|&v| scale as f64 * 2.0 * v / cols as f64).collect();
        let lwant: Vec<f64> = e.chunks(cols).map(|r| r.iter().map(|v| v * v).sum::<f64>() / cols as f64).collect();
        assert_close("mse grad", &read(&ctx, &bd), &dwant);
        assert_close("mse loss", &read(&ctx, &bl), &lwant);
    }
}

#[test]
fn cpu_cross_entropy_ties_and_bad_labels() {
    let ctx = Context::cpu();
    // Row 0: tie between classes 1 and 2, label 2 -> not correct (the first maximum wins).
    // Row 1: tie, label 1 -> correct. Row 2: label out of range -> NaN loss.
    let x = [0.0, 3.0, 3.0, 1.0, 5.0, 5.0, 1.0, 2.0, 3.0];
    let labels = [2.0, 1.0, 7.0];
    let (bx, bl) = (upload(&ctx, &x), upload(&ctx, &labels));
    let (bd, bloss, bc) = (poisoned(&ctx, 9), poisoned(&ctx, 3), poisoned(&ctx, 3));
    ctx.ops()
        .softmax_cross_entropy(
            bx.view(),
            bl.view(),
            bd.view(),
            bloss.view(),
            bc.view(),
            3,
            3,
            1.0,
        )
        .unwrap();
    assert_eq!(read(&ctx, &bc), vec![0.0, 1.0, 0.0]);
    let loss = read(&ctx, &bloss);
    assert!(loss[0].is_finite() && loss[1].is_finite() && loss[2].is_nan());
}

// ---- reductions -------------------------------------------------------------------------

proptest! {
    #![proptest_config(cfg())]

    #[test]
    fn cpu_reductions((rows, cols) in shape(), beta in prop_oneof![Just(0.0f32), 0.5f32..1.5], seed in any::<u64>()) {
        let ctx = Context::cpu();
        let ops = ctx.ops();
        let mut r = rng(seed);
        let x = r.vec(rows * cols, -1.0, 1.0);
        let bx = upload(&ctx, &x);
        let init = |n: usize, r: &mut Rng| if beta == 0.0 { vec![f32::NAN; n] } else { r.vec(n, -1.0, 1.0) };

        let o0 = init(cols, &mut r);
        let bo = upload(&ctx, &o0);
        ops.sum_rows(bx.view(), bo.view(), rows, cols, beta).unwrap();
        let want: Vec<f64> = (0..cols).map(|c| {
            let s: f64 = (0..rows).map(|rr| x[rr * cols + c] as f64).sum();
            if beta == 0.0 { s } else { beta as f64 * o0[c] as f64 + s }
        }).collect();
        assert_close("sum_rows", &read(&ctx, &bo), &want);

        let o0 = init(rows, &mut r);
        let bo = upload(&ctx, &o0);
        ops.sum_cols(bx.view(), bo.view(), rows, cols, beta).unwrap();
        let want: Vec<f64> = (0..rows).map(|rr| {
            let s: f64 = x[rr * cols..(rr + 1) * cols].iter().map(|&v| v as f64).sum();
            if beta == 0.0 { s } else { beta as f64 * o0[rr] as f64 + s }
        }).collect();
        assert_close("sum_cols", &read(&ctx, &bo), &want);

        let o0 = init(1, &mut r);
        let bo = upload(&ctx, &o0);
        ops.sum_all(bx.view(), bo.view(), beta).unwrap();
        let s: f64 = x.iter().map(|&v| v as f64).sum();
        let want = if beta == 0.0 { s } else { beta as f64 * o0[0] as f64 + s };
        // A random-sign sum can be near zero; compare against its scale, not itself.
        let got = read(&ctx, &bo)[0] as f64;
        prop_assert!((got - want).abs() <= 1e-5 * (x.len() as f64).sqrt().max(want.abs()), "sum_all {got} vs {want}");
    }

    #[test]
    fn cpu_clip_grad_norm(n in length(), max_norm in 0.1f32..50.0, seed in any::<u64>()) {
        let ctx = Context::cpu();
        let mut r = rng(seed);
        let g = r.vec(n, -1.0, 1.0);
        let (bg, bn) = (upload(&ctx, &g), poisoned(&ctx, 1));
        ctx.ops().clip_grad_norm(bg.view(), max_norm, bn.view()).unwrap();
        let norm = g.iter().map(|&v| (v as f64).powi(2)).sum::<f64>().sqrt();
        let coef = (max_norm as f64 / (norm + 1e-6)).min(1.0);
        assert_close("norm", &read(&ctx, &bn), &[norm]);
        let want: Vec<f64> = g.iter().map(|&v| v as f64 * coef).collect();
        assert_close("clipped", &read(&ctx, &bg), &want);
    }
}

// ---- data movement ----------------------------------------------------------------------

proptest! {
    #![proptest_config(cfg())]

    #[test]
    fn cpu_gather_and_one_hot(
        (nidx, cols) in shape(),
        src_rows in 1usize..300,
        seed in any::<u64>(),
    ) {
        let ctx = Context::cpu();
        let mut r = rng(seed);
        let src = r.vec(src_rows * cols, -1.0, 1.0);
        let idx: Vec<f32> = (0..nidx).map(|_| r.below(src_rows) as f32).collect();
        let (bs, bi, bd) = (upload(&ctx, &src), upload(&ctx, &idx), poisoned(&ctx, nidx * cols));
        ctx.ops().gather_rows(bs.view(), bi.view(), bd.view(), cols).unwrap();
        let want: Vec<f64> = idx.iter().flat_map(|&i| src[i as usize * cols..(i as usize + 1) * cols].iter().map(|&v| v as f64)).collect();
        assert_close("gather_rows", &read(&ctx, &bd), &want);

        let out = poisoned(&ctx, nidx * src_rows);
        ctx.ops().one_hot(bi.view(), out.view(), src_rows).unwrap();
        let want: Vec<f32> = idx.iter().flat_map(|&i| (0..src_rows).map(move |c| (c == i as usize) as u8 as f32)).collect();
        prop_assert_eq!(read(&ctx, &out), want);
    }
}

#[test]
fn cpu_gather_rejects_bad_index() {
    let ctx = Context::cpu();
    let src = upload(&ctx, &[1.0, 2.0, 3.0, 4.0]);
    let dst = poisoned(&ctx, 2);
    for bad in [2.0, -1.0, 0.5, f32::NAN] {
        let idx = upload(&ctx, &[bad]);
        let err = ctx.ops().gather_rows(src.view(), idx.view(), dst.view(), 2);
        assert!(
            matches!(err, Err(Error::InvalidArgument(_))),
            "{bad}: {err:?}"
        );
    }
}

// ---- recurrent cells --------------------------------------------------------------------

/// `(batch, hidden)`: tiny, odd, and past the parallel threshold.
fn cell_shape() -> impl Strategy<Value = (usize, usize)> {
    prop_oneof![
        (1usize..4, 1usize..9),
        (1usize..40, 1usize..70),
        (64usize..100, 100usize..160),
    ]
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

fn to64(v: &[f32]) -> Vec<f64> {
    v.iter().map(|&x| x as f64).collect()
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
    fn cpu_rnn_cell((batch, hidden) in cell_shape(), relu in any::<bool>(), seed in any::<u64>()) {
        let act = if relu { Activation::Relu } else { Activation::Tanh };
        let ctx = Context::cpu();
        let mut r = rng(seed);
        let n = batch * hidden;
        let pre = r.vec(n, -2.0, 2.0);
        let (bi, bh) = (r.vec(hidden, -1.0, 1.0), r.vec(hidden, -1.0, 1.0));
        let want: Vec<f64> = (0..n).map(|i| act_ref(act, pre[i] as f64 + bi[i % hidden] as f64 + bh[i % hidden] as f64)).collect();
        let (bp, bbi, bbh, out) = (upload(&ctx, &pre), upload(&ctx, &bi), upload(&ctx, &bh), poisoned(&ctx, n));
        ctx.ops().rnn_cell_forward(bp.view(), bbi.view(), bbh.view(), out.view(), act, batch, hidden).unwrap();
        assert_close("rnn cell", &read(&ctx, &out), &want);
        ctx.ops().rnn_cell_forward(bp.view(), bbi.view(), bbh.view(), bp.view(), act, batch, hidden).unwrap();
        assert_close("rnn cell in place", &read(&ctx, &bp), &want);
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
        ops.lstm_cell_forward(bg.view(), bcp.view(), bc.view(), bh.view(), batch, hidden).unwrap();
        assert_close("lstm gates", &read(&ctx, &bg), &g_want);
        assert_close("lstm c", &read(&ctx, &bc), &c_want);
        assert_close("lstm h", &read(&ctx, &bh), &h_want);

        let (bdh, bdc, bdg) = (upload(&ctx, &dh), upload(&ctx, &dc), poisoned(&ctx, n4));
        ops.lstm_cell_backward(bg.view(), bcp.view(), bc.view(), bdh.view(), bdc.view(), bdg.view(), batch, hidden).unwrap();
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
        ops.gru_cell_forward(bgx.view(), bgh.view(), bhp.view(), bh.view(), bcache.view(), batch, hidden).unwrap();
        assert_close("gru h", &read(&ctx, &bh), &h_want);
        assert_close("gru cache", &read(&ctx, &bcache), &cache_want);

        let (bdh, bdgx, bdgh, bdhp) = (upload(&ctx, &dh), poisoned(&ctx, n3), poisoned(&ctx, n3), poisoned(&ctx, n));
        ops.gru_cell_backward(bcache.view(), bhp.view(), bdh.view(), bdgx.view(), bdgh.view(), bdhp.view(), batch, hidden).unwrap();
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

// ---- optimizers -------------------------------------------------------------------------

proptest! {
    #![proptest_config(cfg())]

    #[test]
    fn cpu_sgd(
        n in length(),
        momentum in prop_oneof![Just(0.0f32), 0.5f32..0.95],
        nesterov in any::<bool>(),
        wd in prop_oneof![Just(0.0f32), 0.001f32..0.1],
        seed in any::<u64>(),
    ) {
        let ctx = Context::cpu();
        let mut r = rng(seed);
        let s = SgdStep { lr: 0.05, momentum, weight_decay: wd, nesterov };
        // Parameters away from zero, so a relative error of one element stays meaningful.
        let p0 = r.vec(n, 1.0, 2.0);
        let (bp, bv) = (upload(&ctx, &p0), upload(&ctx, &vec![0.0; n]));
        let (mut p, mut v) = (to64(&p0), vec![0.0f64; n]);
        for _ in 0..3 {
            let g = r.vec(n, -1.0, 1.0);
            ctx.ops().sgd_step(bp.view(), upload(&ctx, &g).view(), bv.view(), s).unwrap();
            for i in 0..n {
                let gi = g[i] as f64 + wd as f64 * p[i];
                let step = if momentum == 0.0 {
                    gi
                } else {
                    v[i] = momentum as f64 * v[i] + gi;
                    if nesterov { gi + momentum as f64 * v[i] } else { v[i] }
                };
                p[i] -= 0.05f32 as f64 * step;
            }
        }
        assert_close("sgd params", &read(&ctx, &bp), &p);
        if momentum != 0.0 {
            assert_close("sgd velocity", &read(&ctx, &bv), &v);
        }
    }

    #[test]
    fn cpu_adam(
        n in length(),
        decoupled in any::<bool>(),
        wd in prop_oneof![Just(0.0f32), 0.001f32..0.1],
        seed in any::<u64>(),
    ) {
        let ctx = Context::cpu();
        let mut r = rng(seed);
        let p0 = r.vec(n, 1.0, 2.0);
        let bp = upload(&ctx, &p0);
        let (bm, bv) = (upload(&ctx, &vec![0.0; n]), upload(&ctx, &vec![0.0; n]));
        let (mut p, mut m, mut v) = (to64(&p0), vec![0.0f64; n], vec![0.0f64; n]);
        // The f32 hyper-parameters, widened, so the reference sees exactly what the op sees.
        let (lr, b1, b2, eps) = (1e-2f32 as f64, 0.9f32 as f64, 0.999f32 as f64, 1e-8f32 as f64);
        for step in 1..=3u64 {
            let g = r.vec(n, -1.0, 1.0);
            let s = AdamStep { lr: lr as f32, beta1: b1 as f32, beta2: b2 as f32, eps: eps as f32, weight_decay: wd, decoupled, step };
            ctx.ops().adam_step(bp.view(), upload(&ctx, &g).view(), bm.view(), bv.view(), s).unwrap();
            for i in 0..n {
                let mut gi = g[i] as f64;
                if decoupled {
                    p[i] *= 1.0 - lr * wd as f64;
                } else {
                    gi += wd as f64 * p[i];
                }
                m[i] = b1 * m[i] + (1.0 - b1) * gi;
                v[i] = b2 * v[i] + (1.0 - b2) * gi * gi;
                let mhat = m[i] / (1.0 - b1.powi(step as i32));
                let vhat = v[i] / (1.0 - b2.powi(step as i32));
                p[i] -= lr * mhat / (vhat.sqrt() + eps);
            }
        }
        assert_close("adam params", &read(&ctx, &bp), &p);
        assert_close("adam m", &read(&ctx, &bm), &m);
        assert_close("adam v", &read(&ctx, &bv), &v);
    }
}

// ---- errors and the runtime surface ------------------------------------------------------

#[test]
fn cpu_rejects_bad_shapes_foreign_buffers_and_overlaps() {
    let ctx = Context::cpu();
    let other = Context::cpu();
    let ops = ctx.ops();
    let a = upload(&ctx, &[1.0; 6]);
    let b = upload(&ctx, &[1.0; 6]);
    let short = upload(&ctx, &[1.0; 5]);
    let foreign = upload(&other, &[1.0; 6]);

    let shape = |r: rnn::Result<()>| assert!(matches!(r, Err(Error::Shape { .. })), "{r:?}");
    shape(ops.add(a.view(), short.view(), b.view()));
    shape(ops.gemm(Gemm::new(2, 3, 2), a.view(), b.view(), short.view()));
    shape(ops.softmax(a.view(), b.view(), 4, 2));
    shape(ops.sum_rows(a.view(), short.view(), 2, 3, 0.0));
    shape(ops.lstm_cell_forward(a.view(), b.view(), b.view(), b.view(), 1, 2));
    shape(ops.upload(a.view(), &[1.0; 3]));
    shape(ops.download(a.view(), &mut [0.0; 2]));

    let foreign_err =
        |r: rnn::Result<()>| assert!(matches!(r, Err(Error::ForeignBuffer(_))), "{r:?}");
    foreign_err(ops.add(a.view(), foreign.view(), b.view()));
    foreign_err(ops.fill(foreign.view(), 0.0));
    foreign_err(ops.copy(a.view(), foreign.view()));
    foreign_err(ops.download(foreign.view(), &mut [0.0; 6]));

    // An output partially overlapping an input, and in-place where the op does not allow it.
    let invalid =
        |r: rnn::Result<()>| assert!(matches!(r, Err(Error::InvalidArgument(_))), "{r:?}");
    invalid(ops.add(
        a.slice(0, 4).unwrap(),
        b.slice(0, 4).unwrap(),
        a.slice(1, 4).unwrap(),
    ));
    invalid(ops.copy(a.view(), a.view()));
    invalid(ops.axpy(1.0, a.view(), a.view()));
    let (s0, s1) = (upload(&ctx, &[0.0; 6]), upload(&ctx, &[0.0; 2]));
    invalid(ops.mse(
        a.view(),
        b.view(),
        s0.view(),
        s0.slice(0, 2).unwrap(),
        2,
        3,
        1.0,
    ));
    invalid(ops.adam_step(
        a.view(),
        b.view(),
        s0.view(),
        s0.view(),
        AdamStep {
            lr: 0.1,
            beta1: 0.9,
            beta2: 0.99,
            eps: 1e-8,
            weight_decay: 0.0,
            decoupled: false,
            step: 1,
        },
    ));
    invalid(ops.adam_step(
        a.view(),
        b.view(),
        s0.view(),
        upload(&ctx, &[0.0; 6]).view(),
        AdamStep {
            lr: 0.1,
            beta1: 0.9,
            beta2: 0.99,
            eps: 1e-8,
            weight_decay: 0.0,
            decoupled: false,
            step: 0,
        },
    ));
    let _ = s1;
}

#[test]
fn cpu_runtime_surface() {
    let ctx = Context::cpu();
    let ops = ctx.ops();
    ops.warm_up().unwrap();
    ops.synchronize().unwrap();
    let err = ops.alloc(usize::MAX / 8);
    assert!(
        matches!(&err, Err(Error::OutOfMemory { device, requested, .. }) if device == "cpu" && *requested > 0),
        "{err:?}"
    );
    let src = rnn::KernelSource::new(rnn::Dialect::OpenCl, "__kernel void k() {}", "k");
    assert!(matches!(ops.compile(&src), Err(Error::Unsupported { .. })));
    // Zero-length views are fine everywhere.
    let e = ctx.alloc(0).unwrap();
    ops.add(e.view(), e.view(), e.view()).unwrap();
    ops.gemm(Gemm::new(0, 0, 3), e.view(), e.view(), e.view())
        .unwrap();
}

#[test]
fn cpu_concurrent_ops_share_buffers() {
    // Two threads run ops over views of the same two buffers in opposite roles; the one-lock-
    // per-buffer, address-ordered locking must not deadlock and must give exact results.
    let ctx = Context::cpu();
    let n = 50_000;
    let x = upload(&ctx, &vec![1.0; 2 * n]);
    let y = upload(&ctx, &vec![2.0; 2 * n]);
    std::thread::scope(|s| {
        s.spawn(|| {
            for _ in 0..50 {
                ctx.ops()
                    .add(
                        x.slice(0, n).unwrap(),
                        y.slice(0, n).unwrap(),
                        y.slice(n, n).unwrap(),
                    )
                    .unwrap();
            }
        });
        s.spawn(|| {
            for _ in 0..50 {
                ctx.ops()
                    .add(
                        y.slice(0, n).unwrap(),
                        x.slice(0, n).unwrap(),
                        x.slice(n, n).unwrap(),
                    )
                    .unwrap();
            }
        });
    });
    assert!(read(&ctx, &x)[n..].iter().all(|&v| v == 3.0));
    assert!(read(&ctx, &y)[n..].iter().all(|&v| v == 3.0));
}
