//! The grid limit of cooperative launches (`cuLaunchCooperativeKernel`, which `launch.rs`
//! queues): every block of the grid resident at once, so persistent kernels may synchronize the
//! whole grid. The limit comes from the occupancy calculator times the SM count.

use cudarc::driver::result;

use super::device::CudaDevice;
use super::error;
use super::module::CudaKernels;
use crate::error::Result;

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
}
