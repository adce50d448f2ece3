//! Elementwise arithmetic over views of equal length.

use super::MemoryOps;
use crate::buffer::View;
use crate::error::Result;

/// Elementwise arithmetic over views of equal length.
///
/// Typing (docs/architecture.md, "Typed storage"): `scale`, `axpy`, `add` and `mul` take views
/// of one float type T (f32, bf16 or f16; another mix is [`crate::Error::DTypeMismatch`]),
/// computed in f32 and rounded to T (bit for bit the same on every backend); `cast` converts
/// between any two float types.
pub trait ElementwiseOps: MemoryOps {
    /// `x[i] *= alpha`.
    fn scale(&self, x: View<'_>, alpha: f32) -> Result<()>;

    /// `y[i] += alpha * x[i]`.
    fn axpy(&self, alpha: f32, x: View<'_>, y: View<'_>) -> Result<()>;

    /// `out[i] = a[i] + b[i]`; `out` may be the same view as `a` or `b`.
    fn add(&self, a: View<'_>, b: View<'_>, out: View<'_>) -> Result<()>;

    /// `out[i] = a[i] * b[i]`; `out` may be the same view as `a` or `b`.
    fn mul(&self, a: View<'_>, b: View<'_>, out: View<'_>) -> Result<()>;

    /// `dst[i] = src[i]` converted to `dst`'s type: views of any float types (f32, bf16, f16;
    /// another type is [`crate::Error::DTypeMismatch`]) of equal length that do not overlap.
    /// f32 to bf16/f16 rounds to nearest even (f16 overflows to inf, NaN stays NaN); bf16/f16
    /// to f32 is exact; bf16 <-> f16 goes through f32; the same type on both sides copies.
    /// Refreshes the low copy of the parameters that a bf16/f16 forward reads.
    fn cast(&self, src: View<'_>, dst: View<'_>) -> Result<()>;
}
