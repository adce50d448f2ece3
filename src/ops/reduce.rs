//! Reductions: column, row and whole sums, and gradient-norm clipping.

use super::{MatShape, MemoryOps, check};
use crate::buffer::View;
use crate::error::Result;

/// Reductions over a matrix or a whole view, accumulated on the device.
pub trait ReduceOps: MemoryOps {
    /// Column sums of a `rows x cols` matrix (`shape`): `out[c] = beta * out[c] + sum_r x[r,c]`
    /// (bias gradients). With `beta == 0`, `out` is not read.
    fn sum_rows(&self, x: View<'_>, out: View<'_>, shape: MatShape, beta: f32) -> Result<()>;

    /// Row sums of a `rows x cols` matrix (`shape`): `out[r] = beta * out[r] + sum_c x[r,c]`.
    fn sum_cols(&self, x: View<'_>, out: View<'_>, shape: MatShape, beta: f32) -> Result<()>;

    /// `out[0] = beta * out[0] + sum_i x[i]` (`out.len() == 1`): metrics accumulate on the device.
    fn sum_all(&self, x: View<'_>, out: View<'_>, beta: f32) -> Result<()>;

    /// Gradient-norm clipping without a host round trip: computes `n = ||grads||_2`, writes it
    /// to `norm_out[0]`, and scales `grads` by `min(1, max_norm / (n + 1e-6))`.
    fn clip_grad_norm(&self, grads: View<'_>, max_norm: f32, norm_out: View<'_>) -> Result<()>;
}

/// Which way a matrix is summed: down its columns ([`ReduceOps::sum_rows`], one sum per column)
/// or along its rows ([`ReduceOps::sum_cols`], one sum per row).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SumAxis {
    /// One sum per column (over the rows).
    Rows,
    /// One sum per row (over the columns).
    Cols,
}

impl SumAxis {
    /// The op's name.
    pub(crate) fn op(self) -> &'static str {
        match self {
            SumAxis::Rows => "sum_rows",
            SumAxis::Cols => "sum_cols",
        }
    }

    /// Checks the lengths of a sum's input (`shape`) and output (one element per sum); returns
    /// the input's length.
    pub(crate) fn check(self, x: &View<'_>, out: &View<'_>, shape: MatShape) -> Result<usize> {
        let op = self.op();
        let n = check::area(op, shape.rows, shape.cols)?;
        check::len(op, "x", x, n)?;
        let sums = match self {
            SumAxis::Rows => shape.cols,
            SumAxis::Cols => shape.rows,
        };
        check::len(op, "out", out, sums)?;
        Ok(n)
    }
}
