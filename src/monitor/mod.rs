//! What a device is doing, from its management library: NVML on NVIDIA (`libnvidia-ml`, loaded
//! at run time through `nvml-wrapper`, no link dependency), ROCm SMI on AMD (`librocm_smi64`,
//! loaded with `libloading`), the process's resident memory for the CPU backend. A machine
//! without the library simply has no figures; nothing is estimated. OpenCL devices report only
//! their total memory ([`crate::DeviceInfo::memory`]), so they have no figures here either.

mod gpu_figures;
mod nvml;
mod sampler;

use crate::device::{DeviceId, DeviceInfo};

pub use gpu_figures::GpuFigures;
pub(crate) use sampler::EpochSampler;

/// Live figures of `device` from its management library, or `None` (no library, not a GPU it
/// knows, or an OpenCL/CPU device).
pub fn figures(device: &DeviceInfo) -> Option<GpuFigures> {
    match device.id {
        DeviceId::Cuda(n) => nvml::figures(n),
        DeviceId::Hip(n) => crate::backend::hip::smi::figures(n).map(GpuFigures::from),
        _ => None,
    }
}

/// One line per management library: loaded (with its driver version) or why not.
pub fn libraries() -> Vec<String> {
    vec![nvml::status(), crate::backend::hip::smi::status()]
}

/// This process's resident memory in bytes (`VmRSS` of `/proc/self/status`; Linux).
pub(crate) fn process_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}
