//! Which errors of [`crate::backend::Device::load`] mean "this binary is unusable here" (a
//! corrupt, foreign or outdated cache entry, to be deleted and rebuilt), as opposed to a
//! transient failure (out of memory, a lost context) after which the entry is still good.

#[cfg(feature = "cuda")]
use cudarc::driver::sys::CUresult;
#[cfg(feature = "opencl")]
use opencl3::error_codes::{CL_BUILD_PROGRAM_FAILURE, CL_INVALID_BINARY};

use crate::device::BackendKind;
use crate::error::Error;

/// CUDA driver statuses that reject a CUBIN/PTX image itself.
#[cfg(feature = "cuda")]
const CUDA_REJECTS: [CUresult; 5] = [
    CUresult::CUDA_ERROR_INVALID_IMAGE,
    CUresult::CUDA_ERROR_NO_BINARY_FOR_GPU,
    CUresult::CUDA_ERROR_INVALID_PTX,
    CUresult::CUDA_ERROR_UNSUPPORTED_PTX_VERSION,
    CUresult::CUDA_ERROR_INVALID_SOURCE,
];

/// HIP statuses that reject a code object: hipErrorInvalidImage (200),
/// hipErrorNoBinaryForGpu (209), hipErrorInvalidKernelFile (218), hipErrorInvalidSource (300).
const HIP_REJECTS: [i64; 4] = [200, 209, 218, 300];

/// True when `e`, returned while loading a cached binary, says the binary itself is unusable:
/// the driver rejected its format or it targets something else. Anything else (out of memory,
/// context or launch-resource errors) is transient and must not cost the cache its entry.
pub(crate) fn is_binary_rejection(e: &Error) -> bool {
    match e {
        #[cfg(feature = "cuda")]
        Error::Backend {
            backend: BackendKind::Cuda,
            code,
            ..
        } => CUDA_REJECTS.iter().any(|&r| r as i64 == *code),
        #[cfg(feature = "opencl")]
        Error::Backend {
            backend: BackendKind::OpenCl,
            code,
            ..
        } => *code == i64::from(CL_INVALID_BINARY) || *code == i64::from(CL_BUILD_PROGRAM_FAILURE),
        Error::Backend {
            backend: BackendKind::Hip,
            code,
            ..
        } => HIP_REJECTS.contains(code),
        // OpenCL "builds" a binary at load; a failure there is the driver refusing it. A
        // loader that finds the bytes malformed itself says so with InvalidData.
        Error::Compile { .. } | Error::InvalidData(_) => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn backend(backend: BackendKind, code: i64) -> Error {
        Error::Backend {
            backend,
            call: "load".into(),
            code,
            message: String::new(),
        }
    }

    #[test]
    fn format_rejections_are_told_apart_from_transient_failures() {
        #[cfg(feature = "cuda")]
        {
            assert!(is_binary_rejection(&backend(BackendKind::Cuda, 200)));
            assert!(is_binary_rejection(&backend(BackendKind::Cuda, 222)));
        }
        #[cfg(feature = "opencl")]
        assert!(is_binary_rejection(&backend(BackendKind::OpenCl, -42)));
        assert!(is_binary_rejection(&backend(BackendKind::Hip, 209)));
        // Out of memory (CUDA 2, HIP 2), a destroyed context (CUDA 201), CL_OUT_OF_RESOURCES.
        assert!(!is_binary_rejection(&backend(BackendKind::Cuda, 2)));
        assert!(!is_binary_rejection(&backend(BackendKind::Cuda, 201)));
        assert!(!is_binary_rejection(&backend(BackendKind::Hip, 2)));
        assert!(!is_binary_rejection(&backend(BackendKind::OpenCl, -5)));
        let oom = Error::OutOfMemory {
            device: "d".into(),
            requested: 1,
            free: 0,
            total: 0,
        };
        assert!(!is_binary_rejection(&oom));
    }
}
