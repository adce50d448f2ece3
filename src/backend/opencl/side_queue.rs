//! A second in-order queue for host-to-device copies that overlap the main queue's kernels
//! (`Device::write_block_on_side`), ordered against the main queue through events
//! (`Device::order_streams`), without blocking the host. The copies read host blocks
//! (`Device::host_block`) that are buffers allocated by the driver in host memory
//! (`CL_MEM_ALLOC_HOST_PTR`) and kept mapped: on NVIDIA's OpenCL that memory is pinned, so a
//! copy from it runs on the copy engines without staging (NVIDIA's OpenCL best-practices
//! guide, "pinned memory"). A block's next write or its release waits for the copies still
//! reading it, on the writing thread.
//!
//! The ordering costs few driver calls, because a stream of batches orders both ways every
//! step and each call is time the training thread does not spend queueing kernels: the side
//! queue's copies carry the main queue's latest marker in their wait lists (no barrier on the
//! side queue), and the main queue waits on the last copy's own event (no marker on the side
//! queue, whose copies are flushed as they are queued).

use std::any::Any;
use std::ffi::c_void;
use std::ops::Range;
use std::ptr;
use std::sync::OnceLock;

use parking_lot::Mutex;

use opencl3::command_queue::{
    CL_BLOCKING, CL_NON_BLOCKING, CommandQueue, enqueue_barrier_with_wait_list, enqueue_map_buffer,
    enqueue_marker_with_wait_list, enqueue_unmap_mem_object, enqueue_write_buffer,
    release_command_queue, retain_command_queue,
};
use opencl3::context::Context;
use opencl3::event::{retain_event, wait_for_events};
use opencl3::memory::{
    CL_MAP_WRITE, CL_MEM_ALLOC_HOST_PTR, CL_MEM_READ_WRITE, create_buffer, release_mem_object,
};
use opencl3::types::{cl_command_queue, cl_event, cl_int, cl_mem};

use super::error::cl_error;
use super::event::release;
use crate::error::{Error, Result};
use crate::ops::HostBlock;

/// Waits for `event`, then releases it.
fn settle(event: cl_event) -> Result<()> {
    let waited = wait_for_events(&[event]);
    release(event);
    waited.map_err(|c| cl_error("clWaitForEvents", c))
}

/// A driver-allocated host buffer, mapped for the life of the block, and the last copy still
/// reading it.
pub(super) struct MappedBlock {
    /// The side queue, retained: the block is mapped and unmapped on it.
    queue: cl_command_queue,
    mem: cl_mem,
    host: *mut u8,
    len: usize,
    /// The completion event of the last copy out of the block (the queue is in order, so it
    /// completes after every earlier one).
    pending: Option<cl_event>,
}

// SAFETY: the handles are OpenCL objects, which any thread may use (OpenCL 1.1+ makes every
// call but clSetKernelArg thread-safe); `host` is owned by the block, written only through
// `&mut self` and read by the driver only until `pending` completes.
unsafe impl Send for MappedBlock {}

impl MappedBlock {
    fn settle(&mut self) -> Result<()> {
        self.pending.take().map_or(Ok(()), settle)
    }

    /// Queues the non-blocking write of bytes `range` (checked against the block by the
    /// caller) to `dst` at `offset` (checked against `dst` by the caller) on the side queue,
    /// after `after` when given; returns the copy's event, retained once more for the caller.
    fn copy_to(
        &mut self,
        dst: cl_mem,
        offset: usize,
        range: Range<usize>,
        after: Option<cl_event>,
        enqueue_error: impl FnOnce(cl_int) -> Error,
    ) -> Result<cl_event> {
        let (waits, wait_list) = match &after {
            Some(e) => (1, e as *const cl_event),
            None => (0, ptr::null()),
        };
        // SAFETY: `dst` is a live buffer with `offset + range.len()` in range and `range` lies
        // inside the mapped block (both checked by the caller); the block is neither written
        // (`bytes_mut`) nor unmapped (`Drop`) before the event kept below has completed;
        // `wait_list` points at `waits` live events (`after` is held by the side queue).
        let event = unsafe {
            enqueue_write_buffer(
                self.queue,
                dst,
                CL_NON_BLOCKING,
                offset,
                range.len(),
                self.host.add(range.start) as *const c_void,
                waits,
                wait_list,
            )
        }
        .map_err(enqueue_error)?;
        // SAFETY: a live event, just returned; the caller releases this second reference.
        if let Err(c) = unsafe { retain_event(event) } {
            release(event);
            return Err(cl_error("clRetainEvent", c));
        }
        if let Some(earlier) = self.pending.replace(event) {
            release(earlier);
        }
        // Another queue's barrier waits on this copy only once it has been submitted.
        match opencl3::command_queue::flush(self.queue) {
            Ok(()) => Ok(event),
            Err(c) => {
                release(event);
                Err(cl_error("clFlush", c))
            }
        }
    }
}

impl HostBlock for MappedBlock {
    fn bytes_mut(&mut self) -> Result<&mut [u8]> {
        self.settle()?;
        // SAFETY: `host` maps `len` bytes for writing until `Drop` unmaps them; no copy reads
        // them any more (settled above) and `&mut self` keeps them from being handed out twice.
        Ok(unsafe { std::slice::from_raw_parts_mut(self.host, self.len) })
    }

    fn len(&self) -> usize {
        self.len
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

impl Drop for MappedBlock {
    fn drop(&mut self) {
        if let Err(e) = self.settle() {
            log::warn!("opencl: a host block's last copy failed: {e}");
        }
        // SAFETY: `host` was mapped from `mem` on `queue` and is no longer read (settled
        // above); the unmap is waited for before the buffer and the queue are released, each
        // exactly once.
        unsafe {
            match enqueue_unmap_mem_object(
                self.queue,
                self.mem,
                self.host as *mut c_void,
                0,
                ptr::null(),
            ) {
                Ok(event) => {
                    if let Err(e) = settle(event) {
                        log::warn!("opencl: unmapping a host block failed: {e}");
                    }
                }
                Err(c) => log::warn!("opencl: {}", cl_error("clEnqueueUnmapMemObject", c)),
            }
            let _ = release_mem_object(self.mem);
            let _ = release_command_queue(self.queue);
        }
    }
}

/// The events that order the two queues: each held once, by this struct.
#[derive(Default)]
struct Marks {
    /// The main queue's latest marker: every copy queued after it waits for it.
    main: Option<cl_event>,
    /// The side queue's last copy that the main queue has not yet been made to wait for.
    copy: Option<cl_event>,
}

// SAFETY: the events are OpenCL objects, which any thread may use and release.
unsafe impl Send for Marks {}

impl Marks {
    fn replace(slot: &mut Option<cl_event>, event: Option<cl_event>) {
        if let Some(old) = std::mem::replace(slot, event) {
            release(old);
        }
    }
}

impl Drop for Marks {
    fn drop(&mut self) {
        Marks::replace(&mut self.main, None);
        Marks::replace(&mut self.copy, None);
    }
}

/// The side queue, created on first use.
#[derive(Default)]
pub(super) struct SideQueue {
    queue: OnceLock<CommandQueue>,
    marks: Mutex<Marks>,
}

impl SideQueue {
    /// Waits for every copy queued so far.
    pub(super) fn finish(&self) {
        if let Some(q) = self.queue.get() {
            let _ = q.finish();
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

    /// A host block of `bytes` (at least 4: OpenCL refuses empty buffers) in `context`,
    /// mapped for writing on the side queue.
    pub(super) fn host_block(&self, context: &Context, bytes: usize) -> Result<MappedBlock> {
        let queue = self.queue(context)?.get();
        let len = bytes.max(4);
        // SAFETY: a live context; no host pointer is passed, the driver allocates the storage
        // in host memory.
        let mem = unsafe {
            create_buffer(
                context.get(),
                CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR,
                len,
                ptr::null_mut(),
            )
        }
        .map_err(|c| cl_error("clCreateBuffer", c))?;
        let mut host: cl_mem = ptr::null_mut();
        // SAFETY: a blocking map of the whole live buffer on a live queue of its context.
        let mapped = unsafe {
            enqueue_map_buffer(
                queue,
                mem,
                CL_BLOCKING,
                CL_MAP_WRITE,
                0,
                len,
                &mut host,
                0,
                ptr::null(),
            )
        };
        // SAFETY: the queue is live; the block releases this reference once.
        let retained = mapped.and_then(|event| {
            release(event);
            unsafe { retain_command_queue(queue) }
        });
        if let Err(c) = retained {
            // SAFETY: the buffer was created above and is released once, here.
            let _ = unsafe { release_mem_object(mem) };
            return Err(cl_error("clEnqueueMapBuffer", c));
        }
        Ok(MappedBlock {
            queue,
            mem,
            host: host as *mut u8,
            len,
            pending: None,
        })
    }

    /// Queues the copy of `block`'s bytes `range` to `dst` at `offset` (both ranges checked
    /// by the caller) on the side queue; `enqueue_error` turns a failed enqueue's status into
    /// the error.
    pub(super) fn write_block(
        &self,
        dst: cl_mem,
        offset: usize,
        block: &mut dyn HostBlock,
        range: Range<usize>,
        enqueue_error: impl FnOnce(cl_int) -> Error,
    ) -> Result<()> {
        let block: &mut MappedBlock = block.downcast("write_block_on_side")?;
        if self.queue.get().map(|q| q.get()) != Some(block.queue) {
            return Err(Error::InvalidArgument(
                "write_block_on_side: the host block belongs to another OpenCL device".into(),
            ));
        }
        let mut marks = self.marks.lock();
        let event = block.copy_to(dst, offset, range, marks.main, enqueue_error)?;
        Marks::replace(&mut marks.copy, Some(event));
        Ok(())
    }

    /// Makes the side queue wait for the work queued on `main` so far (`to_side`), or `main`
    /// wait for the side queue's.
    pub(super) fn order(
        &self,
        context: &Context,
        main: &CommandQueue,
        to_side: bool,
    ) -> Result<()> {
        self.queue(context)?;
        let mut marks = self.marks.lock();
        if to_side {
            // SAFETY: a marker with an empty wait list on a live queue; `marks` keeps its event.
            let marker = unsafe { enqueue_marker_with_wait_list(main.get(), 0, ptr::null()) }
                .map_err(|c| cl_error("clEnqueueMarkerWithWaitList", c))?;
            Marks::replace(&mut marks.main, Some(marker));
            // Another queue's commands wait on the marker only once it has been submitted.
            return main.flush().map_err(|e| cl_error("clFlush", e.0));
        }
        // The side queue is in order and runs only these copies: its last one completes after
        // every earlier one. None since the last call: the main queue already waits for all.
        let Some(copy) = marks.copy.take() else {
            return Ok(());
        };
        // SAFETY: a barrier on a live queue of the same context, waiting on one live event
        // (released below, once the barrier holds its own reference).
        let barrier = unsafe { enqueue_barrier_with_wait_list(main.get(), 1, &copy) }
            .map_err(|c| cl_error("clEnqueueBarrierWithWaitList", c));
        release(copy);
        release(barrier?);
        Ok(())
    }
}
