//! OpenCL status codes to the crate's [`Error`], keeping the code and its name.

use opencl3::error_codes::{CL_MEM_OBJECT_ALLOCATION_FAILURE, CL_OUT_OF_HOST_MEMORY, error_text};
use opencl3::types::cl_int;

use crate::device::BackendKind;
use crate::error::Error;

/// The symbolic name of a status code (`CL_OUT_OF_RESOURCES`, ...).
pub(crate) fn status_name(code: cl_int) -> &'static str {
    error_text(code)
}

/// A failed OpenCL call as [`Error::Backend`].
pub(crate) fn cl_error(call: &str, code: cl_int) -> Error {
    Error::Backend {
        backend: BackendKind::OpenCl,
        call: call.to_string(),
        code: i64::from(code),
        message: status_name(code).to_string(),
    }
}

/// True for the status of an allocation that failed for lack of memory, on any call: OpenCL
/// allocates buffers lazily, so a transfer or a launch can be the first to need the memory.
///
/// `CL_OUT_OF_RESOURCES` is deliberately not one of them: drivers use it for many failures
/// (NVIDIA's reports a kernel's out-of-bounds access that way at the next blocking call), so it
/// stays an [`Error::Backend`] with its code.
pub(crate) fn is_allocation_failure(code: cl_int) -> bool {
    code == CL_MEM_OBJECT_ALLOCATION_FAILURE
}

/// True for the statuses `clCreateBuffer` returns when memory runs out: the device's
/// ([`is_allocation_failure`]) or the host's, which backs the buffer on some drivers.
pub(crate) fn is_buffer_creation_oom(code: cl_int) -> bool {
    is_allocation_failure(code) || code == CL_OUT_OF_HOST_MEMORY
}

#[cfg(test)]
mod tests {
    use super::*;
    use opencl3::error_codes::CL_OUT_OF_RESOURCES;

    #[test]
    fn codes_keep_their_names() {
        let e = cl_error("clEnqueueNDRangeKernel", CL_OUT_OF_RESOURCES).to_string();
        assert!(e.contains("CL_OUT_OF_RESOURCES") && e.contains("-5"), "{e}");
        assert!(is_allocation_failure(CL_MEM_OBJECT_ALLOCATION_FAILURE));
        assert!(!is_allocation_failure(CL_OUT_OF_RESOURCES));
        assert!(!is_allocation_failure(CL_OUT_OF_HOST_MEMORY));
        assert!(is_buffer_creation_oom(CL_OUT_OF_HOST_MEMORY));
        assert!(!is_buffer_creation_oom(CL_OUT_OF_RESOURCES));
        assert!(!is_buffer_creation_oom(-11));
    }
}
