//! The per-context memory pool: size-classed free lists so that a training step, which asks for
//! the same sizes every time, allocates nothing from the driver after its first run.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::backend::{Device, DevicePtr};
use crate::buffer::{Buffer, DeviceMemory, ReleaseMemory, Storage};
use crate::dtype::DType;
use crate::error::{Error, Result};

/// Size classes: multiples of 256 bytes up to 4 KiB, then 8 classes per power of two (at most
/// 12.5% slack) so large buffers of nearby sizes share blocks without doubling memory. `None`
/// when the class does not fit in `usize` (no device can hold it).
pub(crate) fn size_class(bytes: usize) -> Option<usize> {
    const SMALL: usize = 4096;
    if bytes <= SMALL {
        return Some(bytes.div_ceil(256).max(1) * 256);
    }
    let top = usize::BITS - 1 - bytes.leading_zeros();
    let step = 1usize << (top - 3);
    bytes.div_ceil(step).checked_mul(step)
}

/// Cached device blocks by size class; also the owner every pooled [`Buffer`] returns to.
pub(crate) struct Pool<D: Device> {
    device: Arc<D>,
    free: Mutex<HashMap<usize, Vec<DevicePtr>>>,
    /// While a graph is recorded: blocks released during the recording, kept out of the free
    /// lists (see [`Pool::hold_begin`]).
    held: Mutex<Option<Vec<(DevicePtr, usize)>>>,
}

/// Blocks a recorded graph uses as temporaries; back to the pool when the graph is dropped.
pub(crate) struct HeldBlocks<D: Device> {
    pool: Arc<Pool<D>>,
    blocks: Vec<(DevicePtr, usize)>,
}

impl<D: Device> Drop for HeldBlocks<D> {
    fn drop(&mut self) {
        let mut free = self.pool.free.lock();
        for (ptr, bytes) in self.blocks.drain(..) {
            free.entry(bytes).or_default().push(ptr);
        }
    }
}

impl<D: Device> Pool<D> {
    pub(crate) fn new(device: Arc<D>) -> Self {
        Pool {
            device,
            free: Mutex::new(HashMap::new()),
            held: Mutex::new(None),
        }
    }

    /// From now until [`Pool::hold_end`], released blocks are held back instead of cached: a
    /// temporary that a recorded op allocates and drops is baked into the graph, and every
    /// replay writes it again, so nothing else may get that block while the graph lives.
    pub(crate) fn hold_begin(&self) {
        *self.held.lock() = Some(Vec::new());
    }

    /// Ends holding; the blocks held since [`Pool::hold_begin`] belong to the returned value.
    pub(crate) fn hold_end(self: &Arc<Self>) -> HeldBlocks<D> {
        HeldBlocks {
            pool: self.clone(),
            blocks: self.held.lock().take().unwrap_or_default(),
        }
    }

    /// Releases every cached block to the driver.
    pub(crate) fn trim(&self) {
        let blocks: Vec<DevicePtr> = self.free.lock().drain().flat_map(|(_, v)| v).collect();
        for ptr in blocks {
            self.device.free(ptr);
        }
    }

    /// A block of at least `bytes` bytes: a cached one of the same class, else a new one. On
    /// out-of-memory the cache is emptied and the driver asked once more.
    fn take(&self, bytes: usize) -> Result<(DevicePtr, usize)> {
        let Some(class) = size_class(bytes) else {
            // Rounding up would wrap to a small size behind a huge buffer; no device has this.
            let (free, total) = self.device.memory_info().unwrap_or((0, 0));
            return Err(Error::OutOfMemory {
                device: self.device.info().id.to_string(),
                requested: bytes,
                free: free as usize,
                total: total as usize,
            });
        };
        if let Some(ptr) = self.free.lock().get_mut(&class).and_then(Vec::pop) {
            return Ok((ptr, class));
        }
        match self.device.alloc(class) {
            Ok(ptr) => Ok((ptr, class)),
            Err(Error::OutOfMemory { .. }) => {
                log::debug!("pool: out of memory for {class} bytes; releasing cached blocks");
                self.trim();
                match self.device.alloc(class) {
                    Ok(ptr) => Ok((ptr, class)),
                    Err(Error::OutOfMemory { device, .. }) => {
                        let (free, total) = self.device.memory_info().unwrap_or((0, 0));
                        Err(Error::OutOfMemory {
                            device,
                            requested: bytes,
                            free: free as usize,
                            total: total as usize,
                        })
                    }
                    Err(e) => Err(e),
                }
            }
            Err(e) => Err(e),
        }
    }
}

impl<D: Device> ReleaseMemory for Pool<D> {
    fn release(&self, ptr: DevicePtr, bytes: usize) {
        if let Some(held) = self.held.lock().as_mut() {
            held.push((ptr, bytes));
            return;
        }
        // Work already queued may still use the block; the queue is in order, so whatever
        // reuses it next is ordered after that work.
        self.free.lock().entry(bytes).or_default().push(ptr);
    }
}

impl<D: Device> Drop for Pool<D> {
    fn drop(&mut self) {
        self.trim();
    }
}

/// A pooled buffer of `len` elements of `dtype` for context `context`.
pub(crate) fn alloc<D: Device>(
    pool: &Arc<Pool<D>>,
    dtype: DType,
    len: usize,
    context: u64,
) -> Result<Buffer> {
    let bytes = len.checked_mul(dtype.size()).ok_or_else(|| {
        Error::InvalidArgument(format!("{len} {dtype} overflow the address space"))
    })?;
    let (ptr, class) = pool.take(bytes)?;
    let owner: Arc<dyn ReleaseMemory> = pool.clone();
    Ok(Buffer::typed(
        dtype,
        len,
        context,
        Storage::Device(DeviceMemory {
            ptr,
            bytes: class,
            owner,
        }),
    ))
}

#[cfg(test)]
mod tests {
    use super::size_class;

    #[test]
    fn classes_cover_the_request_with_bounded_slack() {
        for bytes in [
            0usize,
            1,
            255,
            256,
            257,
            4096,
            4097,
            10_000,
            1 << 20,
            (1 << 20) + 1,
            123_456_789,
        ] {
            let c = size_class(bytes).unwrap();
            assert!(c >= bytes && c >= 256, "{bytes} -> {c}");
            assert!(c - bytes <= 256 || (c - bytes) * 8 <= c, "{bytes} -> {c}");
            assert_eq!(size_class(c), Some(c), "classes are fixed points");
        }
    }

    #[test]
    fn classes_that_would_wrap_are_none() {
        assert_eq!(size_class(usize::MAX), None);
        assert_eq!(size_class(usize::MAX - 4), None);
        let top = 1usize << (usize::BITS - 1);
        assert_eq!(size_class(top), Some(top));
        assert_eq!(size_class(top + 1), Some(top + (top >> 3)));
        // Past the last class below 2^64 the rounding would wrap.
        assert_eq!(size_class(top + 7 * (top >> 3) + 1), None);
    }
}
