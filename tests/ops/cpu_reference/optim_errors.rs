//! Optimizer steps, error paths, the runtime surface and concurrent use.

use super::*;
use rnn::ops::LstmCellForward;
use rnn::ops::Mse;
use rnn::ops::SeqShape;
use rnn::ops::{LossOutputs, MatShape, OptimBuffers};

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
        let s = SgdStep { momentum, weight_decay: wd, nesterov };
        let state = optimizer_state(ctx.ops(), 0.05).unwrap();
        // Parameters away from zero, so a relative error of one element stays meaningful.
        let p0 = r.vec(n, 1.0, 2.0);
        let (bp, bv) = (upload(&ctx, &p0), upload(&ctx, &vec![0.0; n]));
        let (mut p, mut v) = (to64(&p0), vec![0.0f64; n]);
        // The velocity sums gradients of either sign, like Adam's m: its f32 rounding scales
        // with the sum of the terms' magnitudes, which can dwarf a cancelling velocity.
        let mut v_abs = vec![0.0f64; n];
        for _ in 0..3 {
            let g = r.vec(n, -1.0, 1.0);
            ctx.ops().sgd_step(OptimBuffers::new(bp.view(), upload(&ctx, &g).view(), state.view()), bv.view(), s).unwrap();
            for i in 0..n {
                let gi = g[i] as f64 + wd as f64 * p[i];
                let step = if momentum == 0.0 {
                    gi
                } else {
                    v[i] = momentum as f64 * v[i] + gi;
                    v_abs[i] = momentum as f64 * v_abs[i] + gi.abs();
                    if nesterov { gi + momentum as f64 * v[i] } else { v[i] }
                };
                p[i] -= 0.05f32 as f64 * step;
            }
        }
        assert_close("sgd params", &read(&ctx, &bp), &p);
        if momentum != 0.0 {
            assert_within_scale("sgd velocity", &read(&ctx, &bv), &v, &v_abs);
        }
        // SGD has no bias corrections: 1 - 0^t = 1.
        prop_assert_eq!(read(&ctx, &state), vec![0.05, 3.0, 1.0, 1.0]);
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
        // m sums gradients of either sign: its f32 rounding scales with the sum of the terms'
        // magnitudes, which can dwarf a cancelling m (n = 1 especially).
        let mut m_abs = vec![0.0f64; n];
        // The f32 hyper-parameters, widened, so the reference sees exactly what the op sees.
        let (lr, b1, b2, eps) = (1e-2f32 as f64, 0.9f32 as f64, 0.999f32 as f64, 1e-8f32 as f64);
        let state = optimizer_state(ctx.ops(), lr as f32).unwrap();
        for step in 1..=3u64 {
            let g = r.vec(n, -1.0, 1.0);
            let s = AdamStep { beta1: b1 as f32, beta2: b2 as f32, eps: eps as f32, weight_decay: wd, decoupled };
            ctx.ops().adam_step(OptimBuffers::new(bp.view(), upload(&ctx, &g).view(), state.view()), bm.view(), bv.view(), s).unwrap();
            for i in 0..n {
                let mut gi = g[i] as f64;
                if decoupled {
                    p[i] *= 1.0 - lr * wd as f64;
                } else {
                    gi += wd as f64 * p[i];
                }
                m[i] = b1 * m[i] + (1.0 - b1) * gi;
                m_abs[i] = b1 * m_abs[i] + (1.0 - b1) * gi.abs();
                v[i] = b2 * v[i] + (1.0 - b2) * gi * gi;
                let mhat = m[i] / (1.0 - b1.powi(step as i32));
                let vhat = v[i] / (1.0 - b2.powi(step as i32));
                p[i] -= lr * mhat / (vhat.sqrt() + eps);
            }
        }
        assert_close("adam params", &read(&ctx, &bp), &p);
        assert_within_scale("adam m", &read(&ctx, &bm), &m, &m_abs);
        assert_close("adam v", &read(&ctx, &bv), &v);
    }
}

/// `got` against `want` with the error measured against `scale`, the running sum of the terms'
/// magnitudes: the bound f32 rounding of a signed sum actually obeys.
fn assert_within_scale(what: &str, got: &[f32], want: &[f64], scale: &[f64]) {
    assert!(got.iter().all(|x| x.is_finite()), "{what}: non-finite");
    let diff: f64 = got
        .iter()
        .zip(want)
        .map(|(g, w)| (*g as f64 - w).powi(2))
        .sum();
    let scale: f64 = scale.iter().map(|x| x * x).sum();
    assert!(
        diff.sqrt() < TOL * scale.sqrt(),
        "{what}: error {} vs scale {}",
        diff.sqrt(),
        scale.sqrt()
    );
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
    shape(ops.sum_rows(a.view(), short.view(), MatShape::new(2, 3), 0.0));
    shape(ops.lstm_cell_forward(LstmCellForward::new(
        a.view(),
        b.view(),
        b.view(),
        b.view(),
        SeqShape::step(1, 2),
    )));
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
    invalid(ops.mse(Mse::new(
        a.view(),
        b.view(),
        LossOutputs::new(s0.view(), s0.slice(0, 2).unwrap(), None),
        MatShape::new(2, 3),
        1.0,
    )));
    let adam = AdamStep {
        beta1: 0.9,
        beta2: 0.99,
        eps: 1e-8,
        weight_decay: 0.0,
        decoupled: false,
    };
    let state = optimizer_state(ops, 0.1).unwrap();
    // m and v the same buffer.
    invalid(ops.adam_step(
        OptimBuffers::new(a.view(), b.view(), state.view()),
        s0.view(),
        s0.view(),
        adam,
    ));
    // The state inside the moments.
    let (m, v) = (upload(&ctx, &[0.0; 6]), upload(&ctx, &[0.0; 6]));
    invalid(ops.adam_step(
        OptimBuffers::new(a.view(), b.view(), m.slice(1, 4).unwrap()),
        m.view(),
        v.view(),
        adam,
    ));
    // Totals overlapping the row losses.
    invalid(ops.mse(Mse::new(
        a.view(),
        b.view(),
        LossOutputs::new(s0.view(), s1.view(), Some(s1.view())),
        MatShape::new(2, 3),
        1.0,
    )));
    // A state of the wrong length is a shape error.
    assert!(matches!(
        ops.adam_step(
            OptimBuffers::new(a.view(), b.view(), s1.view()),
            m.view(),
            v.view(),
            adam
        ),
        Err(Error::Shape { .. })
    ));
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
    // The message reports the host's memory, or leaves it out; never "0 bytes free of 0".
    let msg = err.unwrap_err().to_string();
    assert!(!msg.contains("free of 0"), "{msg}");
    if std::fs::read_to_string("/proc/meminfo").is_ok_and(|m| m.contains("MemAvailable:")) {
        assert!(msg.contains("bytes free of"), "{msg}");
    }
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
    // `b[n..] = a[..n] + b[..n]`, 50 times.
    let add_into = |a: &Buffer, b: &Buffer| {
        for _ in 0..50 {
            ctx.ops()
                .add(
                    a.slice(0, n).unwrap(),
                    b.slice(0, n).unwrap(),
                    b.slice(n, n).unwrap(),
                )
                .unwrap();
        }
    };
    std::thread::scope(|s| {
        s.spawn(|| add_into(&x, &y));
        s.spawn(|| add_into(&y, &x));
    });
    assert!(read(&ctx, &x)[n..].iter().all(|&v| v == 3.0));
    assert!(read(&ctx, &y)[n..].iter().all(|&v| v == 3.0));
}
