//! Modules (`cuModuleLoadData`) and launches (`cuLaunchKernel`, `cuLaunchCooperativeKernel`)
//! with marshalled arguments.

use std::ffi::c_void;

use cudarc::driver::sys::{CUfunction, CUfunction_attribute, CUstream};
use cudarc::driver::{DriverError, result};
use cudarc::nvrtc::Ptx;

use super::device::CudaDevice;
use super::error;
use super::module::{CudaKernels, LaunchKind};
use crate::backend::{RawArg, with_param_slots};
use crate::device::BackendKind;
use crate::error::{Error, Result};
use crate::kernel::LaunchConfig;

/// Dynamic shared memory every block may use without opting in.
const DEFAULT_SHARED: u32 = 48 * 1024;

const ELF_MAGIC: &[u8] = b"\x7fELF";

/// cudarc's `cuLaunchKernel` and `cuLaunchCooperativeKernel`, which share this signature.
type DriverLaunch = unsafe fn(
    CUfunction,
    (u32, u32, u32),
    (u32, u32, u32),
    u32,
    CUstream,
    &mut [*mut c_void],
) -> std::result::Result<(), DriverError>;

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
        Ok(CudaKernels::new(module))
    }

    pub(super) fn function(&self, module: &CudaKernels, entry: &str) -> Result<CUfunction> {
        module.function(entry)
    }

    /// Raises the dynamic shared-memory limit of `entry` in `module` to `bytes` when that is
    /// above the default every block may use; `bytes` beyond the device's opt-in limit is the
    /// driver's error (callers check it first for a clearer one). Binds the context.
    pub(super) fn opt_in_shared(
        &self,
        module: &CudaKernels,
        entry: &str,
        bytes: u32,
    ) -> Result<()> {
        if bytes <= DEFAULT_SHARED {
            return Ok(());
        }
        self.bind()?;
        let f = self.function(module, entry)?;
        // SAFETY: `f` is a function of `module`, loaded in this context (current after `bind`)
        // and kept alive by the borrow; the attribute only sets a launch limit.
        unsafe {
            result::function::set_function_attribute(
                f,
                CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                bytes as i32,
            )
        }
        .map_err(|e| error::driver(&format!("cuFuncSetAttribute({entry})"), e))
    }

    /// Queues `entry` of `module` on this device's stream: a plain launch, which first raises
    /// the function's shared-memory limit when `config` needs more than the default, or a
    /// cooperative one, whose limit `co_resident_blocks` raised when it sized the grid.
    pub(super) fn launch_kernel(
        &self,
        kind: LaunchKind,
        module: &CudaKernels,
        entry: &str,
        config: &LaunchConfig,
        args: &[RawArg],
    ) -> Result<()> {
        let (what, call, driver_launch) = match kind {
            LaunchKind::Plain => (
                "launch",
                "cuLaunchKernel",
                result::launch_kernel as DriverLaunch,
            ),
            LaunchKind::Cooperative => (
                "cooperative launch",
                "cuLaunchCooperativeKernel",
                result::launch_cooperative_kernel as DriverLaunch,
            ),
        };
        if config.grid.contains(&0) || config.block.contains(&0) {
            return Err(Error::InvalidArgument(format!(
                "{what} of '{entry}' with an empty grid {:?} or block {:?}",
                config.grid, config.block
            )));
        }
        self.bind()?;
        let f = self.function(module, entry)?;
        if kind == LaunchKind::Plain {
            if config.shared_bytes > self.shared_optin {
                return Err(Error::InvalidArgument(format!(
                    "launch of '{entry}' asks for {} bytes of shared memory; {} allows {}",
                    config.shared_bytes, self.info.id, self.shared_optin
                )));
            }
            self.opt_in_shared(module, entry, config.shared_bytes)?;
        }
        let [gx, gy, gz] = config.grid;
        let [bx, by, bz] = config.block;
        with_param_slots(args, |params| {
            // SAFETY: `driver_launch` is cudarc's cuLaunchKernel or cuLaunchCooperativeKernel
            // binding, which take the same arguments. `f` belongs to a module loaded in this
            // context and is kept alive by `module`; `params` holds one pointer per kernel
            // parameter, each to an 8-byte slot that outlives the call (the driver copies the
            // values before the launch returns). Device pointers in the arguments come from
            // this context's allocations; the kernel ABI (docs/kernel-abi.md) fixes their number
            // and types. A cooperative grid larger than can be resident is rejected by the
            // driver (CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE) rather than started with a grid
            // barrier that would never complete.
            unsafe {
                driver_launch(
                    f,
                    (gx, gy, gz),
                    (bx, by, bz),
                    config.shared_bytes,
                    self.stream.cu_stream(),
                    params,
                )
            }
        })
        .map_err(|e| error::driver(&format!("{call}({entry})"), e))
    }
}
