//! Branch-free `exp`, `tanh` and `sigmoid` for f32 that the compiler vectorizes, unlike the
//! scalar libm calls behind `f32::exp`/`f32::tanh` (which dominated the RNN cell and softmax
//! loops). Cephes-style range reduction and minimax polynomials: within a few ulp of libm.

// The polynomial coefficients are written as published (Cephes), not rounded to f32 digits.
#![allow(clippy::excessive_precision)]

/// `1.5 * 2^23`: adding it rounds an f32 of magnitude below 2^22 to the nearest integer.
const ROUND_MAGIC: f32 = 12_582_912.0;

/// `e^x`; NaN propagates. Inputs are clamped to [-86.6, 88.72], so tiny results stay at about
/// 2e-38 instead of reaching 0, and huge ones stay finite (both harmless to every caller).
#[inline(always)]
pub(super) fn exp(x: f32) -> f32 {
    let x = x.clamp(-86.6, 88.72);
    let t = x * std::f32::consts::LOG2_E + ROUND_MAGIC;
    let n = t - ROUND_MAGIC;
    // The integer n sits in the low mantissa bits of t.
    let ni = t.to_bits() as i32 - ROUND_MAGIC.to_bits() as i32;
    let r = x - n * 0.693_359_4 - n * -2.121_944_4e-4;
    let p = 1.987_569_1e-4;
    let p = p * r + 1.398_199_9e-3;
    let p = p * r + 8.333_452e-3;
    let p = p * r + 4.166_579_6e-2;
    let p = p * r + 1.666_666_5e-1;
    let p = p * r + 5.000_000_1e-1;
    let e = r * r * p + r + 1.0;
    // 2^(n-1) * 2 keeps the biased exponent in 1..=254 for n in -125..=128.
    e * f32::from_bits(((ni + 126) << 23) as u32) * 2.0
}

/// `tanh(x)`: a polynomial near zero (where `1 - 2/(e^2x + 1)` would cancel), else through `exp`.
#[inline(always)]
pub(super) fn tanh(x: f32) -> f32 {
    let a = x.abs();
    let z = x * x;
    let p = -5.704_988_7e-3;
    let p = p * z + 2.063_908_9e-2;
    let p = p * z - 5.373_971_6e-2;
    let p = p * z + 1.333_144_2e-1;
    let p = p * z - 3.333_328_2e-1;
    let small = x + x * z * p;
    let large = (1.0 - 2.0 / (exp(2.0 * a) + 1.0)).copysign(x);
    if a < 0.625 { small } else { large }
}

/// `1 / (1 + e^-x)`.
#[inline(always)]
pub(super) fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + exp(-x))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_to_libm() {
        let mut worst = [0.0f64; 3];
        let mut x = -90.0f32;
        while x < 90.0 {
            let pairs = [
                (exp(x) as f64, (x as f64).exp()),
                (tanh(x) as f64, (x as f64).tanh()),
                (sigmoid(x) as f64, 1.0 / (1.0 + (-x as f64).exp())),
            ];
            for (w, (got, want)) in worst.iter_mut().zip(pairs) {
                // Relative error, except where the value underflows below f32's normal range.
                if want.abs() > 1e-37 && want.abs() < 3e38 {
                    *w = w.max(((got - want) / want).abs());
                }
            }
            x += 0.001_3;
        }
        assert!(
            worst.iter().all(|&e| e < 1e-6),
            "worst relative errors {worst:?}"
        );
        assert!(exp(f32::NAN).is_nan() && tanh(f32::NAN).is_nan());
        assert_eq!(tanh(0.0), 0.0);
        assert_eq!(tanh(100.0), 1.0);
        assert_eq!(tanh(-100.0), -1.0);
    }
}
