//! [`CudaDevice`]: one CUDA device with its primary context, one stream, NVRTC and cuBLAS,
//! behind the [`Device`] seam.

use std::sync::Arc;

use cudarc::driver::sys::CUdevice_attribute;
use cudarc::driver::{CudaContext, CudaStream};

use super::blas::Blas;
use super::compile::{self, NvrtcInfo, Target};
use super::error;
use super::kernels;
use super::module::{CudaKernels, LaunchKind};
use crate::backend::capture_gate::CaptureFlag;
use crate::backend::{ByteAddr, Device, DevicePtr, RawArg, SgemmKernel};
use crate::context_options::ContextOptions;
use crate::device::{DeviceId, DeviceInfo};
use crate::error::{Error, Result};
use crate::kernel::{Dialect, LaunchConfig, OpModule};
use crate::ops::Gemm;

/// A CUDA device as the generic GPU op set drives it.
///
/// Every method binds the context to the calling thread first, so the device can be used from
/// any thread; all work is queued on one stream, in order.
pub(crate) struct CudaDevice {
    // Field order is drop order: the cuBLAS handle refers to the stream, the stream to the
    // context.
    pub(super) blas: Option<Blas>,
    /// A second stream, created on first use, for collectives that overlap the main stream's
    /// work (`Device::native_side_stream`).
    pub(super) side: std::sync::OnceLock<Arc<CudaStream>>,
    pub(super) stream: Arc<CudaStream>,
    pub(super) ctx: Arc<CudaContext>,
    pub(super) info: DeviceInfo,
    pub(super) target: Target,
    pub(super) nvrtc: NvrtcInfo,
    pub(super) driver_version: i32,
    pub(super) async_alloc: bool,
    /// Build the op set from the HIP sources behind the HIP-to-CUDA prelude
    /// (`ContextOptions::hip_sources_via_nvrtc`), to check the HIP kernels on an NVIDIA GPU.
    pub(super) hip_sources: bool,
    /// `CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH`: grid-synchronizing kernels may be launched.
    pub(super) cooperative: bool,
    /// Streaming multiprocessors (the co-residency limit is per SM).
    pub(super) sms: u32,
    /// Most dynamic shared memory one block may opt in to, in bytes.
    pub(super) shared_optin: u32,
    /// The op set has `sgemm_wg128` (built for sm_90a from the CUDA sources) and it should take
    /// the GEMMs it fits ahead of cuBLAS, while TF32 is off: with TF32 (and cuBLAS) cuBLAS runs
    /// them at full tensor-core speed.
    pub(super) warpgroup_gemm: bool,
    /// f32 products may use TF32 math (`ContextOptions::allow_tf32`, then
    /// `Device::set_tf32`); only with cuBLAS, whose math mode follows it.
    pub(super) tf32: std::sync::atomic::AtomicBool,
    /// What `ContextOptions::allow_tf32` set (with cuBLAS): `set_tf32(false)` returns to it.
    pub(super) tf32_default: bool,
    /// A graph is being recorded from the stream (`Device::capture_begin`): allocations, host
    /// copies and waits are refused until it ends.
    pub(super) capturing: CaptureFlag,
}

impl CudaDevice {
    /// Opens the device `info` (from [`super::probe`]): retains its primary context, creates the
    /// stream, and the cuBLAS handle when `options.vendor_blas` and cuBLAS is present.
    pub(crate) fn open(info: &DeviceInfo, options: &ContextOptions) -> Result<Self> {
        let DeviceId::Cuda(ordinal) = info.id else {
            return Err(Error::InvalidArgument(format!(
                "{} is not a CUDA device",
                info.id
            )));
        };
        let driver_version = super::runtime::check_runtime()?;
        let nvrtc = NvrtcInfo::query()?;
        let ctx =
            CudaContext::new(ordinal).map_err(|e| error::driver("cuDevicePrimaryCtxRetain", e))?;
        // cudarc's event tracking makes the first stream of every CudaContext run
        // cuCtxSynchronize on the shared primary context, which invalidates a graph another
        // context on this device is recording at that moment; and it only serves CudaSlice,
        // which this backend never uses.
        // SAFETY: no CudaSlice is ever allocated from this context (memory goes through the
        // backend's own pool on `stream`), so there is no cross-stream use to track.
        unsafe { ctx.disable_event_tracking() };
        let (major, minor) = ctx
            .compute_capability()
            .map_err(|e| error::driver("cuDeviceGetAttribute", e))?;
        let cc = (major * 10 + minor) as u32;
        let target = nvrtc.target_for(cc).ok_or_else(|| {
            error::unavailable(format!(
                "NVRTC {}.{} cannot compile for sm_{cc}",
                nvrtc.version.0, nvrtc.version.1
            ))
        })?;
        if let Target::Ptx(_) = target {
            if let Some(reason) = super::runtime::ptx_unloadable(nvrtc.version, driver_version) {
                return Err(error::unavailable(format!("{}: {reason}", info.id)));
            }
            log::warn!(
                "{}: NVRTC {}.{} cannot emit a CUBIN for sm_{cc}; building {target} (JIT by the driver at load)",
                info.id,
                nvrtc.version.0,
                nvrtc.version.1
            );
        }
        let attr = |a: CUdevice_attribute| {
            ctx.attribute(a)
                .map_err(|e| error::driver("cuDeviceGetAttribute", e))
        };
        let cooperative = attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH)? != 0;
        let sms = attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?.max(0) as u32;
        let shared_optin =
            attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?.max(0)
                as u32;
        let stream = ctx
            .new_stream()
            .map_err(|e| error::driver("cuStreamCreate", e))?;
        let blas = if !options.vendor_blas {
            log::info!(
                "{}: cuBLAS disabled by ContextOptions::vendor_blas; GEMM uses the sgemm kernel",
                info.id
            );
            None
        } else if options.hip_sources_via_nvrtc {
            // These contexts exist to run the HIP sources; GEMM through cuBLAS would leave the
            // HIP `sgemm` kernel untested.
            log::info!(
                "{}: cuBLAS not used with hip_sources_via_nvrtc; GEMM uses the HIP sgemm kernel",
                info.id
            );
            None
        } else if !Blas::present() {
            log::info!(
                "{}: cuBLAS not found (tried {}); GEMM uses the sgemm kernel",
                info.id,
                compile::candidates("cublas")
            );
            None
        } else {
            match Blas::new(&ctx, &stream, options.allow_tf32) {
                Ok(b) => Some(b),
                Err(e) => {
                    log::warn!(
                        "{}: cuBLAS unusable ({e}); GEMM uses the sgemm kernel",
                        info.id
                    );
                    None
                }
            }
        };
        if options.hip_sources_via_nvrtc {
            log::info!(
                "{}: op set built from the HIP sources through NVRTC",
                info.id
            );
        }
        log::info!(
            "{}: {} ({}), NVRTC {}.{}, {target}, cuBLAS {}",
            info.id,
            info.name,
            info.arch,
            nvrtc.version.0,
            nvrtc.version.1,
            if blas.is_some() { "on" } else { "off" }
        );
        let warpgroup_gemm = options.warpgroup_gemm
            && matches!(target, Target::CubinArchSpecific(90))
            && !options.hip_sources_via_nvrtc
            && shared_optin >= kernels::SGEMM_WG128.shared_bytes;
        let tf32_default = options.allow_tf32 && blas.is_some();
        Ok(CudaDevice {
            warpgroup_gemm,
            tf32: tf32_default.into(),
            tf32_default,
            blas,
            async_alloc: ctx.has_async_alloc(),
            side: std::sync::OnceLock::new(),
            stream,
            ctx,
            info: info.clone(),
            target,
            nvrtc,
            driver_version,
            hip_sources: options.hip_sources_via_nvrtc,
            cooperative,
            sms,
            shared_optin,
            capturing: CaptureFlag::default(),
        })
    }

    /// Whether `sgemm_wg128` runs an `m x n x k` product here (see
    /// [`kernels::warpgroup_gemm_fits`]).
    fn takes_warpgroup_gemm(&self, m: usize, n: usize, k: usize) -> bool {
        self.warpgroup_gemm
            && !self.tf32.load(std::sync::atomic::Ordering::Relaxed)
            && kernels::warpgroup_gemm_fits(self.sms, m, n, k)
    }

    /// Makes this device's context current on the calling thread.
    pub(super) fn bind(&self) -> Result<()> {
        self.ctx
            .bind_to_thread()
            .map_err(|e| error::driver("cuCtxSetCurrent", e))
    }

    /// The side stream, created on first use; the context is bound on return.
    fn side_stream(&self) -> Result<Arc<CudaStream>> {
        self.bind()?;
        if let Some(s) = self.side.get() {
            return Ok(s.clone());
        }
        let s = self
            .ctx
            .new_stream()
            .map_err(|e| error::driver("cuStreamCreate", e))?;
        // Two threads racing here each made a stream; the loser's is dropped unused.
        Ok(self.side.get_or_init(|| s).clone())
    }

    fn label(&self) -> String {
        format!("{} ({}, {})", self.info.id, self.info.name, self.info.arch)
    }
}

impl Drop for CudaDevice {
    fn drop(&mut self) {
        // The pool has queued a cuMemFreeAsync for every block it held (it drops before the
        // device it points to). Waiting here completes those frees, with this context current,
        // before cuBLAS, the stream and the context reference go (fields, in that order), so
        // the memory is back with the driver when the context is released, and a late kernel
        // error shows in the log instead of vanishing.
        let done = self.bind().and_then(|()| {
            if let Some(side) = self.side.get() {
                side.synchronize()
                    .map_err(|e| error::driver("cuStreamSynchronize", e))?;
            }
            self.stream
                .synchronize()
                .map_err(|e| error::driver("cuStreamSynchronize", e))
        });
        if let Err(e) = done {
            log::warn!("{}: pending work failed at context drop: {e}", self.info.id);
        }
    }
}

impl Device for CudaDevice {
    type Module = CudaKernels;

    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn dialect(&self) -> Dialect {
        if self.hip_sources {
            Dialect::Hip
        } else {
            Dialect::Cuda
        }
    }

    fn op_set_source(&self) -> String {
        if self.hip_sources {
            crate::backend::hip::kernels::op_set_source_for_nvrtc()
        } else {
            super::kernels::op_set_source()
        }
    }

    fn op_set_modules(&self) -> Vec<OpModule> {
        if self.hip_sources {
            crate::backend::hip::kernels::op_set_modules_for_nvrtc()
        } else {
            super::kernels::op_set_modules()
        }
    }

    fn compiler_identity(&self) -> String {
        let base = format!(
            "nvrtc {}.{}; driver {}; {}",
            self.nvrtc.version.0, self.nvrtc.version.1, self.driver_version, self.target
        );
        if self.hip_sources {
            // The prelude is part of every HIP build here (pre-included), so a user source of
            // the same text must not share a cache entry with its CUDA build, and a changed
            // prelude must rebuild.
            format!("{base}; {}", compile::hip_environment_identity())
        } else {
            base
        }
    }

    fn alloc(&self, bytes: usize) -> Result<DevicePtr> {
        self.alloc_bytes(bytes)
    }

    fn free(&self, ptr: DevicePtr) {
        self.free_ptr(ptr)
    }

    fn memory_info(&self) -> Result<(u64, u64)> {
        self.mem_info()
    }

    fn write(&self, dst: DevicePtr, offset: usize, src: &[u8]) -> Result<()> {
        self.write_bytes(dst, offset, src)
    }

    fn read(&self, src: DevicePtr, offset: usize, dst: &mut [u8]) -> Result<()> {
        self.read_bytes(src, offset, dst)
    }

    fn copy(&self, src: ByteAddr, dst: ByteAddr, bytes: usize) -> Result<()> {
        self.copy_bytes(src, dst, bytes)
    }

    fn build(&self, source: &str, options: &[String]) -> Result<(Vec<u8>, Self::Module)> {
        let env = if self.hip_sources {
            compile::hip_environment()
        } else {
            compile::Environment::default()
        };
        let binary = compile::compile(source, self.target, options, env, &self.label())?;
        let module = self.load_module(&binary)?;
        Ok((binary, module))
    }

    fn load(&self, binary: &[u8]) -> Result<Self::Module> {
        self.load_module(binary)
    }

    fn has_entry(&self, module: &Self::Module, entry: &str) -> Result<bool> {
        self.bind()?;
        match self.function(module, entry) {
            Ok(_) => Ok(true),
            // CUDA_ERROR_NOT_FOUND: the module has no function of that name.
            Err(Error::Backend { code: 500, .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    fn launch(
        &self,
        module: &Self::Module,
        entry: &str,
        config: &LaunchConfig,
        args: &[RawArg],
    ) -> Result<()> {
        self.launch_kernel(LaunchKind::Plain, module, entry, config, args)
    }

    fn block_limits(&self, _: &Self::Module, _: &str) -> Option<Result<(u32, u32)>> {
        // The kernels that ask declare __launch_bounds__(1024); `launch_kernel` opts a plain
        // launch in to more shared memory than the default.
        Some(Ok((1024, self.shared_optin)))
    }

    fn cooperative_blocks(
        &self,
        module: &Self::Module,
        entry: &str,
        threads: u32,
        shared_bytes: u32,
    ) -> Option<Result<u32>> {
        self.cooperative
            .then(|| self.co_resident_blocks(module, entry, threads, shared_bytes))
    }

    fn launch_cooperative(
        &self,
        module: &Self::Module,
        entry: &str,
        config: &LaunchConfig,
        args: &[RawArg],
    ) -> Option<Result<()>> {
        self.cooperative
            .then(|| self.launch_kernel(LaunchKind::Cooperative, module, entry, config, args))
    }

    fn synchronize(&self) -> Result<()> {
        self.refuse_while_capturing("synchronize")?;
        self.bind()?;
        self.stream
            .synchronize()
            .map_err(|e| error::driver("cuStreamSynchronize", e))
    }

    fn sgemm_kernel(&self, m: usize, n: usize, k: usize) -> SgemmKernel {
        if self.takes_warpgroup_gemm(m, n, k) {
            return kernels::SGEMM_WG128;
        }
        kernels::sgemm_for(self.target.code(), self.hip_sources, self.sms, m, n)
    }

    fn half_tensor_cores(&self) -> bool {
        kernels::half_tensor_cores(self.target.code(), self.hip_sources)
    }

    fn capture_begin(&self) -> Option<Result<()>> {
        Some(self.begin_capture())
    }

    fn capture_end(&self) -> Result<Box<dyn crate::graph::GraphExec>> {
        self.end_capture()
    }

    fn profiler_range(&self, on: bool) -> Result<()> {
        self.profiler(on)
    }

    fn native_stream(&self) -> Option<Result<u64>> {
        Some(
            self.bind()
                .map(|()| self.stream.cu_stream() as usize as u64),
        )
    }

    fn native_side_stream(&self) -> Option<Result<u64>> {
        Some(self.side_stream().map(|s| s.cu_stream() as usize as u64))
    }

    fn side_writes(&self) -> bool {
        true
    }

    fn host_block(&self, bytes: usize, read_back: bool) -> Result<Box<dyn crate::ops::HostBlock>> {
        Ok(Box::new(super::staging::PinnedBlock::new(
            &self.ctx, bytes, read_back,
        )?))
    }

    fn write_block_on_side(
        &self,
        dst: DevicePtr,
        offset: usize,
        block: &mut dyn crate::ops::HostBlock,
        range: std::ops::Range<usize>,
    ) -> Result<()> {
        // A recorded host-to-device copy would read the block at every replay.
        self.refuse_while_capturing("upload")?;
        let block: &mut super::staging::PinnedBlock = block.downcast("write_block_on_side")?;
        let side = self.side_stream()?;
        block.copy_to(&side, dst + offset as u64, range)
    }

    fn order_streams(&self, to_side: bool) -> Result<()> {
        // An event wait between two streams would fork or join a recording.
        self.refuse_while_capturing("stream ordering")?;
        let side = self.side_stream()?;
        let (waiter, waited) = if to_side {
            (&side, &self.stream)
        } else {
            (&self.stream, &side)
        };
        waiter
            .join(waited)
            .map_err(|e| error::driver("cuStreamWaitEvent", e))
    }

    fn vendor_gemm(
        &self,
        g: &Gemm,
        a: (DevicePtr, usize),
        b: (DevicePtr, usize),
        c: (DevicePtr, usize),
    ) -> Option<Result<()>> {
        let blas = self.blas.as_ref()?;
        let tf32 = self.tf32.load(std::sync::atomic::Ordering::Relaxed);
        Some(self.bind().and_then(|()| blas.gemm(g, a, b, c, tf32)))
    }

    fn vendor_half_gemm(
        &self,
        g: &Gemm,
        operands: [(DevicePtr, usize); 3],
        types: [crate::dtype::DType; 2],
    ) -> Option<Result<()>> {
        let blas = self.blas.as_ref()?;
        Some(self.bind().and_then(|()| blas.gemm_ex(g, operands, types)))
    }

    fn has_vendor_gemm(&self) -> bool {
        self.blas.is_some()
    }

    fn has_vendor_half_gemm(&self) -> bool {
        self.blas.is_some()
    }

    fn builtin_gemm_preferred(&self, g: &Gemm) -> bool {
        self.takes_warpgroup_gemm(g.m, g.n, g.k)
    }

    fn set_tf32(&self, on: bool) -> bool {
        // TF32 exists here only as cuBLAS's math mode.
        let on = (on && self.blas.is_some()) || self.tf32_default;
        self.tf32.swap(on, std::sync::atomic::Ordering::Relaxed)
    }

    fn tf32(&self) -> bool {
        self.tf32.load(std::sync::atomic::Ordering::Relaxed)
    }
}
