//! [`GpuManager`]: probes every runtime, lists devices, picks one, creates contexts.

use std::fmt;

use crate::backend;
use crate::context::{Context, ContextOptions};
use crate::device::{BackendKind, DeviceId, DeviceInfo, DeviceKind};
use crate::error::{Error, Result};

/// Whether one runtime could be used, and why not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackendStatus {
    /// The runtime.
    pub backend: BackendKind,
    /// True when the runtime loaded and initialized (it may still have zero devices).
    pub available: bool,
    /// Devices it reported.
    pub devices: usize,
    /// Why it is unavailable, or a short description of what was found.
    pub detail: String,
}

impl fmt::Display for BackendStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = if self.available {
            "available"
        } else {
            "unavailable"
        };
        write!(
            f,
            "{:<7} {:<11} {} device(s): {}",
            self.backend, state, self.devices, self.detail
        )
    }
}

/// Finds every device of every runtime this machine has, at run time.
///
/// ```
/// let manager = rnn::GpuManager::new().unwrap();
/// for status in manager.backends() {
///     println!("{status}");
/// }
/// let ctx = manager.create_context(rnn::DeviceId::Cpu).unwrap();
/// assert_eq!(ctx.info().id, rnn::DeviceId::Cpu);
/// ```
pub struct GpuManager {
    statuses: Vec<BackendStatus>,
    devices: Vec<DeviceInfo>,
}

/// Reads `RNN_BACKENDS`: a comma-separated list of runtimes to probe (`cuda,opencl`), or a list
/// of exclusions (`-hip`). The CPU backend is always kept. Unset means all.
fn backends_from_env() -> Result<Vec<BackendKind>> {
    let Ok(value) = std::env::var("RNN_BACKENDS") else {
        return Ok(BackendKind::ALL.to_vec());
    };
    let invalid = |reason: String| Error::InvalidEnv {
        name: "RNN_BACKENDS".into(),
        value: value.clone(),
        reason,
    };
    let items: Vec<&str> = value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    if items.is_empty() {
        return Ok(BackendKind::ALL.to_vec());
    }
    let excluding = items.iter().all(|s| s.starts_with('-'));
    if !excluding && items.iter().any(|s| s.starts_with('-')) {
        return Err(invalid(
            "mix of names and -exclusions; use either 'cuda,opencl' or '-hip'".into(),
        ));
    }
    let mut named = Vec::new();
    for item in items {
        let kind: BackendKind = item
            .trim_start_matches('-')
            .parse()
            .map_err(|_| invalid(format!("'{item}' is not one of cuda, opencl, hip, cpu")))?;
        named.push(kind);
    }
    let mut chosen: Vec<BackendKind> = if excluding {
        BackendKind::ALL
            .iter()
            .copied()
            .filter(|k| !named.contains(k))
            .collect()
    } else {
        named
    };
    if !chosen.contains(&BackendKind::Cpu) {
        chosen.push(BackendKind::Cpu);
    }
    chosen.sort();
    chosen.dedup();
    Ok(chosen)
}

/// Parses an `RNN_DEVICE` value. A value outside the grammar is [`Error::InvalidEnv`] that
/// states the problem and the grammar once; whether the device exists is checked later, by
/// [`GpuManager::device`], which lists the ids of this machine.
///
/// A comma-separated list (`cuda:0,cuda:1`, for data-parallel training) selects its first
/// device wherever one device is wanted.
pub(crate) fn parse_device_env(value: &str) -> Result<DeviceId> {
    let list = parse_device_list_env(value)?;
    if list.len() > 1 {
        log::debug!(
            "RNN_DEVICE lists {} devices; {} is the one device",
            list.len(),
            list[0]
        );
    }
    Ok(list[0])
}

/// Parses an `RNN_DEVICE` value as a comma-separated list of at least one device id; a
/// device listed twice is [`Error::InvalidEnv`].
pub(crate) fn parse_device_list_env(value: &str) -> Result<Vec<DeviceId>> {
    let mut out: Vec<DeviceId> = Vec::new();
    for part in value.split(',') {
        let id = parse_one_device_env(part, value)?;
        // CPU replicas share the host (`cpu,cpu`); a GPU holds one replica.
        if id != DeviceId::Cpu && out.contains(&id) {
            return Err(Error::InvalidEnv {
                name: "RNN_DEVICE".into(),
                value: value.to_string(),
                reason: format!("{id} is listed twice"),
            });
        }
        out.push(id);
    }
    Ok(out)
}

fn parse_one_device_env(part: &str, value: &str) -> Result<DeviceId> {
    part.parse().map_err(|e| match e {
        Error::UnknownDevice { reason, valid, .. } => Error::InvalidEnv {
            name: "RNN_DEVICE".into(),
            value: value.to_string(),
            reason: format!("{reason}; expected {valid}"),
        },
        other => other,
    })
}

/// Reads `RNN_DEVICE` (unset or empty: `None`).
pub(crate) fn device_from_env() -> Result<Option<DeviceId>> {
    match std::env::var("RNN_DEVICE") {
        Ok(v) if !v.trim().is_empty() => parse_device_env(&v).map(Some),
        _ => Ok(None),
    }
}

impl GpuManager {
    /// Probes the runtimes allowed by `RNN_BACKENDS` (all by default) and the CPU backend.
    /// A runtime that is missing or broken is reported in [`GpuManager::backends`], never an
    /// error; only an invalid `RNN_BACKENDS` value is.
    pub fn new() -> Result<Self> {
        Ok(Self::with_backends(&backends_from_env()?))
    }

    /// Probes exactly the given runtimes (the CPU backend is always present).
    pub fn with_backends(kinds: &[BackendKind]) -> Self {
        let mut statuses = Vec::new();
        let mut devices = Vec::new();
        for kind in BackendKind::ALL {
            if kind != BackendKind::Cpu && !kinds.contains(&kind) {
                statuses.push(BackendStatus {
                    backend: kind,
                    available: false,
                    devices: 0,
                    detail: "not probed (excluded by RNN_BACKENDS)".into(),
                });
                continue;
            }
            let probed = match kind {
                BackendKind::Cuda => backend::cuda::probe(),
                BackendKind::OpenCl => backend::opencl::probe(),
                BackendKind::Hip => backend::hip::probe(),
                BackendKind::Cpu => Ok(vec![backend::cpu::device_info()]),
            };
            match probed {
                Ok(found) => {
                    let mut detail = if found.is_empty() {
                        "runtime loaded, no devices".to_string()
                    } else {
                        found
                            .iter()
                            .map(|d| d.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    };
                    // HIP may be a ROCm outside the search path or a stand-in (RNN_HIP_LIBRARY):
                    // say which files answered.
                    if let Some(origin) = (kind == BackendKind::Hip)
                        .then(backend::hip::origin)
                        .flatten()
                    {
                        detail = format!("{detail} [{origin}]");
                    }
                    log::info!("{kind}: {} device(s) ({detail})", found.len());
                    statuses.push(BackendStatus {
                        backend: kind,
                        available: true,
                        devices: found.len(),
                        detail,
                    });
                    devices.extend(found);
                }
                Err(e) => {
                    let detail = match e {
                        Error::BackendUnavailable { reason, .. } => reason,
                        other => other.to_string(),
                    };
                    log::info!("{kind}: unavailable: {detail}");
                    statuses.push(BackendStatus {
                        backend: kind,
                        available: false,
                        devices: 0,
                        detail,
                    });
                }
            }
        }
        GpuManager { statuses, devices }
    }

    /// Every runtime with its availability and the reason.
    pub fn backends(&self) -> &[BackendStatus] {
        &self.statuses
    }

    /// The status of one runtime.
    pub fn backend(&self, kind: BackendKind) -> &BackendStatus {
        self.statuses
            .iter()
            .find(|s| s.backend == kind)
            .expect("every backend has a status")
    }

    /// Every device found, the CPU backend last.
    pub fn devices(&self) -> &[DeviceInfo] {
        &self.devices
    }

    /// The comma-separated list of valid ids, for error messages.
    pub fn valid_ids(&self) -> String {
        self.devices
            .iter()
            .map(|d| d.id.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The device with this id, or an error listing the valid ids.
    pub fn device(&self, id: DeviceId) -> Result<&DeviceInfo> {
        self.devices.iter().find(|d| d.id == id).ok_or_else(|| {
            let status = self.backend(id.backend());
            let reason = if status.available {
                format!("{} has {} device(s)", id.backend(), status.devices)
            } else {
                format!("{} is unavailable: {}", id.backend(), status.detail)
            };
            Error::UnknownDevice {
                given: id.to_string(),
                reason,
                valid: self.valid_ids(),
            }
        })
    }

    /// The best GPU, ignoring `RNN_DEVICE`: a native runtime (CUDA, HIP) first, then an OpenCL
    /// GPU; larger memory breaks ties. OpenCL CPU devices (PoCL) are never chosen here.
    pub fn best_gpu(&self) -> Option<&DeviceInfo> {
        let rank = |d: &DeviceInfo| match (d.backend, d.kind) {
            (BackendKind::Cuda | BackendKind::Hip, DeviceKind::Gpu) => Some(0),
            (BackendKind::OpenCl, DeviceKind::Gpu) => Some(1),
            _ => None,
        };
        self.devices
            .iter()
            .filter_map(|d| rank(d).map(|r| (r, d)))
            .min_by(|(ra, a), (rb, b)| {
                ra.cmp(rb)
                    .then(b.memory.cmp(&a.memory))
                    .then(a.id.cmp(&b.id))
            })
            .map(|(_, d)| d)
    }

    /// The device to use: `RNN_DEVICE` if set (an error if it is invalid or absent), else the
    /// best GPU, else the CPU backend. The choice is logged.
    pub fn best_device(&self) -> Result<&DeviceInfo> {
        if let Some(id) = device_from_env()? {
            let d = self.device(id).map_err(|e| match e {
                Error::UnknownDevice {
                    given,
                    reason,
                    valid,
                } => Error::UnknownDevice {
                    reason: format!("{reason} (set by RNN_DEVICE)"),
                    given,
                    valid,
                },
                other => other,
            })?;
            log::info!("using {} ({}) from RNN_DEVICE", d.id, d.name);
            return Ok(d);
        }
        match self.best_gpu() {
            Some(d) => {
                log::info!("best device: {} ({})", d.id, d.name);
                Ok(d)
            }
            None => {
                for s in self
                    .statuses
                    .iter()
                    .filter(|s| s.backend != BackendKind::Cpu)
                {
                    log::info!("no GPU from {}: {}", s.backend, s.detail);
                }
                self.device(DeviceId::Cpu)
            }
        }
    }

    /// A context on the given device with default options.
    pub fn create_context(&self, id: DeviceId) -> Result<Context> {
        self.create_context_with(id, ContextOptions::default())
    }

    /// A context on the given device.
    pub fn create_context_with(&self, id: DeviceId, options: ContextOptions) -> Result<Context> {
        let info = self.device(id)?.clone();
        let ops = match id.backend() {
            BackendKind::Cuda => backend::cuda::create_ops(&info, &options)?,
            BackendKind::OpenCl => backend::opencl::create_ops(&info, &options)?,
            BackendKind::Hip => backend::hip::create_ops(&info, &options)?,
            BackendKind::Cpu => backend::cpu::create_ops(),
        };
        Ok(Context::from_ops(ops))
    }

    /// A context on [`GpuManager::best_device`].
    pub fn default_context(&self) -> Result<Context> {
        let id = self.best_device()?.id;
        self.create_context(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_is_always_listed_and_best_without_gpus() {
        let m = GpuManager::with_backends(&[BackendKind::Cpu]);
        assert_eq!(m.devices().last().unwrap().id, DeviceId::Cpu);
        assert!(m.best_gpu().is_none());
        assert!(!m.backend(BackendKind::Cuda).available);
        assert!(m.backend(BackendKind::Cuda).detail.contains("RNN_BACKENDS"));
    }

    #[test]
    fn bad_rnn_device_states_the_grammar_once() {
        for bad in ["gpu7", "cuda", "opencl:1", "cuda:x"] {
            let err = parse_device_env(bad).unwrap_err();
            assert!(matches!(err, Error::InvalidEnv { .. }), "{bad}: {err}");
            let text = err.to_string();
            assert!(text.contains("RNN_DEVICE") && text.contains(bad), "{text}");
            assert_eq!(text.matches("hip:<n>").count(), 1, "{text}");
        }
        assert_eq!(parse_device_env(" hip:2 ").unwrap(), DeviceId::Hip(2));
    }

    /// A runtime this build leaves out is listed, unavailable, with the feature that builds it;
    /// asking for its device names that cause.
    #[cfg(not(all(feature = "cuda", feature = "opencl", feature = "hip")))]
    #[test]
    fn left_out_runtime_is_unavailable_with_its_feature() {
        let m = GpuManager::with_backends(&BackendKind::ALL);
        let (kind, id, feature) = if cfg!(not(feature = "cuda")) {
            (BackendKind::Cuda, DeviceId::Cuda(0), "`cuda`")
        } else if cfg!(not(feature = "opencl")) {
            (
                BackendKind::OpenCl,
                DeviceId::OpenCl {
                    platform: 0,
                    device: 0,
                },
                "`opencl`",
            )
        } else {
            (BackendKind::Hip, DeviceId::Hip(0), "`hip`")
        };
        let status = m.backend(kind);
        assert!(!status.available, "{status}");
        assert_eq!(
            status.detail,
            format!("built without the {feature} feature")
        );
        let err = m.device(id).unwrap_err().to_string();
        assert!(
            err.contains(&format!("built without the {feature} feature")),
            "{err}"
        );
    }

    #[test]
    fn unknown_device_lists_valid_ids() {
        let m = GpuManager::with_backends(&[BackendKind::Cpu]);
        let err = m.device(DeviceId::Cuda(7)).unwrap_err().to_string();
        assert!(err.contains("cuda:7") && err.contains("cpu"), "{err}");
    }
}
