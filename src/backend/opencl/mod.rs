//! The OpenCL backend: every platform and device the ICD loader lists (GPUs, CPUs such as PoCL,
//! accelerators), driven through `opencl3`, which loads `libOpenCL` at run time.

mod device;
mod error;
mod event;
pub(crate) mod kernels;
mod launch;
mod memory;
mod module;
mod persistent;
mod profile;
pub(crate) mod sgemm;
mod side_queue;
mod sm90a;

use opencl3::device::{
    CL_DEVICE_TYPE_ALL, CL_DEVICE_TYPE_CPU, CL_DEVICE_TYPE_GPU, Device as ClDeviceHandle,
};
use opencl3::error_codes::{CL_PLATFORM_NOT_FOUND_KHR, DLOPEN_RUNTIME_LOAD_FAILED};
use opencl3::platform::{Platform, get_platforms};

use crate::context_options::ContextOptions;
use crate::device::{BackendKind, DeviceId, DeviceInfo, DeviceKind};
use crate::error::{Error, Result};
use crate::ops::Engine;

pub(crate) use device::{ClDevice, OpenOptions};
use error::{cl_error, status_name};

fn unavailable(reason: String) -> Error {
    Error::BackendUnavailable {
        backend: BackendKind::OpenCl,
        reason,
    }
}

/// Why `libOpenCL` did not load, in the loader's words.
fn load_failure_reason() -> String {
    let name = "libOpenCL.so.1";
    // SAFETY: loading the ICD loader runs only its initializers, as opencl3's own attempt
    // just did; the library is dropped (unloaded) right away.
    let detail = match unsafe { libloading::Library::new(name) } {
        Err(e) => e.to_string(),
        Ok(_) => "loaded on a second attempt".to_string(),
    };
    format!(
        "OpenCL ICD loader {name} could not be loaded ({detail}); OPENCL_DYLIB_PATH overrides the path"
    )
}

fn platforms() -> Result<Vec<Platform>> {
    match get_platforms() {
        Ok(p) if p.is_empty() => Err(unavailable(
            "the ICD loader lists no OpenCL platform (no vendor driver registered)".into(),
        )),
        Ok(p) => Ok(p),
        Err(e) if e.0 == DLOPEN_RUNTIME_LOAD_FAILED => Err(unavailable(load_failure_reason())),
        Err(e) if e.0 == CL_PLATFORM_NOT_FOUND_KHR => Err(unavailable(format!(
            "no OpenCL platform found ({} {}): no vendor driver registered in /etc/OpenCL/vendors or OCL_ICD_VENDORS",
            status_name(e.0),
            e.0
        ))),
        Err(e) => Err(unavailable(format!(
            "clGetPlatformIDs failed: {} ({})",
            status_name(e.0),
            e.0
        ))),
    }
}

fn describe(id: DeviceId, platform: &Platform, d: &ClDeviceHandle) -> Result<DeviceInfo> {
    let q = |what: &str, e: opencl3::error_codes::ClError| {
        cl_error(&format!("clGetDeviceInfo({what})"), e.0)
    };
    let ty = d.dev_type().map_err(|e| q("CL_DEVICE_TYPE", e))?;
    let kind = if ty & CL_DEVICE_TYPE_GPU != 0 {
        DeviceKind::Gpu
    } else if ty & CL_DEVICE_TYPE_CPU != 0 {
        DeviceKind::Cpu
    } else {
        DeviceKind::Accelerator
    };
    let platform_name = platform.name().unwrap_or_default();
    Ok(DeviceInfo {
        id,
        backend: BackendKind::OpenCl,
        name: d
            .name()
            .map_err(|e| q("CL_DEVICE_NAME", e))?
            .trim()
            .to_string(),
        vendor: d
            .vendor()
            .map_err(|e| q("CL_DEVICE_VENDOR", e))?
            .trim()
            .to_string(),
        kind,
        memory: d
            .global_mem_size()
            .map_err(|e| q("CL_DEVICE_GLOBAL_MEM_SIZE", e))?,
        compute_units: d
            .max_compute_units()
            .map_err(|e| q("CL_DEVICE_MAX_COMPUTE_UNITS", e))?,
        arch: d
            .opencl_c_version()
            .map_err(|e| q("CL_DEVICE_OPENCL_C_VERSION", e))?
            .trim()
            .to_string(),
        driver: format!(
            "{} {}",
            platform_name.trim(),
            d.driver_version()
                .map_err(|e| q("CL_DRIVER_VERSION", e))?
                .trim()
        ),
    })
}

/// Every (platform, device) pair in enumeration order, which defines the ids.
fn enumerate() -> Result<Vec<(DeviceId, Platform, ClDeviceHandle)>> {
    let mut out = Vec::new();
    for (pi, platform) in platforms()?.into_iter().enumerate() {
        let devices = match platform.get_devices(CL_DEVICE_TYPE_ALL) {
            Ok(d) => d,
            Err(e) => {
                log::info!(
                    "opencl: platform {pi} ({}) lists no devices: {} ({})",
                    platform.name().unwrap_or_default(),
                    status_name(e.0),
                    e.0
                );
                continue;
            }
        };
        for (di, raw) in devices.into_iter().enumerate() {
            let id = DeviceId::OpenCl {
                platform: pi,
                device: di,
            };
            out.push((id, platform, ClDeviceHandle::new(raw)));
        }
    }
    Ok(out)
}

/// Serializes device discovery and context creation. PoCL (seen with libpocl.so.2.10) crashes
/// in clGetDeviceInfo, or lists no devices, while another thread of the process creates a
/// context; managers and contexts are made from several threads (the test harness does), so
/// those calls take turns here. Both are rare and short next to the work a context does.
static DISCOVERY: parking_lot::Mutex<()> = parking_lot::Mutex::new(());

/// Lists the devices of this runtime, or says why it cannot be used.
pub(crate) fn probe() -> Result<Vec<DeviceInfo>> {
    let _turn = DISCOVERY.lock();
    let mut infos = Vec::new();
    for (id, platform, d) in enumerate()? {
        match describe(id, &platform, &d) {
            Ok(info) => infos.push(info),
            Err(e) => log::warn!("opencl: {id} skipped: {e}"),
        }
    }
    Ok(infos)
}

/// Ops for one device of this runtime.
pub(crate) fn create_ops(info: &DeviceInfo, options: &ContextOptions) -> Result<Engine> {
    // Checked even when the option is on, so a bad value is reported wherever it is set.
    let from_env = profile::enabled_by_env()?;
    let profile = options.profile_kernels || from_env;
    let persistent = persistent::allowed_by_env()?;
    let tensor_cores = sgemm::tensor_cores_allowed_by_env()?;
    let _turn = DISCOVERY.lock();
    let (_, platform, handle) = enumerate()?
        .into_iter()
        .find(|(id, _, _)| *id == info.id)
        .ok_or_else(|| unavailable(format!("{} is no longer listed by the ICD loader", info.id)))?;
    let device = ClDevice::open(
        info.clone(),
        &platform,
        handle,
        OpenOptions {
            sgemm_tile: options.opencl_sgemm_tile,
            profile,
            persistent,
            tensor_cores,
            warpgroup_gemm: options.warpgroup_gemm,
        },
    )?;
    crate::backend::gpu::create(device, options)
}
