//! Host-to-device copies on the side stream through pinned staging memory
//! (`Device::write_on_side`): a copy from pinned memory runs on the copy engines while the
//! main stream computes, where one from pageable memory would be staged by the driver,
//! possibly in step with the stream. A few staging blocks are used in turn; a block is
//! refilled only once its previous copy has finished (an event per block).

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaEvent, CudaStream, PinnedHostSlice, result};
use parking_lot::Mutex;

use super::error;
use crate::backend::DevicePtr;
use crate::error::Result;

/// Staging blocks used in turn: a batch's inputs and targets, for two batches in flight.
const BLOCKS: usize = 4;

/// One pinned block and the event recorded after the last copy out of it.
struct Block {
    host: PinnedHostSlice<u8>,
    copied: CudaEvent,
}

/// The side stream's staging blocks (grown on demand, never shrunk).
#[derive(Default)]
pub(super) struct Staging {
    blocks: Mutex<(usize, Vec<Option<Block>>)>,
}

impl Staging {
    /// Copies `src` into a pinned block of `ctx`, then queues its copy to `dst` on `side`;
    /// returns once `src` may be reused.
    pub(super) fn write(
        &self,
        ctx: &Arc<CudaContext>,
        side: &CudaStream,
        dst: DevicePtr,
        src: &[u8],
    ) -> Result<()> {
        if src.is_empty() {
            return Ok(());
        }
        let mut guard = self.blocks.lock();
        let (next, blocks) = &mut *guard;
        if blocks.is_empty() {
            blocks.resize_with(BLOCKS, || None);
        }
        let slot = &mut blocks[*next];
        *next = (*next + 1) % BLOCKS;
        if slot.as_ref().is_none_or(|b| b.host.len() < src.len()) {
            // The old block's copy must finish before the block is freed (its drop waits on
            // an event of its own that nothing recorded, so it would not).
            if let Some(old) = slot.take() {
                old.copied
                    .synchronize()
                    .map_err(|e| error::driver("cuEventSynchronize", e))?;
            }
            // SAFETY: the block is filled below before any copy reads it.
            let host = unsafe { ctx.alloc_pinned::<u8>(src.len()) }
                .map_err(|e| error::driver("cuMemHostAlloc", e))?;
            let copied = ctx
                .new_event(None)
                .map_err(|e| error::driver("cuEventCreate", e))?;
            *slot = Some(Block { host, copied });
        }
        let Some(block) = slot.as_mut() else {
            unreachable!("the block was made above")
        };
        // The block's previous copy has read it before it is refilled.
        block
            .copied
            .synchronize()
            .map_err(|e| error::driver("cuEventSynchronize", e))?;
        let host = block
            .host
            .as_mut_slice()
            .map_err(|e| error::driver("cuEventSynchronize", e))?;
        let staged = &mut host[..src.len()];
        staged.copy_from_slice(src);
        // SAFETY: the caller (generic ops) checked that `src.len()` bytes from `dst` lie
        // inside the allocation; `staged` is pinned memory that stays allocated and untouched
        // until the event recorded next has passed (checked above before any refill or free).
        unsafe { result::memcpy_htod_async(dst, &*staged, side.cu_stream()) }
            .map_err(|e| error::driver("cuMemcpyHtoDAsync", e))?;
        block
            .copied
            .record(side)
            .map_err(|e| error::driver("cuEventRecord", e))
    }
}
