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
    /// [`check::cell`] plus context ownership and the 32-bit kernel limit, then the cell kernel
    /// `op` (one thread per element of `batch x hidden`) over `bufs` in ABI order.
    fn cell(
        &self,
        op: &str,
        shape: SeqShape,
        inputs: &[check::CellArg<'_, '_>],
        outputs: &[check::CellArg<'_, '_>],
        bufs: &[&View<'_>],
    ) -> Result<()> {
        let SeqShape { batch, hidden, .. } = shape;
        let all: Vec<&View<'_>> = inputs.iter().chain(outputs).map(|(_, v, _)| *v).collect();
        self.mine(op, &all)?;
        let n = check::cell(op, batch, hidden, inputs, outputs)?;
        check::fits_u32(op, check::area(op, n, 4)?)?;
        if n == 0 {
            return Ok(());
        }
        let args = Args::new().bufs(bufs)?.dims(&[batch, hidden]);
        self.run(op, launch::elementwise(n), args)
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
        // `gates` is read and rewritten in place: it counts as an output.
        let outs = [("gates", &gates, 4), ("c", &c, 1), ("h", &h, 1)];
        let bufs = [&gates, &c_prev, &c, &h];
        self.cell(
            "lstm_cell_forward",
            shape,
            &[("c_prev", &c_prev, 1)],
            &outs,
            &bufs,
        )
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
        let ins = [
            ("gates", &gates, 4),
            ("c_prev", &c_prev, 1),
            ("c", &c, 1),
            ("dh", &dh, 1),
        ];
        let bufs = [&gates, &c_prev, &c, &dh, &dc, &dgates];
        let outs = [("dc", &dc, 1), ("dgates", &dgates, 4)];
        self.cell("lstm_cell_backward", shape, &ins, &outs, &bufs)
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
        let ins = [("gx", &gx, 3), ("gh", &gh, 3), ("h_prev", &h_prev, 1)];
        let outs = [("h", &h, 1), ("cache", &cache, 4)];
        let bufs = [&gx, &gh, &h_prev, &h, &cache];
        self.cell("gru_cell_forward", shape, &ins, &outs, &bufs)
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
        let ins = [("cache", &cache, 4), ("h_prev", &h_prev, 1), ("dh", &dh, 1)];
        let outs = [("dgx", &dgx, 3), ("dgh", &dgh, 3), ("dh_prev", &dh_prev, 1)];
        let bufs = [&cache, &h_prev, &dh, &dgx, &dgh, &dh_prev];
        self.cell("gru_cell_backward", shape, &ins, &outs, &bufs)
    }
}
