//! What a device is doing, from its management library: NVML on NVIDIA (`libnvidia-ml`, loaded
//! at run time through `nvml-wrapper`, no link dependency), ROCm SMI on AMD (`librocm_smi64`,
//! loaded with `libloading`), the process's resident memory for the CPU backend. A machine
//! without the library simply has no figures; nothing is estimated. OpenCL devices report only
//! their total memory ([`crate::DeviceInfo::memory`]), so they have no figures here either.
//!
//! NVML is built with the `monitor` and `cuda` features, ROCm SMI with `monitor` and `hip`.

#[cfg(all(feature = "monitor", feature = "cuda"))]
mod nvml;
mod sampler;

use std::fmt;

use crate::device::DeviceInfo;

pub(crate) use sampler::EpochSampler;

/// A device's live figures. Each is `None` when the library does not report it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct GpuFigures {
    /// Which library answered (`NVML`, `ROCm SMI`).
    pub source: &'static str,
    /// Percent of the last sample period in which a kernel ran.
    pub utilization_percent: Option<u32>,
    /// Device memory in use by every process, bytes.
    pub memory_used: Option<u64>,
    /// Device memory, bytes.
    pub memory_total: Option<u64>,
    /// Device memory in use by this process, bytes.
    pub process_memory: Option<u64>,
    /// Core temperature, degrees Celsius.
    pub temperature_c: Option<f32>,
    /// Power draw, watts.
    pub power_watts: Option<f32>,
}

impl fmt::Display for GpuFigures {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
        let mut parts = Vec::new();
        if let Some(u) = self.utilization_percent {
            parts.push(format!("util {u}%"));
        }
        match (self.memory_used, self.memory_total) {
            (Some(u), Some(t)) => parts.push(format!("mem {:.0}/{:.0} MiB", mib(u), mib(t))),
            (Some(u), None) => parts.push(format!("mem {:.0} MiB used", mib(u))),
            (None, Some(t)) => parts.push(format!("mem ?/{:.0} MiB", mib(t))),
            (None, None) => {}
        }
        if let Some(p) = self.process_memory {
            parts.push(format!("this process {:.0} MiB", mib(p)));
        }
        if let Some(t) = self.temperature_c {
            parts.push(format!("{t:.0} C"));
        }
        if let Some(w) = self.power_watts {
            parts.push(format!("{w:.0} W"));
        }
        write!(f, "{} ({})", parts.join(", "), self.source)
    }
}

/// Live figures of `device` from its management library, or `None` (no library, not a GPU it
/// knows, or an OpenCL/CPU device).
pub fn figures(device: &DeviceInfo) -> Option<GpuFigures> {
    match device.id {
        #[cfg(all(feature = "monitor", feature = "cuda"))]
        crate::DeviceId::Cuda(n) => nvml::figures(n),
        #[cfg(all(feature = "monitor", feature = "hip"))]
        crate::DeviceId::Hip(n) => crate::backend::hip::smi::figures(n),
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
