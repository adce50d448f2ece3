//! The cuda backend.
// SKELETON: replaced by the cuda backend implementation.

use std::sync::Arc;

use crate::context::ContextOptions;
use crate::device::{BackendKind, DeviceInfo};
use crate::error::{Error, Result};
use crate::ops::Ops;

/// Lists the devices of this runtime, or says why it cannot be used.
pub(crate) fn probe() -> Result<Vec<DeviceInfo>> {
    Err(Error::BackendUnavailable {
        backend: BackendKind::Cuda,
        reason: "not built yet".into(),
    })
}

/// Ops for one device of this runtime.
pub(crate) fn create_ops(_info: &DeviceInfo, _options: &ContextOptions) -> Result<Arc<dyn Ops>> {
    Err(Error::BackendUnavailable {
        backend: BackendKind::Cuda,
        reason: "not built yet".into(),
    })
}

pub(crate) mod kernels;
