//! Softmax and the losses, forward and backward fused.

use super::MemoryOps;
use super::check;
use super::views::view_group;
use crate::buffer::View;
use crate::dtype::DType;
use crate::error::Result;
use crate::ops::{LossOutputs, MatShape};

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

view_group! {
    /// The arguments of [`LossOps::softmax_cross_entropy`].
    SoftmaxCrossEntropy {
        /// The logits, `rows x cols`.
        logits: View<'a>,
        /// u32 class labels, `rows`: `labels[r]` is the class index of row `r`.
        labels: View<'a>,
        /// Written: `dlogits`, the row losses and, if given, the totals to add to.
        out: LossOutputs<'a>,
        /// Written: 1 where the row's arg-max is its label, else 0; `rows`.
        row_correct: View<'a>,
        /// Rows and classes.
        shape: MatShape,
        /// Scale of the gradient (`1 / rows` for a mean loss).
        grad_scale: f32,
    }
    /// The arguments in declaration order.
}

view_group! {
    /// The arguments of [`LossOps::mse`].
    Mse {
        /// The predictions, `rows x cols`.
        pred: View<'a>,
        /// The targets, `rows x cols`.
        target: View<'a>,
        /// Written: `dpred`, the row losses and, if given, the totals to add to.
        out: LossOutputs<'a>,
        /// Rows and columns.
        shape: MatShape,
        /// Scale of the gradient (`1 / rows` for a mean loss).
        grad_scale: f32,
    }
    /// The arguments in declaration order.
}

/// The checks of a fused loss with the inputs `ins` (`(name, view, type, elements)`) and the
/// outputs `outs` (f32, `(name, view, elements)`) besides its `totals` (at least `totals_len`
/// elements): contexts and types, lengths, and no output overlapping another view.
fn loss_views(
    op: &str,
    ctx: u64,
    ins: &[(&str, &View<'_>, DType, usize)],
    outs: &[(&str, &View<'_>, usize)],
    totals: (Option<&View<'_>>, usize),
) -> Result<()> {
    let f32_outs = outs.iter().map(|(name, v, _)| (*name, *v, DType::F32));
    let typed: Vec<_> = ins
        .iter()
        .map(|(name, v, t, _)| (*name, *v, *t))
        .chain(f32_outs)
        .collect();
    check::typed(op, ctx, &typed)?;
    let ins: Vec<_> = ins.iter().map(|(name, v, _, n)| (*name, *v, *n)).collect();
    let all: Vec<&View<'_>> = ins.iter().chain(outs).map(|(_, v, _)| *v).collect();
    if let Some(t) = totals.0 {
        check::typed(op, ctx, &[("totals", t, DType::F32)])?;
    }
    check::totals(op, totals.0, totals.1, &all)?;
    for (name, v, n) in ins.iter().chain(outs) {
        check::len(op, name, v, *n)?;
    }
    check::disjoint_outputs(op, &ins, outs)
}

impl SoftmaxCrossEntropy<'_> {
    pub(crate) const OP: &'static str = "softmax_cross_entropy";

    /// Checks the arguments against the context `ctx`; returns `rows * cols`.
    pub(crate) fn check(&self, ctx: u64) -> Result<usize> {
        let MatShape { rows, cols } = self.shape;
        let n = check::area(Self::OP, rows, cols)?;
        let ins = [
            ("logits", &self.logits, DType::F32, n),
            ("labels", &self.labels, DType::U32, rows),
        ];
        let outs = [
            ("dlogits", &self.out.grad, n),
            ("row_loss", &self.out.row_loss, rows),
            ("row_correct", &self.row_correct, rows),
        ];
        loss_views(Self::OP, ctx, &ins, &outs, (self.out.totals.as_ref(), 2))?;
        Ok(n)
    }
}

impl Mse<'_> {
    pub(crate) const OP: &'static str = "mse";

    /// Checks the arguments against the context `ctx`; returns `rows * cols`.
    pub(crate) fn check(&self, ctx: u64) -> Result<usize> {
        let MatShape { rows, cols } = self.shape;
        let n = check::area(Self::OP, rows, cols)?;
        let ins = [
            ("pred", &self.pred, DType::F32, n),
            ("target", &self.target, DType::F32, n),
        ];
        let outs = [
            ("dpred", &self.out.grad, n),
            ("row_loss", &self.out.row_loss, rows),
        ];
        loss_views(Self::OP, ctx, &ins, &outs, (self.out.totals.as_ref(), 1))?;
        Ok(n)
    }
}
