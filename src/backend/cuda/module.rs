//! [`CudaKernels`]: a loaded module and the functions looked up from it, and [`LaunchKind`]: how
//! they are launched. Below the device (which names it as its `Device::Module`) and the launch
//! code (which loads and runs it), so that neither imports the other for them.

use std::sync::Arc;

use cudarc::driver::CudaModule;
use cudarc::driver::sys::CUfunction;

use super::error;
use crate::backend::FunctionCache;
use crate::error::{Error, Result};

/// How a kernel is launched: every block of a cooperative launch is resident at once, so
/// persistent kernels may synchronize the whole grid (`cuLaunchCooperativeKernel`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum LaunchKind {
    Plain,
    Cooperative,
}

/// A loaded CUBIN/PTX module and the functions looked up from it so far (raw `CUfunction`
/// handles, valid while `module` lives).
pub(crate) struct CudaKernels {
    /// Always `Some` until Drop, which unloads it outside any capture.
    module: Option<Arc<CudaModule>>,
    functions: FunctionCache<usize>,
}

impl Drop for CudaKernels {
    fn drop(&mut self) {
        // cuModuleUnload may synchronize the device: not while another thread records a graph.
        if let Some(module) = self.module.take() {
            crate::backend::capture_gate::outside_captures(move || drop(module));
        }
    }
}

impl CudaKernels {
    pub(super) fn new(module: Arc<CudaModule>) -> Self {
        CudaKernels {
            module: Some(module),
            functions: FunctionCache::new(),
        }
    }

    /// The raw handle of `entry`, looked up once.
    pub(super) fn function(&self, entry: &str) -> Result<CUfunction> {
        let handle = self.functions.get_or_load(entry, || {
            if entry.contains('\0') {
                return Err(Error::InvalidArgument(format!(
                    "kernel entry name {entry:?} contains a NUL byte"
                )));
            }
            let loaded = self.module.as_ref().ok_or_else(|| {
                Error::InvalidArgument(format!("kernel '{entry}' of an unloaded module"))
            })?;
            let f = loaded
                .load_function(entry)
                .map_err(|e| error::driver(&format!("cuModuleGetFunction({entry})"), e))?;
            Ok(f.cu_function() as usize)
        })?;
        Ok(handle as CUfunction)
    }
}
