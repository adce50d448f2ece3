//! Reductions: column, row and whole sums, and gradient-norm clipping.

use super::MemoryOps;
use crate::buffer::View;
use crate::error::Result;

/// Reductions over a matrix or a whole view, accumulated on the device.
pub trait ReduceOps: MemoryOps {
    /// Column sums of a `rows x cols` matrix: `out[c] = beta * out[c] + sum_r x[r,c]` (bias
    /// gradients). With `beta == 0`, `out` is not read.
    fn sum_rows(
        &self,
        x: View<'_>,
        out: View<'_>,
        rows: usize,
        cols: usize,
        beta: f32,
    ) -> Result<()>;

    /// Row sums: `out[r] = beta * out[r] + sum_c x[r,c]`.
    fn sum_cols(
        &self,
        x: View<'_>,
        out: View<'_>,
        rows: usize,
        cols: usize,
        beta: f32,
    ) -> Result<()>;

    /// `out[0] = beta * out[0] + sum_i x[i]` (`out.len() == 1`): metrics accumulate on the device.
    fn sum_all(&self, x: View<'_>, out: View<'_>, beta: f32) -> Result<()>;

    /// Gradient-norm clipping without a host round trip: computes `n = ||grads||_2`, writes it
    /// to `norm_out[0]`, and scales `grads` by `min(1, max_norm / (n + 1e-6))`.
    fn clip_grad_norm(&self, grads: View<'_>, max_norm: f32, norm_out: View<'_>) -> Result<()>;
}
