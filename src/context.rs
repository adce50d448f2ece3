//! [`Context`]: the handle users and layers hold — one device and its op set.

use std::sync::Arc;

use crate::buffer::{Buffer, View};
use crate::device::{DeviceId, DeviceInfo};
use crate::error::{Error, Result};
use crate::graph::Graph;
use crate::kernel::{Kernel, KernelArg, KernelSource, LaunchConfig};
use crate::ops::{Engine, Execution, KernelTime, Ops};

pub use crate::context_options::ContextOptions;

/// One device and its op set. Cheap to clone; `Send + Sync`.
///
/// ```
/// let ctx = rnn::Context::cpu();
/// let t = ctx.tensor(&[2, 2], &[1.0, 2.0, 3.0, 4.0]).unwrap();
/// assert_eq!(t.to_vec().unwrap(), vec![1.0, 2.0, 3.0, 4.0]);
/// ```
#[derive(Clone)]
pub struct Context {
    ops: Arc<dyn Ops>,
    /// The same backend object as `ops`, as its execution control.
    exec: Arc<dyn Execution>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Context({} {})", self.info().id, self.info().name)
    }
}

impl Context {
    pub(crate) fn from_ops(engine: Engine) -> Self {
        Context {
            ops: engine.ops,
            exec: engine.exec,
        }
    }

    /// A context on the CPU backend (always available).
    pub fn cpu() -> Self {
        Self::from_ops(crate::backend::cpu::create_ops())
    }

    /// Facts about the device.
    pub fn info(&self) -> &DeviceInfo {
        self.ops.info()
    }

    /// The device id.
    pub fn id(&self) -> DeviceId {
        self.ops.info().id
    }

    /// The op set, for code that drives the device directly.
    pub fn ops(&self) -> &dyn Ops {
        &*self.ops
    }

    /// Execution control: graph recording and replay, native streams, profiling (the common
    /// calls are also methods of the context: [`Context::capture_begin`], ...).
    pub fn execution(&self) -> &dyn Execution {
        &*self.exec
    }

    /// Starts recording this context's work into a graph; see [`Execution::capture_begin`].
    pub fn capture_begin(&self) -> Result<bool> {
        self.exec.capture_begin()
    }

    /// Ends the recording and returns the graph; see [`Execution::capture_end`].
    pub fn capture_end(&self) -> Result<Graph> {
        self.exec.capture_end()
    }

    /// See [`Execution::kernels_final`].
    pub(crate) fn kernels_final(&self) -> bool {
        self.exec.kernels_final()
    }

    /// Queues one replay of `graph`; see [`Execution::graph_launch`].
    pub fn graph_launch(&self, graph: &Graph) -> Result<()> {
        self.exec.graph_launch(graph)
    }

    /// Starts or ends a region for an external profiler; see [`Execution::profiler_range`].
    pub fn profiler_range(&self, on: bool) -> Result<()> {
        self.exec.profiler_range(on)
    }

    /// The per-kernel device times since the last call; see [`Execution::kernel_times`].
    pub fn kernel_times(&self) -> Result<Option<Vec<KernelTime>>> {
        self.exec.kernel_times()
    }

    /// The raw stream handle and the device address of `x` for a collective library; see
    /// [`Execution::native_queue`].
    #[doc(hidden)]
    pub fn native_queue(&self, x: View<'_>) -> Result<(u64, u64)> {
        self.exec.native_queue(x)
    }

    /// A buffer of `len` f32 with unspecified contents.
    pub fn alloc(&self, len: usize) -> Result<Buffer> {
        self.ops.alloc(len)
    }

    /// Compiles a user kernel through the kernel cache. The source's dialect must be the one this
    /// device compiles; the CPU backend compiles nothing.
    pub fn compile(&self, source: &KernelSource) -> Result<Kernel> {
        self.ops.compile(source)
    }

    /// Launches a kernel from [`Context::compile`]; buffers are passed as base pointer plus
    /// `u64` element offset (see [`KernelArg`]).
    pub fn launch(
        &self,
        kernel: &Kernel,
        config: LaunchConfig,
        args: &[KernelArg<'_>],
    ) -> Result<()> {
        if kernel.context != self.ops.context_id() {
            return Err(Error::ForeignBuffer(format!(
                "kernel '{}' was compiled by another context",
                kernel.entry
            )));
        }
        self.ops.launch(kernel, &config, args)
    }

    /// Caps the bytes this context's live buffers may hold (`None`: no cap, the default), as a
    /// smaller device would: an allocation that would pass it fails with
    /// [`Error::OutOfMemory`]. Buffers alive already keep their memory. For checking that a
    /// program fits a device smaller than the one it runs on (a streaming
    /// [`crate::nn::DataStream`] run, say).
    ///
    /// ```
    /// let ctx = rnn::Context::cpu();
    /// ctx.set_memory_limit(Some(1024));
    /// assert!(ctx.alloc(200).is_ok());
    /// assert!(matches!(ctx.alloc(300), Err(rnn::Error::OutOfMemory { .. })));
    /// ```
    pub fn set_memory_limit(&self, bytes: Option<usize>) {
        self.ops.set_memory_limit(bytes)
    }

    /// The cap [`Context::set_memory_limit`] set, if any.
    ///
    /// ```
    /// let ctx = rnn::Context::cpu();
    /// assert_eq!(ctx.memory_limit(), None);
    /// ctx.set_memory_limit(Some(1 << 20));
    /// assert_eq!(ctx.memory_limit(), Some(1 << 20));
    /// ```
    pub fn memory_limit(&self) -> Option<usize> {
        self.ops.memory_limit()
    }

    /// Bytes held by this context's live buffers (a GPU pool's cached free blocks are not
    /// counted).
    pub fn memory_in_use(&self) -> usize {
        self.ops.memory_in_use()
    }

    /// Waits for all queued work.
    pub fn synchronize(&self) -> Result<()> {
        self.ops.synchronize()
    }

    /// Compiles the built-in kernels now (through the disk cache) instead of at first use.
    pub fn warm_up(&self) -> Result<()> {
        self.ops.warm_up()
    }
}
