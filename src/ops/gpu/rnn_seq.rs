//! The whole-sequence Elman ops, each ONE launch where the device allows it, by the first route
//! that fits:
//! 1. with `RNN_SEQ_CLUSTERS=on`, thread-block clusters (sm_90+, hidden <= 512):
//!    `rnn_seq_cluster_*` (geometry `K`), one cluster per tile of 8 batch rows exchanging the
//!    state through distributed shared memory and meeting at the cluster's hardware barrier;
//! 2. a cooperative launch whose grid fits the co-residency limit: `rnn_seq_forward` /
//!    `rnn_seq_backward` (geometry `Q`), each row of blocks meeting at its own barrier in global
//!    memory between steps;
//! 3. everywhere else (OpenCL, HIP, shapes that do not fit) the fused step kernels, once per
//!    step.

use super::GpuOps;
use super::launch::Args;
use super::persistent::SeqTile;
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

/// The grid limit every dialect accepts in y.
const MAX_GRID_Y: usize = 65_535;
/// Blocks of a cluster the cluster kernels may use: the portable maximum, and the largest size
/// Hopper accepts from a function that opts in to non-portable sizes.
const MAX_CLUSTER: usize = 8;
const MAX_CLUSTER_NON_PORTABLE: usize = 16;
/// Hidden units one block of a cluster kernel may own (`RC_MAX_PARTS * RQ_UNITS`).
const MAX_CLUSTER_UNITS: usize = 4 * RQ_UNITS;

/// Units per block and blocks per cluster of the cluster kernels (geometry K). One RQ_UNITS
/// slice per block while that takes at most 16 blocks (the per-step work of a block is then the
/// cooperative kernel's); otherwise the fewest units (a multiple of RQ_UNITS) that cover `hidden`
/// with at most 8 blocks. `None` when `hidden` needs more.
fn cluster_shape(hidden: usize) -> Option<(usize, usize)> {
    if hidden == 0 {
        return None;
    }
    if hidden <= RQ_UNITS * MAX_CLUSTER_NON_PORTABLE {
        return Some((RQ_UNITS, hidden.div_ceil(RQ_UNITS)));
    }
    let units = hidden.div_ceil(MAX_CLUSTER).div_ceil(RQ_UNITS) * RQ_UNITS;
    (units <= MAX_CLUSTER_UNITS).then(|| (units, hidden.div_ceil(units)))
}

/// `RNN_SEQ_CLUSTERS=on` puts the Elman sequence on the cluster kernels where the device has
/// clusters. Off by default: on the H100 they measured no faster than the cooperative kernels
/// (W2: 538 us a training step against 525), the per-step cost being the tile product and the
/// barrier, not the state's trip through L2.
fn clusters_enabled() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| matches!(std::env::var("RNN_SEQ_CLUSTERS").as_deref(), Ok("on")))
}

impl<D: Device> GpuOps<D> {
    /// One clustered launch of `entry` (geometry K): a cluster per tile of RQ_ROWS batch rows,
    /// its blocks splitting the hidden units; `args(units)` gives the arguments. `Ok(false)`
    /// when the device has no clusters or the shape does not fit them.
    fn rnn_seq_clustered(
        &self,
        entry: &str,
        batch: usize,
        hidden: usize,
        args: impl FnOnce(u32) -> Result<Args>,
    ) -> Result<bool> {
        if !clusters_enabled() {
            return Ok(false);
        }
        let Some((units, cluster)) = cluster_shape(hidden) else {
            return Ok(false);
        };
        let tiles = batch.div_ceil(RQ_ROWS);
        let shared = (units + 2 * RQ_ROWS)
            .checked_mul(hidden)
            .and_then(|f| f.checked_mul(4))
            .and_then(|b| u32::try_from(b).ok());
        let (Some(shared), Ok(tiles)) = (shared, u32::try_from(tiles)) else {
            return Ok(false);
        };
        if tiles == 0 || tiles as usize > MAX_GRID_Y {
            return Ok(false);
        }
        let config = LaunchConfig {
            grid: [cluster as u32, tiles, 1],
            block: [RQ_THREADS, 1, 1],
            shared_bytes: shared,
        };
        let module = self.op_set()?;
        let args = args(units as u32)?;
        match self.device.launch_clustered(
            &module,
            entry,
            &config,
            [cluster as u32, 1, 1],
            args.as_slice(),
        ) {
            None => Ok(false),
            Some(Ok(())) => {
                self.count_recorded();
                Ok(true)
            }
            Some(Err(e)) => {
                // A cluster shape the device cannot place is refused before anything runs.
                log::debug!(
                    "{}: {entry} as clusters refused ({e}); trying other routes",
                    self.info.id
                );
                Ok(false)
            }
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
        let clustered =
            self.rnn_seq_clustered("rnn_seq_cluster_forward", batch, hidden, |units| {
                Ok(Args::new()
                    .buf(&pre)?
                    .buf(&hs)?
                    .buf(&w_hh)?
                    .buf(&b_ih)?
                    .buf(&b_hh)?
                    .u32(steps as u32)
                    .u32(batch as u32)
                    .u32(hidden as u32)
                    .u32(units)
                    .u32(act.code())
                    .f32(act.param()))
            })?;
        if clustered {
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
        let clustered =
            self.rnn_seq_clustered("rnn_seq_cluster_backward", batch, hidden, |units| {
                Ok(Args::new()
                    .buf(&dh)?
                    .buf(&hs)?
                    .buf(&w_hh)?
                    .buf(&dpre)?
                    .u32(steps as u32)
                    .u32(batch as u32)
                    .u32(hidden as u32)
                    .u32(units)
                    .u32(act.code())
                    .f32(act.param()))
            })?;
        if clustered {
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

#[cfg(test)]
mod tests {
    use super::cluster_shape;

    #[test]
    fn cluster_shape_covers_hidden_with_one_slice_per_block_or_at_most_eight_blocks() {
        assert_eq!(cluster_shape(256), Some((16, 16)));
        assert_eq!(cluster_shape(100), Some((16, 7)));
        assert_eq!(cluster_shape(1), Some((16, 1)));
        assert_eq!(cluster_shape(257), Some((48, 6)));
        assert_eq!(cluster_shape(512), Some((64, 8)));
        assert_eq!(cluster_shape(513), None);
        assert_eq!(cluster_shape(0), None);
    }
}
