//! Reductions, gradient clipping, gather and one-hot.

use super::*;
use rnn::ops::IndexedRows;
use rnn::ops::MatShape;

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
        ops.sum_rows(bx.view(), bo.view(), MatShape::new(rows, cols), beta).unwrap();
        let want: Vec<f64> = (0..cols).map(|c| {
            let s: f64 = (0..rows).map(|rr| x[rr * cols + c] as f64).sum();
            if beta == 0.0 { s } else { beta as f64 * o0[c] as f64 + s }
        }).collect();
        assert_close("sum_rows", &read(&ctx, &bo), &want);

        let o0 = init(rows, &mut r);
        let bo = upload(&ctx, &o0);
        ops.sum_cols(bx.view(), bo.view(), MatShape::new(rows, cols), beta).unwrap();
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
        let (bs, bi, bd) = (upload(&ctx, &src), ids(&ctx, &idx), poisoned(&ctx, nidx * cols));
        ctx.ops().gather_rows(IndexedRows::new(bs.view(), bi.view(), bd.view(), cols)).unwrap();
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
    for bad in [2.0, 3.0, 16_777_217.0, 4_294_967_296.0] {
        let idx = ids(&ctx, &[bad]);
        let err = ctx
            .ops()
            .gather_rows(IndexedRows::new(src.view(), idx.view(), dst.view(), 2));
        assert!(
            matches!(err, Err(Error::InvalidArgument(_))),
            "{bad}: {err:?}"
        );
    }
}
