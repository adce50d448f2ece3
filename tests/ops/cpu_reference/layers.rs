//! The layer ops (dropout and the random state) against references written here.

use super::*;
use rnn::ops::IndexedRows;
use rnn::ops::LayerNormBackward;
use rnn::ops::LayerNormForward;
use rnn::ops::{DropoutMask, LayerNormGrads, LayerNormParams, MatShape};
use rnn::ops::{RNG_STATE_LEN, dropout_keeps, rng_state_values};

/// The documented mask, transcribed from docs/kernel-abi.md independently of the crate.
fn keep_ref(seed: u64, counter: u32, stream: u32, i: u32, p: f32) -> bool {
    fn mix(mut x: u32) -> u32 {
        x ^= x >> 16;
        x = x.wrapping_mul(0x7feb352d);
        x ^= x >> 15;
        x = x.wrapping_mul(0x846ca68b);
        x ^ (x >> 16)
    }
    let (lo, hi) = (seed as u32, (seed >> 32) as u32);
    let k0 = mix(lo ^ mix(hi ^ mix(counter ^ mix(stream ^ 0x9e3779b9))));
    let k1 = mix(k0 ^ 0x85ebca6b);
    let h = mix(mix(i ^ k0).wrapping_add(k1));
    (h >> 8) >= (p * 16_777_216.0) as u32
}

proptest! {
    #![proptest_config(cfg())]

    #[test]
    fn cpu_dropout_mask_scale_and_statistics(
        n in length(),
        p in prop_oneof![Just(0.0f32), Just(1.0f32), 0.05f32..0.95],
        seed in any::<u64>(),
        counter in prop_oneof![Just(0u32), any::<u32>()],
        stream in any::<u32>(),
        in_place in any::<bool>(),
    ) {
        let ctx = Context::cpu();
        let ops = ctx.ops();
        let mut r = rng(seed);
        let x = r.vec(n, 0.5, 2.0);
        let state = rng_state_values(seed, counter);
        let bs = upload(&ctx, &state);
        let bx = upload(&ctx, &x);
        let out = if in_place {
            ops.dropout(bx.view(), bx.view(), DropoutMask::new(bs.view(), stream, p)).unwrap();
            read(&ctx, &bx)
        } else {
            let by = poisoned(&ctx, n);
            ops.dropout(bx.view(), by.view(), DropoutMask::new(bs.view(), stream, p)).unwrap();
            read(&ctx, &by)
        };
        let scale = 1.0 / (1.0 - p);
        let mut dropped = 0usize;
        for i in 0..n {
            let keep = keep_ref(seed, counter, stream, i as u32, p);
            prop_assert_eq!(keep, dropout_keeps(&state, stream, i as u32, p));
            let want = if keep { x[i] * scale } else { 0.0 };
            prop_assert_eq!(out[i].to_bits(), want.to_bits(), "element {}", i);
            dropped += !keep as usize;
        }
        // The drop rate is p within 6 binomial standard deviations (or exactly 0 / all).
        let sd = (n as f64 * p as f64 * (1.0 - p as f64)).sqrt();
        prop_assert!((dropped as f64 - n as f64 * p as f64).abs() <= 6.0 * sd + 1e-9,
            "{} of {} dropped at p {}", dropped, n, p);
        // The state is only read.
        prop_assert_eq!(read(&ctx, &bs), state.to_vec());
    }
}

#[test]
fn cpu_dropout_masks_differ_by_step_and_stream() {
    let ctx = Context::cpu();
    let ops = ctx.ops();
    let n = 4096;
    let x = vec![1.0f32; n];
    let bx = upload(&ctx, &x);
    let mask = |counter: u32, stream: u32| {
        let bs = upload(&ctx, &rng_state_values(7, counter));
        let by = poisoned(&ctx, n);
        ops.dropout(
            bx.view(),
            by.view(),
            DropoutMask::new(bs.view(), stream, 0.5),
        )
        .unwrap();
        read(&ctx, &by)
    };
    let a = mask(0, 0);
    assert_eq!(a, mask(0, 0), "same state and stream, same mask");
    for other in [mask(1, 0), mask(0, 1), mask(0, 256)] {
        let same = a.iter().zip(&other).filter(|(x, y)| x == y).count();
        // Independent masks at p = 0.5 agree on about half of the elements.
        assert!((1700..2400).contains(&same), "{same} of {n} equal");
    }
}

#[test]
fn cpu_rng_advance_carries_and_dropout_rejects_bad_arguments() {
    let ctx = Context::cpu();
    let ops = ctx.ops();
    for (counter, want) in [
        (0u32, 1u32),
        (0xffff, 0x1_0000),
        (0x1_ffff, 0x2_0000),
        (u32::MAX, 0),
    ] {
        let b = upload(&ctx, &rng_state_values(0x0123_4567_89ab_cdef, counter));
        ops.rng_advance(b.view()).unwrap();
        assert_eq!(
            read(&ctx, &b),
            rng_state_values(0x0123_4567_89ab_cdef, want).to_vec()
        );
    }
    let s = upload(&ctx, &[0.0; RNG_STATE_LEN]);
    let x = upload(&ctx, &[1.0; 8]);
    let y = poisoned(&ctx, 8);
    for p in [-0.1, 1.1, f32::NAN] {
        let err = ops
            .dropout(x.view(), y.view(), DropoutMask::new(s.view(), 0, p))
            .unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    }
    let short = upload(&ctx, &[0.0; 5]);
    assert!(
        ops.dropout(x.view(), y.view(), DropoutMask::new(short.view(), 0, 0.5))
            .is_err()
    );
    assert!(ops.rng_advance(short.view()).is_err());
    let y7 = poisoned(&ctx, 7);
    assert!(matches!(
        ops.dropout(x.view(), y7.view(), DropoutMask::new(s.view(), 0, 0.5)),
        Err(Error::Shape { .. })
    ));
}

/// Layer norm in f64: `(y, stats, dx, dweight, dbias)`.
#[allow(clippy::type_complexity)]
fn layer_norm_ref(
    x: &[f32],
    w: &[f32],
    b: &[f32],
    dy: &[f32],
    rows: usize,
    cols: usize,
    eps: f64,
) -> (Vec<f64>, Vec<f64>, Vec<f64>, Vec<f64>, Vec<f64>) {
    let (mut y, mut st, mut dx) = (
        vec![0.0; rows * cols],
        vec![0.0; 2 * rows],
        vec![0.0; rows * cols],
    );
    let (mut dw, mut db) = (vec![0.0; cols], vec![0.0; cols]);
    let n = cols as f64;
    for r in 0..rows {
        let xr: Vec<f64> = x[r * cols..(r + 1) * cols]
            .iter()
            .map(|&v| v as f64)
            .collect();
        let mean = xr.iter().sum::<f64>() / n;
        let var = xr.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
        let rstd = 1.0 / (var + eps).sqrt();
        st[2 * r] = mean;
        st[2 * r + 1] = rstd;
        let xhat: Vec<f64> = xr.iter().map(|v| (v - mean) * rstd).collect();
        let g: Vec<f64> = (0..cols)
            .map(|c| dy[r * cols + c] as f64 * w[c] as f64)
            .collect();
        let m1 = g.iter().sum::<f64>() / n;
        let m2 = g.iter().zip(&xhat).map(|(g, h)| g * h).sum::<f64>() / n;
        for c in 0..cols {
            y[r * cols + c] = xhat[c] * w[c] as f64 + b[c] as f64;
            dx[r * cols + c] = rstd * (g[c] - m1 - xhat[c] * m2);
            dw[c] += dy[r * cols + c] as f64 * xhat[c];
            db[c] += dy[r * cols + c] as f64;
        }
    }
    (y, st, dx, dw, db)
}

proptest! {
    #![proptest_config(cfg())]

    #[test]
    fn cpu_layer_norm((rows, cols) in shape(), offset in prop_oneof![Just(0.0f32), Just(50.0f32)], seed in any::<u64>()) {
        let ctx = Context::cpu();
        let ops = ctx.ops();
        let mut r = rng(seed);
        // A large common offset checks that the variance is computed around the mean.
        let mut x: Vec<f32> = r.vec(rows * cols, -2.0, 2.0).iter().map(|v| v + offset).collect();
        // Every row spreads at least +-1.5 around the offset: f32 inputs near 50 carry ~4e-6 of
        // rounding, which a row of nearly equal values would turn into an arbitrarily large
        // relative error of x - mean in any f32 implementation (PyTorch's included).
        if cols >= 2 {
            for row in x.chunks_mut(cols) {
                row[0] = offset - 1.5;
                row[1] = offset + 1.5;
            }
        }
        let (w, b) = (r.vec(cols, 0.5, 1.5), r.vec(cols, -1.0, 1.0));
        let dy = r.vec(rows * cols, -1.0, 1.0);
        let (y, st, dx, dw, db) = layer_norm_ref(&x, &w, &b, &dy, rows, cols, 1e-5);
        let (bx, bw, bb, bdy) = (upload(&ctx, &x), upload(&ctx, &w), upload(&ctx, &b), upload(&ctx, &dy));
        let (by, bst) = (poisoned(&ctx, rows * cols), poisoned(&ctx, 2 * rows));
        ops.layer_norm_forward(LayerNormForward::new(bx.view(), LayerNormParams::new(bw.view(), bb.view()), by.view(), bst.view(), MatShape::new(rows, cols), 1e-5)).unwrap();
        assert_close("layer_norm y", &read(&ctx, &by), &y);
        assert_close("layer_norm stats", &read(&ctx, &bst), &st);
        let (bdx, bdw, bdb) = (poisoned(&ctx, rows * cols), poisoned(&ctx, cols), poisoned(&ctx, cols));
        ops.layer_norm_backward(LayerNormBackward::new(bdy.view(), bx.view(), bw.view(), bst.view(), LayerNormGrads::new(bdx.view(), bdw.view(), bdb.view()), MatShape::new(rows, cols))).unwrap();
        // dx cancels (its three terms sum to ~0 for constant dy), so bound it by its terms.
        let got = read(&ctx, &bdx);
        let scale = dx.iter().map(|v| v * v).sum::<f64>().sqrt().max(1e-3 * (rows * cols) as f64);
        let err = got.iter().zip(&dx).map(|(&g, w)| (g as f64 - w).powi(2)).sum::<f64>().sqrt() / scale;
        prop_assert!(err < 1e-4, "layer_norm dx rel err {}", err);
        assert_close("layer_norm dweight", &read(&ctx, &bdw), &dw);
        assert_close("layer_norm dbias", &read(&ctx, &bdb), &db);
    }
}

#[test]
fn cpu_layer_norm_rejects_bad_shapes() {
    let ctx = Context::cpu();
    let ops = ctx.ops();
    let x = upload(&ctx, &[1.0; 12]);
    let w = upload(&ctx, &[1.0; 4]);
    let y = poisoned(&ctx, 12);
    let st = poisoned(&ctx, 6);
    ops.layer_norm_forward(LayerNormForward::new(
        x.view(),
        LayerNormParams::new(w.view(), w.view()),
        y.view(),
        st.view(),
        MatShape::new(3, 4),
        1e-5,
    ))
    .unwrap();
    let short = poisoned(&ctx, 5);
    let err = ops
        .layer_norm_forward(LayerNormForward::new(
            x.view(),
            LayerNormParams::new(w.view(), w.view()),
            y.view(),
            short.view(),
            MatShape::new(3, 4),
            1e-5,
        ))
        .unwrap_err();
    assert!(matches!(err, Error::Shape { .. }), "{err}");
    let err = ops
        .layer_norm_forward(LayerNormForward::new(
            x.view(),
            LayerNormParams::new(w.view(), w.view()),
            x.view(),
            st.view(),
            MatShape::new(3, 4),
            1e-5,
        ))
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
}

proptest! {
    #![proptest_config(cfg())]

    #[test]
    fn cpu_scatter_add_rows_accumulates_repeated_indices(
        n in 1usize..300, table in 1usize..12, cols in prop_oneof![1usize..20, 100usize..200], seed in any::<u64>()
    ) {
        let ctx = Context::cpu();
        let ops = ctx.ops();
        let mut r = rng(seed);
        let src = r.vec(n * cols, -1.0, 1.0);
        // Few table rows: most ids repeat.
        let idx: Vec<f32> = (0..n).map(|_| r.below(table) as f32).collect();
        let d0 = r.vec(table * cols, -1.0, 1.0);
        let mut want: Vec<f64> = to64(&d0);
        for (i, &v) in idx.iter().enumerate() {
            for c in 0..cols {
                want[v as usize * cols + c] += src[i * cols + c] as f64;
            }
        }
        let (bs, bi, bd) = (upload(&ctx, &src), ids(&ctx, &idx), upload(&ctx, &d0));
        ops.scatter_add_rows(IndexedRows::new(bs.view(), bi.view(), bd.view(), cols)).unwrap();
        assert_close("scatter_add_rows", &read(&ctx, &bd), &want);
    }
}

#[test]
fn cpu_scatter_add_rows_rejects_invalid_indices_before_writing() {
    let ctx = Context::cpu();
    let ops = ctx.ops();
    let src = upload(&ctx, &[1.0; 6]);
    let d0 = [0.5f32; 4];
    let dst = upload(&ctx, &d0);
    for bad in [2.0, 3.0, 16_777_217.0, 4_294_967_296.0] {
        let idx = ids(&ctx, &[0.0, 1.0, bad]);
        let err = ops
            .scatter_add_rows(IndexedRows::new(src.view(), idx.view(), dst.view(), 2))
            .unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
        assert_eq!(read(&ctx, &dst), d0.to_vec());
    }
    let idx = ids(&ctx, &[0.0, 1.0, 1.0]);
    let odd = upload(&ctx, &[0.0; 5]);
    assert!(matches!(
        ops.scatter_add_rows(IndexedRows::new(src.view(), idx.view(), odd.view(), 2)),
        Err(Error::Shape { .. })
    ));
}
