//! Launches for persistent kernels: cooperative (`cuLaunchCooperativeKernel`: every block of the
//! grid resident at once, so the kernel may synchronize the whole grid; the grid limit comes from
//! the occupancy calculator times the SM count) and clustered (`cuLaunchKernelEx` with a cluster
//! dimension: blocks of one cluster share shared memory and a hardware barrier).

use cudarc::driver::result;
use cudarc::driver::sys::{self, CUfunction_attribute};

use super::device::CudaDevice;
use super::error;
use super::launch::CudaKernels;
use crate::backend::{RawArg, with_param_slots};
use crate::error::{Error, Result};
use crate::kernel::LaunchConfig;

/// Dynamic shared memory every block may use without opting in.
const DEFAULT_SHARED: u32 = 48 * 1024;

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
        self.allow_dynamic_shared(f, entry, shared_bytes)?;
        // SAFETY: `f` is a function of a module loaded in this (current) context and kept
        // alive by `module`; the occupancy calculator only reads the function's attributes.
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

    /// Lets `entry` use `shared_bytes` of dynamic shared memory (above the 48 KB default the
    /// function must opt in).
    fn allow_dynamic_shared(
        &self,
        f: sys::CUfunction,
        entry: &str,
        shared_bytes: u32,
    ) -> Result<()> {
        if shared_bytes <= DEFAULT_SHARED {
            return Ok(());
        }
        if shared_bytes > self.shared_optin {
            return Err(Error::InvalidArgument(format!(
                "'{entry}' asks for {shared_bytes} bytes of shared memory; the device allows {}",
                self.shared_optin
            )));
        }
        // SAFETY: `f` is a function of a module loaded in this (current) context and kept
        // alive by the caller's module; the value is within the device's opt-in limit.
        unsafe {
            result::function::set_function_attribute(
                f,
                CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                shared_bytes as i32,
            )
        }
        .map_err(|e| error::driver(&format!("cuFuncSetAttribute({entry})"), e))
    }

    pub(super) fn launch_kernel_clustered(
        &self,
        module: &CudaKernels,
        entry: &str,
        config: &LaunchConfig,
        cluster: [u32; 3],
        args: &[RawArg],
    ) -> Result<()> {
        let fits = config
            .grid
            .iter()
            .zip(cluster)
            .all(|(&g, c)| g > 0 && c > 0 && g % c == 0);
        if !fits || config.block.contains(&0) {
            return Err(Error::InvalidArgument(format!(
                "clustered launch of '{entry}': grid {:?} is not a non-empty multiple of the \
                 cluster {cluster:?} (block {:?})",
                config.grid, config.block
            )));
        }
        self.bind()?;
        let f = self.function(module, entry)?;
        self.allow_dynamic_shared(f, entry, config.shared_bytes)?;
        if cluster.iter().product::<u32>() > 8 {
            // Beyond the portable 8 blocks the function must opt in (Hopper accepts 16).
            // SAFETY: `f` is a function of a module loaded in this (current) context and kept
            // alive by `module`; the attribute takes 0 or 1.
            unsafe {
                result::function::set_function_attribute(
                    f,
                    CUfunction_attribute::CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED,
                    1,
                )
            }
            .map_err(|e| error::driver(&format!("cuFuncSetAttribute({entry})"), e))?;
        }
        let mut attr = sys::CUlaunchAttribute {
            id: sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION,
            pad: [0; 4],
            value: sys::CUlaunchAttributeValue {
                clusterDim: sys::CUlaunchAttributeValue_union__bindgen_ty_1 {
                    x: cluster[0],
                    y: cluster[1],
                    z: cluster[2],
                },
            },
        };
        let launch = sys::CUlaunchConfig {
            gridDimX: config.grid[0],
            gridDimY: config.grid[1],
            gridDimZ: config.grid[2],
            blockDimX: config.block[0],
            blockDimY: config.block[1],
            blockDimZ: config.block[2],
            sharedMemBytes: config.shared_bytes,
            hStream: self.stream.cu_stream(),
            attrs: &mut attr,
            numAttrs: 1,
        };
        // SAFETY: as for `cuLaunchKernel` (launch.rs): `f` belongs to a module loaded in this
        // context and kept alive by `module`; `params` holds one pointer per kernel parameter,
        // each to an 8-byte slot that outlives the call; `launch` and the one attribute it points
        // to live until the call returns (the driver copies them). The driver rejects a cluster
        // shape the function or device cannot run (CUDA_ERROR_CLUSTER_OUT_OF_RESOURCES, ...)
        // without starting anything.
        with_param_slots(args, |params| unsafe {
            sys::cuLaunchKernelEx(&launch, f, params.as_mut_ptr(), std::ptr::null_mut()).result()
        })
        .map_err(|e| {
            error::driver(
                &format!("cuLaunchKernelEx({entry}, cluster {cluster:?})"),
                e,
            )
        })
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
