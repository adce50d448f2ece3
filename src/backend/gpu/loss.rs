//! Softmax and the losses on the GPU (row kernels, totals through the grid-reduction scratch).

use super::GpuOps;
use super::launch::{self, Args};
use super::scratch::{MAX_TOTALS_BLOCKS, Ticket};
use crate::backend::Device;
use crate::buffer::View;
use crate::dtype::DType;
use crate::error::Result;
use crate::ops::check;
use crate::ops::prelude::*;
use crate::ops::{LossOutputs, MatShape};

impl<D: Device> GpuOps<D> {
    /// Runs `launch(totals, partials, ticket)` for a loss kernel: with `totals`, the kernel
    /// adds its sums there through the scratch; without, a placeholder view is passed (the
    /// kernel's `with_totals` flag is 0 and it touches none of the three).
    fn with_totals(
        &self,
        totals: Option<View<'_>>,
        launch: impl FnOnce(&View<'_>, &View<'_>, &View<'_>) -> Result<()>,
    ) -> Result<()> {
        self.with_scratch(|scratch| {
            let partials = scratch.partials()?;
            let ticket = scratch.ticket(Ticket::Totals)?;
            launch(&totals.unwrap_or(partials), &partials, &ticket)
        })
    }

    /// `softmax` and `log_softmax`: one block per row; `y` may be exactly `x`.
    pub(super) fn row_softmax(
        &self,
        op: &str,
        x: View<'_>,
        y: View<'_>,
        rows: usize,
        cols: usize,
    ) -> Result<()> {
        self.mine(op, &[&x, &y])?;
        let n = check::area(op, rows, cols)?;
        check::len(op, "x", &x, n)?;
        check::len(op, "y", &y, n)?;
        check::no_overlap(op, &y, &x, true)?;
        check::fits_u32(op, n)?;
        if n == 0 {
            return Ok(());
        }
        let args = Args::new()
            .bufs(&[&x, &y])?
            .u32(rows as u32)
            .u32(cols as u32);
        self.run(op, launch::rows(rows), args)
    }
}

impl<D: Device> LossOps for GpuOps<D> {
    fn softmax(&self, x: View<'_>, y: View<'_>, rows: usize, cols: usize) -> Result<()> {
        self.row_softmax("softmax", x, y, rows, cols)
    }

    fn log_softmax(&self, x: View<'_>, y: View<'_>, rows: usize, cols: usize) -> Result<()> {
        self.row_softmax("log_softmax", x, y, rows, cols)
    }

    fn softmax_cross_entropy(
        &self,
        logits: View<'_>,
        labels: View<'_>,
        out: LossOutputs<'_>,
        row_correct: View<'_>,
        shape: MatShape,
        grad_scale: f32,
    ) -> Result<()> {
        let LossOutputs {
            grad: dlogits,
            row_loss,
            totals,
        } = out;
        let MatShape { rows, cols } = shape;
        let op = "softmax_cross_entropy";
        check::typed(op, self.context, &[("labels", &labels, DType::U32)])?;
        self.mine(op, &[&logits, &dlogits, &row_loss, &row_correct])?;
        let n = check::softmax_cross_entropy(&logits, &labels, &out, &row_correct, shape)?;
        let outs = [&dlogits, &row_loss, &row_correct];
        for (i, o) in outs.iter().enumerate() {
            for input in [&logits, &labels] {
                check::no_overlap(op, o, input, false)?;
            }
            for other in &outs[i + 1..] {
                check::no_overlap(op, o, other, false)?;
            }
        }
        check::fits_u32(op, n)?;
        if rows == 0 {
            return Ok(());
        }
        let with_totals = totals.is_some() as u32;
        self.with_totals(totals, |totals, partials, ticket| {
            let args = Args::new()
                .buf(&logits)?
                .buf_u32(&labels)?
                .bufs(&[&dlogits, &row_loss, &row_correct, totals, partials, ticket])?
                .dims(&[rows, cols])
                .f32(grad_scale)
                .u32(with_totals);
            self.run(
                "softmax_xent",
                launch::warp_rows(rows, MAX_TOTALS_BLOCKS),
                args,
            )
        })
    }

    fn mse(
        &self,
        pred: View<'_>,
        target: View<'_>,
        out: LossOutputs<'_>,
        shape: MatShape,
        grad_scale: f32,
    ) -> Result<()> {
        let LossOutputs {
            grad: dpred,
            row_loss,
            totals,
        } = out;
        let MatShape { rows, cols } = shape;
        let op = "mse";
        self.mine(op, &[&pred, &target, &dpred, &row_loss])?;
        let n = check::mse(&pred, &target, &out, shape)?;
        for o in [&dpred, &row_loss] {
            check::no_overlap(op, o, &pred, false)?;
            check::no_overlap(op, o, &target, false)?;
        }
        check::no_overlap(op, &dpred, &row_loss, false)?;
        check::fits_u32(op, n)?;
        if rows == 0 {
            return Ok(());
        }
        let with_totals = totals.is_some() as u32;
        self.with_totals(totals, |totals, partials, ticket| {
            let args = Args::new()
                .bufs(&[&pred, &target, &dpred, &row_loss, totals, partials, ticket])?
                .dims(&[rows, cols])
                .f32(grad_scale)
                .u32(with_totals);
            self.run(op, launch::warp_rows(rows, MAX_TOTALS_BLOCKS), args)
        })
    }
}
