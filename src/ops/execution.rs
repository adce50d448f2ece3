//! Execution control of a context: graph capture and replay, the native streams a collective
//! library queues on, and kernel profiling. Not ops: they steer how and where the ops run.

use std::ops::Range;
use std::sync::Arc;

use super::host_block::PlainBlock;
use super::{HostBlock, KernelTime, Ops};
use crate::buffer::View;
use crate::error::Result;

/// A context's two handles on its backend object: the op set and the execution control (the
/// same object behind both, as the backends implement both traits).
#[derive(Clone)]
pub(crate) struct Engine {
    pub(crate) ops: Arc<dyn Ops>,
    pub(crate) exec: Arc<dyn Execution>,
}

impl Engine {
    pub(crate) fn new<T: Ops + Execution + 'static>(backend: Arc<T>) -> Self {
        Engine {
            ops: backend.clone(),
            exec: backend,
        }
    }
}

/// Execution control of a context: graph recording and replay, native streams, profiling.
/// Reached through [`crate::Context`] (`ctx.capture_begin()`, `ctx.kernel_times()`, or
/// [`crate::Context::execution`] for the rest).
pub trait Execution: Send + Sync {
    /// Starts recording the work this context queues into a graph instead of running it
    /// (CUDA or HIP stream capture). `Ok(false)` when the device cannot record graphs (OpenCL,
    /// the CPU, a HIP runtime without the graph API): the caller then just runs its work. While
    /// recording, ops that would allocate device memory, copy from the host or wait fail with
    /// [`crate::Error::Unsupported`]; end the recording with [`Execution::capture_end`] in every
    /// case.
    fn capture_begin(&self) -> Result<bool>;

    /// Ends the recording started by [`Execution::capture_begin`] and returns the graph, ready to
    /// launch. Nothing recorded has run yet. An error (a recorded op failed, or the driver
    /// rejected the graph) leaves no recording active.
    fn capture_end(&self) -> Result<crate::graph::Graph>;

    /// Queues one replay of `graph` (from this context): the recorded kernels run again with
    /// the same arguments, reading whatever the buffers hold now.
    fn graph_launch(&self, graph: &crate::graph::Graph) -> Result<()>;

    /// False while a cold start still launches quick-to-compile stand-ins for kernels whose
    /// modules are being built (the GPU backends' tier 0): a graph recorded now would not hold
    /// the final kernels, so callers that record the same work again and again wait.
    #[doc(hidden)]
    fn kernels_final(&self) -> bool {
        true
    }

    /// Lets f32 products use TF32 tensor-core math from now on (`on`), or returns them to what
    /// [`crate::ContextOptions::allow_tf32`] said at creation (`!on`); returns the previous
    /// setting. Only CUDA devices with cuBLAS change (the f32 products then go to
    /// cuBLAS in its TF32 mode); elsewhere a no-op that returns false. Mixed-precision training
    /// turns it on for the f32 layers' products, which PyTorch's autocast runs in bf16/f16.
    #[doc(hidden)]
    fn set_tf32(&self, _on: bool) -> bool {
        false
    }

    /// As [`Execution::native_queue`], for the context's side stream: collectives queued there
    /// overlap the main stream's work.
    #[doc(hidden)]
    fn native_side_queue(&self, x: View<'_>) -> Result<(u64, u64)>;

    /// Orders this context's side stream (see [`Execution::native_side_queue`]) after the work
    /// queued so far on its main stream (`to_side`), or the main stream after the side stream's.
    #[doc(hidden)]
    fn order_streams(&self, to_side: bool) -> Result<()>;

    /// Whether [`Execution::upload_block_on_side`] copies on a side stream (CUDA, OpenCL), so
    /// that a copy overlaps the main stream's work.
    #[doc(hidden)]
    fn side_uploads(&self) -> bool {
        false
    }

    /// A host block of `bytes` that [`Execution::upload_block_on_side`] copies from without
    /// staging: pinned memory on CUDA, a mapped host-allocated buffer on OpenCL, plain memory
    /// elsewhere. With `read_back` its writer reads it too (a stream window, checked after it
    /// is read): CUDA pins cached memory for it rather than write-combined memory, which is
    /// quick to write and to copy from but slow to read.
    #[doc(hidden)]
    fn host_block(&self, bytes: usize, _read_back: bool) -> Result<Box<dyn HostBlock>> {
        Ok(Box::new(PlainBlock(vec![0; bytes])))
    }

    /// Queues a host-to-device copy of `block`'s bytes `range` (the native-endian bytes of
    /// `dst`'s elements) on the side stream; the block's next [`HostBlock::bytes_mut`] waits
    /// for it. `block` must come from this context's [`Execution::host_block`]. Order it with
    /// [`Execution::order_streams`]: `true` before (the copy waits for the main stream's
    /// readers of `dst`), `false` before the work that reads `dst`.
    /// [`crate::Error::Unsupported`] where [`Execution::side_uploads`] is false.
    #[doc(hidden)]
    fn upload_block_on_side(
        &self,
        dst: View<'_>,
        block: &mut dyn HostBlock,
        range: Range<usize>,
    ) -> Result<()>;

    /// For a collective library that queues its own kernels on this context's stream (NCCL,
    /// RCCL): makes the device current on the calling thread and returns the raw stream handle
    /// and the device address of `x`'s first element. [`crate::Error::Unsupported`] on
    /// backends without such handles (OpenCL, the CPU).
    #[doc(hidden)]
    fn native_queue(&self, x: View<'_>) -> Result<(u64, u64)>;

    /// Marks the start (`true`) or end of a region for an external profiler (CUDA:
    /// `cuProfilerStart`/`cuProfilerStop`, which `ncu --profile-from-start off` honours); a
    /// no-op elsewhere.
    fn profiler_range(&self, on: bool) -> Result<()>;

    /// The per-kernel device times collected since the last call (which resets them), most
    /// time first, once all queued work has finished (this waits for it). `None` when this
    /// context collects none: only OpenCL has the timer, and only when it was opened with
    /// [`crate::ContextOptions::profile_kernels`] or `RNN_PROFILE_KERNELS=1`.
    fn kernel_times(&self) -> Result<Option<Vec<KernelTime>>> {
        Ok(None)
    }
}
