//! Softmax and losses (row kernels) and the LSTM and GRU cell steps.

use super::GpuOps;
use super::launch::{self, Args};
use super::scratch::{MAX_TOTALS_BLOCKS, Ticket};
use crate::backend::Device;
use crate::buffer::View;
use crate::error::Result;
use crate::ops::check;

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
            .buf(&x)?
            .buf(&y)?
            .u32(rows as u32)
            .u32(cols as u32);
        self.run(op, launch::rows(rows), args)
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn softmax_xent_impl(
        &self,
        logits: View<'_>,
        labels: View<'_>,
        dlogits: View<'_>,
        row_loss: View<'_>,
        row_correct: View<'_>,
        totals: Option<View<'_>>,
        rows: usize,
        cols: usize,
        grad_scale: f32,
    ) -> Result<()> {
        let op = "softmax_cross_entropy";
        self.mine(op, &[&logits, &labels, &dlogits, &row_loss, &row_correct])?;
        check::totals(
            op,
            totals.as_ref(),
            2,
            &[&logits, &labels, &dlogits, &row_loss, &row_correct],
        )?;
        let n = check::area(op, rows, cols)?;
        check::len(op, "logits", &logits, n)?;
        check::len(op, "labels", &labels, rows)?;
        check::len(op, "dlogits", &dlogits, n)?;
        check::len(op, "row_loss", &row_loss, rows)?;
        check::len(op, "row_correct", &row_correct, rows)?;
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
                .buf(&labels)?
                .buf(&dlogits)?
                .buf(&row_loss)?
                .buf(&row_correct)?
                .buf(totals)?
                .buf(partials)?
                .buf(ticket)?
                .u32(rows as u32)
                .u32(cols as u32)
                .f32(grad_scale)
                .u32(with_totals);
            self.run(
                "softmax_xent",
                launch::warp_rows(rows, MAX_TOTALS_BLOCKS),
                args,
            )
        })
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn mse_impl(
        &self,
        pred: View<'_>,
        target: View<'_>,
        dpred: View<'_>,
        row_loss: View<'_>,
        totals: Option<View<'_>>,
        rows: usize,
        cols: usize,
        grad_scale: f32,
    ) -> Result<()> {
        let op = "mse";
        self.mine(op, &[&pred, &target, &dpred, &row_loss])?;
        check::totals(op, totals.as_ref(), 1, &[&pred, &target, &dpred, &row_loss])?;
        let n = check::area(op, rows, cols)?;
        check::len(op, "pred", &pred, n)?;
        check::len(op, "target", &target, n)?;
        check::len(op, "dpred", &dpred, n)?;
        check::len(op, "row_loss", &row_loss, rows)?;
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
                .buf(&pred)?
                .buf(&target)?
                .buf(&dpred)?
                .buf(&row_loss)?
                .buf(totals)?
                .buf(partials)?
                .buf(ticket)?
                .u32(rows as u32)
                .u32(cols as u32)
                .f32(grad_scale)
                .u32(with_totals);
            self.run(op, launch::warp_rows(rows, MAX_TOTALS_BLOCKS), args)
        })
    }

    /// [`check::cell`] plus context ownership and the 32-bit kernel limit.
    fn cell_checks(
        &self,
        op: &str,
        batch: usize,
        hidden: usize,
        inputs: &[check::CellArg<'_, '_>],
        outputs: &[check::CellArg<'_, '_>],
    ) -> Result<u32> {
        let all: Vec<&View<'_>> = inputs.iter().chain(outputs).map(|(_, v, _)| *v).collect();
        self.mine(op, &all)?;
        let n = check::cell(op, batch, hidden, inputs, outputs)?;
        check::fits_u32(op, check::area(op, n, 4)?)?;
        Ok(n as u32)
    }

    pub(super) fn lstm_cell_forward_impl(
        &self,
        gates: View<'_>,
        c_prev: View<'_>,
        c: View<'_>,
        h: View<'_>,
        batch: usize,
        hidden: usize,
    ) -> Result<()> {
        let op = "lstm_cell_forward";
        // `gates` is read and rewritten in place: it counts as an output.
        let n = self.cell_checks(
            op,
            batch,
            hidden,
            &[("c_prev", &c_prev, 1)],
            &[("gates", &gates, 4), ("c", &c, 1), ("h", &h, 1)],
        )?;
        if n == 0 {
            return Ok(());
        }
        let args = Args::new()
            .buf(&gates)?
            .buf(&c_prev)?
            .buf(&c)?
            .buf(&h)?
            .u32(batch as u32)
            .u32(hidden as u32);
        self.run(op, launch::elementwise(n as usize), args)
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn lstm_cell_backward_impl(
        &self,
        gates: View<'_>,
        c_prev: View<'_>,
        c: View<'_>,
        dh: View<'_>,
        dc: View<'_>,
        dgates: View<'_>,
        batch: usize,
        hidden: usize,
    ) -> Result<()> {
        let op = "lstm_cell_backward";
        let n = self.cell_checks(
            op,
            batch,
            hidden,
            &[
                ("gates", &gates, 4),
                ("c_prev", &c_prev, 1),
                ("c", &c, 1),
                ("dh", &dh, 1),
            ],
            &[("dc", &dc, 1), ("dgates", &dgates, 4)],
        )?;
        if n == 0 {
            return Ok(());
        }
        let args = Args::new()
            .buf(&gates)?
            .buf(&c_prev)?
            .buf(&c)?
            .buf(&dh)?
            .buf(&dc)?
            .buf(&dgates)?
            .u32(batch as u32)
            .u32(hidden as u32);
        self.run(op, launch::elementwise(n as usize), args)
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn gru_cell_forward_impl(
        &self,
        gx: View<'_>,
        gh: View<'_>,
        h_prev: View<'_>,
        h: View<'_>,
        cache: View<'_>,
        batch: usize,
        hidden: usize,
    ) -> Result<()> {
        let op = "gru_cell_forward";
        let n = self.cell_checks(
            op,
            batch,
            hidden,
            &[("gx", &gx, 3), ("gh", &gh, 3), ("h_prev", &h_prev, 1)],
            &[("h", &h, 1), ("cache", &cache, 4)],
        )?;
        if n == 0 {
            return Ok(());
        }
        let args = Args::new()
            .buf(&gx)?
            .buf(&gh)?
            .buf(&h_prev)?
            .buf(&h)?
            .buf(&cache)?
            .u32(batch as u32)
            .u32(hidden as u32);
        self.run(op, launch::elementwise(n as usize), args)
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn gru_cell_backward_impl(
        &self,
        cache: View<'_>,
        h_prev: View<'_>,
        dh: View<'_>,
        dgx: View<'_>,
        dgh: View<'_>,
        dh_prev: View<'_>,
        batch: usize,
        hidden: usize,
    ) -> Result<()> {
        let op = "gru_cell_backward";
        let n = self.cell_checks(
            op,
            batch,
            hidden,
            &[("cache", &cache, 4), ("h_prev", &h_prev, 1), ("dh", &dh, 1)],
            &[("dgx", &dgx, 3), ("dgh", &dgh, 3), ("dh_prev", &dh_prev, 1)],
        )?;
        if n == 0 {
            return Ok(());
        }
        let args = Args::new()
            .buf(&cache)?
            .buf(&h_prev)?
            .buf(&dh)?
            .buf(&dgx)?
            .buf(&dgh)?
            .buf(&dh_prev)?
            .u32(batch as u32)
            .u32(hidden as u32);
        self.run(op, launch::elementwise(n as usize), args)
    }
}
