//! The block-local sequence kernels (`*_seq_*_local`, geometry `B`, kernels-cu/small_seq.cu,
//! kernels-cl/small_seq.cl): each block owns a tile of batch rows and every hidden unit, keeps
//! the whole W_hh and its state rows in shared memory, and steps with `__syncthreads` only, in
//! one plain launch per sequence op. The persistent kernels (geometry `Q`) split the hidden
//! units across blocks and meet at a global-memory barrier every step, which costs about the
//! same however little a step computes (3-7 us a step on an H100, 2026-11-26, issue 27),
//! so it dominates at small hidden sizes; these kernels have no such barrier, and run on every
//! device whose blocks hold W_hh (no co-residency needed).
//!
//! Selection (`RNN_RECURRENT_BLOCK_LOCAL`, `ContextOptions::recurrent_block_local`): by default
//! a sequence runs block-local wherever W_hh and one tile fit a block's shared memory, at any
//! batch (on an H100 under CUDA: LSTM hidden <= 119, GRU <= 136, Elman <= 240 at one row a
//! block; with 48 KB, OpenCL on NVIDIA and HIP: LSTM <= 52, GRU <= 62, Elman <= 108). There a
//! row's whole recurrence stays in one block and a step costs its products, not a barrier;
//! larger hidden sizes do not fit, so the rule needs no size threshold. `0` turns them off (the
//! persistent, GEMM or step paths decide as before).

use super::GpuOps;
use super::launch::Args;
use crate::backend::Device;
use crate::buffer::View;
use crate::env_switch::Switch;
use crate::error::Result;
use crate::kernel::LaunchConfig;
use crate::ops::SeqShape;

/// `RNN_RECURRENT_BLOCK_LOCAL`: off (`0`, `off`, `false`, `no`) keeps every recurrent sequence
/// off the block-local kernels; on, unset or empty, they take what fits (the module docs).
const ENV: Switch = Switch {
    name: "RNN_RECURRENT_BLOCK_LOCAL",
    unset: true,
    empty: true,
    yes_no: true,
};

/// The context's choice (`ContextOptions::recurrent_block_local`), else [`ENV`]'s. Read once,
/// when the context is created.
pub(crate) fn choice(option: Option<bool>) -> Result<bool> {
    match option {
        Some(on) => Ok(on),
        None => ENV.read_env(),
    }
}

/// The most threads of a block (`__launch_bounds__(1024)` in kernels-cu/small_seq.cu).
const MAX_THREADS: usize = 1024;

/// The largest shared memory a block of any current GPU may have (an H100's 227 KB): W_hh
/// alone beyond it rules a kernel out before the device is asked (and its module compiled).
const MAX_SHARED_BYTES: usize = 227 << 10;

/// A block-local launch: `grid` blocks of `threads` threads with `shared_floats` floats of
/// dynamic shared memory each, `rows` batch rows a block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BlockLocal {
    pub grid: usize,
    pub rows: usize,
    pub threads: usize,
    pub shared_floats: usize,
}

/// What a device gives one block: threads and bytes of dynamic shared memory.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BlockRoom {
    pub threads: usize,
    pub shared_bytes: usize,
}

/// The launch of a block-local kernel with `gates` gate blocks (1 Elman, 3 GRU, 4 LSTM) over
/// `batch x hidden`, forward or backward, on a device with `compute_units` SMs whose blocks
/// have `room`: the fewest rows a block that still give every SM one block (more rows per
/// block only lengthen each block's steps while SMs idle), fewer where the threads (one per
/// product and row group, and at least one per cell element of the tile) or the shared memory
/// (W_hh and the staged rows with hidden padded to 4, the products) would not fit. `None` where not even one row fits.
pub(crate) fn geometry(
    gates: usize,
    (batch, hidden): (usize, usize),
    forward: bool,
    compute_units: usize,
    room: BlockRoom,
) -> Option<BlockLocal> {
    let max_threads = room.threads.min(MAX_THREADS);
    if batch == 0 || hidden == 0 || hidden > max_threads {
        return None;
    }
    let gh = gates.checked_mul(hidden)?;
    let padded = gh.div_ceil(32).checked_mul(32)?;
    let max_groups = max_threads / padded;
    if max_groups == 0 {
        return None;
    }
    // k runs in float4s: each gate block's hidden padded to 4, in W and in the staged rows.
    let padded_hidden = hidden.div_ceil(4) * 4;
    let width = if forward { 1 } else { gates } * padded_hidden;
    let w = gh.checked_mul(padded_hidden)?;
    let want = batch
        .div_ceil(compute_units.max(1))
        .min(max_threads / hidden);
    (1..=want.max(1)).rev().find_map(|rows| {
        let groups = rows.min(max_groups);
        let threads = padded * groups;
        let slots = groups * rows.div_ceil(groups);
        let floats = w.checked_add(slots * (width + gh))?;
        let fits = rows * hidden <= threads && floats.checked_mul(4)? <= room.shared_bytes;
        fits.then_some(BlockLocal {
            grid: batch.div_ceil(rows),
            rows,
            threads,
            shared_floats: floats,
        })
    })
}

/// The debug record of a sequence op that runs block-local, which benches/recurrent_grid.rs
/// reads to name the algorithm.
fn note(device: &impl std::fmt::Display, entry: &str, shape: SeqShape, launch: BlockLocal) {
    log::debug!(
        "{device}: {entry} {}x{} runs block-local ({} blocks of {} rows)",
        shape.batch,
        shape.hidden,
        launch.grid,
        launch.rows
    );
}

/// A block-local kernel: its entry, gate blocks (1 Elman, 3 GRU, 4 LSTM) and direction.
#[derive(Clone, Copy)]
struct LocalKernel {
    pub entry: &'static str,
    pub gates: usize,
    pub forward: bool,
}

impl LocalKernel {
    /// The block-local counterpart of the persistent kernel `persistent` (`lstm_seq_forward`,
    /// ...; same arguments less the barrier and exchange buffers).
    pub(super) fn of(persistent: &str) -> Option<LocalKernel> {
        let (entry, gates) = match persistent {
            "rnn_seq_forward" => ("rnn_seq_forward_local", 1),
            "rnn_seq_backward" => ("rnn_seq_backward_local", 1),
            "lstm_seq_forward" => ("lstm_seq_forward_local", 4),
            "lstm_seq_backward" => ("lstm_seq_backward_local", 4),
            "gru_seq_forward" => ("gru_seq_forward_local", 3),
            "gru_seq_backward" => ("gru_seq_backward_local", 3),
            _ => return None,
        };
        Some(LocalKernel {
            entry,
            gates,
            forward: persistent.ends_with("_forward"),
        })
    }
}

impl<D: Device> GpuOps<D> {
    /// One launch of the block-local counterpart of the persistent kernel `persistent` over every step of `shape` with `bufs`, then
    /// the dimensions and what `tail` appends (the Elman activation); false where they are
    /// turned off or it does not fit the device.
    pub(super) fn block_local(
        &self,
        persistent: &str,
        bufs: &[&View<'_>],
        shape: SeqShape,
        tail: impl FnOnce(Args) -> Args,
    ) -> Result<bool> {
        let Some(k) = LocalKernel::of(persistent) else {
            return Ok(false);
        };
        let (steps, batch, hidden) = (shape.steps, shape.batch, shape.hidden);
        let w_bytes = k.gates.saturating_mul(hidden).saturating_mul(hidden) * 4;
        if !self.seq_block_local || w_bytes > MAX_SHARED_BYTES {
            return Ok(false);
        }
        let module = self.module_for(k.entry)?;
        let Some(limits) = self.device.block_limits(&module, k.entry).transpose()? else {
            return Ok(false);
        };
        let room = BlockRoom {
            threads: limits.0 as usize,
            shared_bytes: limits.1 as usize,
        };
        let units = self.info.compute_units as usize;
        let Some(launch) = geometry(k.gates, (batch, hidden), k.forward, units, room) else {
            return Ok(false);
        };
        note(&self.info.id, k.entry, shape, launch);
        let args = tail(Args::new().bufs(bufs)?.dims(&[steps, batch, hidden]));
        let config = LaunchConfig {
            grid: [launch.grid as u32, 1, 1],
            block: [launch.threads as u32, 1, 1],
            // Fits u32: at most `room.shared_bytes`.
            shared_bytes: (launch.shared_floats * 4) as u32,
        };
        self.count_recorded();
        self.device
            .launch(&module, k.entry, &config, args.as_slice())?;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::{BlockLocal, BlockRoom, geometry};

    const H100: BlockRoom = BlockRoom {
        threads: 1024,
        shared_bytes: 227 << 10,
    };
    const NV_OPENCL: BlockRoom = BlockRoom {
        threads: 1024,
        shared_bytes: 48 << 10,
    };

    /// The largest hidden size whose forward and backward both fit at batch 1.
    fn largest(gates: usize, limit: BlockRoom) -> usize {
        (1..=1024)
            .filter(|&h| {
                geometry(gates, (1, h), true, 132, limit).is_some()
                    && geometry(gates, (1, h), false, 132, limit).is_some()
            })
            .max()
            .unwrap_or(0)
    }

    #[test]
    fn hidden_limits_by_cell_and_device() {
        assert_eq!([4, 3, 1].map(|g| largest(g, H100)), [119, 136, 240]);
        assert_eq!([4, 3, 1].map(|g| largest(g, NV_OPENCL)), [52, 62, 108]);
    }

    #[test]
    fn one_row_a_block_until_the_batch_exceeds_the_sms() {
        // LSTM hidden 64 forward: 256 products, one thread each.
        let one = geometry(4, (64, 64), true, 132, H100).unwrap();
        assert_eq!(
            one,
            BlockLocal {
                grid: 64,
                rows: 1,
                threads: 256,
                shared_floats: 4 * 64 * 64 + 64 + 256,
            }
        );
        // Batch 256 on 132 SMs: two rows a block, a row group each.
        let two = geometry(4, (256, 64), true, 132, H100).unwrap();
        assert_eq!((two.grid, two.rows, two.threads), (128, 2, 512));
        // Batch 4096: 32 rows wanted; the cell threads (rows x hidden <= threads) allow 16.
        let many = geometry(4, (4096, 64), false, 132, H100).unwrap();
        assert_eq!((many.grid, many.rows, many.threads), (256, 16, 1024));
        assert!(many.shared_floats * 4 <= H100.shared_bytes);
    }

    #[test]
    fn nothing_fits_without_room_for_w() {
        assert_eq!(geometry(4, (8, 128), true, 132, H100), None);
        assert_eq!(geometry(1, (8, 2000), true, 132, H100), None);
        assert_eq!(geometry(4, (0, 16), true, 132, H100), None);
        let none = BlockRoom {
            threads: 1024,
            shared_bytes: 0,
        };
        assert_eq!(geometry(4, (1, 16), true, 132, none), None);
        // More than 1024 products a row: no block has the threads.
        let unbounded = BlockRoom {
            threads: 1 << 20,
            shared_bytes: usize::MAX,
        };
        assert_eq!(geometry(4, (1, 300), true, 132, unbounded), None);
        // A kernel limited to 128 work-items (registers) cannot take 256 products.
        let small = BlockRoom {
            threads: 128,
            shared_bytes: 48 << 10,
        };
        assert_eq!(geometry(4, (1, 64), true, 132, small), None);
        assert!(geometry(4, (1, 32), true, 132, small).is_some());
    }
}
