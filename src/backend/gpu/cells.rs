//! The LSTM and GRU cell steps on the GPU: the gate math of one time step, one launch each.

use super::GpuOps;
use super::launch::{self, Args};
use crate::backend::Device;
use crate::buffer::View;
use crate::dtype::DType;
use crate::error::Result;
use crate::ops::check;
use crate::ops::prelude::*;
use crate::ops::{Activation, SeqShape};
use crate::ops::{GruCellBackward, GruCellForward, LstmCellBackward, LstmCellForward};

/// `RNN_KIND_BF16` and `RNN_KIND_F16` (kernels-common/half_convert.h): the `kind` argument of
/// the `_lo` cells.
fn kind_code(t: DType) -> u32 {
    if t == DType::Bf16 { 0 } else { 1 }
}

impl<D: Device> GpuOps<D> {
    /// After the op's checks found `n = batch * hidden` elements: the 32-bit kernel limit, then
    /// the cell kernel `op` (one thread per element) over `bufs` in ABI order, then `lo` where
    /// given (the T copy a `_lo` cell of the GEMM path writes), the sizes, and the activation's
    /// code, `lo`'s type code and the activation's parameter, each where there is one.
    pub(super) fn cell<const N: usize>(
        &self,
        op: &str,
        (n, shape): (usize, SeqShape),
        bufs: [View<'_>; N],
        (act, lo): (Option<Activation>, Option<View<'_>>),
    ) -> Result<()> {
        check::fits_u32(op, check::area(op, n, 4)?)?;
        if n == 0 {
            return Ok(());
        }
        let mut args = Args::new().bufs(&bufs.each_ref())?;
        if let Some(lo) = &lo {
            args = args.buf_as(lo, lo.dtype())?;
        }
        args = args.dims(&[shape.batch, shape.hidden]);
        if let Some(act) = act {
            args = args.u32(act.code());
        }
        if let Some(lo) = &lo {
            args = args.u32(kind_code(lo.dtype()));
        }
        if let Some(act) = act {
            args = args.f32(act.param());
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
                self.cell($args::OP, (n, a.shape), a.views(), (None, None))
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
