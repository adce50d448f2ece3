//! Cooperative launches (`cuLaunchCooperativeKernel`): every block of the grid resident at once,
//! so persistent kernels may synchronize the whole grid. The grid limit comes from the occupancy
//! calculator times the SM count.

use cudarc::driver::result;

use super::device::CudaDevice;
use super::error;
use super::module::CudaKernels;
use crate::backend::{RawArg, with_param_slots};
use crate::error::{Error, Result};
use crate::kernel::LaunchConfig;

impl CudaDevice {
    /// Co-resident blocks of `entry` with `threads` threads and `shared_bytes` of dynamic
    /// shared memory (raising the function's dynamic limit first when it needs more than the
    /// default); 0 when one block does not fit.
    pub(super) fn co_resident_blocks(
        &self,
        module: &CudaKernels,
        entry: &str,
        threads: u32,
        shared_bytes: u32,
    ) -> Result<u32> {
        if shared_bytes > self.shared_optin {
            return Ok(0);
        }
        self.bind()?;
        let f = self.function(module, entry)?;
        self.opt_in_shared(module, entry, shared_bytes)?;
        // SAFETY: `f` is a function of a module loaded in this (current) context and kept alive
        // by `module`; the occupancy calculator only reads the function's attributes.
        let per_sm = unsafe {
            result::occupancy::max_active_block_per_multiprocessor(
                f,
                threads as i32,
                shared_bytes as usize,
            )
        }
        .map_err(|e| {
            error::driver(
                &format!("cuOccupancyMaxActiveBlocksPerMultiprocessor({entry})"),
                e,
            )
        })?;
        Ok((per_sm.max(0) as u32).saturating_mul(self.sms))
    }

    pub(super) fn launch_kernel_cooperative(
        &self,
        module: &CudaKernels,
        entry: &str,
        config: &LaunchConfig,
        args: &[RawArg],
    ) -> Result<()> {
        if config.grid.contains(&0) || config.block.contains(&0) {
            return Err(Error::InvalidArgument(format!(
                "cooperative launch of '{entry}' with an empty grid {:?} or block {:?}",
                config.grid, config.block
            )));
        }
        self.bind()?;
        let f = self.function(module, entry)?;
        let [gx, gy, gz] = config.grid;
        let [bx, by, bz] = config.block;
        // SAFETY: as for `cuLaunchKernel` (launch.rs): `f` belongs to a module loaded in this
        // context and kept alive by `module`; `params` holds one pointer per kernel parameter,
        // each to an 8-byte slot that outlives the call; device pointers come from this
        // context's allocations. The driver itself rejects a grid larger than can be resident
        // (CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE) rather than starting a kernel whose grid
        // barrier would never complete.
        with_param_slots(args, |params| unsafe {
            result::launch_cooperative_kernel(
                f,
                (gx, gy, gz),
                (bx, by, bz),
                config.shared_bytes,
                self.stream.cu_stream(),
                params,
            )
        })
        .map_err(|e| error::driver(&format!("cuLaunchCooperativeKernel({entry})"), e))
    }
}
