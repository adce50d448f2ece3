//! cuBLAS SGEMM behind `Device::vendor_gemm`, bound to the device's stream.

use std::sync::Arc;

use cudarc::cublas::result as cublas;
use cudarc::cublas::sys::{self, cublasMath_t, cublasOperation_t};
use cudarc::driver::{CudaContext, CudaStream};
use parking_lot::Mutex;

use super::error;
use crate::backend::DevicePtr;
use crate::error::{Error, Result};
use crate::ops::Gemm;

/// The handle and the math mode last set on it.
struct Handle(sys::cublasHandle_t, cublasMath_t);

// SAFETY: a cuBLAS handle may be used from any thread as long as calls on it do not overlap;
// the Mutex in `Blas` serializes them.
unsafe impl Send for Handle {}

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

impl Handle {
    fn set_math_mode(&mut self, mode: cublasMath_t) -> Result<()> {
        if self.1 == mode {
            return Ok(());
        }
        // SAFETY: live handle, used by no other call meanwhile (the caller holds its lock).
        unsafe { sys::cublasSetMathMode(self.0, mode) }
            .result()
            .map_err(|e| error::cublas("cublasSetMathMode", e))?;
        self.1 = mode;
        Ok(())
    }
}

impl Blas {
    fn math_mode(tf32: bool) -> cublasMath_t {
        if tf32 {
            cublasMath_t::CUBLAS_TF32_TENSOR_OP_MATH
        } else {
            cublasMath_t::CUBLAS_DEFAULT_MATH
        }
    }

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
        let mode = Blas::math_mode(tf32);
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
        let dim = |v: usize, name: &str| {
            i32::try_from(v).map_err(|_| {
                Error::InvalidArgument(format!("gemm {name} = {v} exceeds cuBLAS's 32-bit sizes"))
            })
        };
        let (m, n, k) = (dim(g.m, "m")?, dim(g.n, "n")?, dim(g.k, "k")?);
        if m == 0 || n == 0 {
            return Ok(());
        }
        let op = |t: bool| {
            if t {
                cublasOperation_t::CUBLAS_OP_T
            } else {
                cublasOperation_t::CUBLAS_OP_N
            }
        };
        // Leading dimensions of the stored row-major matrices (at least 1 for cuBLAS).
        let lda = (if g.trans_a { m } else { k }).max(1);
        let ldb = (if g.trans_b { k } else { n }).max(1);
        let ptr = |(p, off): (DevicePtr, usize)| (p + (off * 4) as u64) as *mut f32;
        let mut h = self.handle.lock();
        h.set_math_mode(Blas::math_mode(tf32))?;
        // SAFETY: live handle on this context's stream; the generic ops checked that A, B and C
        // hold op(A) m x k, op(B) k x n and C m x n elements at these offsets; alpha and beta
        // are host values (the default pointer mode).
        unsafe {
            sys::cublasSgemm_v2(
                h.0,
                op(g.trans_b),
                op(g.trans_a),
                n,
                m,
                k,
                &g.alpha,
                ptr(b),
                ldb,
                ptr(a),
                lda,
                &g.beta,
                ptr(c),
                n,
            )
        }
        .result()
        .map_err(|e| error::cublas("cublasSgemm", e))
    }
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
