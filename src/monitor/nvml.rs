//! NVML through `nvml-wrapper`, which opens `libnvidia-ml` with `dlopen` on first use.

use std::ffi::OsStr;
use std::sync::OnceLock;

use parking_lot::Mutex;

use nvml_wrapper::Nvml;
use nvml_wrapper::enum_wrappers::device::TemperatureSensor;
use nvml_wrapper::enums::device::UsedGpuMemory;

use super::GpuFigures;

/// The library, initialized once per process, or why it is not there.
fn nvml() -> Result<&'static Nvml, &'static str> {
    static NVML: OnceLock<Result<Nvml, String>> = OnceLock::new();
    NVML.get_or_init(|| {
        // Driver installs without the development package have only the versioned name.
        Nvml::builder()
            .lib_path(OsStr::new("libnvidia-ml.so.1"))
            .init()
            .or_else(|_| Nvml::init())
            .map_err(|e| format!("tried libnvidia-ml.so.1 and libnvidia-ml.so: {e}"))
    })
    .as_ref()
    .map_err(String::as_str)
}

/// "NVML: driver X, N devices" or why it is unavailable.
pub(super) fn status() -> String {
    match nvml() {
        Ok(n) => format!(
            "NVML: loaded (driver {}, {} devices)",
            n.sys_driver_version().unwrap_or_else(|_| "?".into()),
            n.device_count()
                .map_or_else(|_| "?".into(), |c| c.to_string())
        ),
        Err(why) => format!("NVML: not available ({why})"),
    }
}

/// The NVML device behind CUDA ordinal `ordinal`: found by PCI bus id, else by index (NVML
/// numbers devices in PCI order, as CUDA does with `CUDA_DEVICE_ORDER=PCI_BUS_ID`).
fn device(ordinal: usize) -> Option<nvml_wrapper::Device<'static>> {
    // The sampler asks ten times a second: the bus id is looked up once per ordinal.
    static BUS_IDS: Mutex<Vec<(usize, Option<String>)>> = Mutex::new(Vec::new());
    let nvml = nvml().ok()?;
    let bus = {
        let mut known = BUS_IDS.lock();
        match known.iter().find(|(o, _)| *o == ordinal) {
            Some((_, b)) => b.clone(),
            None => {
                let b = crate::backend::cuda::pci_bus_id(ordinal);
                known.push((ordinal, b.clone()));
                b
            }
        }
    };
    if let Some(bus) = bus
        && let Ok(d) = nvml.device_by_pci_bus_id(bus.as_str())
    {
        return Some(d);
    }
    nvml.device_by_index(u32::try_from(ordinal).ok()?).ok()
}

/// Live figures of CUDA device `ordinal`.
pub(super) fn figures(ordinal: usize) -> Option<GpuFigures> {
    let d = device(ordinal)?;
    let memory = d.memory_info().ok();
    let pid = std::process::id();
    let process_memory = d.running_compute_processes().ok().and_then(|ps| {
        ps.into_iter()
            .filter(|p| p.pid == pid)
            .find_map(|p| match p.used_gpu_memory {
                UsedGpuMemory::Used(b) => Some(b),
                UsedGpuMemory::Unavailable => None,
            })
    });
    Some(GpuFigures {
        source: "NVML",
        utilization_percent: d.utilization_rates().ok().map(|u| u.gpu),
        memory_used: memory.as_ref().map(|m| m.used),
        memory_total: memory.as_ref().map(|m| m.total),
        process_memory,
        temperature_c: d.temperature(TemperatureSensor::Gpu).ok().map(|t| t as f32),
        power_watts: d.power_usage().ok().map(|mw| mw as f32 / 1000.0),
    })
}
