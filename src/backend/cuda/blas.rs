//! cuBLAS behind `Device::vendor_gemm` (SGEMM) and `Device::vendor_half_gemm` (`cublasGemmEx` of
//! bf16/f16 operands, f32 sums), bound to the device's stream.

use std::sync::Arc;

use cudarc::cublas::result as cublas;
use cudarc::cublas::sys::{
    self, cublasComputeType_t, cublasGemmAlgo_t, cublasMath_t, cublasOperation_t, cudaDataType,
};
use cudarc::driver::{CudaContext, CudaStream};
use parking_lot::Mutex;

use super::error;
use crate::backend::DevicePtr;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::ops::Gemm;

/// The handle and the math mode last set on it.
struct Handle(sys::cublasHandle_t, cublasMath_t);

// SAFETY: a cuBLAS handle may be used from any thread as long as calls on it do not overlap;
// the Mutex in `Blas` serializes them.
unsafe impl Send for Handle {}

impl Handle {
    /// Sets `mode` unless it is the handle's already (each product sets the one it needs:
    /// TF32 or full f32 for SGEMM, no reduced-precision reductions for `cublasGemmEx`).
    fn set_math_mode(&mut self, mode: cublasMath_t) -> Result<()> {
        if self.1 != mode {
            set_math_mode(self.0, mode)?;
            self.1 = mode;
        }
        Ok(())
    }
}

/// A cuBLAS handle on the context's stream.
pub(crate) struct Blas {
    handle: Mutex<Handle>,
    /// The handle's workspace, set explicitly so that cuBLAS never allocates one itself inside
    /// a graph recording (where allocation is not allowed). Freed after the handle.
    workspace: Option<DevicePtr>,
    ctx: Arc<CudaContext>,
}

/// cuBLAS workspace: 32 MiB, what PyTorch gives cuBLAS on Hopper.
const WORKSPACE_BYTES: usize = 32 << 20;

impl Blas {
    /// Whether a cuBLAS library can be opened (checked before anything loads its symbols,
    /// which panics when the library is absent).
    pub(crate) fn present() -> bool {
        // SAFETY: only tries to dlopen the candidate names.
        unsafe { sys::is_culib_present() }
    }

    /// A handle bound to `stream`; TF32 tensor-core math when `tf32` (PyTorch's
    /// `allow_tf32`), else full f32. Requires [`Blas::present`].
    pub(crate) fn new(ctx: &Arc<CudaContext>, stream: &CudaStream, tf32: bool) -> Result<Self> {
        ctx.bind_to_thread()
            .map_err(|e| error::driver("cuCtxSetCurrent", e))?;
        // cuBLAS may synchronize the device while it sets a handle up (as it does tearing one
        // down): not while another thread records a graph.
        let handle = crate::backend::capture_gate::outside_captures(cublas::create_handle)
            .map_err(|e| error::cublas("cublasCreate", e))?;
        let handle = Handle(handle, cublasMath_t::CUBLAS_DEFAULT_MATH);
        let mode = sgemm_mode(tf32);
        let mut blas = Blas {
            handle: Mutex::new(handle),
            workspace: None,
            ctx: ctx.clone(),
        };
        let h = blas.handle.lock().0;
        // SAFETY: `h` is a live handle; the stream belongs to the bound context and outlives
        // the handle (CudaDevice drops `Blas` before its stream).
        unsafe { cublas::set_stream(h, stream.cu_stream() as sys::cudaStream_t) }
            .map_err(|e| error::cublas("cublasSetStream", e))?;
        blas.handle.lock().set_math_mode(mode)?;
        // SAFETY: plain allocation in the bound context; freed once, in Drop.
        match unsafe { cudarc::driver::result::malloc_sync(WORKSPACE_BYTES) } {
            Ok(ws) => {
                blas.workspace = Some(ws);
                // SAFETY: live handle; `ws` holds WORKSPACE_BYTES and outlives the handle (Drop
                // destroys the handle first).
                unsafe { sys::cublasSetWorkspace_v2(h, ws as *mut _, WORKSPACE_BYTES) }
                    .result()
                    .map_err(|e| error::cublas("cublasSetWorkspace", e))?;
            }
            // Without it cuBLAS still works outside graphs; recordings that need a workspace
            // then fail and the step runs unrecorded.
            Err(e) => log::warn!(
                "no cuBLAS workspace ({}); graphs of GEMMs may not record",
                error::driver_message(&e)
            ),
        }
        let mut version = 0;
        // SAFETY: live handle, valid out-pointer.
        if unsafe { sys::cublasGetVersion_v2(h, &mut version) }
            .result()
            .is_ok()
        {
            log::info!("cuBLAS {version} loaded, math mode {mode:?}");
        }
        Ok(blas)
    }

    /// Row-major `C = alpha op(A) op(B) + beta C` as the column-major product
    /// `C^T = op(B)^T op(A)^T`: cuBLAS sees each row-major matrix as its transpose, so the
    /// operands swap and keep their own transpose flags. With beta = 0 cuBLAS does not read C.
    /// TF32 tensor-core math when `tf32`. The caller has bound the context.
    pub(crate) fn gemm(
        &self,
        g: &Gemm,
        a: (DevicePtr, usize),
        b: (DevicePtr, usize),
        c: (DevicePtr, usize),
        tf32: bool,
    ) -> Result<()> {
        let Some(d) = Dims::new(g)? else {
            return Ok(());
        };
        let ptr = |p: (DevicePtr, usize)| element(p, DType::F32) as *mut f32;
        let mut h = self.handle.lock();
        h.set_math_mode(sgemm_mode(tf32))?;
        // SAFETY: live handle on this context's stream; the generic ops checked that A, B and C
        // hold op(A) m x k, op(B) k x n and C m x n elements at these offsets; alpha and beta
        // are host values (the default pointer mode).
        unsafe {
            sys::cublasSgemm_v2(
                h.0,
                op(g.trans_b),
                op(g.trans_a),
                d.n,
                d.m,
                d.k,
                &g.alpha,
                ptr(b),
                d.ldb,
                ptr(a),
                d.lda,
                &g.beta,
                ptr(c),
                d.n,
            )
        }
        .result()
        .map_err(|e| error::cublas("cublasSgemm", e))
    }

    /// [`Blas::gemm`] with A and B of `types[0]` (bf16 or f16) and C of `types[1]` (f32 or
    /// the operands' type) through `cublasGemmEx`, summed in f32 (`CUBLAS_COMPUTE_32F`, alpha
    /// and beta f32): a T-typed C is `alpha Σ + beta C` rounded once, which the handle's math
    /// mode guarantees for the duration of the call by forbidding reductions in the output
    /// type (cuBLAS may otherwise add split-k partial sums in bf16/f16). The caller has bound
    /// the context.
    pub(crate) fn gemm_ex(
        &self,
        g: &Gemm,
        [a, b, c]: [(DevicePtr, usize); 3],
        [t, c_type]: [DType; 2],
    ) -> Result<()> {
        let Some(d) = Dims::new(g)? else {
            return Ok(());
        };
        let (ab, cd) = (data_type(t)?, data_type(c_type)?);
        let ptr = |p: (DevicePtr, usize), dtype: DType| element(p, dtype) as *mut std::ffi::c_void;
        let mut h = self.handle.lock();
        h.set_math_mode(cublasMath_t::CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)?;
        // SAFETY: live handle on this context's stream; the generic ops checked that A, B and C
        // hold op(A) m x k, op(B) k x n elements of `t` and m x n of `c_type` at these offsets;
        // alpha and beta are host f32 values, the scale type of CUBLAS_COMPUTE_32F.
        unsafe {
            sys::cublasGemmEx(
                h.0,
                op(g.trans_b),
                op(g.trans_a),
                d.n,
                d.m,
                d.k,
                (&g.alpha as *const f32).cast(),
                ptr(b, t),
                ab,
                d.ldb,
                ptr(a, t),
                ab,
                d.lda,
                (&g.beta as *const f32).cast(),
                ptr(c, c_type),
                cd,
                d.n,
                cublasComputeType_t::CUBLAS_COMPUTE_32F,
                cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )
        }
        .result()
        .map_err(|e| error::cublas("cublasGemmEx", e))
    }
}

/// A product's sizes as cuBLAS takes them, with the leading dimensions of the stored row-major
/// matrices (at least 1 for cuBLAS).
struct Dims {
    m: i32,
    n: i32,
    k: i32,
    lda: i32,
    ldb: i32,
}

impl Dims {
    /// `None` for an empty output (nothing to do); an error where a size passes cuBLAS's
    /// 32-bit sizes.
    fn new(g: &Gemm) -> Result<Option<Self>> {
        let dim = |v: usize, name: &str| {
            i32::try_from(v).map_err(|_| {
                Error::InvalidArgument(format!("gemm {name} = {v} exceeds cuBLAS's 32-bit sizes"))
            })
        };
        let (m, n, k) = (dim(g.m, "m")?, dim(g.n, "n")?, dim(g.k, "k")?);
        if m == 0 || n == 0 {
            return Ok(None);
        }
        Ok(Some(Dims {
            m,
            n,
            k,
            lda: (if g.trans_a { m } else { k }).max(1),
            ldb: (if g.trans_b { k } else { n }).max(1),
        }))
    }
}

fn op(transposed: bool) -> cublasOperation_t {
    if transposed {
        cublasOperation_t::CUBLAS_OP_T
    } else {
        cublasOperation_t::CUBLAS_OP_N
    }
}

/// The address of element `offset` of a matrix of `dtype` at `base`.
fn element((base, offset): (DevicePtr, usize), dtype: DType) -> u64 {
    base + (offset * dtype.size()) as u64
}

/// cuBLAS's name for the element type `dtype`.
fn data_type(dtype: DType) -> Result<cudaDataType> {
    match dtype {
        DType::F32 => Ok(cudaDataType::CUDA_R_32F),
        DType::Bf16 => Ok(cudaDataType::CUDA_R_16BF),
        DType::F16 => Ok(cudaDataType::CUDA_R_16F),
        other => Err(Error::InvalidArgument(format!(
            "cublasGemmEx takes f32, bf16 or f16 matrices, not {other:?}"
        ))),
    }
}

/// The math mode of an SGEMM: TF32 tensor-core math (PyTorch's `allow_tf32`) or full f32.
fn sgemm_mode(tf32: bool) -> cublasMath_t {
    if tf32 {
        cublasMath_t::CUBLAS_TF32_TENSOR_OP_MATH
    } else {
        cublasMath_t::CUBLAS_DEFAULT_MATH
    }
}

fn set_math_mode(h: sys::cublasHandle_t, mode: cublasMath_t) -> Result<()> {
    // SAFETY: `h` is a live handle; the mode is a host-side setting of the handle.
    unsafe { sys::cublasSetMathMode(h, mode) }
        .result()
        .map_err(|e| error::cublas("cublasSetMathMode", e))
}

impl Drop for Blas {
    fn drop(&mut self) {
        if let Err(e) = self.ctx.bind_to_thread() {
            log::warn!("cuBLAS handle not destroyed: {}", error::driver_message(&e));
            return;
        }
        let handle = self.handle.get_mut().0;
        let workspace = self.workspace.take();
        // Both may synchronize the device: not while another thread records a graph.
        crate::backend::capture_gate::outside_captures(|| {
            // SAFETY: the handle is live and destroyed exactly once, with its context current.
            if let Err(e) = unsafe { cublas::destroy_handle(handle) } {
                log::warn!("cublasDestroy failed: {e:?}");
            }
            if let Some(ws) = workspace {
                // SAFETY: allocated in this context by `new`, no longer referenced by the
                // destroyed handle, freed once (cuMemFree waits for work still using it).
                if let Err(e) = unsafe { cudarc::driver::result::free_sync(ws) } {
                    log::warn!("cuMemFree(cuBLAS workspace): {}", error::driver_message(&e));
                }
            }
        });
    }
}
