//! Backends. GPU runtimes implement the small [`Device`] trait; the op set is written once over
//! it (`src/backend/gpu`). The CPU backend implements [`crate::ops::Ops`] natively.

// Parameter slots serve the driver-API launches of CUDA and HIP; OpenCL uses only the hasher.
#[cfg(any(feature = "cuda", feature = "opencl", feature = "hip"))]
#[cfg_attr(not(any(feature = "cuda", feature = "hip")), allow(dead_code))]
mod args;
// The op set written once over `Device` for every GPU runtime.
pub(crate) mod gpu;
// The capture gate serves the runtimes that record graphs.
#[cfg(any(feature = "cuda", feature = "hip"))]
pub(crate) mod capture_gate;
pub(crate) mod cpu;
// The CUDA and HIP modules are public only for the compile tests (the `testing` feature).
#[cfg(all(feature = "cuda", feature = "testing"))]
#[doc(hidden)]
pub mod cuda;
#[cfg(all(feature = "cuda", not(feature = "testing")))]
pub(crate) mod cuda;
#[cfg(all(feature = "hip", feature = "testing"))]
#[doc(hidden)]
pub mod hip;
#[cfg(all(feature = "hip", not(feature = "testing")))]
pub(crate) mod hip;
#[cfg(feature = "opencl")]
pub(crate) mod opencl;
// The kernel contract needs every dialect's sources and launch rules.
#[cfg(all(test, feature = "cuda", feature = "opencl", feature = "hip"))]
pub(crate) mod recording;

pub use crate::buffer::DevicePtr;
/// A runtime this build leaves out: [`crate::GpuManager`] lists it as unavailable with the
/// feature that would build it, so that `RNN_DEVICE=cuda:0` names the cause.
#[cfg(not(all(feature = "cuda", feature = "opencl", feature = "hip")))]
mod not_built {
    use crate::context::ContextOptions;
    use crate::device::{BackendKind, DeviceInfo};
    use crate::error::{Error, Result};
    use crate::ops::Engine;

    pub(crate) fn unavailable(backend: BackendKind, feature: &str) -> Error {
        Error::BackendUnavailable {
            backend,
            reason: format!("built without the `{feature}` feature"),
        }
    }

    /// `probe` and `create_ops` of a left-out runtime, as the manager calls them.
    macro_rules! left_out {
        ($kind:ident, $feature:literal) => {
            pub(crate) fn probe() -> Result<Vec<DeviceInfo>> {
                Err(unavailable(BackendKind::$kind, $feature))
            }
            pub(crate) fn create_ops(_: &DeviceInfo, _: &ContextOptions) -> Result<Engine> {
                Err(unavailable(BackendKind::$kind, $feature))
            }
        };
    }

    #[cfg(not(feature = "cuda"))]
    pub(crate) mod cuda {
        use super::*;
        left_out!(Cuda, "cuda");
    }
    #[cfg(not(feature = "opencl"))]
    pub(crate) mod opencl {
        use super::*;
        left_out!(OpenCl, "opencl");
    }
    #[cfg(not(feature = "hip"))]
    pub(crate) mod hip {
        use super::*;
        left_out!(Hip, "hip");
    }
}

/// Without the `cuda` feature: the CUDA kernel sources stay, since the HIP backend compiles them
/// behind its vendor header.
#[cfg(not(feature = "cuda"))]
pub(crate) mod cuda {
    // The HIP backend uses the sources and the `sgemm` geometry only.
    #[cfg(feature = "hip")]
    #[allow(dead_code)]
    pub(crate) mod kernels;
    pub(crate) use super::not_built::cuda::*;
}
#[cfg(not(feature = "opencl"))]
pub(crate) use not_built::opencl;
/// Without the `hip` feature: the HIP sources stay, since a CUDA context can compile them through
/// NVRTC (`ContextOptions::hip_sources_via_nvrtc`).
#[cfg(not(feature = "hip"))]
pub(crate) mod hip {
    // The CUDA backend uses the sources behind the NVRTC prelude only.
    #[cfg(feature = "cuda")]
    #[allow(dead_code)]
    pub(crate) mod kernels;
    pub(crate) use super::not_built::hip::*;

    /// No runtime loaded: the status says why.
    pub(crate) fn origin() -> Option<String> {
        None
    }
}

#[cfg(feature = "opencl")]
pub(crate) use args::Fnv;
#[cfg(any(feature = "cuda", feature = "hip"))]
pub(crate) use args::{FunctionCache, with_param_slots};

use crate::device::DeviceInfo;
use crate::error::Result;
use crate::kernel::{Dialect, LaunchConfig};
use crate::ops::Gemm;

/// A place in device memory: an allocation and a byte offset into it.
pub type ByteAddr = (DevicePtr, usize);

/// One raw kernel parameter as the backend passes it to the driver.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RawArg {
    /// A device buffer (the handle itself; offsets travel as a separate `U64`).
    Ptr(DevicePtr),
    /// 32-bit float.
    F32(f32),
    /// 32-bit unsigned.
    U32(u32),
    /// 32-bit signed.
    I32(i32),
    /// 64-bit unsigned.
    U64(u64),
}

/// A GEMM kernel of a dialect: an entry point with the arguments of `sgemm`
/// (docs/kernel-abi.md) and its block geometry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SgemmKernel {
    /// The entry point.
    pub entry: &'static str,
    /// `(tile_m, tile_n, threads)`: each block computes a `tile_m x tile_n` tile of C with
    /// `threads` threads; the grid is `(ceil(n / tile_n), ceil(m / tile_m))`.
    pub tile: (u32, u32, u32),
    /// The entry has the `sgemm_tc` arguments (docs/kernel-abi.md, geometry T): a partial-sum
    /// buffer and a k chunk after C, so the grid's z may split k (finished by
    /// `sgemm_split_sum`).
    pub splits_k: bool,
    /// Dynamic shared memory a block needs, in bytes (0: the entry declares its own).
    pub shared_bytes: u32,
    /// Only one block fits an SM: a split-k grid then takes at most one block per SM, so that
    /// it runs in one wave.
    pub one_block_per_sm: bool,
    /// The entry adds its k splits into C itself (the last block of a tile to arrive, geometry
    /// L) and takes the strip tickets after the partial-sum buffer; no `sgemm_split_sum` launch
    /// follows it.
    pub sums_splits: bool,
    /// How many of its blocks an SM runs at once, for the split-k rule: k is split until the
    /// grid has this many blocks per SM (1 for the kernels whose loads are asynchronous, which
    /// keep an SM busy with one block).
    pub blocks_per_sm: u32,
}

impl SgemmKernel {
    /// The usual kernel: k may be split, the entry declares its own shared memory, several
    /// blocks share an SM, `sgemm_split_sum` finishes the splits, and one block an SM keeps
    /// it busy. Kernels that differ override those fields (`SgemmKernel { .., ..new() }`).
    pub(crate) const fn new(entry: &'static str, tile: (u32, u32, u32)) -> Self {
        SgemmKernel {
            entry,
            tile,
            splits_k: true,
            shared_bytes: 0,
            one_block_per_sm: false,
            sums_splits: false,
            blocks_per_sm: 1,
        }
    }
}

/// The tensor-core kernels `sgemm_tc128` (128 x 128 tiles of 8 warps) and `sgemm_tc64` (64 x 64
/// tiles of 4 warps): kernels-cu/gemm_tc.cu on CUDA sm_80+, kernels-cl/gemm_tc.cl on NVIDIA's
/// OpenCL (sm_80+), the same design and geometry in both dialects (the OpenCL entries also take
/// the strip tickets and add their own splits: [`SgemmKernel::sums_splits`]).
pub(crate) const SGEMM_TC128: SgemmKernel = SgemmKernel::new("sgemm_tc128", (128, 128, 256));
/// See [`SGEMM_TC128`].
pub(crate) const SGEMM_TC64: SgemmKernel = SgemmKernel::new("sgemm_tc64", (64, 64, 128));

/// The tensor-core kernel for an `m x n` output on a device with `sms` SMs: 128-wide tiles while
/// they fill at least three quarters of the SMs, else 64-wide ones (which split k further if
/// they still leave SMs idle).
#[cfg(any(feature = "cuda", feature = "hip"))]
pub(crate) fn tensor_core_sgemm(sms: u32, m: usize, n: usize) -> SgemmKernel {
    let tiles = m.div_ceil(128).saturating_mul(n.div_ceil(128));
    if tiles.saturating_mul(4) >= sms as usize * 3 {
        SGEMM_TC128
    } else {
        SGEMM_TC64
    }
}

/// The low-level seam every GPU runtime implements: memory, copies, compilation, launches.
///
/// Work is queued in order on one stream/queue per device object. Methods take `&self` and must be
/// safe to call from several threads (implementations serialize where the driver needs it).
pub trait Device: Send + Sync + 'static {
    /// A loaded module (CUDA `CUmodule`, OpenCL program with its kernels, HIP module).
    type Module: Send + Sync + 'static;

    /// Facts about the device.
    fn info(&self) -> &DeviceInfo;
    /// The source dialect this device compiles.
    fn dialect(&self) -> Dialect;
    /// The complete built-in op-set translation unit this device compiles (docs/kernel-abi.md):
    /// the sources of its dialect, embedded at build time.
    fn op_set_source(&self) -> String;
    /// The built-in op set as modules that compile independently, one per kernel family, each
    /// with the entries it defines: a context builds a module on the first launch of one of
    /// them. The default is one module of [`Device::op_set_source`] holding every entry.
    fn op_set_modules(&self) -> Vec<crate::kernel::OpModule> {
        vec![crate::kernel::OpModule {
            name: "op_set",
            entries: None,
            source: self.op_set_source(),
        }]
    }
    /// Everything besides the source that decides what binary a compile produces: compiler and
    /// driver versions, target arch. Part of the disk-cache key.
    fn compiler_identity(&self) -> String;

    /// Allocates `bytes` of device memory (no pooling at this level). Out of memory must be
    /// reported as [`crate::Error::OutOfMemory`].
    fn alloc(&self, bytes: usize) -> Result<DevicePtr>;
    /// Frees memory from [`Device::alloc`].
    fn free(&self, ptr: DevicePtr);
    /// Free and total device memory in bytes.
    fn memory_info(&self) -> Result<(u64, u64)>;
    /// Copies host bytes to `dst + offset` (bytes).
    fn write(&self, dst: DevicePtr, offset: usize, src: &[u8]) -> Result<()>;
    /// Waits for queued work, then copies from `src + offset` (bytes) to the host.
    fn read(&self, src: DevicePtr, offset: usize, dst: &mut [u8]) -> Result<()>;
    /// Device-to-device copy of `bytes` from `src` to `dst`, queued.
    fn copy(&self, src: ByteAddr, dst: ByteAddr, bytes: usize) -> Result<()>;

    /// Compiles source to a binary for this device (CUBIN, OpenCL program binary, HIP code
    /// object) and loads it. A compile failure is [`crate::Error::Compile`] with the full log.
    fn build(&self, source: &str, options: &[String]) -> Result<(Vec<u8>, Self::Module)>;
    /// Loads a binary produced by [`Device::build`] (from the disk cache). On an error the
    /// cache rebuilds; it deletes the entry only when the error rejects the binary itself
    /// (`crate::cache::rejection::is_binary_rejection`: the driver's invalid-image statuses, or
    /// [`crate::Error::Compile`]), not after a transient failure such as out of memory.
    fn load(&self, binary: &[u8]) -> Result<Self::Module>;
    /// Whether `module` defines a kernel named `entry`, so a user kernel whose entry point the
    /// source does not define is an error at compile time, not at its first launch. `Err` only
    /// when the driver failed for another reason than the name being absent.
    fn has_entry(&self, module: &Self::Module, entry: &str) -> Result<bool>;
    /// Queues a launch of `entry` from `module`.
    fn launch(
        &self,
        module: &Self::Module,
        entry: &str,
        config: &LaunchConfig,
        args: &[RawArg],
    ) -> Result<()>;
    /// Waits for all queued work.
    fn synchronize(&self) -> Result<()>;

    /// The GEMM kernel (docs/kernel-abi.md, geometry `G` or `T`) to launch for an `m x n` output
    /// summed over `k`.
    fn sgemm_kernel(&self, m: usize, n: usize, k: usize) -> SgemmKernel;

    /// A portable GEMM kernel that may carry an `m x n x k` product while the module of the
    /// kernel [`Device::sgemm_kernel`] names is not built (NVIDIA OpenCL's SIMT kernels for its
    /// tensor-core products); `None` where there is none.
    fn portable_sgemm_kernel(&self, _m: usize, _n: usize, _k: usize) -> Option<SgemmKernel> {
        None
    }

    /// Whether the op set has the bf16/f16 tensor-core GEMM kernels (`hgemm_tc*` and
    /// `hgemm_lo_tc*`: the CUDA sources built for sm_80+); else the portable `hgemm_*` kernels
    /// take every bf16/f16 product.
    fn half_tensor_cores(&self) -> bool {
        false
    }

    /// The most threads, and the most bytes of dynamic shared memory, that one block running
    /// `entry` of `module` may have in a plain [`Device::launch`]. `None` when the device does
    /// not say; the caller then keeps to kernels with fixed tiles.
    fn block_limits(&self, _module: &Self::Module, _entry: &str) -> Option<Result<(u32, u32)>> {
        None
    }

    /// How many blocks of `threads` threads, each with `shared_bytes` of dynamic shared memory,
    /// can be resident on the device at once running `entry` of `module`: the largest grid a
    /// [`Device::launch_cooperative`] of that kernel accepts (0 when one block does not fit, e.g.
    /// too much shared memory). `None` when the device has no cooperative launch; the caller
    /// then takes a route that needs no grid-wide barrier.
    fn cooperative_blocks(
        &self,
        _module: &Self::Module,
        _entry: &str,
        _threads: u32,
        _shared_bytes: u32,
    ) -> Option<Result<u32>> {
        None
    }

    /// Queues a cooperative launch: every block of the grid is resident at once, so the kernel
    /// may synchronize the whole grid. The grid must not exceed [`Device::cooperative_blocks`]
    /// for the same block size and shared memory. `None` when the device has no cooperative
    /// launch.
    fn launch_cooperative(
        &self,
        _module: &Self::Module,
        _entry: &str,
        _config: &LaunchConfig,
        _args: &[RawArg],
    ) -> Option<Result<()>> {
        None
    }

    /// Starts recording this device's queue into a graph (CUDA/HIP stream capture). `None` when
    /// the device cannot record graphs. While recording, the device must refuse work that
    /// cannot be recorded (allocation, host copies, waits) with an error instead of doing it.
    fn capture_begin(&self) -> Option<Result<()>> {
        None
    }

    /// Ends the recording started by [`Device::capture_begin`] and instantiates the graph.
    /// On an error no recording is left active.
    fn capture_end(&self) -> Result<Box<dyn crate::graph::GraphExec>> {
        Err(crate::error::Error::Unsupported {
            op: "capture_end".into(),
            backend: self.info().backend,
            reason: "this device records no graphs".into(),
        })
    }

    /// The raw stream handle (`CUstream`, `hipStream_t`) this device queues its work on, after
    /// making the device current on the calling thread, for a library that queues its own
    /// kernels in order with ours (NCCL, RCCL). `None` where there is no such handle (OpenCL).
    fn native_stream(&self) -> Option<Result<u64>> {
        None
    }

    /// A second stream of this device, created on first use, for work that overlaps the main
    /// stream (collectives during backward): its raw handle, after making the device current.
    /// `None` where there is none.
    fn native_side_stream(&self) -> Option<Result<u64>> {
        None
    }

    /// Makes the side stream wait for the work queued on the main stream so far (`to_side`),
    /// or the main stream wait for the side stream's (`!to_side`), without blocking the host.
    fn order_streams(&self, _to_side: bool) -> Result<()> {
        Err(crate::error::Error::Unsupported {
            op: "order_streams".into(),
            backend: self.info().backend,
            reason: "this device has no side stream".into(),
        })
    }

    /// Whether [`Device::write_block_on_side`] copies on the side stream.
    fn side_writes(&self) -> bool {
        false
    }

    /// A host block of `bytes` that [`Device::write_block_on_side`] copies from without
    /// staging (pinned where the device has such memory); plain host memory by default.
    /// `read_back`: see [`crate::ops::Execution::host_block`].
    fn host_block(&self, bytes: usize, _read_back: bool) -> Result<Box<dyn crate::ops::HostBlock>> {
        Ok(Box::new(crate::ops::PlainBlock(vec![0; bytes])))
    }

    /// Queues a copy of `block`'s bytes `range` (a block of this device's
    /// [`Device::host_block`]) to `dst + offset` (bytes) on the side stream; the block's next
    /// `bytes_mut` waits for it. Ordered against the main stream only by
    /// [`Device::order_streams`].
    fn write_block_on_side(
        &self,
        _dst: DevicePtr,
        _offset: usize,
        _block: &mut dyn crate::ops::HostBlock,
        _range: std::ops::Range<usize>,
    ) -> Result<()> {
        Err(crate::error::Error::Unsupported {
            op: "write_block_on_side".into(),
            backend: self.info().backend,
            reason: "this device has no side-stream copies".into(),
        })
    }

    /// Marks the start or end of a profiled region for an external profiler (CUDA:
    /// `cuProfilerStart`/`cuProfilerStop`); nothing by default.
    fn profiler_range(&self, _on: bool) -> Result<()> {
        Ok(())
    }

    /// Per-kernel device times since the last call, then reset (see
    /// [`crate::Context::kernel_times`]); `None` where the device keeps none.
    fn kernel_times(&self) -> Result<Option<Vec<crate::ops::KernelTime>>> {
        Ok(None)
    }

    /// A vendor-library GEMM (cuBLAS) when the device has one and it is enabled. Each matrix is a
    /// `(pointer, element offset)` pair. `None` means: use the `sgemm` kernel. Asked only for
    /// products [`Device::builtin_gemm_preferred`] leaves to it, but while the preferred
    /// kernel's module builds.
    fn vendor_gemm(
        &self,
        _g: &Gemm,
        _a: (DevicePtr, usize),
        _b: (DevicePtr, usize),
        _c: (DevicePtr, usize),
    ) -> Option<Result<()>> {
        None
    }

    /// Whether [`Device::vendor_gemm`] runs products (the vendor library is loaded and enabled).
    fn has_vendor_gemm(&self) -> bool {
        false
    }

    /// A vendor-library product of bf16/f16 operands summed in f32 (cuBLAS's `cublasGemmEx`):
    /// `operands` are A, B and C as `(pointer, element offset)`, `types` the operands' type and
    /// C's (f32 or the operands' type, rounded once). `None` where the device has no such
    /// library or it is disabled ([`Device::has_vendor_half_gemm`] false): the caller runs its
    /// own kernels.
    fn vendor_half_gemm(
        &self,
        _g: &Gemm,
        _operands: [(DevicePtr, usize); 3],
        _types: [crate::dtype::DType; 2],
    ) -> Option<Result<()>> {
        None
    }

    /// Whether [`Device::vendor_half_gemm`] runs products (asked before the caller sets up
    /// scratch for one).
    fn has_vendor_half_gemm(&self) -> bool {
        false
    }

    /// Whether a built-in kernel takes `g` ahead of [`Device::vendor_gemm`] (CUDA's warpgroup
    /// GEMM on an H100). While that kernel's module is still being built (a cold start,
    /// `src/backend/gpu/tier0.rs`) the vendor library takes the product all the same.
    fn builtin_gemm_preferred(&self, _g: &Gemm) -> bool {
        false
    }

    /// [`crate::ops::Execution::set_tf32`]: f32 products in TF32 math from now on, or as the
    /// context was created; returns the previous setting. A no-op returning false where the
    /// device has no TF32 route.
    fn set_tf32(&self, _on: bool) -> bool {
        false
    }

    /// Whether f32 products run in TF32 now ([`Device::set_tf32`]).
    fn tf32(&self) -> bool {
        false
    }
}
