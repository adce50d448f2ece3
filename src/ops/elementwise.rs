//! Elementwise arithmetic over views of equal length.

use super::MemoryOps;
use crate::buffer::View;
use crate::error::Result;

/// Elementwise arithmetic over views of equal length.
pub trait ElementwiseOps: MemoryOps {
    /// `x[i] *= alpha`.
    fn scale(&self, x: View<'_>, alpha: f32) -> Result<()>;

    /// `y[i] += alpha * x[i]`.
    fn axpy(&self, alpha: f32, x: View<'_>, y: View<'_>) -> Result<()>;

    /// `out[i] = a[i] + b[i]`; `out` may be the same view as `a` or `b`.
    fn add(&self, a: View<'_>, b: View<'_>, out: View<'_>) -> Result<()>;

    /// `out[i] = a[i] * b[i]`; `out` may be the same view as `a` or `b`.
    fn mul(&self, a: View<'_>, b: View<'_>, out: View<'_>) -> Result<()>;
}
