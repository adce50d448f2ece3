//! Memory: the device, buffers, host transfers, waiting, and filling and copying views.

use crate::buffer::{Buffer, View};
use crate::device::DeviceInfo;
use crate::error::Result;

/// The memory ops every backend has: which device and context they belong to, allocation, host
/// transfers, waiting for queued work, and filling and copying views.
pub trait MemoryOps: Send + Sync {
    /// The device these ops run on.
    fn info(&self) -> &DeviceInfo;

    /// Id of the owning context; buffers carry it.
    fn context_id(&self) -> u64;

    /// A new buffer of `len` f32. Its contents are unspecified until written.
    fn alloc(&self, len: usize) -> Result<Buffer>;

    /// Copies `src` into `dst` (`src.len() == dst.len()`).
    fn upload(&self, dst: View<'_>, src: &[f32]) -> Result<()>;

    /// Waits for queued work, then copies `src` into `dst` (`src.len() == dst.len()`).
    fn download(&self, src: View<'_>, dst: &mut [f32]) -> Result<()>;

    /// Waits for all queued work.
    fn synchronize(&self) -> Result<()>;

    /// Compiles the built-in kernels now rather than at first use (a no-op on the CPU).
    fn warm_up(&self) -> Result<()>;

    /// `x[i] = value`.
    fn fill(&self, x: View<'_>, value: f32) -> Result<()>;

    /// `dst[i] = src[i]`.
    fn copy(&self, src: View<'_>, dst: View<'_>) -> Result<()>;
}
