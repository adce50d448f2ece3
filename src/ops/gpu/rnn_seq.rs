//! The whole-sequence Elman ops. Where the device runs persistent kernels (CUDA's cooperative
//! launch; NVIDIA GPUs under OpenCL, see src/backend/opencl/persistent.rs) and the grid fits
//! the co-residency limit, ONE launch of the persistent `rnn_seq_forward` / `rnn_seq_backward`
//! kernels (geometry `Q`, kernels-cu/rnn_seq.cu, kernels-cl/seq.cl) runs every time step, each
//! row of blocks meeting at its own barrier between steps; everywhere else (other OpenCL
//! devices, HIP, shapes that do not fit) the fused step kernels run once per step.

use super::GpuOps;
use super::launch::Args;
use super::persistent::SeqTile;
use crate::backend::Device;
use crate::buffer::View;
use crate::error::Result;
use crate::ops::{Activation, check};

/// Batch rows of a block tile (`RQ_ROWS` in kernels-cu/rnn_seq.cu).
const RQ_ROWS: usize = 8;
/// Hidden units a block owns (`RQ_UNITS`).
const RQ_UNITS: usize = 16;
/// Threads per block (`RQ_THREADS`).
const RQ_THREADS: u32 = 256;

/// The block tile of `rnn_seq_*` at `hidden`: the W slice and the staged state rows in shared
/// memory.
fn tile(hidden: usize) -> SeqTile {
    SeqTile {
        rows: RQ_ROWS,
        units: RQ_UNITS,
        threads: RQ_THREADS,
        shared_floats: (RQ_UNITS + RQ_ROWS).checked_mul(hidden),
    }
}

impl<D: Device> GpuOps<D> {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn rnn_sequence_forward_impl(
        &self,
        pre: View<'_>,
        hs: View<'_>,
        w_hh: View<'_>,
        b_ih: View<'_>,
        b_hh: View<'_>,
        act: Activation,
        steps: usize,
        batch: usize,
        hidden: usize,
    ) -> Result<()> {
        self.mine("rnn_sequence_forward", &[&pre, &hs, &w_hh, &b_ih, &b_hh])?;
        let n = check::rnn_sequence_forward(pre, hs, w_hh, b_ih, b_hh, act, steps, batch, hidden)?;
        if n == 0 || steps == 0 {
            return Ok(());
        }
        let launched =
            self.cooperative("rnn_seq_forward", tile(hidden), batch, hidden, |barrier| {
                Ok(Args::new()
                    .buf(&pre)?
                    .buf(&hs)?
                    .buf(&w_hh)?
                    .buf(&b_ih)?
                    .buf(&b_hh)?
                    .buf(barrier)?
                    .u32(steps as u32)
                    .u32(batch as u32)
                    .u32(hidden as u32)
                    .u32(act.code())
                    .f32(act.param()))
            })?;
        if launched {
            return Ok(());
        }
        crate::ops::rnn_seq::forward_by_steps(
            self, pre, hs, w_hh, b_ih, b_hh, act, steps, batch, hidden,
        )
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn rnn_sequence_backward_impl(
        &self,
        dh: View<'_>,
        hs: View<'_>,
        w_hh: View<'_>,
        dpre: View<'_>,
        act: Activation,
        steps: usize,
        batch: usize,
        hidden: usize,
    ) -> Result<()> {
        self.mine("rnn_sequence_backward", &[&dh, &hs, &w_hh, &dpre])?;
        let n = check::rnn_sequence_backward(dh, hs, w_hh, dpre, act, steps, batch, hidden)?;
        if n == 0 || steps == 0 {
            return Ok(());
        }
        let launched =
            self.cooperative("rnn_seq_backward", tile(hidden), batch, hidden, |barrier| {
                Ok(Args::new()
                    .buf(&dh)?
                    .buf(&hs)?
                    .buf(&w_hh)?
                    .buf(&dpre)?
                    .buf(barrier)?
                    .u32(steps as u32)
                    .u32(batch as u32)
                    .u32(hidden as u32)
                    .u32(act.code())
                    .f32(act.param()))
            })?;
        if launched {
            return Ok(());
        }
        crate::ops::rnn_seq::backward_by_steps(self, dh, hs, w_hh, dpre, act, steps, batch, hidden)
    }
}
