//! Memory: the device, buffers, host transfers, waiting, and filling and copying views.

use crate::buffer::{Buffer, View};
use crate::device::DeviceInfo;
use crate::dtype::{self, DType, Element};
use crate::error::Result;
use crate::ops::check;

/// The memory ops every backend has: which device and context they belong to, allocation, host
/// transfers, waiting for queued work, and filling and copying views.
///
/// Element types: `alloc`, `upload`, `download` and `fill` are f32 (a view of another type is
/// [`crate::Error::DTypeMismatch`]); `alloc_as` and the byte transfers take any [`DType`], and
/// `copy` any type that is the same on both sides. Typed host transfers are
/// [`TypedMemory::upload_as`] and [`TypedMemory::download_as`].
pub trait MemoryOps: Send + Sync {
    /// The device these ops run on.
    fn info(&self) -> &DeviceInfo;

    /// Id of the owning context; buffers carry it.
    fn context_id(&self) -> u64;

    /// A new buffer of `len` f32. Its contents are unspecified until written.
    fn alloc(&self, len: usize) -> Result<Buffer>;

    /// A new buffer of `len` elements of `dtype` (`len * dtype.size()` bytes). Its contents are
    /// unspecified until written.
    fn alloc_as(&self, dtype: DType, len: usize) -> Result<Buffer>;

    /// Copies `src` into the f32 view `dst` (`src.len() == dst.len()`).
    fn upload(&self, dst: View<'_>, src: &[f32]) -> Result<()>;

    /// Waits for queued work, then copies the f32 view `src` into `dst`
    /// (`src.len() == dst.len()`).
    fn download(&self, src: View<'_>, dst: &mut [f32]) -> Result<()>;

    /// Copies `src`, the native-endian bytes of `dst.len()` elements of `dst`'s type (any type),
    /// into `dst`. Prefer the typed [`TypedMemory::upload_as`].
    fn upload_bytes(&self, dst: View<'_>, src: &[u8]) -> Result<()>;

    /// Waits for queued work, then copies the elements of `src` (any type) into `dst` as their
    /// native-endian bytes (`src.len() * src.dtype().size()` of them). Prefer the typed
    /// [`TypedMemory::download_as`].
    fn download_bytes(&self, src: View<'_>, dst: &mut [u8]) -> Result<()>;

    /// Waits for all queued work.
    fn synchronize(&self) -> Result<()>;

    /// Compiles the built-in kernels now rather than at first use (a no-op on the CPU).
    fn warm_up(&self) -> Result<()>;

    /// Caps the bytes this context's live buffers may hold (`None`: no cap, the default): an
    /// allocation that would pass it is [`crate::Error::OutOfMemory`]. Buffers alive already
    /// keep their memory. See [`crate::Context::set_memory_limit`].
    fn set_memory_limit(&self, bytes: Option<usize>);

    /// The cap [`MemoryOps::set_memory_limit`] set, if any.
    fn memory_limit(&self) -> Option<usize>;

    /// Bytes held by this context's live buffers (a GPU pool's cached free blocks not
    /// included).
    fn memory_in_use(&self) -> usize;

    /// `x[i] = value` (an f32 view).
    fn fill(&self, x: View<'_>, value: f32) -> Result<()>;

    /// `dst[i] = src[i]`, for views of any one element type (both sides the same, else
    /// [`crate::Error::DTypeMismatch`] naming `dst`).
    fn copy(&self, src: View<'_>, dst: View<'_>) -> Result<()>;
}

/// Typed host transfers over any [`MemoryOps`] (`&dyn Ops` included): the view's element type
/// must be `T`'s, else [`crate::Error::DTypeMismatch`].
///
/// ```
/// use rnn::ops::prelude::*;
/// # fn main() -> rnn::Result<()> {
/// let ctx = rnn::Context::cpu();
/// let ops = ctx.ops();
/// let ids = ops.alloc_as(rnn::DType::U32, 3)?;
/// ops.upload_as(ids.view(), &[7u32, 1 << 25, 3])?;
/// let mut back = [0u32; 3];
/// ops.download_as(ids.view(), &mut back)?;
/// assert_eq!(back, [7, 1 << 25, 3]);
/// # Ok(()) }
/// ```
pub trait TypedMemory: MemoryOps {
    /// Copies `src` into `dst`, a view of `T::DTYPE` (`src.len() == dst.len()`).
    fn upload_as<T: Element>(&self, dst: View<'_>, src: &[T]) -> Result<()> {
        check::dtype("upload_as", "dst", &dst, T::DTYPE)?;
        if src.len() != dst.len() {
            return Err(crate::Error::shape(
                "upload_as",
                format!("{} values for a view of {}", src.len(), dst.len()),
            ));
        }
        self.upload_bytes(dst, &dtype::to_bytes(src))
    }

    /// Waits for queued work, then copies `src`, a view of `T::DTYPE`, into `dst`
    /// (`src.len() == dst.len()`).
    fn download_as<T: Element>(&self, src: View<'_>, dst: &mut [T]) -> Result<()> {
        check::dtype("download_as", "src", &src, T::DTYPE)?;
        if src.len() != dst.len() {
            return Err(crate::Error::shape(
                "download_as",
                format!("a view of {} into {} values", src.len(), dst.len()),
            ));
        }
        let mut bytes = vec![0u8; dst.len() * T::DTYPE.size()];
        self.download_bytes(src, &mut bytes)?;
        dtype::from_bytes(&bytes, dst);
        Ok(())
    }
}

impl<M: MemoryOps + ?Sized> TypedMemory for M {}
