//! The LSTM and GRU cell steps on the GPU: the gate math of one time step, one launch each.

use super::GpuOps;
use super::launch::{self, Args};
use crate::backend::Device;
use crate::buffer::View;
use crate::error::Result;
use crate::ops::check;
use crate::ops::prelude::*;
use crate::ops::{Activation, SeqShape};
use crate::ops::{GruCellBackward, GruCellForward, LstmCellBackward, LstmCellForward};

impl<D: Device> GpuOps<D> {
    /// After the op's checks found `n = batch * hidden` elements: the 32-bit kernel limit, then
    /// the cell kernel `op` (one thread per element) over `bufs` in ABI order, followed by the
    /// activation's code and parameter where `act` names one (the Elman cells).
    pub(super) fn cell<const N: usize>(
        &self,
        op: &str,
        (n, shape): (usize, SeqShape),
        bufs: [View<'_>; N],
        act: Option<Activation>,
    ) -> Result<()> {
        check::fits_u32(op, check::area(op, n, 4)?)?;
        if n == 0 {
            return Ok(());
        }
        let mut args = Args::new()
            .bufs(&bufs.each_ref())?
            .dims(&[shape.batch, shape.hidden]);
        if let Some(act) = act {
            args = args.u32(act.code()).f32(act.param());
        }
        self.run(op, launch::elementwise(n), args)
    }
}

/// The cell ops, one body for all four: the op's checks, then its kernel over its views.
macro_rules! cell_ops {
    ($($method:ident($args:ident)),+ $(,)?) => {
        $(
            fn $method(&self, a: $args<'_>) -> Result<()> {
                let n = a.check(self.context)?;
                self.cell($args::OP, (n, a.shape), a.views(), None)
            }
        )+
    };
}

impl<D: Device> GatedCellOps for GpuOps<D> {
    cell_ops!(
        lstm_cell_forward(LstmCellForward),
        lstm_cell_backward(LstmCellBackward),
        gru_cell_forward(GruCellForward),
        gru_cell_backward(GruCellBackward),
    );
}
