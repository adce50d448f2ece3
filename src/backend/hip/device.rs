//! [`HipDevice`]: the [`Device`] seam over the HIP runtime, one stream per context.

use std::ffi::{CString, c_int, c_void};

use crate::backend::capture_gate::{CaptureFlag, keeps_block_while_recording, outside_captures};
use crate::backend::{
    ByteAddr, Device, DevicePtr, FunctionCache, RawArg, SgemmKernel, with_param_slots,
};
use crate::device::DeviceInfo;
use crate::error::{Error, Result};
use crate::kernel::{Dialect, LaunchConfig, OpModule};

use super::compile;
use super::error::{backend_error, check, unavailable, version_string};
use super::ffi::{self, Function, HIP_ERROR_OUT_OF_MEMORY, HipApi, RtcApi, Stream};

/// One HIP device with its own stream.
pub(crate) struct HipDevice {
    pub(super) api: &'static HipApi,
    rtc: &'static RtcApi,
    pub(super) ordinal: c_int,
    pub(super) info: DeviceInfo,
    /// `--offload-arch` value: the base processor (`gfx90a`), so the code object is built for
    /// "any" xnack/sramecc mode and loads whatever mode the device runs in.
    arch: String,
    identity: String,
    pub(super) stream: Stream,
    /// A graph is being recorded from the stream (`Device::capture_begin`): allocations, host
    /// copies and waits are refused until it ends (see `graph.rs`).
    pub(super) capturing: CaptureFlag,
}

// SAFETY: `stream` is a HIP stream handle; the HIP runtime allows any host thread to enqueue on
// and synchronize a stream, and all HIP API calls are thread-safe. The other fields are
// immutable after construction.
unsafe impl Send for HipDevice {}
// SAFETY: as above; `&self` methods only pass the handle to thread-safe runtime calls.
unsafe impl Sync for HipDevice {}

impl HipDevice {
    /// Opens device `info` (a `hip:<n>` id from the probe): selects it and creates its stream.
    pub(crate) fn new(info: &DeviceInfo, arch_full: &str) -> Result<Self> {
        let loaded = ffi::api().map_err(unavailable)?;
        let api = &loaded.hip;
        let rtc = loaded
            .rtc
            .as_ref()
            .map_err(|reason| unavailable(format!("hiprtc not found: {reason}")))?;
        let ordinal = match info.id {
            crate::device::DeviceId::Hip(i) => c_int::try_from(i)
                .map_err(|_| Error::InvalidArgument(format!("HIP ordinal {i} out of range")))?,
            other => {
                return Err(Error::InvalidArgument(format!(
                    "{other} is not a HIP device id"
                )));
            }
        };
        let arch = arch_full.split(':').next().unwrap_or(arch_full).to_string();
        let (rtc_major, rtc_minor) = rtc.version();
        let (mut runtime, mut driver) = (0, 0);
        // SAFETY: valid out-pointers to one `int` each.
        let code = unsafe { (api.runtime_get_version)(&mut runtime) };
        check(api, code, "hipRuntimeGetVersion")?;
        // SAFETY: as above.
        let code = unsafe { (api.driver_get_version)(&mut driver) };
        check(api, code, "hipDriverGetVersion")?;
        let identity = format!(
            "hiprtc {rtc_major}.{rtc_minor} ({}); HIP runtime {}; driver {}; arch {arch_full}; \
             offload-arch {arch}",
            rtc.path,
            version_string(runtime),
            version_string(driver)
        );

        set_device(api, ordinal)?;
        let mut stream: Stream = std::ptr::null_mut();
        // SAFETY: `stream` is a valid out-pointer; the device was selected on this thread.
        let code = unsafe { (api.stream_create)(&mut stream) };
        check(api, code, "hipStreamCreate")?;
        log::debug!("hip:{ordinal}: stream created, {identity}");
        Ok(HipDevice {
            api,
            rtc,
            ordinal,
            info: info.clone(),
            arch,
            identity,
            stream,
            capturing: CaptureFlag::default(),
        })
    }

    /// HIP keeps the current device per host thread; every call that allocates or loads binds
    /// this device first (cheap when it is already current).
    pub(super) fn bind(&self) -> Result<()> {
        set_device(self.api, self.ordinal)
    }

    fn device_name(&self) -> String {
        format!("{} ({})", self.info.id, self.info.name)
    }

    fn sync_stream(&self) -> Result<()> {
        // SAFETY: `self.stream` is live until drop.
        let code = unsafe { (self.api.stream_synchronize)(self.stream) };
        check(self.api, code, "hipStreamSynchronize")
    }
}

pub(super) fn set_device(api: &HipApi, ordinal: c_int) -> Result<()> {
    // SAFETY: plain value argument; an invalid ordinal is reported as an error code.
    let code = unsafe { (api.set_device)(ordinal) };
    check(api, code, "hipSetDevice")
}

/// `ptr + offset` as a device address, or an error if it overflows.
fn offset_ptr(ptr: DevicePtr, offset: usize) -> Result<u64> {
    ptr.checked_add(offset as u64)
        .ok_or_else(|| Error::InvalidArgument("device address overflow".to_string()))
}

impl Drop for HipDevice {
    fn drop(&mut self) {
        // Queued work may still use the stream; destroying it waits for that work in HIP, but
        // synchronizing first makes the ordering explicit and surfaces late errors in the log.
        if let Err(e) = self.sync_stream() {
            log::warn!("{}: pending work failed at context drop: {e}", self.info.id);
        }
        // SAFETY: the stream was created in `new` and is destroyed exactly once, here.
        let code = unsafe { (self.api.stream_destroy)(self.stream) };
        if let Err(e) = check(self.api, code, "hipStreamDestroy") {
            log::warn!("{}: {e}", self.info.id);
        }
    }
}

/// A loaded code object and its resolved kernels.
pub(crate) struct HipModule {
    api: &'static HipApi,
    ordinal: c_int,
    module: ffi::Module,
    /// hipModuleLoadData is not documented to copy the image; keeping it costs a few KB.
    _image: Vec<u8>,
    functions: FunctionCache<usize>,
}

// SAFETY: a `hipModule_t` and its `hipFunction_t`s may be used from any host thread; the
// function map is behind a mutex.
unsafe impl Send for HipModule {}
// SAFETY: as above.
unsafe impl Sync for HipModule {}

impl HipModule {
    fn function(&self, entry: &str) -> Result<Function> {
        let f = self.functions.get_or_load(entry, || {
            let name = CString::new(entry)
                .map_err(|_| Error::InvalidArgument(format!("kernel name {entry:?} has a NUL")))?;
            let mut f: Function = std::ptr::null_mut();
            // SAFETY: `f` is a valid out-pointer, `self.module` is live, `name` is
            // NUL-terminated.
            let code =
                unsafe { (self.api.module_get_function)(&mut f, self.module, name.as_ptr()) };
            check(
                self.api,
                code,
                &format!("hipModuleGetFunction(\"{entry}\")"),
            )?;
            Ok(f as usize)
        })?;
        Ok(f as Function)
    }
}

impl Drop for HipModule {
    fn drop(&mut self) {
        if set_device(self.api, self.ordinal).is_err() {
            log::warn!(
                "hip:{}: cannot select device to unload a module",
                self.ordinal
            );
        }
        // SAFETY: the module was loaded by hipModuleLoadData and is unloaded once, here; launches
        // that reference it were queued by a context that keeps the module alive in its cache.
        let code = outside_captures(|| unsafe { (self.api.module_unload)(self.module) });
        if let Err(e) = check(self.api, code, "hipModuleUnload") {
            log::warn!("{e}");
        }
    }
}

impl Device for HipDevice {
    type Module = HipModule;

    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn dialect(&self) -> Dialect {
        Dialect::Hip
    }

    fn block_limits(&self, _: &HipModule, _: &str) -> Option<Result<(u32, u32)>> {
        // 48 KB: within the 64 KB of LDS every AMD GPU gives a workgroup since GCN, and the
        // default a plain launch may use on NVIDIA (hipshim), which needs no opt-in there.
        Some(Ok((1024, 48 << 10)))
    }

    fn op_set_source(&self) -> String {
        super::kernels::op_set_source()
    }

    fn op_set_modules(&self) -> Vec<OpModule> {
        super::kernels::op_set_modules()
    }

    fn compiler_identity(&self) -> String {
        self.identity.clone()
    }

    fn alloc(&self, bytes: usize) -> Result<DevicePtr> {
        if bytes == 0 {
            return Ok(0);
        }
        // hipMalloc is not stream-ordered: it cannot be recorded into a graph.
        self.refuse_while_capturing("device allocation")?;
        self.bind()?;
        let mut ptr: *mut c_void = std::ptr::null_mut();
        // SAFETY: `ptr` is a valid out-pointer; the device is current on this thread.
        let code = unsafe { (self.api.malloc)(&mut ptr, bytes) };
        if code == HIP_ERROR_OUT_OF_MEMORY {
            let (free, total) = self.memory_info().unwrap_or((0, 0));
            return Err(Error::OutOfMemory {
                device: self.device_name(),
                requested: bytes,
                free: free as usize,
                total: total as usize,
            });
        }
        check(self.api, code, "hipMalloc")?;
        Ok(ptr as DevicePtr)
    }

    fn free(&self, ptr: DevicePtr) {
        if ptr == 0 {
            return;
        }
        let recording = self.refuse_while_capturing("free").is_err();
        if keeps_block_while_recording(recording, self.info.id, ptr) {
            return;
        }
        if let Err(e) = self.bind() {
            log::warn!("{e}");
        }
        // hipFree synchronizes the device: not while another thread records a graph.
        // SAFETY: `ptr` came from `alloc` on this device (the pool returns each block once).
        let code = outside_captures(|| unsafe { (self.api.free)(ptr as *mut c_void) });
        if let Err(e) = check(self.api, code, "hipFree") {
            log::warn!("{}: {e}", self.info.id);
        }
    }

    fn memory_info(&self) -> Result<(u64, u64)> {
        self.bind()?;
        let (mut free, mut total) = (0usize, 0usize);
        // SAFETY: valid out-pointers; the device is current on this thread.
        let code = unsafe { (self.api.mem_get_info)(&mut free, &mut total) };
        check(self.api, code, "hipMemGetInfo")?;
        Ok((free as u64, total as u64))
    }

    fn write(&self, dst: DevicePtr, offset: usize, src: &[u8]) -> Result<()> {
        if src.is_empty() {
            return Ok(());
        }
        // A recorded host-to-device copy would read `src` at every replay, long after it is gone.
        self.refuse_while_capturing("upload")?;
        let dst = offset_ptr(dst, offset)?;
        // SAFETY: `src` is readable for `src.len()` bytes and stays borrowed until the stream is
        // synchronized below, so the (possibly asynchronous) copy never outlives it; the
        // destination range lies in an allocation of this device (checked by the op layer).
        let code = unsafe {
            (self.api.memcpy_htod_async)(dst, src.as_ptr().cast(), src.len(), self.stream)
        };
        check(self.api, code, "hipMemcpyHtoDAsync")?;
        self.sync_stream()
    }

    fn read(&self, src: DevicePtr, offset: usize, dst: &mut [u8]) -> Result<()> {
        self.refuse_while_capturing("download")?;
        if dst.is_empty() {
            return self.sync_stream();
        }
        let src = offset_ptr(src, offset)?;
        // SAFETY: `dst` is writable for `dst.len()` bytes and stays borrowed until the stream is
        // synchronized below; queued kernels run before the copy (same stream).
        let code = unsafe {
            (self.api.memcpy_dtoh_async)(dst.as_mut_ptr().cast(), src, dst.len(), self.stream)
        };
        check(self.api, code, "hipMemcpyDtoHAsync")?;
        self.sync_stream()
    }

    fn copy(&self, src: ByteAddr, dst: ByteAddr, bytes: usize) -> Result<()> {
        if bytes == 0 {
            return Ok(());
        }
        let (src, dst) = (offset_ptr(src.0, src.1)?, offset_ptr(dst.0, dst.1)?);
        // SAFETY: both ranges lie in allocations of this device (checked by the op layer), which
        // stay allocated until the queued copy has run (buffers outlive their queued work).
        let code = unsafe { (self.api.memcpy_dtod_async)(dst, src, bytes, self.stream) };
        check(self.api, code, "hipMemcpyDtoDAsync")
    }

    fn build(&self, source: &str, options: &[String]) -> Result<(Vec<u8>, HipModule)> {
        let opts = compile::options_for(&self.arch, options);
        let binary = compile::compile(self.rtc, source, &opts, &self.device_name())?;
        let module = self.load(&binary)?;
        Ok((binary, module))
    }

    fn load(&self, binary: &[u8]) -> Result<HipModule> {
        self.bind()?;
        let image = binary.to_vec();
        let mut module: ffi::Module = std::ptr::null_mut();
        // SAFETY: `image` is a complete code object (or offload bundle) kept alive by the returned
        // module; `module` is a valid out-pointer; the device is current on this thread.
        let code = unsafe { (self.api.module_load_data)(&mut module, image.as_ptr().cast()) };
        check(self.api, code, "hipModuleLoadData")?;
        Ok(HipModule {
            api: self.api,
            ordinal: self.ordinal,
            module,
            _image: image,
            functions: FunctionCache::new(),
        })
    }

    fn has_entry(&self, module: &HipModule, entry: &str) -> Result<bool> {
        self.bind()?;
        match module.function(entry) {
            Ok(_) => Ok(true),
            // hipErrorNotFound: the code object has no function of that name.
            Err(Error::Backend { code: 500, .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    fn launch(
        &self,
        module: &HipModule,
        entry: &str,
        config: &LaunchConfig,
        args: &[RawArg],
    ) -> Result<()> {
        let f = module.function(entry)?;
        let [gx, gy, gz] = config.grid;
        let [bx, by, bz] = config.block;
        let code = with_param_slots(args, |params| {
            // SAFETY: `f` belongs to a live module of this device; `params` holds one pointer per
            // kernel parameter, each to an 8-byte slot alive for the call (the runtime copies the
            // values when it enqueues); `extra` is null; the stream is live.
            unsafe {
                (self.api.module_launch_kernel)(
                    f,
                    gx,
                    gy,
                    gz,
                    bx,
                    by,
                    bz,
                    config.shared_bytes,
                    self.stream,
                    params.as_mut_ptr(),
                    std::ptr::null_mut(),
                )
            }
        });
        if code != ffi::HIP_SUCCESS {
            return Err(backend_error(
                self.api,
                code,
                &format!("hipModuleLaunchKernel(\"{entry}\")"),
            ));
        }
        Ok(())
    }

    fn synchronize(&self) -> Result<()> {
        self.refuse_while_capturing("synchronize")?;
        self.sync_stream()
    }

    fn capture_begin(&self) -> Option<Result<()>> {
        self.begin_capture()
    }

    fn capture_end(&self) -> Result<Box<dyn crate::graph::GraphExec>> {
        self.end_capture()
    }

    fn sgemm_kernel(&self, _m: usize, _n: usize, _k: usize) -> SgemmKernel {
        crate::backend::cuda::kernels::SGEMM
    }

    fn native_stream(&self) -> Option<Result<u64>> {
        // RCCL queues on this stream, with this device current on the calling thread.
        Some(self.bind().map(|()| self.stream as usize as u64))
    }
}
