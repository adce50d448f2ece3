//! A [`Device`] that runs nothing and records every launch, so tests can see the argument
//! sequence the generic GPU ops build for each entry point (the kernel-contract test,
//! src/backend/gpu/contract). Memory is host memory; `build` reads the entry names of the source.

pub(crate) mod signatures;

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;

use super::{ByteAddr, Device, DevicePtr, RawArg, SgemmKernel};
use crate::device::{BackendKind, DeviceId, DeviceInfo, DeviceKind};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::kernel::{Dialect, LaunchConfig};

/// The element type each device handle was last packed as on this thread
/// (`gpu::launch::Args::buf_of` notes it): what the kernel contract test compares with the
/// pointer types the kernels declare. A launch is queued on the thread that packs its
/// arguments, so [`RecordingDevice`] reads its pointers' types here when it records it.
pub(crate) mod pointer_types {
    use std::cell::RefCell;
    use std::collections::HashMap;

    use crate::dtype::DType;

    thread_local! {
        static TYPES: RefCell<HashMap<u64, DType>> = RefCell::new(HashMap::new());
    }

    pub(crate) fn note(ptr: u64, dtype: DType) {
        TYPES.with(|t| t.borrow_mut().insert(ptr, dtype));
    }

    /// The type `ptr` was last packed as on this thread, if any.
    pub(crate) fn of(ptr: u64) -> Option<DType> {
        TYPES.with(|t| t.borrow().get(&ptr).copied())
    }
}

/// One recorded launch: the entry and its arguments, in order.
#[derive(Debug, Clone)]
pub(crate) struct Launch {
    pub(crate) entry: String,
    pub(crate) args: Vec<RawArg>,
    /// For each argument that is a pointer, the element type its view was packed as
    /// (`gpu::launch::Args::buf_of`); `None` for the other arguments.
    pub(crate) pointer_types: Vec<Option<DType>>,
    /// Dynamic shared memory of the launch: the OpenCL backend passes it as a trailing
    /// `__local` argument.
    pub(crate) shared_bytes: u32,
}

/// The GEMM kernel rule of the device being imitated.
pub(crate) type SgemmRule = Box<dyn Fn(usize, usize, usize) -> SgemmKernel + Send + Sync>;

/// What the recorded device claims to be; the generic ops pick their entries by these.
pub(crate) struct Imitate {
    /// The dialect, which also decides the op-set source.
    pub(crate) dialect: Dialect,
    /// Compute units (SMs), which size grids and k splits.
    pub(crate) compute_units: u32,
    /// The device's `sgemm_kernel`.
    pub(crate) sgemm: SgemmRule,
    /// Co-resident blocks of a cooperative launch (`None`: the device has none, so the
    /// sequence ops loop the step kernels).
    pub(crate) co_resident: Option<u32>,
}

/// The module of a recording device: the entry points its source defines.
pub(crate) struct Module {
    entries: Vec<String>,
}

/// A device that records launches instead of running them.
pub(crate) struct RecordingDevice {
    imitate: Imitate,
    info: DeviceInfo,
    memory: Mutex<HashMap<DevicePtr, Vec<u8>>>,
    next_ptr: Mutex<DevicePtr>,
    launches: Arc<Mutex<Vec<Launch>>>,
}

impl RecordingDevice {
    /// A device imitating `imitate`, and the log its launches go to.
    pub(crate) fn new(imitate: Imitate) -> (Self, Arc<Mutex<Vec<Launch>>>) {
        let (id, backend, vendor, arch) = match imitate.dialect {
            Dialect::Cuda => (DeviceId::Cuda(0), BackendKind::Cuda, "NVIDIA", "sm_90"),
            Dialect::Hip => (DeviceId::Hip(0), BackendKind::Hip, "AMD", "gfx90a"),
            Dialect::OpenCl => (
                DeviceId::OpenCl {
                    platform: 0,
                    device: 0,
                },
                BackendKind::OpenCl,
                "NVIDIA",
                "OpenCL 3.0",
            ),
        };
        let info = DeviceInfo {
            id,
            backend,
            name: "recording device".into(),
            vendor: vendor.into(),
            kind: DeviceKind::Gpu,
            memory: 1 << 36,
            compute_units: imitate.compute_units,
            arch: arch.into(),
            driver: "none".into(),
        };
        let launches = Arc::new(Mutex::new(Vec::new()));
        let device = RecordingDevice {
            imitate,
            info,
            memory: Mutex::new(HashMap::new()),
            next_ptr: Mutex::new(1 << 20),
            launches: launches.clone(),
        };
        (device, launches)
    }

    fn record(&self, entry: &str, config: &LaunchConfig, args: &[RawArg]) {
        let pointer_types = args
            .iter()
            .map(|a| match a {
                RawArg::Ptr(p) => pointer_types::of(*p),
                _ => None,
            })
            .collect();
        self.launches.lock().push(Launch {
            entry: entry.to_string(),
            args: args.to_vec(),
            pointer_types,
            shared_bytes: config.shared_bytes,
        });
    }

    fn module_of(&self, source: &str) -> Module {
        let opencl = self.imitate.dialect == Dialect::OpenCl;
        Module {
            entries: signatures::kernels(source, opencl)
                .into_iter()
                .map(|s| s.entry)
                .collect(),
        }
    }

    fn bytes_at<R>(&self, ptr: DevicePtr, f: impl FnOnce(&mut Vec<u8>) -> R) -> Result<R> {
        let mut memory = self.memory.lock();
        let buf = memory
            .get_mut(&ptr)
            .ok_or_else(|| Error::InvalidArgument(format!("no allocation at {ptr:#x}")))?;
        Ok(f(buf))
    }
}

/// The op-set translation unit a device of `dialect` builds (without the optional defines).
pub(crate) fn op_set_source(dialect: Dialect) -> String {
    match dialect {
        Dialect::Cuda => super::cuda::kernels::op_set_source(),
        Dialect::Hip => super::hip::kernels::op_set_source(),
        Dialect::OpenCl => super::opencl::kernels::op_set_source(),
    }
}

impl Device for RecordingDevice {
    type Module = Module;

    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn dialect(&self) -> Dialect {
        self.imitate.dialect
    }

    fn op_set_source(&self) -> String {
        op_set_source(self.imitate.dialect)
    }

    fn compiler_identity(&self) -> String {
        "recording".into()
    }

    fn alloc(&self, bytes: usize) -> Result<DevicePtr> {
        let mut next = self.next_ptr.lock();
        let ptr = *next;
        *next += (bytes as u64).max(1).next_multiple_of(256);
        self.memory.lock().insert(ptr, vec![0; bytes]);
        Ok(ptr)
    }

    fn free(&self, ptr: DevicePtr) {
        self.memory.lock().remove(&ptr);
    }

    fn memory_info(&self) -> Result<(u64, u64)> {
        Ok((self.info.memory, self.info.memory))
    }

    fn write(&self, dst: DevicePtr, offset: usize, src: &[u8]) -> Result<()> {
        self.bytes_at(dst, |b| b[offset..offset + src.len()].copy_from_slice(src))
    }

    fn read(&self, src: DevicePtr, offset: usize, dst: &mut [u8]) -> Result<()> {
        self.bytes_at(src, |b| dst.copy_from_slice(&b[offset..offset + dst.len()]))
    }

    fn copy(&self, (src, so): ByteAddr, (dst, d): ByteAddr, n: usize) -> Result<()> {
        let data = self.bytes_at(src, |b| b[so..so + n].to_vec())?;
        self.bytes_at(dst, |b| b[d..d + n].copy_from_slice(&data))
    }

    fn build(&self, source: &str, _options: &[String]) -> Result<(Vec<u8>, Module)> {
        // No binary: the kernel cache stores none for an empty one, so the test leaves nothing
        // in the user's cache directory (building from source again is cheap).
        Ok((Vec::new(), self.module_of(source)))
    }

    fn load(&self, binary: &[u8]) -> Result<Module> {
        Ok(self.module_of(&String::from_utf8_lossy(binary)))
    }

    fn has_entry(&self, module: &Module, entry: &str) -> Result<bool> {
        Ok(module.entries.iter().any(|e| e == entry))
    }

    fn launch(&self, _: &Module, entry: &str, c: &LaunchConfig, args: &[RawArg]) -> Result<()> {
        self.record(entry, c, args);
        Ok(())
    }

    fn synchronize(&self) -> Result<()> {
        Ok(())
    }

    fn sgemm_kernel(&self, m: usize, n: usize, k: usize) -> SgemmKernel {
        (self.imitate.sgemm)(m, n, k)
    }

    fn half_tensor_cores(&self) -> bool {
        // The CUDA imitations build for sm_80 and sm_90a; an OpenCL one has the bf16/f16
        // tensor-core kernels where its f32 GEMMs take tensor cores (one define builds both).
        match self.imitate.dialect {
            Dialect::Cuda => true,
            Dialect::OpenCl => {
                let entry = (self.imitate.sgemm)(4096, 4096, 4096).entry;
                entry.starts_with("sgemm_tc") || entry.starts_with("sgemm_wg")
            }
            _ => false,
        }
    }

    fn vendor_half_gemm(
        &self,
        _: &crate::ops::Gemm,
        _: [(DevicePtr, usize); 3],
        _: [DType; 2],
    ) -> Option<Result<()>> {
        self.has_vendor_half_gemm().then_some(Ok(()))
    }

    fn has_vendor_half_gemm(&self) -> bool {
        // The H100 imitation has cuBLAS (its products are not recorded, the epilogue kernels
        // that follow them are); the sm_80 one keeps every product on the built-in kernels.
        self.imitate.dialect == Dialect::Cuda && self.imitate.compute_units == 132
    }

    fn block_limits(&self, _: &Module, _: &str) -> Option<Result<(u32, u32)>> {
        // An H100's opt-in limit under CUDA, NVIDIA's 48 KB under OpenCL, HIP's default.
        let shared = match self.imitate.dialect {
            Dialect::Cuda => 227 << 10,
            Dialect::OpenCl | Dialect::Hip => 48 << 10,
        };
        Some(Ok((1024, shared)))
    }

    fn cooperative_blocks(&self, _: &Module, _: &str, _: u32, _: u32) -> Option<Result<u32>> {
        self.imitate.co_resident.map(Ok)
    }

    fn launch_cooperative(
        &self,
        _: &Module,
        entry: &str,
        config: &LaunchConfig,
        args: &[RawArg],
    ) -> Option<Result<()>> {
        self.imitate.co_resident?;
        self.record(entry, config, args);
        Some(Ok(()))
    }
}
