//! What a device is doing, from its management library: NVML on NVIDIA (`libnvidia-ml`, loaded
//! at run time through `nvml-wrapper`, no link dependency), ROCm SMI on AMD (`librocm_smi64`,
//! loaded with `libloading`), the process's resident memory for the CPU backend. A machine
//! without the library simply has no figures; nothing is estimated. OpenCL devices report only
//! their total memory ([`crate::DeviceInfo::memory`]), so they have no figures here either.
//!
//! NVML is built with the `monitor` and `cuda` features, ROCm SMI with `monitor` and `hip`.

mod gpu_figures;
#[cfg(all(feature = "monitor", feature = "cuda"))]
mod nvml;
mod sampler;

#[cfg(all(feature = "monitor", any(feature = "cuda", feature = "hip")))]
use crate::device::DeviceId;
use crate::device::DeviceInfo;

pub use gpu_figures::GpuFigures;
pub(crate) use sampler::EpochSampler;

/// Live figures of `device` from its management library, or `None` (no library, not a GPU it
/// knows, or an OpenCL/CPU device).
pub fn figures(device: &DeviceInfo) -> Option<GpuFigures> {
    match device.id {
        #[cfg(all(feature = "monitor", feature = "cuda"))]
        DeviceId::Cuda(n) => nvml::figures(n),
        #[cfg(all(feature = "monitor", feature = "hip"))]
        DeviceId::Hip(n) => crate::backend::hip::smi::figures(n).map(GpuFigures::from),
        _ => None,
    }
}

/// One line per management library: loaded (with its driver version) or why not.
pub fn libraries() -> Vec<String> {
    vec![nvml_status(), rocm_smi_status()]
}

fn nvml_status() -> String {
    #[cfg(all(feature = "monitor", feature = "cuda"))]
    return nvml::status();
    #[cfg(not(all(feature = "monitor", feature = "cuda")))]
    not_built("NVML", "cuda")
}

fn rocm_smi_status() -> String {
    #[cfg(all(feature = "monitor", feature = "hip"))]
    return crate::backend::hip::smi::status();
    #[cfg(not(all(feature = "monitor", feature = "hip")))]
    not_built("ROCm SMI", "hip")
}

/// The line of a library this build leaves out.
#[cfg(not(all(feature = "monitor", feature = "cuda", feature = "hip")))]
fn not_built(library: &str, runtime: &str) -> String {
    format!("{library}: not built (needs the `monitor` and `{runtime}` features)")
}

/// This process's resident memory in bytes (`VmRSS` of `/proc/self/status`; Linux).
pub(crate) fn process_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}
