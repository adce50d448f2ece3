//! [`Context`]: the handle users and layers hold — one device and its op set.

use std::sync::Arc;

use crate::buffer::Buffer;
use crate::device::{DeviceId, DeviceInfo};
use crate::error::{Error, Result};
use crate::kernel::{Kernel, KernelArg, KernelSource, LaunchConfig};
use crate::ops::Ops;

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
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Context({} {})", self.info().id, self.info().name)
    }
}

impl Context {
    pub(crate) fn from_ops(ops: Arc<dyn Ops>) -> Self {
        Context { ops }
    }

    /// A context on the CPU backend (always available).
    pub fn cpu() -> Self {
        Context {
            ops: crate::backend::cpu::create_ops(),
        }
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

    /// Waits for all queued work.
    pub fn synchronize(&self) -> Result<()> {
        self.ops.synchronize()
    }

    /// Compiles the built-in kernels now (through the disk cache) instead of at first use.
    pub fn warm_up(&self) -> Result<()> {
        self.ops.warm_up()
    }
}
