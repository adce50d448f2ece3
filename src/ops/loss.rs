//! Softmax and the losses, forward and backward fused.

use super::MemoryOps;
use crate::buffer::View;
use crate::error::Result;
use crate::ops::{Mse, SoftmaxCrossEntropy};

/// Row-wise softmax and the losses (forward and backward in one pass).
pub trait LossOps: MemoryOps {
    /// Row-wise softmax of a `rows x cols` matrix; `y` may be the same view as `x`.
    fn softmax(&self, x: View<'_>, y: View<'_>, rows: usize, cols: usize) -> Result<()>;

    /// Row-wise log-softmax; `y` may be the same view as `x`.
    fn log_softmax(&self, x: View<'_>, y: View<'_>, rows: usize, cols: usize) -> Result<()>;

    /// Fused softmax cross-entropy, forward and backward in one pass over `shape.rows x
    /// shape.cols` logits. Writes `out.row_loss[r] = -log softmax(x_r)[label]`,
    /// `row_correct[r] = 1` if the row's arg-max equals the label else 0, and
    /// `out.grad = grad_scale * (softmax(x) - onehot(label))` (the `dlogits`). An invalid label
    /// (not in `0..cols`, see the index rule in [`crate::ops`]) yields, for that row, a NaN
    /// loss, `row_correct = 0` and `dlogits = grad_scale * softmax(x)`; it is not an error.
    ///
    /// With `out.totals` (2 elements), also adds the sum of the row losses to `totals[0]` and the
    /// number of correct rows to `totals[1]`, in the same launch and deterministically (the
    /// same inputs give the same bits), so training accumulates its metrics on the device. No
    /// output overlaps an input or another output.
    fn softmax_cross_entropy(&self, a: SoftmaxCrossEntropy<'_>) -> Result<()>;

    /// Mean squared error per row of `shape.rows x shape.cols` predictions:
    /// `out.row_loss[r] = sum_c (p - t)^2 / cols`, and `out.grad = grad_scale * 2 (p - t) / cols`
    /// (the `dpred`). With `out.totals` (1 element or more), also adds the sum of the row losses
    /// to `totals[0]`, as [`LossOps::softmax_cross_entropy`] does.
    fn mse(&self, a: Mse<'_>) -> Result<()>;
}
