//! Device memory and copies, all queued on the device's stream (only `read` waits).

use cudarc::driver::result;

use super::device::CudaDevice;
use super::error;
use crate::backend::capture_gate::keeps_block_while_recording;
use crate::backend::{ByteAddr, DevicePtr};
use crate::error::{Error, Result};

fn at(ptr: DevicePtr, offset: usize) -> DevicePtr {
    ptr + offset as u64
}

impl CudaDevice {
    pub(super) fn alloc_bytes(&self, bytes: usize) -> Result<DevicePtr> {
        // A stream-ordered allocation would be recorded into the graph (and live only while it
        // replays); a plain one would break the recording.
        self.refuse_while_capturing("device allocation")?;
        if self.info.memory > 0 && bytes as u64 > self.info.memory {
            // More than the device has: stream-ordered allocation may report success for such a
            // request and fail only later, so it never reaches the driver.
            let (free, total) =
                crate::backend::Device::memory_info(self).unwrap_or((0, self.info.memory));
            return Err(Error::OutOfMemory {
                device: format!("{} ({})", self.info.id, self.info.name),
                requested: bytes,
                free: free as usize,
                total: total as usize,
            });
        }
        self.bind()?;
        // The driver rejects zero-byte allocations; an empty buffer still needs a distinct
        // handle to give back.
        let n = bytes.max(1);
        let (call, got) = if self.async_alloc {
            // SAFETY: the stream belongs to the bound context; the memory is used only through
            // this stream (every copy and launch of this device is queued on it).
            ("cuMemAllocAsync", unsafe {
                result::malloc_async(self.stream.cu_stream(), n)
            })
        } else {
            // SAFETY: plain allocation in the bound context.
            ("cuMemAlloc", unsafe { result::malloc_sync(n) })
        };
        match got {
            Ok(ptr) => Ok(ptr),
            Err(e) if error::is_oom(&e) => {
                let (free, total) = result::mem_get_info().unwrap_or((0, 0));
                Err(Error::OutOfMemory {
                    device: format!("{} ({})", self.info.id, self.info.name),
                    requested: bytes,
                    free,
                    total,
                })
            }
            Err(e) => Err(error::driver(call, e)),
        }
    }

    pub(super) fn free_ptr(&self, ptr: DevicePtr) {
        let recording = self.refuse_while_capturing("free").is_err();
        if keeps_block_while_recording(recording, self.info.id, ptr) {
            return;
        }
        if let Err(e) = self.bind() {
            log::warn!("{}: cannot free {ptr:#x}: {e}", self.info.id);
            return;
        }
        let (call, r) = if self.async_alloc {
            // SAFETY: `ptr` came from alloc_bytes on this device and is freed once (the pool
            // owns it); the free is ordered after every queued use on the same stream.
            ("cuMemFreeAsync", unsafe {
                result::free_async(ptr, self.stream.cu_stream())
            })
        } else {
            // cuMemFree may synchronize the device: not while another thread records a graph.
            let freed = crate::backend::capture_gate::outside_captures(|| {
                // SAFETY: as above; cuMemFree waits for work using the memory.
                unsafe { result::free_sync(ptr) }
            });
            ("cuMemFree", freed)
        };
        if let Err(e) = r {
            log::warn!(
                "{}: {call}({ptr:#x}) failed: {}",
                self.info.id,
                error::driver_message(&e)
            );
        }
    }

    pub(super) fn mem_info(&self) -> Result<(u64, u64)> {
        self.bind()?;
        let (free, total) = result::mem_get_info().map_err(|e| error::driver("cuMemGetInfo", e))?;
        Ok((free as u64, total as u64))
    }

    pub(super) fn write_bytes(&self, dst: DevicePtr, offset: usize, src: &[u8]) -> Result<()> {
        if src.is_empty() {
            return Ok(());
        }
        // A recorded host-to-device copy would read `src` at every replay, long after it is gone.
        self.refuse_while_capturing("upload")?;
        self.bind()?;
        // SAFETY: the caller (generic ops) checked that `offset + src.len()` lies inside the
        // allocation. `src` is pageable memory: the driver stages it before returning, so the
        // slice may be dropped as soon as this call returns.
        unsafe { result::memcpy_htod_async(at(dst, offset), src, self.stream.cu_stream()) }
            .map_err(|e| error::driver("cuMemcpyHtoDAsync", e))
    }

    pub(super) fn read_bytes(&self, src: DevicePtr, offset: usize, dst: &mut [u8]) -> Result<()> {
        self.refuse_while_capturing("download")?;
        self.bind()?;
        if !dst.is_empty() {
            // SAFETY: range checked by the caller; `dst` stays borrowed until the stream
            // synchronization below has completed the copy.
            unsafe { result::memcpy_dtoh_async(dst, at(src, offset), self.stream.cu_stream()) }
                .map_err(|e| error::driver("cuMemcpyDtoHAsync", e))?;
        }
        self.stream
            .synchronize()
            .map_err(|e| error::driver("cuStreamSynchronize", e))
    }

    pub(super) fn copy_bytes(&self, src: ByteAddr, dst: ByteAddr, bytes: usize) -> Result<()> {
        if bytes == 0 {
            return Ok(());
        }
        self.bind()?;
        // SAFETY: both ranges checked by the caller and allocated in this context.
        unsafe {
            result::memcpy_dtod_async(
                at(dst.0, dst.1),
                at(src.0, src.1),
                bytes,
                self.stream.cu_stream(),
            )
        }
        .map_err(|e| error::driver("cuMemcpyDtoDAsync", e))
    }
}
