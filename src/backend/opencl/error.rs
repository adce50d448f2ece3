//! OpenCL status codes to the crate's [`Error`], keeping the code and its name.

use opencl3::error_codes::{
    CL_MEM_OBJECT_ALLOCATION_FAILURE, CL_OUT_OF_HOST_MEMORY, CL_OUT_OF_RESOURCES, error_text,
};
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

/// True for the statuses a driver uses when memory runs out.
pub(crate) fn is_out_of_memory(code: cl_int) -> bool {
    matches!(
        code,
        CL_MEM_OBJECT_ALLOCATION_FAILURE | CL_OUT_OF_RESOURCES | CL_OUT_OF_HOST_MEMORY
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_keep_their_names() {
        let e = cl_error("clEnqueueNDRangeKernel", CL_OUT_OF_RESOURCES).to_string();
        assert!(e.contains("CL_OUT_OF_RESOURCES") && e.contains("-5"), "{e}");
        assert!(is_out_of_memory(CL_MEM_OBJECT_ALLOCATION_FAILURE));
        assert!(!is_out_of_memory(-11));
    }
}
