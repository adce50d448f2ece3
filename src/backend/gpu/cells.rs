//! The LSTM and GRU cell steps on the GPU: the gate math of one time step, one launch each.

use super::GpuOps;
use super::launch::{self, Args};
use crate::backend::Device;
use crate::buffer::View;
use crate::error::Result;
use crate::ops::SeqShape;
use crate::ops::check;
use crate::ops::prelude::*;
use crate::ops::{GruCellBackward, GruCellForward, LstmCellBackward, LstmCellForward};

impl<D: Device> GpuOps<D> {
    /// After the op's checks found `n = batch * hidden` elements: the 32-bit kernel limit, then
    /// the cell kernel `op` (one thread per element) over `bufs` in ABI order.
    fn cell<const N: usize>(
        &self,
        op: &str,
        n: usize,
        shape: SeqShape,
        bufs: [View<'_>; N],
    ) -> Result<()> {
        check::fits_u32(op, check::area(op, n, 4)?)?;
        if n == 0 {
            return Ok(());
        }
        let args = Args::new()
            .bufs(&bufs.each_ref())?
            .dims(&[shape.batch, shape.hidden]);
        self.run(op, launch::elementwise(n), args)
    }
}

impl<D: Device> GatedCellOps for GpuOps<D> {
    fn lstm_cell_forward(&self, a: LstmCellForward<'_>) -> Result<()> {
        let n = a.check(self.context)?;
        self.cell(LstmCellForward::OP, n, a.shape, a.views())
    }

    fn lstm_cell_backward(&self, a: LstmCellBackward<'_>) -> Result<()> {
        let n = a.check(self.context)?;
        self.cell(LstmCellBackward::OP, n, a.shape, a.views())
    }

    fn gru_cell_forward(&self, a: GruCellForward<'_>) -> Result<()> {
        let n = a.check(self.context)?;
        self.cell(GruCellForward::OP, n, a.shape, a.views())
    }

    fn gru_cell_backward(&self, a: GruCellBackward<'_>) -> Result<()> {
        let n = a.check(self.context)?;
        self.cell(GruCellBackward::OP, n, a.shape, a.views())
    }
}
