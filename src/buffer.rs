//! Device memory as the op set sees it: an owned [`Buffer`] and borrowed [`View`]s into it.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::RwLock;

use crate::dtype::DType;
use crate::error::{Error, Result};

/// A device address as an integer: a `CUdeviceptr`, a `cl_mem` handle or a `hipDeviceptr_t`.
/// Defined with the buffers that hold it (and re-exported as `backend::DevicePtr`), so that
/// memory does not depend on the backends that hand it out.
pub type DevicePtr = u64;

static NEXT_CONTEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A fresh id for a new context; buffers carry it so ops can reject foreign buffers.
pub(crate) fn next_context_id() -> u64 {
    NEXT_CONTEXT_ID.fetch_add(1, Ordering::Relaxed)
}

/// Returns device memory to whoever handed it out (the context's pool).
pub(crate) trait ReleaseMemory: Send + Sync {
    /// Takes back `bytes` bytes at `ptr`; called exactly once per allocation.
    fn release(&self, ptr: DevicePtr, bytes: usize);
}

/// A block of device memory that goes back to its pool on drop.
pub(crate) struct DeviceMemory {
    pub(crate) ptr: DevicePtr,
    pub(crate) bytes: usize,
    pub(crate) owner: Arc<dyn ReleaseMemory>,
}

impl Drop for DeviceMemory {
    fn drop(&mut self) {
        self.owner.release(self.ptr, self.bytes);
    }
}

/// Where a buffer's elements live.
pub(crate) enum Storage {
    /// CPU backend: host memory behind a lock so views of one buffer can be read and written
    /// from shared references.
    Host(RwLock<Vec<f32>>),
    /// CPU backend, any type other than f32: the elements' native-endian bytes, behind a lock.
    /// Only type-independent ops (copy, transfers) touch them; the f32 storage above stays the
    /// one every computing op reads.
    HostBytes(RwLock<Vec<u8>>),
    /// A GPU backend's memory.
    Device(DeviceMemory),
}

/// `len` elements of one [`DType`] (f32 unless allocated with
/// [`crate::ops::MemoryOps::alloc_as`]) owned by one context: `len * dtype.size()` bytes. Freed
/// (returned to the pool) on drop.
pub struct Buffer {
    len: usize,
    dtype: DType,
    context: u64,
    storage: Storage,
    /// The bytes this buffer holds against its context's memory limit, given back on drop.
    _charge: Option<crate::memory_limit::Charge>,
}

impl Buffer {
    /// A buffer of `len` f32.
    pub(crate) fn new(len: usize, context: u64, storage: Storage) -> Self {
        Buffer::typed(DType::F32, len, context, storage)
    }

    /// A buffer of `len` elements of `dtype`.
    pub(crate) fn typed(dtype: DType, len: usize, context: u64, storage: Storage) -> Self {
        Buffer {
            len,
            dtype,
            context,
            storage,
            _charge: None,
        }
    }

    /// This buffer, holding `charge` against its context's memory limit while it lives.
    pub(crate) fn charged(mut self, charge: crate::memory_limit::Charge) -> Self {
        self._charge = Some(charge);
        self
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// Number of elements (of [`Buffer::dtype`]).
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when the buffer holds no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The id of the context that owns this buffer.
    pub fn context_id(&self) -> u64 {
        self.context
    }

    pub(crate) fn storage(&self) -> &Storage {
        &self.storage
    }

    /// The whole buffer as a view.
    pub fn view(&self) -> View<'_> {
        View {
            buffer: self,
            offset: 0,
            len: self.len,
        }
    }

    /// Elements `offset..offset + len` as a view; an error if that range is outside the buffer.
    pub fn slice(&self, offset: usize, len: usize) -> Result<View<'_>> {
        self.view().slice(offset, len)
    }
}

impl fmt::Debug for Buffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let place = match self.storage {
            Storage::Host(_) | Storage::HostBytes(_) => "host",
            Storage::Device(_) => "device",
        };
        write!(
            f,
            "Buffer({} {}, {place}, context {})",
            self.len, self.dtype, self.context
        )
    }
}

/// A contiguous range of a [`Buffer`]. Ops read and write through views; a layer's weights are
/// views into one flat parameter buffer.
#[derive(Clone, Copy)]
pub struct View<'a> {
    buffer: &'a Buffer,
    offset: usize,
    len: usize,
}

impl<'a> View<'a> {
    /// The buffer this view points into.
    pub fn buffer(&self) -> &'a Buffer {
        self.buffer
    }

    /// The element type (the buffer's).
    pub fn dtype(&self) -> DType {
        self.buffer.dtype
    }

    /// First element, counted from the start of the buffer.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when the view covers no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// A sub-range of this view (offset relative to the view).
    pub fn slice(&self, offset: usize, len: usize) -> Result<View<'a>> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len => Ok(View {
                buffer: self.buffer,
                offset: self.offset + offset,
                len,
            }),
            // The parts, not `offset + len`: that sum may overflow.
            _ => Err(Error::shape(
                "slice",
                format!(
                    "{len} elements at offset {offset} are outside a view of {} elements",
                    self.len
                ),
            )),
        }
    }

    /// True when both views cover exactly the same elements of the same buffer.
    pub fn same_as(&self, other: &View<'_>) -> bool {
        std::ptr::eq(self.buffer, other.buffer)
            && self.offset == other.offset
            && self.len == other.len
    }

    /// True when the two views share at least one element.
    pub fn overlaps(&self, other: &View<'_>) -> bool {
        std::ptr::eq(self.buffer, other.buffer)
            && self.offset < other.offset + other.len
            && other.offset < self.offset + self.len
            && self.len > 0
            && other.len > 0
    }
}

impl fmt::Debug for View<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "View({:?}[{}..{}])",
            self.buffer,
            self.offset,
            self.offset + self.len
        )
    }
}
