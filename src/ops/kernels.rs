//! User kernels: compiling a kernel source and launching it on the context's queue.

use super::MemoryOps;
use crate::error::Result;
use crate::kernel::{Kernel, KernelArg, KernelSource, LaunchConfig};

/// User kernels: compile a [`KernelSource`] once, launch it on this context's queue.
pub trait KernelOps: MemoryOps {
    /// Compiles a user kernel (through the kernel cache). The CPU backend returns
    /// [`crate::Error::Unsupported`].
    fn compile(&self, source: &KernelSource) -> Result<Kernel>;

    /// Launches a kernel compiled by [`KernelOps::compile`] on this context's queue.
    fn launch(&self, kernel: &Kernel, config: &LaunchConfig, args: &[KernelArg<'_>]) -> Result<()>;
}
