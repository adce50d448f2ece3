//! [`GpuFigures`]: a device's live figures as the monitor reports them, in a file of their own so
//! that the readers of each library (`nvml`, the HIP backend's ROCm SMI) and the monitor's
//! front all depend on it and it on none of them.

use std::fmt;

#[cfg(all(feature = "monitor", feature = "hip"))]
use crate::backend::hip::smi::SmiReading;

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

#[cfg(all(feature = "monitor", feature = "hip"))]
impl From<SmiReading> for GpuFigures {
    fn from(r: SmiReading) -> Self {
        GpuFigures {
            source: "ROCm SMI",
            utilization_percent: r.busy_percent,
            memory_used: r.vram_used,
            memory_total: r.vram_total,
            process_memory: r.process_vram,
            temperature_c: r.temperature_c,
            power_watts: r.power_watts,
        }
    }
}
