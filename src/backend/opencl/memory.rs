//! Buffers: `cl_mem` handles carried as [`DevicePtr`] integers, and the transfers between them.

use std::ffi::c_void;
use std::ptr;
use std::sync::atomic::Ordering;

use opencl3::command_queue::{
    CL_BLOCKING, enqueue_copy_buffer, enqueue_read_buffer, enqueue_write_buffer,
};

use opencl3::memory::{CL_MEM_READ_WRITE, create_buffer, release_mem_object};
use opencl3::types::{cl_int, cl_mem};

use super::device::ClDevice;
use super::error::{cl_error, is_allocation_failure, is_buffer_creation_oom};
use super::event::release;
use crate::backend::{ByteAddr, DevicePtr};
use crate::error::{Error, Result};

/// Turns a handle back into the `cl_mem` it was made from.
pub(super) fn as_mem(ptr: DevicePtr) -> cl_mem {
    ptr as usize as cl_mem
}

impl ClDevice {
    fn out_of_memory(&self, requested: usize) -> Error {
        let total = self.info.memory as usize;
        let used: usize = self.live.lock().values().sum();
        Error::OutOfMemory {
            device: self.info.name.clone(),
            requested,
            free: total.saturating_sub(used),
            total,
        }
    }

    /// An error for a failed transfer or launch touching `buffers`: an allocation failure is
    /// out of memory (buffers are materialized lazily, at their first use, so the request is
    /// their size); every other status, `CL_OUT_OF_RESOURCES` included, is a backend error
    /// with its code.
    pub(super) fn enqueue_error(&self, call: &str, code: cl_int, buffers: &[DevicePtr]) -> Error {
        if is_allocation_failure(code) {
            let live = self.live.lock();
            let requested = buffers.iter().filter_map(|b| live.get(b)).sum();
            drop(live);
            self.out_of_memory(requested)
        } else {
            cl_error(call, code)
        }
    }

    pub(super) fn alloc_buffer(&self, bytes: usize) -> Result<DevicePtr> {
        if bytes as u64 > self.max_alloc {
            return Err(self.out_of_memory(bytes));
        }
        // clCreateBuffer rejects size 0; an empty buffer still needs a handle.
        let size = bytes.max(4);
        // SAFETY: the context is valid for the life of `self`; no host pointer is passed, so
        // the driver owns the storage.
        let mem =
            unsafe { create_buffer(self.context.get(), CL_MEM_READ_WRITE, size, ptr::null_mut()) };
        match mem {
            Ok(mem) => {
                let handle = mem as usize as DevicePtr;
                self.live.lock().insert(handle, size);
                Ok(handle)
            }
            Err(code) if is_buffer_creation_oom(code) => Err(self.out_of_memory(bytes)),
            Err(code) => Err(cl_error("clCreateBuffer", code)),
        }
    }

    pub(super) fn free_buffer(&self, handle: DevicePtr) {
        {
            let mut live = self.live.lock();
            if live.remove(&handle).is_none() {
                log::warn!("opencl: free of unknown buffer handle {handle:#x} ignored");
                return;
            }
            // Counted under the table's lock, before the handle can be handed out again: a
            // launch finds a reused handle in the table only after this, and reads the count
            // after that (see `launch.rs`, `ClKernel`).
            self.frees.fetch_add(1, Ordering::Release);
        }
        // SAFETY: the handle came from `alloc_buffer` and was still live (just removed from
        // the table, so it is released once). Queued commands keep their own reference.
        if let Err(code) = unsafe { release_mem_object(as_mem(handle)) } {
            log::warn!("opencl: clReleaseMemObject failed: {}", cl_error("", code));
        }
    }

    fn check_range(
        &self,
        call: &str,
        handle: DevicePtr,
        offset: usize,
        bytes: usize,
    ) -> Result<()> {
        let size = self.live.lock().get(&handle).copied();
        match size {
            Some(size) if offset.checked_add(bytes).is_some_and(|end| end <= size) => Ok(()),
            Some(size) => Err(Error::InvalidArgument(format!(
                "{call}: range {offset}+{bytes} outside a buffer of {size} bytes"
            ))),
            None => Err(Error::InvalidArgument(format!(
                "{call}: {handle:#x} is not a buffer of this OpenCL device"
            ))),
        }
    }

    pub(super) fn write_buffer(&self, dst: DevicePtr, offset: usize, src: &[u8]) -> Result<()> {
        if src.is_empty() {
            return Ok(());
        }
        self.check_range("clEnqueueWriteBuffer", dst, offset, src.len())?;
        // SAFETY: `dst` is a live buffer with `offset + len` in range (checked above); the
        // write is blocking, so `src` outlives the driver's use of it.
        let event = unsafe {
            enqueue_write_buffer(
                self.queue.get(),
                as_mem(dst),
                CL_BLOCKING,
                offset,
                src.len(),
                src.as_ptr() as *const c_void,
                0,
                ptr::null(),
            )
        }
        .map_err(|c| self.enqueue_error("clEnqueueWriteBuffer", c, &[dst]))?;
        release(event);
        Ok(())
    }

    /// A copy of `block`'s bytes `range` to `dst` at `offset` on the side queue
    /// (`side_queue.rs`), without blocking.
    pub(super) fn write_buffer_from_block(
        &self,
        dst: DevicePtr,
        offset: usize,
        block: &mut dyn crate::ops::HostBlock,
        range: std::ops::Range<usize>,
    ) -> Result<()> {
        if range.is_empty() {
            return Ok(());
        }
        self.check_range("clEnqueueWriteBuffer", dst, offset, range.len())?;
        self.side
            .write_block(as_mem(dst), offset, block, range, |c| {
                self.enqueue_error("clEnqueueWriteBuffer", c, &[dst])
            })
    }

    pub(super) fn read_buffer(&self, src: DevicePtr, offset: usize, dst: &mut [u8]) -> Result<()> {
        if dst.is_empty() {
            return self.queue.finish().map_err(|e| cl_error("clFinish", e.0));
        }
        self.check_range("clEnqueueReadBuffer", src, offset, dst.len())?;
        // SAFETY: `src` is a live buffer with the range checked above; the read is blocking
        // (and the queue in order, so earlier work has finished) and `dst` is exclusively
        // borrowed for its whole length.
        let event = unsafe {
            enqueue_read_buffer(
                self.queue.get(),
                as_mem(src),
                CL_BLOCKING,
                offset,
                dst.len(),
                dst.as_mut_ptr() as *mut c_void,
                0,
                ptr::null(),
            )
        }
        .map_err(|c| self.enqueue_error("clEnqueueReadBuffer", c, &[src]))?;
        release(event);
        Ok(())
    }

    pub(super) fn copy_buffer(&self, src: ByteAddr, dst: ByteAddr, bytes: usize) -> Result<()> {
        let ((src, src_offset), (dst, dst_offset)) = (src, dst);
        if bytes == 0 {
            return Ok(());
        }
        self.check_range("clEnqueueCopyBuffer", src, src_offset, bytes)?;
        self.check_range("clEnqueueCopyBuffer", dst, dst_offset, bytes)?;
        // SAFETY: both handles are live buffers of this context with the ranges checked
        // above; the copy is device-side and queued in order.
        let event = unsafe {
            enqueue_copy_buffer(
                self.queue.get(),
                as_mem(src),
                as_mem(dst),
                src_offset,
                dst_offset,
                bytes,
                0,
                ptr::null(),
            )
        }
        .map_err(|c| self.enqueue_error("clEnqueueCopyBuffer", c, &[src, dst]))?;
        match &self.timer {
            Some(t) => t.record("copy", event, || self.finish()),
            None => {
                release(event);
                Ok(())
            }
        }
    }
}
