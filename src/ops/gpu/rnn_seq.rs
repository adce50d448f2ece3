//! The whole-sequence Elman ops. Where the device has a cooperative launch and the grid fits
//! the co-residency limit, ONE launch of the persistent `rnn_seq_forward` / `rnn_seq_backward`
//! kernels (geometry `Q`, kernels-cu/rnn_seq.cu) runs every time step, the blocks meeting at a
//! grid-wide barrier between steps; everywhere else (OpenCL, HIP, shapes that do not fit) the
//! fused step kernels run once per step.

use super::GpuOps;
use super::launch::Args;
use crate::backend::Device;
use crate::buffer::View;
use crate::error::Result;
use crate::kernel::LaunchConfig;
use crate::ops::{Activation, check};

/// Batch rows of a block tile (`RQ_ROWS` in kernels-cu/rnn_seq.cu).
const RQ_ROWS: usize = 8;
/// Hidden units a block owns (`RQ_UNITS`).
const RQ_UNITS: usize = 16;
/// Threads per block (`RQ_THREADS`).
const RQ_THREADS: u32 = 256;
/// The grid limit every dialect accepts in y.
const MAX_GRID_Y: usize = 65_535;

/// The grid of a persistent launch: every unit slice in x, as many row tiles in y as fit the
/// co-residency limit `limit` (blocks stride over the rest). `None` when the unit slices alone
/// exceed it.
fn persistent_grid(batch: usize, hidden: usize, limit: usize) -> Option<[u32; 3]> {
    let gx = hidden.div_ceil(RQ_UNITS);
    if gx == 0 || gx > limit {
        return None;
    }
    let gy = batch.div_ceil(RQ_ROWS).min(limit / gx).clamp(1, MAX_GRID_Y);
    Some([gx as u32, gy as u32, 1])
}

impl<D: Device> GpuOps<D> {
    /// One cooperative launch of the persistent kernel `entry`, with `args(barrier)` its
    /// arguments. `Ok(false)` when the device or the shape does not allow it (the caller loops
    /// the step kernels instead).
    fn rnn_seq_cooperative(
        &self,
        entry: &str,
        batch: usize,
        hidden: usize,
        args: impl FnOnce(&View<'_>) -> Result<Args>,
    ) -> Result<bool> {
        // The W slice and the staged state rows, in floats.
        let shared = (RQ_UNITS + RQ_ROWS)
            .checked_mul(hidden)
            .and_then(|f| f.checked_mul(4))
            .and_then(|b| u32::try_from(b).ok());
        let Some(shared) = shared else {
            return Ok(false);
        };
        let module = self.op_set()?;
        let limit = match self
            .device
            .cooperative_blocks(&module, entry, RQ_THREADS, shared)
        {
            None => return Ok(false),
            Some(limit) => limit? as usize,
        };
        let Some(grid) = persistent_grid(batch, hidden, limit) else {
            log::debug!(
                "{}: {entry} {batch}x{hidden} does not fit {limit} co-resident blocks \
                 ({shared} bytes of shared memory each); looping the step kernels",
                self.info.id
            );
            return Ok(false);
        };
        let config = LaunchConfig {
            grid,
            block: [RQ_THREADS, 1, 1],
            shared_bytes: shared,
        };
        // The counter is zeroed once; each completed barrier leaves its low bits at zero again
        // (kernels-cu/rnn_seq.cu), and launches on this context's one queue never overlap.
        let mut slot = self.seq_barrier.lock();
        let barrier = match &*slot {
            Some(b) => b,
            None => {
                let b = self.alloc_buffer(1)?;
                self.fill_impl(b.view(), 0.0)?;
                slot.insert(b)
            }
        };
        let args = args(&barrier.view())?;
        self.count_recorded();
        match self
            .device
            .launch_cooperative(&module, entry, &config, args.as_slice())
        {
            None => Ok(false),
            Some(r) => r.map(|()| true),
        }
    }

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
        let launched = self.rnn_seq_cooperative("rnn_seq_forward", batch, hidden, |barrier| {
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
        let launched = self.rnn_seq_cooperative("rnn_seq_backward", batch, hidden, |barrier| {
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

#[cfg(test)]
mod tests {
    use super::persistent_grid;

    #[test]
    fn grid_covers_units_and_respects_the_limit() {
        // W2 on an H100 (132 SMs, one block each at least).
        assert_eq!(persistent_grid(64, 256, 132), Some([16, 8, 1]));
        // Row tiles beyond the limit are strided, never more blocks than co-resident.
        assert_eq!(persistent_grid(1000, 256, 132), Some([16, 8, 1]));
        assert_eq!(persistent_grid(3, 17, 132), Some([2, 1, 1]));
        // More unit slices than can be resident: the caller falls back.
        assert_eq!(persistent_grid(64, 4096, 132), None);
        assert_eq!(persistent_grid(64, 256, 0), None);
    }
}
