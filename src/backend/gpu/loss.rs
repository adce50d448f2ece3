//! Softmax and the losses on the GPU (row kernels, totals through the grid-reduction scratch).

use super::GpuOps;
use super::launch::{self, Args};
use super::scratch::{MAX_TOTALS_BLOCKS, Ticket};
use crate::backend::Device;
use crate::buffer::View;
use crate::error::Result;
use crate::ops::check;
use crate::ops::prelude::*;
use crate::ops::{MatShape, Mse, SoftmaxCrossEntropy};

impl<D: Device> GpuOps<D> {
    /// Launches the fused loss kernel `entry` (a warp per row) over the checked `shape`: `head`
    /// (its inputs and outputs in ABI order), then `totals` (or, without, a placeholder the
    /// kernel does not touch: its `with_totals` flag is 0), the scratch's partials and ticket
    /// through which it adds to them, the shape, `grad_scale` and the flag.
    fn launch_loss(
        &self,
        entry: &str,
        head: Args,
        totals: Option<View<'_>>,
        (shape, grad_scale): (MatShape, f32),
    ) -> Result<()> {
        let MatShape { rows, cols } = shape;
        if rows == 0 {
            return Ok(());
        }
        self.with_scratch(|scratch| {
            let partials = scratch.partials()?;
            let ticket = scratch.ticket(Ticket::Totals)?;
            let args = head
                .bufs(&[&totals.unwrap_or(partials), &partials, &ticket])?
                .dims(&[rows, cols])
                .f32(grad_scale)
                .u32(totals.is_some() as u32);
            self.run(entry, launch::warp_rows(rows, MAX_TOTALS_BLOCKS), args)
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
        let head = Args::new().buf(&a.logits)?.buf_u32(&a.labels)?.bufs(&[
            &a.out.grad,
            &a.out.row_loss,
            &a.row_correct,
        ])?;
        let tail = (a.shape, a.grad_scale);
        self.launch_loss("softmax_xent", head, a.out.totals, tail)
    }

    fn mse(&self, a: Mse<'_>) -> Result<()> {
        let n = a.check(self.context)?;
        check::fits_u32(Mse::OP, n)?;
        let head = Args::new().bufs(&[&a.pred, &a.target, &a.out.grad, &a.out.row_loss])?;
        self.launch_loss(Mse::OP, head, a.out.totals, (a.shape, a.grad_scale))
    }
}
