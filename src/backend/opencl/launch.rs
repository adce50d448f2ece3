//! Programs and launches: `clBuildProgram` with the full log on failure, program binaries for
//! the disk cache, `clEnqueueNDRangeKernel`, and the size of a persistent grid.

use std::ptr;

use std::sync::atomic::Ordering;

use opencl3::error_codes::{
    CL_SUCCESS, ClError, DLOPEN_FUNCTION_NOT_AVAILABLE, DLOPEN_RUNTIME_LOAD_FAILED,
};
use opencl3::program::Program;
use opencl3::types::{cl_command_queue, cl_event, cl_int, cl_kernel, cl_mem};
use parking_lot::Mutex;

use super::device::ClDevice;
use super::error::{cl_error, status_name};
use super::memory::as_mem;
use super::module::{ClModule, PROGRAM_LOCK};
use crate::backend::RawArg;
use crate::error::{Error, Result};
use crate::kernel::LaunchConfig;

/// PoCL 5.0 aborts (`pocl_release_dlhandle_cache: Assertion 'found->ref_count > 0'`) when
/// kernels of several PoCL contexts complete concurrently in its worker threads: seen on the GPU
/// machine whenever test threads used their own PoCL contexts at once, never single-threaded.
/// So on PoCL each launch holds this lock until its kernel has finished (`clFinish`). PoCL is a
/// CPU device, where the lost overlap costs little; other platforms are not affected.
static POCL_KERNELS: Mutex<()> = Mutex::new(());

/// Whether two arguments are the same bits (so `-0.0` differs from `0.0` and a NaN equals
/// itself).
fn same_arg(a: &RawArg, b: &RawArg) -> bool {
    match (a, b) {
        (RawArg::F32(x), RawArg::F32(y)) => x.to_bits() == y.to_bits(),
        _ => a == b,
    }
}

/// `clEnqueueNDRangeKernel`, without an event unless `event` asks for one (the kernel timer):
/// nothing waits on a launch by event (the queue is in order), and creating and releasing one
/// per launch is driver work on the launch path. The same runtime opencl3 loaded
/// (`cl3::load_library` is its one loader).
fn enqueue_kernel(
    queue: cl_command_queue,
    kernel: cl_kernel,
    global: &[usize; 3],
    local: &[usize; 3],
    event: Option<&mut cl_event>,
) -> std::result::Result<(), cl_int> {
    let runtime = cl3::load_library()
        .as_ref()
        .map_err(|_| DLOPEN_RUNTIME_LOAD_FAILED)?;
    // The queue and kernel are live objects of one context (held by the caller), the work
    // sizes are three-element arrays that outlive the call, and the event pointer is null
    // (allowed: the driver then creates no event) or a slot the caller owns and releases.
    match runtime.clEnqueueNDRangeKernel(
        queue,
        kernel,
        3,
        ptr::null(),
        global.as_ptr(),
        local.as_ptr(),
        0,
        ptr::null(),
        event.map_or(ptr::null_mut(), |e| e as *mut cl_event),
    ) {
        Some(CL_SUCCESS) => Ok(()),
        Some(code) => Err(code),
        None => Err(DLOPEN_FUNCTION_NOT_AVAILABLE),
    }
}

impl ClDevice {
    fn compile_error(&self, program: &Program, code: ClError) -> Error {
        let log = program.get_build_log(self.device.id()).unwrap_or_default();
        Error::Compile {
            device: self.info.name.clone(),
            log: format!(
                "clBuildProgram: {} ({})\n{}",
                status_name(code.0),
                code.0,
                log.trim_end_matches('\0')
            ),
        }
    }

    pub(super) fn build_program(
        &self,
        source: &str,
        options: &[String],
    ) -> Result<(Vec<u8>, ClModule)> {
        let opts = options.join(" ");
        // opencl3 hands options over as a C string.
        if opts.contains('\0') || source.contains('\0') {
            return Err(Error::InvalidArgument(
                "OpenCL source and options must not contain NUL bytes".into(),
            ));
        }
        let _serial = self.serialize_builds.then(|| PROGRAM_LOCK.lock());
        let mut program = Program::create_from_source(&self.context, source)
            .map_err(|e| cl_error("clCreateProgramWithSource", e.0))?;
        if let Err(code) = program.build(&[self.device.id()], &opts) {
            return Err(self.compile_error(&program, code));
        }
        let binary = program
            .get_binaries()
            .map_err(|e| cl_error("clGetProgramInfo(CL_PROGRAM_BINARIES)", e.0))?
            .into_iter()
            .next()
            .unwrap_or_default();
        let module = ClModule::new(program)?;
        Ok((binary, module))
    }

    pub(super) fn load_program(&self, binary: &[u8]) -> Result<ClModule> {
        if binary.is_empty() {
            return Err(Error::Backend {
                backend: crate::device::BackendKind::OpenCl,
                call: "clCreateProgramWithBinary".into(),
                code: i64::from(opencl3::error_codes::CL_INVALID_BINARY),
                message: "CL_INVALID_BINARY: empty program binary".into(),
            });
        }
        let _serial = self.serialize_builds.then(|| PROGRAM_LOCK.lock());
        // SAFETY: one device and one binary, as the call requires; the driver validates the
        // binary and reports a bad one as an error status.
        let mut program =
            unsafe { Program::create_from_binary(&self.context, &[self.device.id()], &[binary]) }
                .map_err(|e| cl_error("clCreateProgramWithBinary", e.0))?;
        if let Err(code) = program.build(&[self.device.id()], "") {
            return Err(self.compile_error(&program, code));
        }
        ClModule::new(program)
    }

    pub(super) fn launch_kernel(
        &self,
        module: &ClModule,
        entry: &str,
        config: &LaunchConfig,
        args: &[RawArg],
    ) -> Result<()> {
        let kernel = module.kernels.get(entry).ok_or_else(|| {
            Error::InvalidArgument(format!("no kernel named '{entry}' in the OpenCL program"))
        })?;
        // Read with the table locked, after the arguments were found live in it: a handle that
        // was released and handed out again is then seen with the count of its release.
        let frees = {
            let live = self.live.lock();
            for a in args {
                if let RawArg::Ptr(p) = a {
                    if !live.contains_key(p) {
                        return Err(Error::InvalidArgument(format!(
                            "{entry}: {p:#x} is not a buffer of this OpenCL device"
                        )));
                    }
                }
            }
            self.frees.load(Ordering::Acquire)
        };
        let mut global = [0usize; 3];
        let mut local = [0usize; 3];
        for d in 0..3 {
            local[d] = config.block[d].max(1) as usize;
            global[d] = config.grid[d].max(1) as usize * local[d];
        }
        let mut slot = kernel.lock();
        let slot = &mut *slot;
        if slot.frees != frees {
            for a in slot.args.iter_mut() {
                if matches!(a, Some(RawArg::Ptr(_))) {
                    *a = None;
                }
            }
            slot.frees = frees;
        }
        if slot.args.len() < args.len() {
            slot.args.resize(args.len(), None);
        }
        for (i, a) in args.iter().enumerate() {
            if slot.args[i].as_ref().is_some_and(|last| same_arg(last, a)) {
                continue;
            }
            // Forgotten until the driver accepts the new value.
            slot.args[i] = None;
            let index = i as u32;
            let kernel = &slot.kernel;
            // SAFETY: each value has the size and type of the parameter the kernel ABI gives
            // at this index (a `cl_mem` handle checked live above, or a scalar); the driver
            // checks the size and reports a mismatch as an error status.
            let set = unsafe {
                match *a {
                    RawArg::Ptr(p) => kernel.set_arg(index, &(as_mem(p) as cl_mem)),
                    RawArg::F32(v) => kernel.set_arg(index, &v),
                    RawArg::U32(v) => kernel.set_arg(index, &v),
                    RawArg::I32(v) => kernel.set_arg(index, &v),
                    RawArg::U64(v) => kernel.set_arg(index, &v),
                }
            };
            set.map_err(|e| {
                Error::InvalidArgument(format!(
                    "{entry}: argument {i} ({a:?}) rejected: {} ({})",
                    status_name(e.0),
                    e.0
                ))
            })?;
            slot.args[i] = Some(*a);
        }
        if config.shared_bytes > 0 && slot.local_bytes != Some(config.shared_bytes as usize) {
            slot.local_bytes = None;
            // Dynamic local memory is a trailing `__local` parameter in OpenCL.
            // SAFETY: a local-memory argument carries only a size.
            unsafe {
                slot.kernel
                    .set_arg_local_buffer(args.len() as u32, config.shared_bytes as usize)
            }
            .map_err(|e| cl_error("clSetKernelArg(__local)", e.0))?;
            slot.local_bytes = Some(config.shared_bytes as usize);
        }
        let _pocl = self.serialize_kernels.then(|| POCL_KERNELS.lock());
        let mut event: cl_event = ptr::null_mut();
        let want_event = self.timer.is_some().then_some(&mut event);
        match enqueue_kernel(
            self.queue.get(),
            slot.kernel.get(),
            &global,
            &local,
            want_event,
        ) {
            Ok(()) => {
                if let Some(timer) = &self.timer {
                    timer.record(entry, event, || self.finish())?;
                }
                if self.serialize_kernels {
                    self.finish()?;
                }
                Ok(())
            }
            Err(code) => {
                let buffers: Vec<_> = args
                    .iter()
                    .filter_map(|a| match a {
                        RawArg::Ptr(p) => Some(*p),
                        _ => None,
                    })
                    .collect();
                Err(self.enqueue_error(&format!("clEnqueueNDRangeKernel({entry})"), code, &buffers))
            }
        }
    }
}

impl ClDevice {
    /// The most work-items of a group running `entry` (its register-limited size) and the
    /// local memory the group may add to the kernel's static use; `None` when the program lacks
    /// `entry`.
    pub(super) fn group_limits(
        &self,
        module: &ClModule,
        entry: &str,
    ) -> Option<Result<(u32, u32)>> {
        let (max_threads, static_local) = match module.limits(entry, &self.device) {
            Err(e) => return Some(Err(e)),
            Ok(None) => return None,
            Ok(Some(l)) => l,
        };
        let left = self.local_mem.saturating_sub(static_local);
        Some(Ok((
            u32::try_from(max_threads).unwrap_or(u32::MAX),
            u32::try_from(left).unwrap_or(u32::MAX),
        )))
    }

    /// How many groups of `entry` (`threads` work-items, `shared_bytes` of dynamic local
    /// memory) may form one persistent grid: one per compute unit when a group fits (the
    /// kernel's register-limited group size and the local memory left by its static use),
    /// else 0. `None` where persistent kernels are off or the op set lacks `entry`.
    pub(super) fn persistent_groups(
        &self,
        module: &ClModule,
        entry: &str,
        threads: u32,
        shared_bytes: u32,
    ) -> Option<Result<u32>> {
        if !self.persistent {
            return None;
        }
        let limits = match module.limits(entry, &self.device) {
            Err(e) => return Some(Err(e)),
            Ok(None) => return None,
            Ok(Some(l)) => l,
        };
        let (max_threads, static_local) = limits;
        let fits = threads as usize <= max_threads
            && static_local.saturating_add(u64::from(shared_bytes)) <= self.local_mem;
        if !fits {
            log::debug!(
                "{}: {entry} with {threads} work-items and {shared_bytes} bytes of local memory \
                 does not fit a compute unit (kernel limit {max_threads} work-items, \
                 {static_local} bytes of static local memory, device {} bytes)",
                self.info.id,
                self.local_mem
            );
            return Some(Ok(0));
        }
        Some(Ok(self.info.compute_units))
    }
}
