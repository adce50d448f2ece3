//! The CPU backend: every op natively, parallel with Rayon, GEMM through the `gemm` crate.
//! It is the reference every GPU backend is tested against.
//!
//! f32 buffers are `Storage::Host` vectors behind a `RwLock`, buffers of the other element types
//! `Storage::HostBytes` byte vectors (only `copy` and the transfers touch those); [`access`] turns
//! an op's views into slices (one lock per buffer), and each op family is implemented in its own module
//! (`impl NormOps for CpuOps` in `norm.rs`, ...).

mod access;
mod activation;
mod cells;
mod data;
mod elementwise;
mod execution;
mod fastmath;
mod float_views;
mod gated_seq;
mod gemm;
mod half_dense;
mod norm;
mod optim;
mod packed;
mod par;
mod random;
mod reduce;
mod rnn_step;
mod row_groups;
mod simd;
mod softmax;
mod varlen;

use std::sync::Arc;

use crate::device::{BackendKind, DeviceId, DeviceInfo, DeviceKind};
use crate::ops::Engine;

/// The CPU backend's device description.
pub(crate) fn device_info() -> DeviceInfo {
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    DeviceInfo {
        id: DeviceId::Cpu,
        backend: BackendKind::Cpu,
        name: format!("CPU ({threads} threads, Rayon)"),
        vendor: String::new(),
        kind: DeviceKind::Cpu,
        memory: system_memory().unwrap_or(0),
        compute_units: threads as u32,
        arch: std::env::consts::ARCH.to_string(),
        driver: format!("rnn {}", env!("CARGO_PKG_VERSION")),
    }
}

/// Total RAM in bytes from `/proc/meminfo` (Linux); `None` elsewhere or when unreadable.
fn system_memory() -> Option<u64> {
    meminfo_bytes("MemTotal:")
}

/// Available and total RAM in bytes from `/proc/meminfo` (Linux); `None` elsewhere or when
/// unreadable.
pub(crate) fn host_memory() -> Option<(u64, u64)> {
    Some((meminfo_bytes("MemAvailable:")?, meminfo_bytes("MemTotal:")?))
}

/// One `/proc/meminfo` field (given in KiB) in bytes.
fn meminfo_bytes(field: &str) -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with(field))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// A new CPU context's ops.
pub(crate) fn create_ops() -> Engine {
    Engine::new(Arc::new(CpuOps {
        info: device_info(),
        context: crate::buffer::next_context_id(),
        limit: Default::default(),
    }))
}

/// The CPU op set: each family is implemented in its module.
pub(super) struct CpuOps {
    info: DeviceInfo,
    context: u64,
    /// The cap on the bytes live buffers hold (`MemoryOps::set_memory_limit`).
    limit: crate::memory_limit::MemoryLimit,
}
