//! Variable-length sequences: per-sample lengths turned into the row masks, time reversals and
//! last-step rows the recurrent layers use, masking rows, and the per-row weights of a loss that
//! skips padded positions and ignored labels (PyTorch's packed sequences and
//! `CrossEntropyLoss(ignore_index=...)`).
//!
//! Everything here is computed on the device from data the batch carries (the lengths, the
//! labels, the row losses), so a step that uses it can be recorded as a graph once and replayed
//! for batches of other lengths.

use super::MemoryOps;
use super::check;
use super::views::op_args;
use crate::buffer::View;
use crate::dtype::DType;
use crate::error::Result;

op_args! {
    /// The arguments of [`SequenceMaskOps::length_layout`]: time-major rows `t * batch + b`.
    LengthLayout for "length_layout" {
        /// u32 lengths, `batch`; each is clamped into `1..=steps`.
        lengths: View<'a>,
        /// Written (f32, `steps * batch`): 1 where `t < len[b]`, else 0.
        mask: View<'a>,
        /// Written (u32, `steps * batch`): row `t * batch + b` of the per-sample time reversal,
        /// `(len[b] - 1 - t) * batch + b` for `t < len[b]`, else itself. It is its own
        /// inverse.
        reversal: View<'a>,
        /// Written (u32, `batch`): the row of each sample's last valid step,
        /// `(len[b] - 1) * batch + b`.
        last: View<'a>,
        /// Time steps.
        steps: usize,
    }
}

impl LengthLayout<'_> {
    /// Checks the arguments against the context `ctx`; returns `steps * batch`, which fits 32
    /// bits.
    pub(crate) fn check(&self, ctx: u64) -> Result<usize> {
        let op = Self::OP;
        check::typed(
            op,
            ctx,
            &[
                ("lengths", &self.lengths, DType::U32),
                ("mask", &self.mask, DType::F32),
                ("reversal", &self.reversal, DType::U32),
                ("last", &self.last, DType::U32),
            ],
        )?;
        let batch = self.lengths.len();
        let n = check::area(op, self.steps, batch)?;
        check::fits_u32(op, n)?;
        check::len(op, "mask", &self.mask, n)?;
        check::len(op, "reversal", &self.reversal, n)?;
        check::len(op, "last", &self.last, batch)?;
        let ins = [("lengths", &self.lengths, batch)];
        let outs = [
            ("mask", &self.mask, n),
            ("reversal", &self.reversal, n),
            ("last", &self.last, batch),
        ];
        check::disjoint_outputs(op, &ins, &outs)?;
        Ok(n)
    }
}

op_args! {
    /// The arguments of [`SequenceMaskOps::loss_weights`], over `rows` rows of a loss.
    LossWeights for "loss_weights" {
        /// The row losses the loss op wrote, `rows`.
        row_loss: View<'a>,
        /// The loss op's correct-row flags (`rows`), or `None` for a loss without them.
        row_correct: Option<View<'a>>,
        /// u32 class labels (`rows`) with the label that marks a row as ignored, or `None`.
        labels: Option<(View<'a>, u32)>,
        /// f32 row mask (`rows`; 0 = padding), or `None`.
        mask: Option<View<'a>>,
        /// Written: each row's weight, `rows`.
        weights: View<'a>,
        /// Device-side running totals to add to (1 element, 2 with `row_correct`), or `None`.
        totals: Option<View<'a>>,
    }
}

impl LossWeights<'_> {
    /// Checks the arguments against the context `ctx`; returns `rows`, which fits 32 bits.
    pub(crate) fn check(&self, ctx: u64) -> Result<usize> {
        let op = Self::OP;
        let rows = self.row_loss.len();
        check::fits_u32(op, rows)?;
        let mut typed = vec![
            ("row_loss", &self.row_loss, DType::F32),
            ("weights", &self.weights, DType::F32),
        ];
        let mut ins = vec![("row_loss", &self.row_loss, rows)];
        if let Some(c) = &self.row_correct {
            typed.push(("row_correct", c, DType::F32));
            ins.push(("row_correct", c, rows));
        }
        if let Some((l, _)) = &self.labels {
            typed.push(("labels", l, DType::U32));
            ins.push(("labels", l, rows));
        }
        if let Some(m) = &self.mask {
            typed.push(("mask", m, DType::F32));
            ins.push(("mask", m, rows));
        }
        if let Some(t) = &self.totals {
            typed.push(("totals", t, DType::F32));
        }
        check::typed(op, ctx, &typed)?;
        for (name, v, n) in &ins {
            check::len(op, name, v, *n)?;
        }
        check::len(op, "weights", &self.weights, rows)?;
        let mut all: Vec<&View<'_>> = ins.iter().map(|(_, v, _)| *v).collect();
        all.push(&self.weights);
        let need = if self.row_correct.is_some() { 2 } else { 1 };
        check::totals(op, self.totals.as_ref(), need, &all)?;
        check::disjoint_outputs(op, &ins, &[("weights", &self.weights, rows)])?;
        Ok(rows)
    }

    /// The kernels' flag bits: 1 labels, 2 mask, 4 totals, 8 correct-row totals.
    pub(crate) fn flags(&self) -> u32 {
        (self.labels.is_some() as u32)
            | (self.mask.is_some() as u32) << 1
            | (self.totals.is_some() as u32) << 2
            | (self.row_correct.is_some() as u32) << 3
    }
}

/// The checks of [`SequenceMaskOps::scale_rows`]; returns `rows * cols`, which fits 32 bits.
pub(crate) fn check_scale_rows(
    ctx: u64,
    x: &View<'_>,
    weights: &View<'_>,
    cols: usize,
) -> Result<usize> {
    let op = "scale_rows";
    check::typed(
        op,
        ctx,
        &[("x", x, DType::F32), ("weights", weights, DType::F32)],
    )?;
    let n = check::area(op, weights.len(), cols)?;
    check::len(op, "x", x, n)?;
    check::no_overlap(op, x, weights, false)?;
    check::fits_u32(op, n)?;
    Ok(n)
}

/// Variable-length sequences on the device.
pub trait SequenceMaskOps: MemoryOps {
    /// From per-sample lengths, the time-major row mask, the per-sample time reversal (PyTorch's
    /// packed reverse direction: each sample reversed within its own length, padding left in
    /// place) and the row of each sample's last valid step. A length outside `1..=steps` is
    /// clamped into it on every backend (data sets validate their lengths on the host).
    fn length_layout(&self, a: LengthLayout<'_>) -> Result<()>;

    /// `x[r, :] = weights[r] * x[r, :]`, in place over `weights.len()` rows of `cols`, except
    /// that a row whose weight is 0 becomes exactly 0 whatever it held (NaN and infinities
    /// included): a 0/1 row mask zeroes padded rows.
    fn scale_rows(&self, x: View<'_>, weights: View<'_>, cols: usize) -> Result<()>;

    /// The weights of a mean loss over the valid rows only: a row is valid unless its label is
    /// the ignored label or its mask is 0; `weights[r] = rows / valid` for a valid row and 0
    /// otherwise (all 0 when no row is valid), so that a loss computed with
    /// `grad_scale = 1 / rows` and then scaled by [`SequenceMaskOps::scale_rows`] is the mean
    /// over the valid rows. With `totals`, adds `Σ weights[r] * row_loss[r]` over the valid
    /// rows to `totals[0]` (and `Σ weights[r] * row_correct[r]` to `totals[1]`), so the totals
    /// divided by `rows` are the batch's mean loss (and accuracy) over its valid rows. Invalid
    /// rows' losses are never read into a sum (an ignored label's NaN loss stays out).
    fn loss_weights(&self, a: LossWeights<'_>) -> Result<()>;
}
