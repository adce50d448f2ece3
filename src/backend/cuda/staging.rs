//! Host blocks in pinned memory (`Device::host_block`) and their copies to the device on the
//! side stream (`Device::write_block_on_side`): a copy from pinned memory runs on the copy
//! engines while the main stream computes, where one from pageable memory would be staged by
//! the driver, on the calling thread. Each block carries the event recorded after its last
//! copy; refilling or freeing the block waits for it, so the writer (a data stream's reading
//! thread) waits, never the thread that queues the copies.

use std::any::Any;
use std::ops::Range;
use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaEvent, CudaStream, PinnedHostSlice, result};

use super::error;
use crate::backend::DevicePtr;
use crate::error::Result;
use crate::ops::HostBlock;

/// A pinned block (write-combined unless it is read back) and the event recorded after the
/// last copy out of it.
pub(super) struct PinnedBlock {
    // Field order is drop order, but `Drop` waits for the event before either goes.
    host: PinnedHostSlice<u8>,
    copied: CudaEvent,
}

impl PinnedBlock {
    /// A block of `bytes` (at least 1: the driver refuses empty allocations) in `ctx`;
    /// write-combined (quick to fill and to copy from, slow to read) unless `read_back`.
    pub(super) fn new(ctx: &Arc<CudaContext>, bytes: usize, read_back: bool) -> Result<Self> {
        let flags = match read_back {
            true => 0,
            false => cudarc::driver::sys::CU_MEMHOSTALLOC_WRITECOMBINED,
        };
        // SAFETY: the memory is uninitialized until written; `bytes_mut` hands it out only to
        // be written (and read back only by a writer that filled what it reads), and a copy
        // reads only the range its caller filled.
        let host = unsafe { ctx.alloc_pinned_with_flags::<u8>(bytes.max(1), flags) }
            .map_err(|e| error::driver("cuMemHostAlloc", e))?;
        let copied = ctx
            .new_event(None)
            .map_err(|e| error::driver("cuEventCreate", e))?;
        Ok(PinnedBlock { host, copied })
    }

    fn settle(&self) -> Result<()> {
        self.copied
            .synchronize()
            .map_err(|e| error::driver("cuEventSynchronize", e))
    }

    /// Queues the copy of bytes `range` (checked against the block by the caller) to `dst` on
    /// `side`, then records the block's event after it.
    pub(super) fn copy_to(
        &self,
        side: &CudaStream,
        dst: DevicePtr,
        range: Range<usize>,
    ) -> Result<()> {
        // `as_slice` waits on the slice's own event, which nothing records: it does not block.
        let host = self
            .host
            .as_slice()
            .map_err(|e| error::driver("cuEventSynchronize", e))?;
        let src = &host[range];
        // SAFETY: the caller (generic ops) checked that `src.len()` bytes from `dst` lie inside
        // the allocation; `src` is pinned memory that is neither written (`bytes_mut`) nor
        // freed (`Drop`) before the event recorded next has passed.
        unsafe { result::memcpy_htod_async(dst, src, side.cu_stream()) }
            .map_err(|e| error::driver("cuMemcpyHtoDAsync", e))?;
        self.copied
            .record(side)
            .map_err(|e| error::driver("cuEventRecord", e))
    }
}

impl HostBlock for PinnedBlock {
    fn bytes_mut(&mut self) -> Result<&mut [u8]> {
        self.settle()?;
        self.host
            .as_mut_slice()
            .map_err(|e| error::driver("cuEventSynchronize", e))
    }

    fn len(&self) -> usize {
        self.host.len()
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

impl Drop for PinnedBlock {
    fn drop(&mut self) {
        // The slice's own drop waits on its own event, which nothing recorded.
        if let Err(e) = self.settle() {
            log::warn!("cuda: a pinned block's last copy failed: {e}");
        }
    }
}
