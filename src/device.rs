//! Device identity: which runtime, which device, and what it is.

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};

pub use crate::backend_kind::BackendKind;

// Parsing a backend's name is here rather than with `BackendKind`: its error is an `Error`, and
// `Error` holds a `BackendKind`, so `backend_kind` stays below `error` and `error` below this.
impl FromStr for BackendKind {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "cuda" => Ok(BackendKind::Cuda),
            "opencl" | "ocl" | "cl" => Ok(BackendKind::OpenCl),
            "hip" | "rocm" => Ok(BackendKind::Hip),
            "cpu" => Ok(BackendKind::Cpu),
            other => Err(Error::InvalidArgument(format!(
                "unknown backend '{other}' (expected cuda, opencl, hip or cpu)"
            ))),
        }
    }
}

/// Identifies one device: `cuda:0`, `opencl:0:1` (platform 0, device 1), `hip:0`, or `cpu`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum DeviceId {
    /// CUDA device ordinal.
    Cuda(usize),
    /// OpenCL platform index and device index within that platform.
    OpenCl {
        /// Platform index, in the order the ICD loader lists them.
        platform: usize,
        /// Device index within the platform.
        device: usize,
    },
    /// HIP device ordinal.
    Hip(usize),
    /// The CPU backend.
    Cpu,
}

impl DeviceId {
    /// The runtime this id belongs to.
    pub fn backend(&self) -> BackendKind {
        match self {
            DeviceId::Cuda(_) => BackendKind::Cuda,
            DeviceId::OpenCl { .. } => BackendKind::OpenCl,
            DeviceId::Hip(_) => BackendKind::Hip,
            DeviceId::Cpu => BackendKind::Cpu,
        }
    }
}

impl fmt::Display for DeviceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceId::Cuda(i) => write!(f, "cuda:{i}"),
            DeviceId::OpenCl { platform, device } => write!(f, "opencl:{platform}:{device}"),
            DeviceId::Hip(i) => write!(f, "hip:{i}"),
            DeviceId::Cpu => f.write_str("cpu"),
        }
    }
}

const GRAMMAR: &str = "cuda:<n>, opencl:<platform>:<device>, hip:<n> or cpu";

impl FromStr for DeviceId {
    type Err = Error;

    /// Parses the grammar only; whether the device exists is [`crate::GpuManager`]'s business.
    fn from_str(s: &str) -> Result<Self> {
        let bad = |reason: String| Error::UnknownDevice {
            given: s.to_string(),
            reason,
            valid: GRAMMAR.to_string(),
        };
        let text = s.trim().to_ascii_lowercase();
        let parts: Vec<&str> = text.split(':').collect();
        let index = |p: &str| -> Result<usize> {
            p.parse::<usize>()
                .map_err(|_| bad(format!("'{p}' is not a device index")))
        };
        match parts.as_slice() {
            ["cpu"] => Ok(DeviceId::Cpu),
            ["cuda", n] => Ok(DeviceId::Cuda(index(n)?)),
            ["hip", n] => Ok(DeviceId::Hip(index(n)?)),
            ["opencl", p, d] => Ok(DeviceId::OpenCl {
                platform: index(p)?,
                device: index(d)?,
            }),
            ["opencl", _] => Err(bad(
                "OpenCL ids name a platform and a device: opencl:<p>:<d>".into(),
            )),
            // The grammar itself travels in `valid`; saying it here too would repeat it.
            _ => Err(bad(format!("'{}' is not a device id", s.trim()))),
        }
    }
}

/// What sort of processor a device is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DeviceKind {
    /// A discrete or integrated GPU.
    Gpu,
    /// A CPU (the native backend, or an OpenCL CPU device such as PoCL).
    Cpu,
    /// Anything else an OpenCL platform reports (FPGA, DSP, ...).
    Accelerator,
}

impl fmt::Display for DeviceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DeviceKind::Gpu => "gpu",
            DeviceKind::Cpu => "cpu",
            DeviceKind::Accelerator => "accelerator",
        })
    }
}

/// Facts about one device, filled from real queries of its runtime.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceInfo {
    /// The id to select it with.
    pub id: DeviceId,
    /// Its runtime.
    pub backend: BackendKind,
    /// Marketing name as the runtime reports it.
    pub name: String,
    /// Vendor as reported (e.g. "NVIDIA Corporation").
    pub vendor: String,
    /// GPU, CPU or other accelerator.
    pub kind: DeviceKind,
    /// Global memory in bytes.
    pub memory: u64,
    /// Streaming multiprocessors, compute units or CPU threads.
    pub compute_units: u32,
    /// Architecture: `sm_90`, `gfx90a`, or the OpenCL C version for OpenCL devices.
    pub arch: String,
    /// Driver or runtime version string.
    pub driver: String,
}

impl fmt::Display for DeviceInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:<12} {} [{}] {} | {} | {:.1} GiB | {} units | {} | driver {}",
            self.id.to_string(),
            self.name,
            self.kind,
            self.vendor,
            self.arch,
            self.memory as f64 / (1u64 << 30) as f64,
            self.compute_units,
            self.backend,
            self.driver
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip() {
        for s in ["cuda:0", "cuda:3", "opencl:0:1", "hip:2", "cpu"] {
            let id: DeviceId = s.parse().unwrap();
            assert_eq!(id.to_string(), s);
        }
    }

    #[test]
    fn bad_ids_are_errors_that_name_the_grammar() {
        for s in [
            "", "gpu", "cuda", "cuda:x", "opencl:1", "hip:-1", "cpu:0", "cuda:0:1",
        ] {
            let err = s.parse::<DeviceId>().unwrap_err().to_string();
            assert!(
                err.contains("opencl:<platform>:<device>") || err.contains("opencl:<p>:<d>"),
                "{err}"
            );
        }
    }
}
