//! Elementwise ops and GEMM (all transposes, alpha/beta, views of one buffer).

use super::*;

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
        // Mid-sized, wide C: one block of columns per thread.
        (170usize..240, 170usize..240, 170usize..240),
        // Mid-sized, narrow C: one block of rows per thread.
        (300usize..520, 9usize..100, 100usize..200),
        // Over 2^24 multiply-adds: the gemm crate's own threading.
        (250usize..300, 250usize..300, 260usize..300),
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
