//! Softmax and the losses on the GPU (row kernels, totals through the grid-reduction scratch).

use super::GpuOps;
use super::launch::{self, Args};
use super::scratch::{MAX_TOTALS_BLOCKS, Ticket};
use crate::backend::Device;
use crate::buffer::View;
use crate::error::Result;
use crate::ops::check;
use crate::ops::prelude::*;
use crate::ops::{LossOutputs, MatShape, Mse, SoftmaxCrossEntropy};

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

    fn softmax_cross_entropy(&self, a: SoftmaxCrossEntropy<'_>) -> Result<()> {
        let n = a.check(self.context)?;
        check::fits_u32(SoftmaxCrossEntropy::OP, n)?;
        let MatShape { rows, cols } = a.shape;
        if rows == 0 {
            return Ok(());
        }
        let LossOutputs {
            grad: dlogits,
            row_loss,
            totals,
        } = a.out;
        let with_totals = totals.is_some() as u32;
        self.with_totals(totals, |totals, partials, ticket| {
            let args = Args::new()
                .buf(&a.logits)?
                .buf_u32(&a.labels)?
                .bufs(&[
                    &dlogits,
                    &row_loss,
                    &a.row_correct,
                    totals,
                    partials,
                    ticket,
                ])?
                .dims(&[rows, cols])
                .f32(a.grad_scale)
                .u32(with_totals);
            self.run(
                "softmax_xent",
                launch::warp_rows(rows, MAX_TOTALS_BLOCKS),
                args,
            )
        })
    }

    fn mse(&self, a: Mse<'_>) -> Result<()> {
        let n = a.check(self.context)?;
        check::fits_u32(Mse::OP, n)?;
        let MatShape { rows, cols } = a.shape;
        if rows == 0 {
            return Ok(());
        }
        let LossOutputs {
            grad: dpred,
            row_loss,
            totals,
        } = a.out;
        let with_totals = totals.is_some() as u32;
        self.with_totals(totals, |totals, partials, ticket| {
            let args = Args::new()
                .bufs(&[
                    &a.pred, &a.target, &dpred, &row_loss, totals, partials, ticket,
                ])?
                .dims(&[rows, cols])
                .f32(a.grad_scale)
                .u32(with_totals);
            self.run(Mse::OP, launch::warp_rows(rows, MAX_TOTALS_BLOCKS), args)
        })
    }
}
