//! The 16-bit float types (bf16, f16) on every backend (the CPU one through `cpu_reference`):
//! conversions against the `half` crate (every bf16 and f16 pattern, a sample of f32 ones),
//! which kernels-common/half_convert.h must match bit for bit.

use half::{bf16, f16};
use rnn::ops::prelude::*;
use rnn::{DType, Error};

use super::contexts;
use crate::support::Target;

/// A NaN poison for 16-bit outputs that no conversion produces (a signalling NaN pattern).
const POISON16: u16 = 0x7c01;

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
fn round_bits(dtype: DType, x: f32) -> u16 {
    match dtype {
        DType::Bf16 => bf16::from_f32(x).to_bits(),
        _ => f16::from_f32(x).to_bits(),
    }
}

fn bytes_of(bits: &[u16]) -> Vec<u8> {
    bits.iter().flat_map(|b| b.to_ne_bytes()).collect()
}

/// The bits of a 16-bit view.
fn download_bits(ops: &dyn Ops, v: rnn::View<'_>) -> Vec<u16> {
    let mut bytes = vec![0u8; v.len() * 2];
    ops.download_bytes(v, &mut bytes).unwrap();
    bytes
        .chunks_exact(2)
        .map(|c| u16::from_ne_bytes([c[0], c[1]]))
        .collect()
}
