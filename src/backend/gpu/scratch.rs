//! The per-context scratch of the one-launch grid reductions (geometry `L` of
//! docs/kernel-abi.md): partial results, and the arrival counters ("tickets") with which the
//! last block of a launch finds out that it is last. Counters are zero between launches (the
//! last block resets its own), so the scratch is zeroed once, when it is allocated, and the
//! kernels of one context never overlap (one queue), so they can share it.

use super::GpuOps;
use crate::backend::Device;
use crate::buffer::{Buffer, View};
use crate::error::Result;
use crate::ops::prelude::*;

/// Floats of partial results: column-sum chunks (`chunks * cols`), or two per block of a
/// totals reduction (at most [`MAX_TOTALS_BLOCKS`] blocks).
pub(super) const PARTIALS: usize = 64 * 1024;
/// Column strips of `sum_rows` that may be reduced over several row chunks (one ticket each);
/// wider matrices have enough strips to fill the device with one chunk.
pub(super) const STRIP_TICKETS: usize = 4096;
/// Most blocks of a launch that adds totals (loss sums) or advances the optimizer state.
pub(super) const MAX_TOTALS_BLOCKS: usize = 1024;

/// Floats of split-k GEMM partial products (16 MiB): a split GEMM has fewer output tiles than
/// the device has compute units, so at most 16 splits of `64 * 64 * units` floats; splits that
/// would not fit are fewer. One fixed block, never reallocated: recorded graphs keep its address.
pub(super) const GEMM_PARTS: usize = 4 << 20;

/// Tickets after the strip tickets.
#[derive(Clone, Copy)]
pub(super) enum Ticket {
    /// The loss kernels' totals.
    Totals = 0,
    /// The optimizer step's state advance.
    Optimizer = 1,
    /// The layer-norm backward's weight and bias column sums.
    LayerNorm = 2,
}

const TICKETS: usize = STRIP_TICKETS + 3;

/// The scratch buffer and views into it.
pub(super) struct Scratch(Buffer);

impl Scratch {
    pub(super) fn partials(&self) -> Result<View<'_>> {
        self.0.slice(0, PARTIALS)
    }

    pub(super) fn strip_tickets(&self) -> Result<View<'_>> {
        self.0.slice(PARTIALS, STRIP_TICKETS)
    }

    pub(super) fn ticket(&self, t: Ticket) -> Result<View<'_>> {
        self.0.slice(PARTIALS + STRIP_TICKETS + t as usize, 1)
    }
}

impl<D: Device> GpuOps<D> {
    /// Runs `f` with this context's scratch, allocating and zeroing it on first use.
    pub(super) fn with_scratch<T>(&self, f: impl FnOnce(&Scratch) -> Result<T>) -> Result<T> {
        let mut slot = self.scratch.lock();
        let scratch = match &*slot {
            Some(s) => s,
            None => {
                let b = self.alloc(PARTIALS + TICKETS)?;
                // 0.0f32 has the bit pattern of the integer 0 the tickets start from.
                self.fill(b.view(), 0.0)?;
                slot.insert(Scratch(b))
            }
        };
        f(scratch)
    }

    /// Runs `f` with this context's split-k GEMM scratch ([`GEMM_PARTS`] floats), allocating it
    /// on first use. GEMMs queue in order on the one stream, so they may share it.
    pub(super) fn with_gemm_parts<T>(&self, f: impl FnOnce(View<'_>) -> Result<T>) -> Result<T> {
        let mut slot = self.gemm_parts.lock();
        let parts = match &*slot {
            Some(b) => b,
            None => slot.insert(self.alloc(GEMM_PARTS)?),
        };
        f(parts.view())
    }
}
