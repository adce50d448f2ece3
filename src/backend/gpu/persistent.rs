//! One cooperative launch of a persistent sequence kernel (geometry `Q`, docs/kernel-abi.md):
//! blocks that own a slice of hidden units for the whole launch, step through time together and
//! meet between steps at their block row's barrier (a row of blocks reads only state rows that
//! its own blocks wrote). Only possible where the device can launch a grid whose blocks all run
//! at once (CUDA's cooperative launch; NVIDIA GPUs under OpenCL, one group per compute unit) and
//! the grid fits that limit; the callers loop their step kernels otherwise.

use super::GpuOps;
use super::launch::Args;
use crate::backend::Device;
use crate::buffer::{Buffer, View};
use crate::dtype::DType;
use crate::error::Result;
use crate::kernel::LaunchConfig;
use crate::ops::prelude::*;
use parking_lot::Mutex;

/// Words between two block rows' barrier counters (`RQ_GROUP_STRIDE` in kernels-cu/rnn_seq.cu):
/// one 128-byte line each.
const RQ_GROUP_STRIDE: usize = 32;
/// Block rows of a cooperative launch: bounds the barrier buffer (`RQ_GROUP_STRIDE` words per
/// row). Co-residency limits grids far below it on today's devices (132 SMs x a few blocks).
const MAX_BARRIER_ROWS: usize = 4096;

/// The block tile of a persistent kernel: `rows` batch rows, `units` hidden units, `threads`
/// threads, and the floats of dynamic shared memory a block needs at the launch's `hidden`
/// (`None` when that overflows).
#[derive(Debug, Clone, Copy)]
pub(super) struct SeqTile {
    pub rows: usize,
    pub units: usize,
    pub threads: u32,
    pub shared_floats: Option<usize>,
}

/// The grid of a persistent launch: every unit slice in x, as many row tiles in y as fit the
/// co-residency limit `limit` (blocks stride over the rest). `None` when the unit slices alone
/// exceed it.
pub(super) fn persistent_grid(
    batch: usize,
    hidden: usize,
    limit: usize,
    rows: usize,
    units: usize,
) -> Option<[u32; 3]> {
    let gx = hidden.div_ceil(units);
    if gx == 0 || gx > limit {
        return None;
    }
    let gy = batch
        .div_ceil(rows)
        .min(limit / gx)
        .clamp(1, MAX_BARRIER_ROWS);
    Some([gx as u32, gy as u32, 1])
}

/// A persistent launch that fits the device: the entry and its launch configuration.
#[derive(Debug, Clone)]
pub(super) struct CoopPlan {
    pub entry: String,
    pub config: LaunchConfig,
}

impl<D: Device> GpuOps<D> {
    /// The cooperative launch of the persistent kernel `entry` over `batch x hidden` with block
    /// tile `tile`; `None` when the device or the shape does not allow it (the caller takes
    /// another algorithm).
    pub(super) fn cooperative_plan(
        &self,
        entry: &str,
        tile: SeqTile,
        batch: usize,
        hidden: usize,
    ) -> Result<Option<CoopPlan>> {
        let shared = tile
            .shared_floats
            .and_then(|f| f.checked_mul(4))
            .and_then(|b| u32::try_from(b).ok());
        let Some(shared) = shared else {
            return Ok(None);
        };
        let module = self.module_for(entry)?;
        let limit = match self
            .device
            .cooperative_blocks(&module, entry, tile.threads, shared)
        {
            None => return Ok(None),
            Some(limit) => limit? as usize,
        };
        let Some(grid) = persistent_grid(batch, hidden, limit, tile.rows, tile.units) else {
            log::debug!(
                "{}: {entry} {batch}x{hidden} does not fit {limit} co-resident blocks \
                 ({shared} bytes of shared memory each); running it per step",
                self.info.id
            );
            return Ok(None);
        };
        Ok(Some(CoopPlan {
            entry: entry.to_string(),
            config: LaunchConfig {
                grid,
                block: [tile.threads, 1, 1],
                shared_bytes: shared,
            },
        }))
    }

    /// The cooperative launch `plan` (of [`GpuOps::cooperative_plan`]), `args(barrier)` its
    /// arguments.
    pub(super) fn cooperative(
        &self,
        plan: &CoopPlan,
        args: impl FnOnce(&View<'_>) -> Result<Args>,
    ) -> Result<()> {
        let entry = plan.entry.as_str();
        let module = self.module_for(entry)?;
        // One counter per block row, zeroed once; each completed barrier leaves its low bits at
        // zero again (kernels-cu/rnn_seq.cu), and launches on this context's one queue never
        // overlap. Allocated for the largest grid once, at the first (eager) step, since a
        // step being recorded as a graph may not allocate.
        let mut slot = self.seq_barrier.lock();
        let barrier = match &*slot {
            Some(b) => b,
            None => {
                let b = self.alloc(MAX_BARRIER_ROWS * RQ_GROUP_STRIDE)?;
                self.fill(b.view(), 0.0)?;
                slot.insert(b)
            }
        };
        let args = args(&barrier.view())?;
        self.count_recorded();
        self.device
            .launch_cooperative(&module, entry, &plan.config, args.as_slice())
            .unwrap_or_else(|| {
                // `cooperative_blocks` offered a grid, so the device has the launch.
                Err(crate::Error::Unsupported {
                    op: entry.to_string(),
                    backend: self.info.backend,
                    reason: "the device sized a cooperative grid but refused its launch".into(),
                })
            })
    }
}

impl<D: Device> GpuOps<D> {
    /// Runs `f` with the first `n` elements of the last buffer of `buffers`, a grow-only list of
    /// scratch buffers of the persistent sequence kernels (`zeroed`: each new buffer filled with
    /// zeros first). Each op's launches finish with the buffer before the next op's start, on
    /// the context's one queue, and the lock keeps two threads from interleaving their ops'
    /// launches. It grows only outside graph recording in practice (a step is recorded after it
    /// ran once op by op; recording refuses allocations), and a replaced buffer is kept, since a
    /// recorded graph may still use it.
    pub(super) fn with_grow_only<R>(
        &self,
        buffers: &Mutex<Vec<Buffer>>,
        n: usize,
        zeroed: bool,
        f: impl FnOnce(View<'_>) -> Result<R>,
    ) -> Result<R> {
        let fill = |b: &Buffer| {
            if zeroed {
                self.fill(b.view(), 0.0)
            } else {
                Ok(())
            }
        };
        self.grow_only(buffers, (DType::F32, n), fill, f)
    }

    /// [`GpuOps::with_grow_only`] over buffers of `dtype`, not zeroed: a buffer of another type
    /// is replaced as a shorter one is.
    pub(super) fn with_grow_only_as<R>(
        &self,
        buffers: &Mutex<Vec<Buffer>>,
        (dtype, n): (DType, usize),
        f: impl FnOnce(View<'_>) -> Result<R>,
    ) -> Result<R> {
        self.grow_only(buffers, (dtype, n), |_| Ok(()), f)
    }

    /// Both of the above: `prepare` runs on each new buffer.
    fn grow_only<R>(
        &self,
        buffers: &Mutex<Vec<Buffer>>,
        (dtype, n): (DType, usize),
        prepare: impl Fn(&Buffer) -> Result<()>,
        f: impl FnOnce(View<'_>) -> Result<R>,
    ) -> Result<R> {
        let mut buffers = buffers.lock();
        let current = buffers
            .last()
            .filter(|b| b.dtype() == dtype)
            .map_or(0, |b| b.len());
        if current < n {
            let b = self.alloc_as(dtype, n.max(current.saturating_mul(2)))?;
            prepare(&b)?;
            buffers.push(b);
        }
        // Not empty: it held a buffer of at least n > 0 elements, or got one.
        let buffer = buffers[buffers.len() - 1].slice(0, n)?;
        f(buffer)
    }
}

#[cfg(test)]
mod tests {
    use super::persistent_grid;

    #[test]
    fn grid_covers_units_and_respects_the_limit() {
        // W2 on an H100 (132 SMs, one block each at least), Elman tile 8 x 16.
        assert_eq!(persistent_grid(64, 256, 132, 8, 16), Some([16, 8, 1]));
        // Row tiles beyond the limit are strided, never more blocks than co-resident.
        assert_eq!(persistent_grid(1000, 256, 132, 8, 16), Some([16, 8, 1]));
        assert_eq!(persistent_grid(3, 17, 132, 8, 16), Some([2, 1, 1]));
        // More unit slices than can be resident: the caller falls back.
        assert_eq!(persistent_grid(64, 4096, 132, 8, 16), None);
        assert_eq!(persistent_grid(64, 256, 0, 8, 16), None);
    }
}
