//! Turning CUDA driver, NVRTC and cuBLAS status codes into the crate's [`Error`], keeping the
//! library's own name, description and numeric code.

use std::ffi::CStr;

use cudarc::cublas::result::CublasError;
use cudarc::driver::DriverError;
use cudarc::driver::sys::CUresult;
use cudarc::nvrtc::result::NvrtcError;

use crate::device::BackendKind;
use crate::error::Error;

/// `CUDA_ERROR_OUT_OF_MEMORY: out of memory` style text for a driver status.
pub(crate) fn driver_message(e: &DriverError) -> String {
    let name = e
        .error_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|_| format!("{:?}", e.0));
    match e.error_string() {
        Ok(s) => format!("{name}: {}", s.to_string_lossy()),
        Err(_) => name,
    }
}

/// A failed driver call as [`Error::Backend`].
pub(crate) fn driver(call: &str, e: DriverError) -> Error {
    Error::Backend {
        backend: BackendKind::Cuda,
        call: call.to_string(),
        code: e.0 as i64,
        message: driver_message(&e),
    }
}

/// True when the driver reported that an allocation did not fit.
pub(crate) fn is_oom(e: &DriverError) -> bool {
    e.0 == CUresult::CUDA_ERROR_OUT_OF_MEMORY
}

/// NVRTC's own description of a status code.
pub(crate) fn nvrtc_message(e: NvrtcError) -> String {
    // SAFETY: nvrtcGetErrorString only maps the enum to a static string; the NVRTC library is
    // loaded (callers only get an NvrtcError from a call that went through the loader).
    let ptr = unsafe { cudarc::nvrtc::sys::nvrtcGetErrorString(e.0) };
    if ptr.is_null() {
        format!("{:?}", e.0)
    } else {
        // SAFETY: non-null pointers from nvrtcGetErrorString point to static NUL-terminated text.
        unsafe { CStr::from_ptr(ptr) }
            .to_string_lossy()
            .into_owned()
    }
}

/// A failed NVRTC call (other than the compilation itself) as [`Error::Backend`].
pub(crate) fn nvrtc(call: &str, e: NvrtcError) -> Error {
    Error::Backend {
        backend: BackendKind::Cuda,
        call: call.to_string(),
        code: e.0 as i64,
        message: nvrtc_message(e),
    }
}

/// A failed cuBLAS call as [`Error::Backend`].
pub(crate) fn cublas(call: &str, e: CublasError) -> Error {
    Error::Backend {
        backend: BackendKind::Cuda,
        call: call.to_string(),
        code: e.0 as i64,
        message: format!("{:?}", e.0),
    }
}

/// [`Error::BackendUnavailable`] for CUDA.
pub(crate) fn unavailable(reason: impl Into<String>) -> Error {
    Error::BackendUnavailable {
        backend: BackendKind::Cuda,
        reason: reason.into(),
    }
}
