//! [`ClModule`]: a built program and its kernel objects, and the lock every program and kernel
//! creation and release takes. Below the device (whose `Device::Module` it is) and the launch
//! code (which builds and runs it), so that neither imports the other for it.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use opencl3::kernel::{Kernel, create_program_kernels};
use opencl3::program::Program;
use parking_lot::Mutex;

use super::error::cl_error;
use crate::backend::{Fnv, RawArg};
use crate::error::Result;

/// Serializes every creation and release of programs and kernels in the process.
///
/// Audit (PoCL 5 aborts in `pocl_release_dlhandle_cache` with `ref_count > 0` when test
/// threads each create, use and drop their own context): this backend never calls
/// `clRelease*` on programs or kernels by hand (the opencl3 wrappers release once, in `Drop`),
/// and never clones them by handle. What it did get wrong was order: `ClModule` released its
/// program before the kernels created from it, and `GpuOps` could release a context's device
/// (queue and context) before that context's modules. Both are legal by the OpenCL spec
/// (objects retain what they depend on) but are exactly the paths that leave PoCL's cache of
/// loaded kernel libraries to sort out reference counts, which it is known to do racily under
/// concurrent program release. So, besides fixing the order (kernels, then program; modules,
/// then device), program build/load/release and kernel creation/release run under this lock.
/// They are rare (once per context and op-set module), so the lock costs nothing measurable;
/// launches do not take it. NVIDIA's OpenCL builds and loads programs without it
/// (`ClDevice::serialize_builds`), so that a context's modules compile in parallel there;
/// releases still take it.
pub(super) static PROGRAM_LOCK: Mutex<()> = Mutex::new(());

/// A kernel object and what was last set on it.
///
/// Arguments stay set on a kernel object after a launch, and a training step launches the same
/// kernels with mostly the same arguments every time; on NVIDIA's OpenCL each
/// `clSetKernelArg` is a driver call of its own, a large part of a small launch. So a launch sets
/// only the arguments that differ from the last launch of this kernel.
pub(super) struct ClKernel {
    pub(super) kernel: Kernel,
    /// The value last set at each index (`None`: unknown, so set it).
    pub(super) args: Vec<Option<RawArg>>,
    /// The size of the trailing `__local` argument last set.
    pub(super) local_bytes: Option<usize>,
    /// `ClDevice::frees` when the buffer handles in `args` were set. A released `cl_mem` handle
    /// can come back as a new buffer's handle with the same value; whether a driver still
    /// refers to the old object through the kernel's argument is its business, so after any
    /// release every buffer argument is set again.
    pub(super) frees: u64,
}

impl ClKernel {
    pub(super) fn new(kernel: Kernel) -> Self {
        ClKernel {
            kernel,
            args: Vec::new(),
            local_bytes: None,
            frees: 0,
        }
    }
}

/// A built program and every kernel in it, created once.
pub(crate) struct ClModule {
    /// `clSetKernelArg` mutates the kernel object, so each is used under its own lock from
    /// setting the arguments until the launch is enqueued.
    pub(super) kernels: HashMap<String, Mutex<ClKernel>, BuildHasherDefault<Fnv>>,
    /// `None` only while dropping: released after the kernels, under [`PROGRAM_LOCK`].
    program: Option<Program>,
}

impl ClModule {
    /// Creates the kernels of `program`. Called with [`PROGRAM_LOCK`] held where the device
    /// serializes builds.
    pub(super) fn new(program: Program) -> Result<Self> {
        // A module whose kernels are all left out by the device's defines (the persistent
        // kernels where they do not run) has none, and clCreateKernelsInProgram refuses to
        // list nothing on some drivers (PoCL: CL_INVALID_VALUE).
        let count = program
            .get_num_kernels()
            .map_err(|e| cl_error("clGetProgramInfo(CL_PROGRAM_NUM_KERNELS)", e.0))?;
        let list = if count == 0 {
            Vec::new()
        } else {
            create_program_kernels(&program)
                .map_err(|e| cl_error("clCreateKernelsInProgram", e.0))?
        };
        let mut kernels = HashMap::with_capacity_and_hasher(list.len(), Default::default());
        for k in list {
            let name = k
                .function_name()
                .map_err(|e| cl_error("clGetKernelInfo(CL_KERNEL_FUNCTION_NAME)", e.0))?;
            kernels.insert(name, Mutex::new(ClKernel::new(k)));
        }
        Ok(ClModule {
            kernels,
            program: Some(program),
        })
    }

    /// Whether the program defines a kernel named `entry`.
    pub(super) fn defines(&self, entry: &str) -> bool {
        self.kernels.contains_key(entry)
    }

    /// `CL_KERNEL_WORK_GROUP_SIZE` (the largest group the kernel's registers allow) and the
    /// static local memory of `entry` on `device` (`CL_KERNEL_LOCAL_MEM_SIZE` less the
    /// `__local` argument set on it); `None` when the program has no such kernel.
    pub(super) fn limits(
        &self,
        entry: &str,
        device: &opencl3::device::Device,
    ) -> Result<Option<(usize, u64)>> {
        let Some(kernel) = self.kernels.get(entry) else {
            return Ok(None);
        };
        let slot = kernel.lock();
        let size = slot
            .kernel
            .get_work_group_size(device.id())
            .map_err(|e| cl_error("clGetKernelWorkGroupInfo(CL_KERNEL_WORK_GROUP_SIZE)", e.0))?;
        let local = slot
            .kernel
            .get_local_mem_size(device.id())
            .map_err(|e| cl_error("clGetKernelWorkGroupInfo(CL_KERNEL_LOCAL_MEM_SIZE)", e.0))?;
        // The reported size includes the `__local` argument as last set (the OpenCL spec says
        // so, and NVIDIA's driver does it): without this a kernel launched once would seem to
        // need its dynamic local memory twice.
        let set = slot.local_bytes.unwrap_or(0) as u64;
        Ok(Some((size, local.saturating_sub(set))))
    }
}

impl Drop for ClModule {
    fn drop(&mut self) {
        let _serial = PROGRAM_LOCK.lock();
        self.kernels.clear();
        self.program.take();
    }
}
