//! HIP status codes to [`crate::Error`], keeping the runtime's own name, text and code.

use crate::device::BackendKind;
use crate::error::{Error, Result};

use super::ffi::{HIP_SUCCESS, HipApi, HipError};

/// [`Error::BackendUnavailable`] for HIP.
pub(crate) fn unavailable(reason: impl Into<String>) -> Error {
    Error::BackendUnavailable {
        backend: BackendKind::Hip,
        reason: reason.into(),
    }
}

/// `Ok(())` for `hipSuccess`, else [`Error::Backend`] naming `call` with the runtime's
/// `hipGetErrorName: hipGetErrorString` and the numeric code.
pub(crate) fn check(api: &HipApi, code: HipError, call: &str) -> Result<()> {
    if code == HIP_SUCCESS {
        return Ok(());
    }
    Err(backend_error(api, code, call))
}

/// [`Error::Backend`] for a failed call.
pub(crate) fn backend_error(api: &HipApi, code: HipError, call: &str) -> Error {
    let (name, text) = api.error_text(code);
    let message = match (name.is_empty(), text.is_empty()) {
        (true, true) => "unknown HIP error".to_string(),
        (false, true) => name,
        (true, false) => text,
        (false, false) => format!("{name}: {text}"),
    };
    Error::Backend {
        backend: BackendKind::Hip,
        call: call.to_string(),
        code: i64::from(code),
        message,
    }
}

/// Formats a packed HIP version (`major * 10_000_000 + minor * 100_000 + patch`).
pub(crate) fn version_string(v: i32) -> String {
    if v <= 0 {
        return format!("{v}");
    }
    format!("{}.{}.{}", v / 10_000_000, (v / 100_000) % 100, v % 100_000)
}
