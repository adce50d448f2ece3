//! The LSTM and GRU cell steps on the GPU: the gate math of one time step, one launch each.

use super::GpuOps;
use super::launch::{self, Args};
use crate::backend::Device;
use crate::buffer::View;
use crate::error::Result;
use crate::ops::GruGateGrads;
use crate::ops::SeqShape;
use crate::ops::check;
use crate::ops::prelude::*;

impl<D: Device> GpuOps<D> {
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
}

impl<D: Device> GatedCellOps for GpuOps<D> {
    fn lstm_cell_forward(
        &self,
        gates: View<'_>,
        c_prev: View<'_>,
        c: View<'_>,
        h: View<'_>,
        shape: SeqShape,
    ) -> Result<()> {
        let SeqShape { batch, hidden, .. } = shape;
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
            .bufs(&[&gates, &c_prev, &c, &h])?
            .u32(batch as u32)
            .u32(hidden as u32);
        self.run(op, launch::elementwise(n as usize), args)
    }

    fn lstm_cell_backward(
        &self,
        gates: View<'_>,
        c_prev: View<'_>,
        c: View<'_>,
        dh: View<'_>,
        dc: View<'_>,
        dgates: View<'_>,
        shape: SeqShape,
    ) -> Result<()> {
        let SeqShape { batch, hidden, .. } = shape;
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
            .bufs(&[&gates, &c_prev, &c, &dh, &dc, &dgates])?
            .u32(batch as u32)
            .u32(hidden as u32);
        self.run(op, launch::elementwise(n as usize), args)
    }

    fn gru_cell_forward(
        &self,
        gx: View<'_>,
        gh: View<'_>,
        h_prev: View<'_>,
        h: View<'_>,
        cache: View<'_>,
        shape: SeqShape,
    ) -> Result<()> {
        let SeqShape { batch, hidden, .. } = shape;
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
            .bufs(&[&gx, &gh, &h_prev, &h, &cache])?
            .u32(batch as u32)
            .u32(hidden as u32);
        self.run(op, launch::elementwise(n as usize), args)
    }

    fn gru_cell_backward(
        &self,
        cache: View<'_>,
        h_prev: View<'_>,
        dh: View<'_>,
        grads: GruGateGrads<'_>,
        dh_prev: View<'_>,
        shape: SeqShape,
    ) -> Result<()> {
        let GruGateGrads { dgx, dgh } = grads;
        let SeqShape { batch, hidden, .. } = shape;
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
            .bufs(&[&cache, &h_prev, &dh, &dgx, &dgh, &dh_prev])?
            .u32(batch as u32)
            .u32(hidden as u32);
        self.run(op, launch::elementwise(n as usize), args)
    }
}
