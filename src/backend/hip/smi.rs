//! ROCm SMI (`librocm_smi64`), loaded at run time with `libloading`, for the device monitor:
//! utilization, VRAM used/total, temperature, power and this process's VRAM.
//!
//! NOT verified on hardware: no AMD GPU has run this code. It is written against ROCm 5.x's
//! `rocm_smi.h` (function signatures, `RSMI_MEM_TYPE_VRAM = 0`, `RSMI_TEMP_TYPE_EDGE = 0`,
//! `RSMI_TEMP_CURRENT = 0`, `rsmi_process_info_t`), and HIP ordinals are assumed to number the
//! GPUs in the same order as ROCm SMI's indices (both follow PCI order unless
//! `HIP_VISIBLE_DEVICES` reorders them). On a machine without an AMD GPU, `rsmi_init` fails and
//! there are simply no figures.

use std::ffi::c_uint;
use std::sync::OnceLock;

use libloading::Library;

use crate::dylib::{open_first, search_paths, sym};

type Status = c_uint;
const RSMI_STATUS_SUCCESS: Status = 0;
const RSMI_MEM_TYPE_VRAM: c_uint = 0;
const RSMI_TEMP_TYPE_EDGE: c_uint = 0;
const RSMI_TEMP_CURRENT: c_uint = 0;

/// `rsmi_process_info_t` of ROCm 5.x.
#[repr(C)]
#[derive(Default)]
struct ProcessInfo {
    process_id: u32,
    pasid: u32,
    vram_usage: u64,
    sdma_usage: u64,
    cu_occupancy: u32,
}

struct Smi {
    /// Keeps the symbols below valid.
    _lib: Library,
    busy_percent: unsafe extern "C" fn(u32, *mut u32) -> Status,
    memory_usage: unsafe extern "C" fn(u32, c_uint, *mut u64) -> Status,
    memory_total: unsafe extern "C" fn(u32, c_uint, *mut u64) -> Status,
    temperature: unsafe extern "C" fn(u32, c_uint, c_uint, *mut i64) -> Status,
    power_average: unsafe extern "C" fn(u32, u32, *mut u64) -> Status,
    process_info: unsafe extern "C" fn(u32, *mut ProcessInfo) -> Status,
}

/// The unversioned name (a development install), then each SONAME, newest first.
const NAMES: [&str; 5] = [
    "librocm_smi64.so",
    "librocm_smi64.so.1",
    "librocm_smi64.so.7",
    "librocm_smi64.so.6",
    "librocm_smi64.so.5",
];

fn load() -> Result<Smi, String> {
    let paths = search_paths(&["ROCM_PATH", "HIP_PATH"], &["/opt/rocm/lib"], &NAMES);
    let (lib, path) = open_first(&paths).map_err(|e| format!("librocm_smi64 not found: {e}"))?;
    let path = path.as_str();
    // SAFETY: each symbol is looked up with the signature `rocm_smi.h` declares for it, and the
    // library is kept in the returned struct for as long as the pointers are used. All are
    // resolved before `rsmi_init` runs, so a library lacking one is never initialized.
    unsafe {
        let init: unsafe extern "C" fn(u64) -> Status = sym(&lib, "rsmi_init", path)?;
        let smi = Smi {
            busy_percent: sym(&lib, "rsmi_dev_busy_percent_get", path)?,
            memory_usage: sym(&lib, "rsmi_dev_memory_usage_get", path)?,
            memory_total: sym(&lib, "rsmi_dev_memory_total_get", path)?,
            temperature: sym(&lib, "rsmi_dev_temp_metric_get", path)?,
            power_average: sym(&lib, "rsmi_dev_power_ave_get", path)?,
            process_info: sym(&lib, "rsmi_compute_process_info_by_pid_get", path)?,
            _lib: lib,
        };
        let status = init(0);
        if status != RSMI_STATUS_SUCCESS {
            return Err(format!(
                "{path}: every symbol resolved, rsmi_init returned status {status}"
            ));
        }
        Ok(smi)
    }
}

fn smi() -> Result<&'static Smi, &'static str> {
    static SMI: OnceLock<Result<Smi, String>> = OnceLock::new();
    SMI.get_or_init(load).as_ref().map_err(String::as_str)
}

/// "ROCm SMI: loaded" or why not.
pub(crate) fn status() -> String {
    match smi() {
        Ok(_) => "ROCm SMI: loaded".into(),
        Err(why) => format!("ROCm SMI: not available ({why})"),
    }
}

/// What ROCm SMI reported for one device; each figure is `None` where its call failed. The
/// monitor turns it into its `GpuFigures` (the backend reads, the monitor presents).
pub(crate) struct SmiReading {
    /// Percent of the last sample period in which the GPU was busy.
    pub(crate) busy_percent: Option<u32>,
    /// VRAM in use by every process, bytes.
    pub(crate) vram_used: Option<u64>,
    /// VRAM, bytes.
    pub(crate) vram_total: Option<u64>,
    /// VRAM in use by this process, bytes.
    pub(crate) process_vram: Option<u64>,
    /// Edge temperature, degrees Celsius.
    pub(crate) temperature_c: Option<f32>,
    /// Average power draw, watts.
    pub(crate) power_watts: Option<f32>,
}

/// Live figures of HIP device `ordinal`.
pub(crate) fn figures(ordinal: usize) -> Option<SmiReading> {
    let smi = smi().ok()?;
    let dv = u32::try_from(ordinal).ok()?;
    let (mut busy, mut used, mut total, mut temp, mut power) = (0u32, 0u64, 0u64, 0i64, 0u64);
    let mut proc_info = ProcessInfo::default();
    let ok = |s: Status| s == RSMI_STATUS_SUCCESS;
    // SAFETY: every out-pointer is a live local of the type the function writes; `dv` is an
    // index the library range-checks (an unknown one is an error status).
    let (b, u, t, c, p, pi) = unsafe {
        (
            ok((smi.busy_percent)(dv, &mut busy)),
            ok((smi.memory_usage)(dv, RSMI_MEM_TYPE_VRAM, &mut used)),
            ok((smi.memory_total)(dv, RSMI_MEM_TYPE_VRAM, &mut total)),
            ok((smi.temperature)(
                dv,
                RSMI_TEMP_TYPE_EDGE,
                RSMI_TEMP_CURRENT,
                &mut temp,
            )),
            ok((smi.power_average)(dv, 0, &mut power)),
            ok((smi.process_info)(std::process::id(), &mut proc_info)),
        )
    };
    if !(b || u || t) {
        return None;
    }
    Some(SmiReading {
        busy_percent: b.then_some(busy),
        vram_used: u.then_some(used),
        vram_total: t.then_some(total),
        // Summed over the process's GPUs: with one AMD GPU in use, that GPU's.
        process_vram: pi.then_some(proc_info.vram_usage),
        temperature_c: c.then_some(temp as f32 / 1000.0),
        power_watts: p.then_some(power as f32 / 1e6),
    })
}
