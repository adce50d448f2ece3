//! The matrix product.

use super::{Gemm, MemoryOps};
use crate::buffer::View;
use crate::error::Result;

/// The matrix product, `C = alpha * op(A) op(B) + beta * C`.
pub trait LinalgOps: MemoryOps {
    /// `C = alpha * op(A) op(B) + beta * C`; see [`Gemm`].
    fn gemm(&self, g: Gemm, a: View<'_>, b: View<'_>, c: View<'_>) -> Result<()>;
}
