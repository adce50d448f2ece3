//! [`ClDevice`]: one OpenCL device with its context and in-order queue, implementing
//! [`Device`]. Memory lives in `memory.rs`, compilation and launches in `launch.rs`.

use std::collections::HashMap;

use opencl3::command_queue::{CL_QUEUE_PROFILING_ENABLE, CommandQueue};
use opencl3::context::Context;
use opencl3::device::Device as ClDeviceHandle;
use opencl3::platform::Platform;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::error::cl_error;
use super::module::ClModule;
use super::profile::KernelTimer;
use super::sgemm::{Limits, SgemmChoice};
use crate::backend::{ByteAddr, Device, DevicePtr, RawArg, SgemmKernel};
use crate::device::DeviceInfo;
use crate::error::Result;
use crate::kernel::{Dialect, LaunchConfig, OpModule};
use crate::ops::KernelTime;

/// One OpenCL device: its context, one in-order command queue, and the live allocations.
pub(crate) struct ClDevice {
    pub(super) info: DeviceInfo,
    pub(super) device: ClDeviceHandle,
    // Field order is drop order: the queues are released before the context they belong to.
    /// The queue of copies that overlap the main queue's kernels (`side_queue.rs`).
    pub(super) side: super::side_queue::SideQueue,
    pub(super) queue: CommandQueue,
    pub(super) context: Context,
    /// `CL_DEVICE_MAX_MEM_ALLOC_SIZE`: OpenCL allocates lazily, so larger requests are refused
    /// up front rather than failing at first use.
    pub(super) max_alloc: u64,
    /// Live allocations (handle -> bytes): `free` releases only handles it handed out, and
    /// `memory_info` derives the free memory OpenCL does not report.
    pub(super) live: Mutex<HashMap<DevicePtr, usize>>,
    /// How many buffers have been released: a launch sets a kernel's buffer arguments again
    /// when this moved since it last set them (see `launch.rs`, `ClKernel`).
    pub(super) frees: AtomicU64,
    /// PoCL: kernels of all PoCL contexts in the process run one at a time (see
    /// `launch.rs`, `POCL_KERNELS`).
    pub(super) serialize_kernels: bool,
    /// Builds and loads programs under `PROGRAM_LOCK` (module.rs): everywhere but NVIDIA's
    /// OpenCL, whose compiler builds the op set's modules in parallel.
    pub(super) serialize_builds: bool,
    /// The kernel timer, when profiling (`ContextOptions::profile_kernels`,
    /// `RNN_PROFILE_KERNELS`); `None` keeps launches and copies free of events.
    pub(super) timer: Option<KernelTimer>,
    /// How a GEMM picks its kernel (`sgemm.rs`).
    sgemm: SgemmChoice,
    /// Whether the op set has the tensor-core GEMM kernels: f32 (kernels-cl/gemm_tc.cl) and
    /// bf16/f16 (kernels-cl/hgemm_tc.cl), both behind `sgemm::TENSOR_CORES_DEFINE`, which is
    /// part of every module's source and so of its cache key.
    tensor_cores: bool,
    /// Whether GEMMs may take the warpgroup kernel (kernels-cl/gemm_wg.cl, `sm90a.rs`): set
    /// where the device supports it, cleared when a built or loaded op set lacks it.
    warpgroup: AtomicBool,
    /// Whether the op set has the persistent sequence kernels and may launch them
    /// (`persistent.rs`).
    pub(super) persistent: bool,
    /// `CL_DEVICE_LOCAL_MEM_SIZE`: what a group's static and dynamic local memory may total.
    pub(super) local_mem: u64,
    identity: String,
}

/// What [`ClDevice::open`] may use, from the context options and the environment.
pub(crate) struct OpenOptions {
    /// Forces the GEMM kernel of every launch (`ContextOptions::opencl_sgemm_tile`); `None`
    /// picks one per launch.
    pub(crate) sgemm_tile: Option<u32>,
    /// Turns the kernel timer on (the queue then records timestamps).
    pub(crate) profile: bool,
    /// Allows the persistent sequence kernels where the device supports them.
    pub(crate) persistent: bool,
    /// Allows the tensor-core GEMM kernels where the device has them (`sgemm.rs`).
    pub(crate) tensor_cores: bool,
    /// Allows the warpgroup GEMM kernel on top of them (`sm90a.rs`,
    /// `ContextOptions::warpgroup_gemm`).
    pub(crate) warpgroup_gemm: bool,
}

impl ClDevice {
    /// Opens `device` of `platform`: a context and an in-order queue.
    pub(crate) fn open(
        info: DeviceInfo,
        platform: &Platform,
        device: ClDeviceHandle,
        options: OpenOptions,
    ) -> Result<Self> {
        let OpenOptions {
            sgemm_tile,
            profile,
            persistent,
            tensor_cores,
            warpgroup_gemm,
        } = options;
        let platform_name = platform.name().unwrap_or_default();
        // Not an NVIDIA device (or driver): the query fails, and the device has no tensor cores.
        let cc_major = device.compute_capability_major_nv().unwrap_or(0);
        let cc_minor = device.compute_capability_minor_nv().unwrap_or(0);
        let tensor_cores =
            tensor_cores && super::sgemm::tensor_cores_supported(&info, &platform_name, cc_major);
        let warpgroup =
            warpgroup_gemm && super::sm90a::supported(tensor_cores, (cc_major, cc_minor));
        let limits = Limits {
            max_work_group: device
                .max_work_group_size()
                .map_err(|e| cl_error("clGetDeviceInfo(CL_DEVICE_MAX_WORK_GROUP_SIZE)", e.0))?,
            local_mem: device
                .local_mem_size()
                .map_err(|e| cl_error("clGetDeviceInfo(CL_DEVICE_LOCAL_MEM_SIZE)", e.0))?,
            compute_units: info.compute_units,
            tensor_cores,
        };
        let local_mem = limits.local_mem;
        let sgemm = SgemmChoice::new(limits, sgemm_tile)?;
        let context =
            Context::from_device(&device).map_err(|e| cl_error("clCreateContext", e.0))?;
        // In order; timestamps only when the timer needs them.
        let properties = if profile {
            CL_QUEUE_PROFILING_ENABLE
        } else {
            0
        };
        let queue = CommandQueue::create_default(&context, properties)
            .map_err(|e| cl_error("clCreateCommandQueue", e.0))?;
        let max_alloc = device
            .max_mem_alloc_size()
            .map_err(|e| cl_error("clGetDeviceInfo(CL_DEVICE_MAX_MEM_ALLOC_SIZE)", e.0))?;
        let persistent = persistent && super::persistent::supported(&info, &platform_name);
        let identity = format!(
            "{} {}; {}; driver {}; {}",
            platform_name,
            platform.version().unwrap_or_default(),
            info.name,
            info.driver,
            info.arch
        );
        Ok(ClDevice {
            info,
            device,
            side: Default::default(),
            queue,
            context,
            max_alloc,
            live: Mutex::new(HashMap::new()),
            frees: AtomicU64::new(0),
            serialize_kernels: identity.contains("Portable Computing Language"),
            serialize_builds: !platform_name.contains("NVIDIA"),
            timer: profile.then(KernelTimer::default),
            sgemm,
            tensor_cores,
            warpgroup: AtomicBool::new(warpgroup),
            persistent,
            local_mem,
            identity,
        })
    }
}

impl ClDevice {
    /// Keeps GEMMs off the warpgroup kernel unless the op set `module` (built from `binary`)
    /// has it in runnable form: PTX retargeted to sm_90a, no marked lines left. Without
    /// sm90a's define it lacks the kernel; a first step whose second failed (or a binary in
    /// another form) holds it inert, without its MMAs. Other programs (no `sgemm_tc64`) say
    /// nothing.
    fn note_warpgroup_kernel(&self, module: &ClModule, binary: &[u8]) {
        if self.warpgroup.load(Ordering::Relaxed)
            && module.defines(crate::backend::SGEMM_TC64.entry)
            && !(module.defines(super::sm90a::SGEMM_WG64.entry)
                && super::sm90a::is_retargeted(binary))
        {
            self.warpgroup.store(false, Ordering::Relaxed);
        }
    }

    /// The second step of the sm_90a build (sm90a.rs) from the first step's `binary`: the
    /// retargeted PTX and its program, or `None` (logged) when it fails.
    fn build_sm90a(&self, binary: &[u8]) -> Option<(Vec<u8>, ClModule)> {
        let built = super::sm90a::retarget(binary)
            .map_err(|why| format!("the first build's PTX: {why}"))
            .and_then(|ptx| {
                self.load_program(&ptx)
                    .map(|module| (ptx, module))
                    .map_err(|e| e.to_string())
            });
        match built {
            Ok((ptx, module)) => {
                log::info!(
                    "{}: warpgroup GEMM built (PTX retargeted to sm_90a)",
                    self.info.id
                );
                self.note_warpgroup_kernel(&module, &ptx);
                Some((ptx, module))
            }
            Err(why) => {
                log::warn!(
                    "{}: the warpgroup GEMM did not build for sm_90a, GEMMs stay on the mma.sync \
                     kernels: {why}",
                    self.info.id
                );
                None
            }
        }
    }

    /// The preprocessor lines that select the optional kernels this device runs.
    fn defines(&self) -> String {
        let mut defines = String::new();
        if self.persistent {
            defines.push_str(super::persistent::DEFINE);
        }
        if self.tensor_cores {
            defines.push_str(super::sgemm::TENSOR_CORES_DEFINE);
        }
        if self.warpgroup.load(Ordering::Relaxed) {
            defines.push_str(super::sm90a::DEFINE);
        }
        defines
    }

    /// `clFinish` on the queue.
    pub(super) fn finish(&self) -> Result<()> {
        self.queue.finish().map_err(|e| cl_error("clFinish", e.0))
    }
}

impl Device for ClDevice {
    type Module = ClModule;

    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn dialect(&self) -> Dialect {
        Dialect::OpenCl
    }

    fn op_set_source(&self) -> String {
        self.defines() + &super::kernels::op_set_source()
    }

    fn op_set_modules(&self) -> Vec<OpModule> {
        super::kernels::op_set_modules(&self.defines())
    }

    fn compiler_identity(&self) -> String {
        self.identity.clone()
    }

    fn alloc(&self, bytes: usize) -> Result<DevicePtr> {
        self.alloc_buffer(bytes)
    }

    fn free(&self, ptr: DevicePtr) {
        self.free_buffer(ptr)
    }

    fn memory_info(&self) -> Result<(u64, u64)> {
        let used: u64 = self.live.lock().values().map(|&b| b as u64).sum();
        Ok((self.info.memory.saturating_sub(used), self.info.memory))
    }

    fn write(&self, dst: DevicePtr, offset: usize, src: &[u8]) -> Result<()> {
        self.write_buffer(dst, offset, src)
    }

    fn side_writes(&self) -> bool {
        true
    }

    fn host_block(&self, bytes: usize, _read_back: bool) -> Result<Box<dyn crate::ops::HostBlock>> {
        // The driver's host-allocated memory is cached: reading it back is as quick as writing.
        Ok(Box::new(self.side.host_block(&self.context, bytes)?))
    }

    fn write_block_on_side(
        &self,
        dst: DevicePtr,
        offset: usize,
        block: &mut dyn crate::ops::HostBlock,
        range: std::ops::Range<usize>,
    ) -> Result<()> {
        self.write_buffer_from_block(dst, offset, block, range)
    }

    fn order_streams(&self, to_side: bool) -> Result<()> {
        self.side.order(&self.context, &self.queue, to_side)
    }

    fn read(&self, src: DevicePtr, offset: usize, dst: &mut [u8]) -> Result<()> {
        self.read_buffer(src, offset, dst)
    }

    fn copy(&self, src: ByteAddr, dst: ByteAddr, bytes: usize) -> Result<()> {
        self.copy_buffer(src, dst, bytes)
    }

    fn build(&self, source: &str, options: &[String]) -> Result<(Vec<u8>, ClModule)> {
        let (binary, module) = self.build_program(source, options)?;
        if super::sm90a::has_marked_lines(&binary) {
            if let Some((ptx, module)) = self.build_sm90a(&binary) {
                return Ok((ptx, module));
            }
        }
        self.note_warpgroup_kernel(&module, &binary);
        Ok((binary, module))
    }

    fn load(&self, binary: &[u8]) -> Result<ClModule> {
        // A cached first step (the second failed when it was built): try the second again.
        if super::sm90a::has_marked_lines(binary) {
            if let Some((_, module)) = self.build_sm90a(binary) {
                return Ok(module);
            }
        }
        let module = self.load_program(binary)?;
        self.note_warpgroup_kernel(&module, binary);
        Ok(module)
    }

    fn has_entry(&self, module: &ClModule, entry: &str) -> Result<bool> {
        Ok(module.defines(entry))
    }

    fn launch(
        &self,
        module: &ClModule,
        entry: &str,
        config: &LaunchConfig,
        args: &[RawArg],
    ) -> Result<()> {
        self.launch_kernel(module, entry, config, args)
    }

    fn block_limits(&self, module: &ClModule, entry: &str) -> Option<Result<(u32, u32)>> {
        self.group_limits(module, entry)
    }

    fn cooperative_blocks(
        &self,
        module: &ClModule,
        entry: &str,
        threads: u32,
        shared_bytes: u32,
    ) -> Option<Result<u32>> {
        self.persistent_groups(module, entry, threads, shared_bytes)
    }

    fn launch_cooperative(
        &self,
        module: &ClModule,
        entry: &str,
        config: &LaunchConfig,
        args: &[RawArg],
    ) -> Option<Result<()>> {
        // An ordinary launch: `cooperative_blocks` only offered a grid this driver runs at once.
        self.persistent
            .then(|| self.launch_kernel(module, entry, config, args))
    }

    fn synchronize(&self) -> Result<()> {
        match &self.timer {
            None => self.finish(),
            // Folding here keeps the list of waiting events short in a profiled run.
            Some(t) => t.finish_and_fold(|| self.finish()),
        }
    }

    fn kernel_times(&self) -> Result<Option<Vec<KernelTime>>> {
        self.timer
            .as_ref()
            .map(|t| t.take(|| self.finish()))
            .transpose()
    }

    fn sgemm_kernel(&self, m: usize, n: usize, k: usize) -> SgemmKernel {
        self.sgemm
            .kernel(m, n, k, self.warpgroup.load(Ordering::Relaxed))
    }

    fn portable_sgemm_kernel(&self, m: usize, n: usize, k: usize) -> Option<SgemmKernel> {
        self.sgemm.portable_for_tensor_cores(m, n, k)
    }

    fn half_tensor_cores(&self) -> bool {
        self.tensor_cores
    }
}

impl Drop for ClDevice {
    fn drop(&mut self) {
        // Buffers still alive here were leaked by their owner (the pool frees its blocks
        // before it lets go of the device); release them with the context.
        let _ = self.queue.finish();
        self.side.finish();
        let live: Vec<DevicePtr> = self.live.lock().keys().copied().collect();
        for ptr in live {
            self.free_buffer(ptr);
        }
    }
}
