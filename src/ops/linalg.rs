//! The matrix product.

use super::{Gemm, MemoryOps, check};
use crate::buffer::View;
use crate::dtype::DType;
use crate::error::Result;

/// The matrix product, `C = alpha * op(A) op(B) + beta * C`.
pub trait LinalgOps: MemoryOps {
    /// `C = alpha * op(A) op(B) + beta * C`; see [`Gemm`].
    ///
    /// Types (docs/architecture.md, "Typed storage"): A and B hold one float type T (f32, bf16
    /// or f16); C holds f32 or T. The products are summed in f32 whatever T is; a T-typed C
    /// receives the f32 result `alpha * Σ + beta * C` rounded once (to nearest even). With T
    /// f32 this is the f32 GEMM of every earlier release, bit for bit. Any other combination is
    /// [`crate::Error::DTypeMismatch`] naming the argument, before any work.
    fn gemm(&self, g: Gemm, a: View<'_>, b: View<'_>, c: View<'_>) -> Result<()>;
}

/// The element types of a [`LinalgOps::gemm`] call, all of the context `ctx`: `(T, C's
/// type)`, where A and B hold T (a float type) and C holds f32 or T.
pub(crate) fn gemm_types(
    ctx: u64,
    a: &View<'_>,
    b: &View<'_>,
    c: &View<'_>,
) -> Result<(DType, DType)> {
    let t = check::float_t("gemm", ctx, &[("A", a), ("B", b)], &[])?;
    check::context_only("gemm", ctx, &[c])?;
    if c.dtype() != DType::F32 {
        check::dtype("gemm", "C", c, t)?;
    }
    Ok((t, c.dtype()))
}
