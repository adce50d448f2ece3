//! The 16-bit float types (bf16, f16) on every backend (the CPU one through `cpu_reference`):
//! conversions against the `half` crate (every bf16 and f16 pattern, a sample of f32 ones),
//! which kernels-common/half_convert.h must match bit for bit; the elementwise ops and
//! activations over bf16/f16 views; loss scaling and the mixed-precision optimizer steps.

use half::{bf16, f16};
use rnn::ops::prelude::*;
use rnn::ops::{Activated, MatShape, MixedUpdate, OptimBuffers, ScaleUpdate};
use rnn::{Activation, AdamStep, DType, Error, SgdStep};

use super::contexts;
use crate::support::Target;

/// A NaN poison for 16-bit outputs that no conversion produces (a signalling NaN pattern).
pub(crate) const POISON16: u16 = 0x7c01;

/// Every 16-bit pattern.
fn all_patterns() -> Vec<u16> {
    (0..=u16::MAX).collect()
}

/// f32 bit patterns that reach every rounding case: a stride over all 2^32 patterns (every
/// exponent, both signs, NaNs and subnormals), the halfway points and their neighbours around
/// every bf16 and f16 value in a range, and the values at the ends of f16's range.
fn f32_sample() -> Vec<f32> {
    let mut out: Vec<f32> = (0..1u64 << 20)
        .map(|i| f32::from_bits((i * 4099 + (i >> 7)) as u32))
        .collect();
    for h in (0..=u16::MAX).step_by(7) {
        let b = bf16::from_bits(h).to_f32().to_bits();
        // bf16 ties sit at bit 15 of the f32 pattern, f16 ties at bit 12 of the mantissa.
        for delta in [0x7fffu32, 0x8000, 0x8001] {
            out.push(f32::from_bits(b.wrapping_add(delta)));
        }
        let f = f16::from_bits(h).to_f32();
        if f.is_finite() {
            let fb = f.to_bits();
            for delta in [0xfffu32, 0x1000, 0x1001, 0x3000] {
                out.push(f32::from_bits(fb.wrapping_add(delta)));
            }
        }
    }
    out.extend([
        65504.0,
        65519.99,
        65520.0,
        -65520.0,
        f32::MAX,
        f32::MIN_POSITIVE,
        5.960_464_5e-8,
        2.980_232_2e-8,
        2.980_232_4e-8,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::from_bits(0x7f80_0001),
        f32::from_bits(0xffc0_1234),
        -0.0,
    ]);
    out
}

/// `got` equals `want` bit for bit, or both are NaN (a NaN's payload may change when a backend
/// stores it as f32).
fn same_f32(got: f32, want: f32) -> bool {
    got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan())
}

/// `cast` between f32, bf16 and f16, every pattern of the 16-bit types and the f32 sample,
/// against the `half` crate; the outputs are poisoned first.
pub fn conversions(t: Target) {
    for ctx in contexts(t, "conversions") {
        let ops = ctx.ops();
        let patterns = all_patterns();
        let n = patterns.len();
        let wide = ops.alloc(n).unwrap();
        for (dtype, to_f32) in [
            (
                DType::Bf16,
                (|h| bf16::from_bits(h).to_f32()) as fn(u16) -> f32,
            ),
            (DType::F16, |h| f16::from_bits(h).to_f32()),
        ] {
            let src = ops.alloc_as(dtype, n).unwrap();
            ops.upload_bytes(src.view(), &bytes_of(&patterns)).unwrap();
            ops.fill(wide.view(), f32::from_bits(0x7fc0_beef)).unwrap();
            ops.cast(src.view(), wide.view()).unwrap();
            let mut got = vec![0.0f32; n];
            ops.download(wide.view(), &mut got).unwrap();
            for (&h, &g) in patterns.iter().zip(&got) {
                assert!(
                    same_f32(g, to_f32(h)),
                    "{}: {dtype} {h:#06x} -> f32 {:#010x}, want {:#010x}",
                    ctx.id(),
                    g.to_bits(),
                    to_f32(h).to_bits()
                );
            }

            // To the other 16-bit type, through f32.
            let other = if dtype == DType::Bf16 {
                DType::F16
            } else {
                DType::Bf16
            };
            let dst = ops.alloc_as(other, n).unwrap();
            ops.upload_bytes(dst.view(), &bytes_of(&vec![POISON16; n]))
                .unwrap();
            ops.cast(src.view(), dst.view()).unwrap();
            let got = download_bits(ops, dst.view());
            for (&h, &g) in patterns.iter().zip(&got) {
                let want = round_bits(other, to_f32(h));
                assert_eq!(g, want, "{}: {dtype} {h:#06x} -> {other}", ctx.id());
            }
        }

        cast_offsets(ops, &ctx.id().to_string());

        let sample = f32_sample();
        let m = sample.len();
        let src = ops.alloc(m + 3).unwrap();
        let view = src.slice(3, m).unwrap();
        ops.upload(view, &sample).unwrap();
        for dtype in [DType::Bf16, DType::F16] {
            let dst = ops.alloc_as(dtype, m + 1).unwrap();
            ops.upload_bytes(dst.view(), &bytes_of(&vec![POISON16; m + 1]))
                .unwrap();
            let out = dst.slice(1, m).unwrap();
            ops.cast(view, out).unwrap();
            let got = download_bits(ops, dst.view());
            assert_eq!(got[0], POISON16, "{}: a write before the view", ctx.id());
            for (&x, &g) in sample.iter().zip(&got[1..]) {
                assert_eq!(
                    g,
                    round_bits(dtype, x),
                    "{}: f32 {:#010x} -> {dtype}",
                    ctx.id(),
                    x.to_bits()
                );
            }
        }
    }
}

/// (source offset, destination offset, length) of [`cast_offsets`]: both views on a group of
/// four (the GPU casts' vector loop) with tails of 0 to 3, one or both off it (their scalar
/// loop), and views shorter than a group.
const CAST_PATHS: [(usize, usize, usize); 9] = [
    (0, 0, 4103),
    (0, 0, 4098),
    (4, 8, 33),
    (8, 4, 4096),
    (1, 0, 1001),
    (0, 2, 77),
    (3, 1, 6),
    (2, 2, 517),
    (0, 0, 3),
];

/// `cast` between every pair of float types over the views of [`CAST_PATHS`], each element
/// against the `half` crate, the elements around the destination view poisoned and kept.
fn cast_offsets(ops: &dyn Ops, id: &str) {
    let xs = values(4200, 7, -70_000.0, 70_000.0);
    let types = [DType::F32, DType::Bf16, DType::F16];
    // The source's elements as stored (rounded into a 16-bit type), and the buffer holding them.
    let source = |dtype: DType, x: &[f32]| {
        let b = ops.alloc_as(dtype, x.len()).unwrap();
        if dtype == DType::F32 {
            ops.upload(b.view(), x).unwrap();
            return (b, x.to_vec());
        }
        let bits: Vec<u16> = x.iter().map(|&v| round_bits(dtype, v)).collect();
        ops.upload_bytes(b.view(), &bytes_of(&bits)).unwrap();
        (b, bits.iter().map(|&h| to_f32(dtype, h)).collect())
    };
    // Stored bits of one element (f32 or 16-bit), and the poison of each type.
    let stored = |dtype: DType, x: f32| match dtype {
        DType::F32 => x.to_bits(),
        _ => round_bits(dtype, x) as u32,
    };
    for from in types {
        for to in types.into_iter().filter(|&t| t != from) {
            for (so, dof, n) in CAST_PATHS {
                let (src, stored_src) = source(from, &xs[..so + n + 1]);
                let len = dof + n + 2;
                let dst = ops.alloc_as(to, len).unwrap();
                let poison = if to == DType::F32 {
                    ops.fill(dst.view(), f32::from_bits(0x7fc0_beef)).unwrap();
                    0x7fc0_beef
                } else {
                    ops.upload_bytes(dst.view(), &bytes_of(&vec![POISON16; len]))
                        .unwrap();
                    POISON16 as u32
                };
                ops.cast(src.slice(so, n).unwrap(), dst.slice(dof, n).unwrap())
                    .unwrap();
                let got: Vec<u32> = if to == DType::F32 {
                    download(ops, dst.view())
                        .iter()
                        .map(|x| x.to_bits())
                        .collect()
                } else {
                    download_bits(ops, dst.view())
                        .iter()
                        .map(|&h| h as u32)
                        .collect()
                };
                for (i, &g) in got.iter().enumerate() {
                    let want = if (dof..dof + n).contains(&i) {
                        stored(to, stored_src[so + i - dof])
                    } else {
                        poison
                    };
                    assert_eq!(
                        g, want,
                        "{id}: cast {from} -> {to}, views at {so} and {dof} of {n}: element {i}"
                    );
                }
            }
        }
    }
}

/// `cast` takes float views only, of equal length, not overlapping.
pub fn cast_errors(t: Target) {
    for ctx in contexts(t, "cast_errors") {
        let ops = ctx.ops();
        let f = ops.alloc(4).unwrap();
        let h = ops.alloc_as(DType::Bf16, 4).unwrap();
        let u = ops.alloc_as(DType::U32, 4).unwrap();
        let e = ops.cast(u.view(), h.view()).unwrap_err();
        assert!(
            matches!(e, Error::DTypeMismatch { ref op, ref arg, found: DType::U32, .. }
                if op == "cast" && arg == "src"),
            "{e}"
        );
        let e = ops.cast(f.view(), u.view()).unwrap_err();
        assert!(
            matches!(e, Error::DTypeMismatch { ref arg, .. } if arg == "dst"),
            "{e}"
        );
        assert!(matches!(
            ops.cast(f.view(), h.slice(0, 3).unwrap()),
            Err(Error::Shape { .. })
        ));
        assert!(
            ops.cast(f.slice(0, 2).unwrap(), f.slice(1, 2).unwrap())
                .is_err()
        );
        // Empty views and the same type on both sides (a copy).
        ops.cast(f.slice(0, 0).unwrap(), h.slice(0, 0).unwrap())
            .unwrap();
        ops.upload(f.view(), &[1.0, 2.0, 3.0, 4.0]).unwrap();
        let g = ops.alloc(4).unwrap();
        ops.cast(f.view(), g.view()).unwrap();
        let mut back = [0.0; 4];
        ops.download(g.view(), &mut back).unwrap();
        assert_eq!(back, [1.0, 2.0, 3.0, 4.0]);
    }
}

/// `x` rounded to `dtype` (bf16 or f16), as bits.
pub(crate) fn round_bits(dtype: DType, x: f32) -> u16 {
    match dtype {
        DType::Bf16 => bf16::from_f32(x).to_bits(),
        _ => f16::from_f32(x).to_bits(),
    }
}

pub(crate) fn bytes_of(bits: &[u16]) -> Vec<u8> {
    bits.iter().flat_map(|b| b.to_ne_bytes()).collect()
}

/// The bits of a 16-bit view.
pub(crate) fn download_bits(ops: &dyn Ops, v: rnn::View<'_>) -> Vec<u16> {
    let mut bytes = vec![0u8; v.len() * 2];
    ops.download_bytes(v, &mut bytes).unwrap();
    bytes
        .chunks_exact(2)
        .map(|c| u16::from_ne_bytes([c[0], c[1]]))
        .collect()
}

/// Deterministic values in `lo..hi` (an LCG: the test needs variety, not quality).
pub(crate) fn values(n: usize, seed: u32, lo: f32, hi: f32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            lo + (hi - lo) * (s >> 8) as f32 / (1u32 << 24) as f32
        })
        .collect()
}

/// `n` elements of `b` from `off`.
fn part(b: &rnn::Buffer, off: usize, n: usize) -> rnn::View<'_> {
    b.slice(off, n).unwrap()
}

pub(crate) fn download(ops: &dyn Ops, v: rnn::View<'_>) -> Vec<f32> {
    let mut out = vec![0.0; v.len()];
    ops.download(v, &mut out).unwrap();
    out
}

/// `unscale_and_check` and `update_scale` against PyTorch's `GradScaler` rules, on the device
/// state, over a sequence of steps with and without inf/NaN gradients.
pub fn loss_scaling(t: Target) {
    for ctx in contexts(t, "loss_scaling") {
        let ops = ctx.ops();
        for n in [1usize, 1000, 70_000] {
            let g = values(n, n as u32, -1e3, 1e3);
            let grads = ops.alloc(n).unwrap();
            let scaler = rnn::ops::scaler_state(ops, 1024.0).unwrap();
            let flag = ops.alloc(1).unwrap();
            ops.upload(grads.view(), &g).unwrap();
            ops.fill(flag.view(), 7.0).unwrap();
            ops.unscale_and_check(grads.view(), scaler.view(), flag.view())
                .unwrap();
            // A power-of-two scale unscales exactly.
            let want: Vec<f32> = g.iter().map(|x| x / 1024.0).collect();
            assert_eq!(download(ops, grads.view()), want, "{}: n {n}", ctx.id());
            assert_eq!(download(ops, flag.view()), [0.0], "{}: n {n}", ctx.id());
            for bad in [f32::INFINITY, f32::NEG_INFINITY, f32::NAN] {
                ops.upload(grads.view(), &g).unwrap();
                ops.upload(grads.slice(n - 1, 1).unwrap(), &[bad]).unwrap();
                ops.unscale_and_check(grads.view(), scaler.view(), flag.view())
                    .unwrap();
                assert_eq!(download(ops, flag.view()), [1.0], "{}: {bad}", ctx.id());
            }
        }

        // The GradScaler rules over 9 steps, interval 3.
        let u = ScaleUpdate {
            growth: 2.0,
            backoff: 0.5,
            interval: 3,
        };
        let scaler = rnn::ops::scaler_state(ops, 8.0).unwrap();
        let flag = ops.alloc(1).unwrap();
        let (mut scale, mut clean) = (8.0f32, 0.0f32);
        for found in [0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.0] {
            ops.upload(flag.view(), &[found]).unwrap();
            ops.update_scale(scaler.view(), flag.view(), u).unwrap();
            if found != 0.0 {
                scale *= 0.5;
                clean = 0.0;
            } else if clean + 1.0 >= 3.0 {
                scale *= 2.0;
                clean = 0.0;
            } else {
                clean += 1.0;
            }
            assert_eq!(download(ops, scaler.view()), [scale, clean], "{}", ctx.id());
        }
        // A scale that would overflow stays.
        ops.upload(scaler.view(), &[f32::MAX, 2.0]).unwrap();
        ops.upload(flag.view(), &[0.0]).unwrap();
        ops.update_scale(scaler.view(), flag.view(), u).unwrap();
        assert_eq!(download(ops, scaler.view()), [f32::MAX, 0.0]);
        let bad = ScaleUpdate { interval: 0, ..u };
        assert!(ops.update_scale(scaler.view(), flag.view(), bad).is_err());
        let e = ops
            .unscale_and_check(
                grads_of(ops, DType::Bf16).view(),
                scaler.view(),
                flag.view(),
            )
            .unwrap_err();
        assert!(
            matches!(e, Error::DTypeMismatch { ref arg, .. } if arg == "grads"),
            "{e}"
        );
    }
}

fn grads_of(ops: &dyn Ops, dtype: DType) -> rnn::Buffer {
    ops.alloc_as(dtype, 4).unwrap()
}

/// `sgd_step_mixed` and `adam_step_mixed`: the f32 step of `sgd_step`/`adam_step` on the same
/// backend, with the new parameters rounded into the low copy (bit for bit the `half` crate's
/// rounding of the f32 result); with `found_inf` set, nothing changes.
pub fn mixed_optimizers(t: Target) {
    for ctx in contexts(t, "mixed_optimizers") {
        let ops = ctx.ops();
        // (n, type, offset of the f32 views, offset of the low copy): the GPU Adam step moves
        // groups of four where every view starts on one (tails of 1 and 2 here), and runs its
        // scalar loop where any does not (f32 views at 1, or only the low copy at 2).
        for (n, dtype, off, low_off) in [
            (1usize, DType::Bf16, 0usize, 0usize),
            (1001, DType::F16, 0, 0),
            (70_001, DType::Bf16, 0, 0),
            (1003, DType::Bf16, 1, 0),
            (1002, DType::F16, 0, 2),
            (518, DType::Bf16, 4, 4),
        ] {
            let p = values(n, 1, -1.0, 1.0);
            let g = values(n, 2, -1.0, 1.0);
            let m0 = values(n, 3, -0.1, 0.1);
            let v0 = values(n, 4, 0.0, 0.01);
            let state0 = [0.05f32, 4.0, -1.0, -1.0];
            let make_at = |x: &[f32], at: usize| {
                let b = ops.alloc(at + x.len()).unwrap();
                ops.upload(b.slice(at, x.len()).unwrap(), x).unwrap();
                b
            };
            let make = |x: &[f32]| make_at(x, 0);
            let sgd = SgdStep {
                momentum: 0.9,
                weight_decay: 0.01,
                nesterov: true,
            };
            let adam = AdamStep {
                beta1: 0.9,
                beta2: 0.999,
                eps: 1e-8,
                weight_decay: 0.01,
                decoupled: true,
            };
            for skip in [false, true] {
                for use_adam in [false, true] {
                    let (pr, gr, mr, vr, sr) =
                        (make(&p), make(&g), make(&m0), make(&v0), make(&state0));
                    let (pm, gm, mm, vm, sm) = (
                        make_at(&p, off),
                        make_at(&g, off),
                        make_at(&m0, off),
                        make_at(&v0, off),
                        make(&state0),
                    );
                    let low_len = low_off + n + 1;
                    let low = ops.alloc_as(dtype, low_len).unwrap();
                    ops.upload_bytes(low.view(), &bytes_of(&vec![POISON16; low_len]))
                        .unwrap();
                    let flag = make(&[if skip { 1.0 } else { 0.0 }]);
                    let mp = MixedUpdate::new(low.slice(low_off, n).unwrap(), flag.view());
                    let mixed = OptimBuffers::new(part(&pm, off, n), part(&gm, off, n), sm.view());
                    if use_adam {
                        if !skip {
                            let plain = OptimBuffers::new(pr.view(), gr.view(), sr.view());
                            ops.adam_step(plain, mr.view(), vr.view(), adam).unwrap();
                        }
                        ops.adam_step_mixed(mixed, part(&mm, off, n), part(&vm, off, n), adam, mp)
                            .unwrap();
                    } else {
                        if !skip {
                            let plain = OptimBuffers::new(pr.view(), gr.view(), sr.view());
                            ops.sgd_step(plain, mr.view(), sgd).unwrap();
                        }
                        ops.sgd_step_mixed(mixed, part(&mm, off, n), sgd, mp)
                            .unwrap();
                    }
                    let what = format!("{}: n {n} {dtype} adam {use_adam} skip {skip}", ctx.id());
                    // The mixed steps are scalar loops, the f32 Adam one vectorized: equal up to
                    // contraction of a multiply-add.
                    for (a, b) in [(&pm, &pr), (&mm, &mr), (&vm, &vr)] {
                        let (a, b) = (download(ops, part(a, off, n)), download(ops, b.view()));
                        let err = crate::support::rel_err(&a, &b);
                        assert!(err < 1e-6, "{what}: relative error {err}");
                    }
                    let (a, b) = (download(ops, sm.view()), download(ops, sr.view()));
                    assert!(crate::support::rel_err(&a, &b) < 1e-6, "{what}: state");
                    let bits = download_bits(ops, low.view());
                    let guards = bits[..low_off].iter().chain(&bits[low_off + n..]);
                    assert!(
                        guards.copied().all(|b| b == POISON16),
                        "{what}: a write outside the low view"
                    );
                    let bits = &bits[low_off..low_off + n];
                    if skip {
                        assert!(bits.iter().all(|&b| b == POISON16), "{what}");
                        assert_eq!(download(ops, sm.view()), state0, "{what}");
                        continue;
                    }
                    for (i, (&b, &x)) in bits
                        .iter()
                        .zip(&download(ops, part(&pm, off, n)))
                        .enumerate()
                    {
                        assert_eq!(b, round_bits(dtype, x), "{what}: low[{i}] of {x}");
                    }
                }
            }
            // The low copy is bf16 or f16 as long as the parameters, the flag one f32.
            let (pb, gb, sb, vel) = (make(&p), make(&g), make(&state0), make(&m0));
            let buffers = OptimBuffers::new(pb.view(), gb.view(), sb.view());
            let flag = make(&[0.0]);
            let wide = ops.alloc(n).unwrap();
            let e = ops
                .sgd_step_mixed(
                    buffers,
                    vel.view(),
                    sgd,
                    MixedUpdate::new(wide.view(), flag.view()),
                )
                .unwrap_err();
            assert!(
                matches!(e, Error::DTypeMismatch { ref arg, .. } if arg == "low"),
                "{e}"
            );
            let short = ops.alloc_as(dtype, n + 1).unwrap();
            let mp = MixedUpdate::new(short.view(), flag.view());
            assert!(ops.sgd_step_mixed(buffers, vel.view(), sgd, mp).is_err());
            assert_eq!(download(ops, sb.view()), state0, "no step after an error");
        }
    }
}

/// A T buffer holding `x` rounded (with two poisoned guard elements after the view).
fn upload_t(ops: &dyn Ops, dtype: DType, x: &[f32]) -> rnn::Buffer {
    let b = ops.alloc_as(dtype, x.len() + 2).unwrap();
    let mut bits: Vec<u16> = x.iter().map(|&v| round_bits(dtype, v)).collect();
    bits.extend([POISON16; 2]);
    ops.upload_bytes(b.view(), &bytes_of(&bits)).unwrap();
    b
}

/// The first `n` elements of a T buffer, as bits; the guards must be intact.
fn bits_of(ops: &dyn Ops, b: &rnn::Buffer, n: usize) -> Vec<u16> {
    let all = download_bits(ops, b.view());
    assert_eq!(&all[n..], [POISON16; 2], "a write past the view");
    all[..n].to_vec()
}

fn to_f32(dtype: DType, bits: u16) -> f32 {
    match dtype {
        DType::Bf16 => bf16::from_bits(bits).to_f32(),
        _ => f16::from_bits(bits).to_f32(),
    }
}

/// The elementwise ops and activations over bf16/f16 views: `scale`, `axpy`, `add` and `mul`
/// bit for bit the f32 arithmetic of the rounded inputs, rounded (no multiply-add contraction);
/// `activation`, `act_backward` and `bias_act_forward` against the CPU backend within one unit
/// in the last place of T (the f32 functions of the backends differ in their last bits, which
/// rounding to T can carry one place). Outputs are poisoned first.
pub fn elementwise_t(t: Target) {
    let cpu = rnn::Context::cpu();
    let cpu = cpu.ops();
    for ctx in contexts(t, "elementwise_t") {
        let ops = ctx.ops();
        for (dtype, rows, cols) in [
            (DType::Bf16, 3, 5),
            (DType::F16, 67, 129),
            (DType::Bf16, 300, 257),
        ] {
            let n = rows * cols;
            let what = format!("{}: {dtype} {rows}x{cols}", ctx.id());
            let a = values(n, 11, -3.0, 3.0);
            let b = values(n, 12, -3.0, 3.0);
            let ar: Vec<f32> = a
                .iter()
                .map(|&v| to_f32(dtype, round_bits(dtype, v)))
                .collect();
            let br: Vec<f32> = b
                .iter()
                .map(|&v| to_f32(dtype, round_bits(dtype, v)))
                .collect();
            let exact = |got: Vec<u16>, want: &dyn Fn(usize) -> f32, op: &str| {
                for (i, &g) in got.iter().enumerate() {
                    assert_eq!(g, round_bits(dtype, want(i)), "{what}: {op}[{i}]");
                }
            };
            let poison = vec![f32::NAN; n];
            for product in [false, true] {
                let (x, y, o) = (
                    upload_t(ops, dtype, &a),
                    upload_t(ops, dtype, &b),
                    upload_t(ops, dtype, &poison),
                );
                let (xv, yv, ov) = (
                    x.slice(0, n).unwrap(),
                    y.slice(0, n).unwrap(),
                    o.slice(0, n).unwrap(),
                );
                if product {
                    ops.mul(xv, yv, ov).unwrap();
                    exact(bits_of(ops, &o, n), &|i| ar[i] * br[i], "mul");
                    // In place.
                    ops.mul(xv, yv, xv).unwrap();
                    exact(bits_of(ops, &x, n), &|i| ar[i] * br[i], "mul in place");
                } else {
                    ops.add(xv, yv, ov).unwrap();
                    exact(bits_of(ops, &o, n), &|i| ar[i] + br[i], "add");
                }
            }
            let (x, y) = (upload_t(ops, dtype, &a), upload_t(ops, dtype, &b));
            let (xv, yv) = (x.slice(0, n).unwrap(), y.slice(0, n).unwrap());
            ops.scale(xv, 0.3).unwrap();
            exact(bits_of(ops, &x, n), &|i| ar[i] * 0.3, "scale");
            let x = upload_t(ops, dtype, &a);
            ops.axpy(-0.7, x.slice(0, n).unwrap(), yv).unwrap();
            exact(bits_of(ops, &y, n), &|i| br[i] + -0.7 * ar[i], "axpy");

            // The activation family against the CPU backend.
            let bias = values(cols, 13, -1.0, 1.0);
            for act in [
                Activation::Relu,
                Activation::Tanh,
                Activation::Sigmoid,
                Activation::Gelu,
                Activation::LeakyRelu { slope: 0.1 },
            ] {
                let run = |o: &dyn Ops| -> Vec<Vec<u16>> {
                    let (x, y) = (upload_t(o, dtype, &a), upload_t(o, dtype, &poison));
                    let (xv, yv) = (x.slice(0, n).unwrap(), y.slice(0, n).unwrap());
                    o.activation(xv, yv, act).unwrap();
                    let act_y = bits_of(o, &y, n);
                    let (dy, dz) = (upload_t(o, dtype, &b), upload_t(o, dtype, &poison));
                    let f = Activated::new(xv, yv, act);
                    o.act_backward(dy.slice(0, n).unwrap(), f, dz.slice(0, n).unwrap())
                        .unwrap();
                    let dz_bits = bits_of(o, &dz, n);
                    let (z, bb, y2) = (
                        upload_t(o, dtype, &a),
                        upload_t(o, dtype, &bias),
                        upload_t(o, dtype, &poison),
                    );
                    let f = Activated::new(z.slice(0, n).unwrap(), y2.slice(0, n).unwrap(), act);
                    o.bias_act_forward(f, bb.slice(0, cols).unwrap(), MatShape::new(rows, cols))
                        .unwrap();
                    vec![act_y, dz_bits, bits_of(o, &z, n), bits_of(o, &y2, n)]
                };
                let (got, want) = (run(ops), run(cpu));
                for (k, (g, w)) in got.iter().zip(&want).enumerate() {
                    for (i, (&g, &w)) in g.iter().zip(w).enumerate() {
                        // Same sign: one place apart in the ordered bit patterns.
                        let apart = (i32::from(g) - i32::from(w)).abs();
                        assert!(
                            g == w || (apart <= 1 && (g ^ w) & 0x8000 == 0),
                            "{what}: {act:?} output {k}[{i}]: {g:#06x} vs the CPU's {w:#06x}"
                        );
                    }
                }
            }
            // Views of one type only.
            let f = ops.alloc(n).unwrap();
            let e = ops.add(xv, f.view(), f.view()).unwrap_err();
            assert!(
                matches!(e, Error::DTypeMismatch { ref arg, expected, found: DType::F32, .. }
                    if arg == "b" && expected == dtype),
                "{e}"
            );
        }
    }
}
