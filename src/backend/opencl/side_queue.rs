//! A second in-order queue for host-to-device copies that overlap the main queue's kernels
//! (`Device::write_on_side`), ordered against the main queue by a marker on one queue and a
//! barrier on the other (`Device::order_streams`), without blocking the host. Each copy is
//! non-blocking from a staging block the queue owns, so the caller's bytes may be reused on
//! return; a block is refilled only once its previous copy has finished.

use std::ffi::c_void;
use std::ptr;
use std::sync::OnceLock;

use opencl3::command_queue::{
    CL_NON_BLOCKING, CommandQueue, enqueue_barrier_with_wait_list, enqueue_marker_with_wait_list,
    enqueue_write_buffer,
};
use opencl3::context::Context;
use opencl3::event::wait_for_events;
use opencl3::types::{cl_event, cl_int, cl_mem};
use parking_lot::Mutex;

use super::error::cl_error;
use super::event::release;
use crate::error::{Error, Result};

/// Staging blocks used in turn: a batch's inputs and targets, for two batches in flight.
const BLOCKS: usize = 4;

/// A copy's completion event.
struct Pending(cl_event);

// SAFETY: an OpenCL event handle may be waited on and released from any thread (OpenCL 1.1+
// makes every API call but clSetKernelArg thread-safe); it is used under the staging lock.
unsafe impl Send for Pending {}

/// One staging block and the copy still reading it, if any.
#[derive(Default)]
struct Block {
    bytes: Vec<u8>,
    pending: Option<Pending>,
}

impl Block {
    /// Waits for the copy reading this block, then forgets its event.
    fn settle(&mut self) -> Result<()> {
        if let Some(Pending(event)) = self.pending.take() {
            let waited = wait_for_events(&[event]);
            release(event);
            waited.map_err(|c| cl_error("clWaitForEvents", c))?;
        }
        Ok(())
    }
}

/// The side queue (created on first use) and its staging blocks.
#[derive(Default)]
pub(super) struct SideQueue {
    queue: OnceLock<CommandQueue>,
    blocks: Mutex<(usize, Vec<Block>)>,
}

impl SideQueue {
    /// Waits for every copy, so the staging blocks may be freed.
    pub(super) fn finish(&self) {
        if let Some(q) = self.queue.get() {
            let _ = q.finish();
        }
        for block in self.blocks.lock().1.iter_mut() {
            let _ = block.settle();
        }
    }

    /// The side queue of `context`, created on first use.
    fn queue(&self, context: &Context) -> Result<&CommandQueue> {
        if let Some(q) = self.queue.get() {
            return Ok(q);
        }
        let q = CommandQueue::create_default(context, 0)
            .map_err(|e| cl_error("clCreateCommandQueue", e.0))?;
        // Two threads racing here each made a queue; the loser's is dropped unused.
        Ok(self.queue.get_or_init(|| q))
    }

    /// Copies `src` into a staging block, then queues its non-blocking write to `dst` at
    /// `offset` (a range the caller checked) on the side queue of `context`; `enqueue_error`
    /// turns a failed enqueue's status into the error.
    pub(super) fn write(
        &self,
        context: &Context,
        dst: cl_mem,
        offset: usize,
        src: &[u8],
        enqueue_error: impl FnOnce(cl_int) -> Error,
    ) -> Result<()> {
        if src.is_empty() {
            return Ok(());
        }
        let queue = self.queue(context)?;
        let mut guard = self.blocks.lock();
        let (next, blocks) = &mut *guard;
        if blocks.is_empty() {
            blocks.resize_with(BLOCKS, Block::default);
        }
        let block = &mut blocks[*next];
        *next = (*next + 1) % BLOCKS;
        block.settle()?;
        block.bytes.clear();
        block.bytes.extend_from_slice(src);
        // SAFETY: `dst` is a live buffer with `offset + len` in range (checked by the caller);
        // `block.bytes` is neither touched nor freed until the returned event has completed
        // (`settle` waits for it before any refill, and `finish` before the drop).
        let event = unsafe {
            enqueue_write_buffer(
                queue.get(),
                dst,
                CL_NON_BLOCKING,
                offset,
                src.len(),
                block.bytes.as_ptr() as *const c_void,
                0,
                ptr::null(),
            )
        }
        .map_err(enqueue_error)?;
        block.pending = Some(Pending(event));
        queue.flush().map_err(|e| cl_error("clFlush", e.0))
    }

    /// Makes the side queue wait for the work queued on `main` so far (`to_side`), or `main`
    /// wait for the side queue's.
    pub(super) fn order(
        &self,
        context: &Context,
        main: &CommandQueue,
        to_side: bool,
    ) -> Result<()> {
        let side = self.queue(context)?;
        let (waiter, waited) = match to_side {
            true => (side, main),
            false => (main, side),
        };
        // SAFETY: a marker with an empty wait list on a live queue; its event is released
        // below, once the barrier holds its own reference.
        let marker = unsafe { enqueue_marker_with_wait_list(waited.get(), 0, ptr::null()) }
            .map_err(|c| cl_error("clEnqueueMarkerWithWaitList", c))?;
        // Another queue's commands wait on the marker only once it has been submitted.
        let flushed = waited.flush().map_err(|e| cl_error("clFlush", e.0));
        // SAFETY: a barrier on a live queue of the same context, waiting on one live event.
        let barrier = flushed.and_then(|()| {
            unsafe { enqueue_barrier_with_wait_list(waiter.get(), 1, &marker) }
                .map_err(|c| cl_error("clEnqueueBarrierWithWaitList", c))
        });
        release(marker);
        release(barrier?);
        Ok(())
    }
}
