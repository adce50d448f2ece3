//! Modules (`cuModuleLoadData`) and launches (`cuLaunchKernel`) with marshalled arguments.

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::Arc;

use cudarc::driver::{CudaFunction, CudaModule, result};
use cudarc::nvrtc::Ptx;
use parking_lot::Mutex;

use super::device::CudaDevice;
use super::error;
use crate::backend::RawArg;
use crate::device::BackendKind;
use crate::error::{Error, Result};
use crate::kernel::LaunchConfig;

/// A loaded CUBIN/PTX module and the functions looked up from it so far.
pub(crate) struct CudaKernels {
    module: Arc<CudaModule>,
    functions: Mutex<HashMap<String, CudaFunction>>,
}

const ELF_MAGIC: &[u8] = b"\x7fELF";

/// The value of one parameter in the 8 bytes `cuLaunchKernel` reads it from: the driver copies
/// as many bytes as the kernel's parameter has, starting at the slot's address, so each value
/// sits at the start of its slot in native byte order.
pub(super) fn slot(arg: &RawArg) -> u64 {
    let mut b = [0u8; 8];
    match *arg {
        RawArg::Ptr(p) | RawArg::U64(p) => b = p.to_ne_bytes(),
        RawArg::F32(v) => b[..4].copy_from_slice(&v.to_ne_bytes()),
        RawArg::U32(v) => b[..4].copy_from_slice(&v.to_ne_bytes()),
        RawArg::I32(v) => b[..4].copy_from_slice(&v.to_ne_bytes()),
    }
    u64::from_ne_bytes(b)
}

impl CudaDevice {
    pub(super) fn load_module(&self, binary: &[u8]) -> Result<CudaKernels> {
        // cuModuleLoadData has no length argument: it trusts an ELF header, or reads PTX up to
        // its NUL. Anything else would make the driver read past the buffer.
        let is_cubin = binary.len() > 64 && binary.starts_with(ELF_MAGIC);
        let is_ptx = !is_cubin && binary.last() == Some(&0) && binary.len() > 1;
        if !is_cubin && !is_ptx {
            return Err(Error::Backend {
                backend: BackendKind::Cuda,
                call: "cuModuleLoadData".into(),
                code: 200,
                message:
                    "CUDA_ERROR_INVALID_IMAGE: binary is neither a CUBIN nor NUL-terminated PTX"
                        .into(),
            });
        }
        self.bind()?;
        let module = self
            .ctx
            .load_module(Ptx::from_binary(binary.to_vec()))
            .map_err(|e| error::driver("cuModuleLoadData", e))?;
        Ok(CudaKernels {
            module,
            functions: Mutex::new(HashMap::new()),
        })
    }

    pub(super) fn function(&self, module: &CudaKernels, entry: &str) -> Result<CudaFunction> {
        if let Some(f) = module.functions.lock().get(entry) {
            return Ok(f.clone());
        }
        if entry.contains('\0') {
            return Err(Error::InvalidArgument(format!(
                "kernel entry name {entry:?} contains a NUL byte"
            )));
        }
        let f = module
            .module
            .load_function(entry)
            .map_err(|e| error::driver(&format!("cuModuleGetFunction({entry})"), e))?;
        module.functions.lock().insert(entry.to_string(), f.clone());
        Ok(f)
    }

    pub(super) fn launch_kernel(
        &self,
        module: &CudaKernels,
        entry: &str,
        config: &LaunchConfig,
        args: &[RawArg],
    ) -> Result<()> {
        if config.grid.contains(&0) || config.block.contains(&0) {
            return Err(Error::InvalidArgument(format!(
                "launch of '{entry}' with an empty grid {:?} or block {:?}",
                config.grid, config.block
            )));
        }
        self.bind()?;
        let f = self.function(module, entry)?;
        let mut slots: Vec<u64> = args.iter().map(slot).collect();
        let mut params: Vec<*mut c_void> = slots
            .iter_mut()
            .map(|s| (s as *mut u64).cast::<c_void>())
            .collect();
        let [gx, gy, gz] = config.grid;
        let [bx, by, bz] = config.block;
        // SAFETY: `f` belongs to a module loaded in this context and is kept alive by `module`;
        // `params` holds one pointer per kernel parameter, each to an 8-byte slot that outlives
        // the call (the driver copies the values before cuLaunchKernel returns). Device pointers
        // in the arguments come from this context's allocations; the kernel ABI
        // (docs/kernel-abi.md) fixes their number and types.
        unsafe {
            result::launch_kernel(
                f.cu_function(),
                (gx, gy, gz),
                (bx, by, bz),
                config.shared_bytes,
                self.stream.cu_stream(),
                &mut params,
            )
        }
        .map_err(|e| error::driver(&format!("cuLaunchKernel({entry})"), e))
    }
}
