//! The CUDA backend: the driver API, NVRTC and cuBLAS through `cudarc`, all loaded at run time.
//!
//! Presence of each library is checked before cudarc's loaders run (they panic when a library
//! is missing), so a machine without CUDA gets "unavailable, with the reason".

mod blas;
mod compile;
mod cooperative;
mod device;
mod error;
mod graph;
pub(crate) mod kernels;
mod launch;
mod memory;
mod module;
mod runtime;
mod staging;

use cudarc::driver::result;
use cudarc::driver::sys::CUdevice_attribute;

pub(crate) use device::CudaDevice;
use runtime::{check_runtime, ptx_unloadable, version_text};

use crate::context_options::ContextOptions;
use crate::device::{BackendKind, DeviceId, DeviceInfo, DeviceKind};
#[cfg(feature = "testing")]
use crate::error::Error;
use crate::error::Result;
use crate::ops::Engine;

fn attribute(dev: cudarc::driver::sys::CUdevice, attr: CUdevice_attribute) -> Result<i32> {
    // SAFETY: `dev` came from cuDeviceGet after cuInit.
    unsafe { result::device::get_attribute(dev, attr) }
        .map_err(|e| error::driver("cuDeviceGetAttribute", e))
}

/// Lists the CUDA devices NVRTC can build for, or says why CUDA cannot be used.
pub(crate) fn probe() -> Result<Vec<DeviceInfo>> {
    let version = check_runtime()?;
    let nvrtc = compile::NvrtcInfo::query()?;
    let count = result::device::get_count().map_err(|e| {
        error::unavailable(format!(
            "cuDeviceGetCount failed: {}",
            error::driver_message(&e)
        ))
    })?;
    if count <= 0 {
        return Err(error::unavailable(format!(
            "no CUDA devices (driver CUDA {})",
            version_text(version)
        )));
    }
    let mut found = Vec::new();
    let mut skipped = Vec::new();
    for ordinal in 0..count {
        let dev = result::device::get(ordinal).map_err(|e| error::driver("cuDeviceGet", e))?;
        let name =
            result::device::get_name(dev).map_err(|e| error::driver("cuDeviceGetName", e))?;
        // SAFETY: `dev` came from cuDeviceGet after cuInit.
        let memory = unsafe { result::device::total_mem(dev) }
            .map_err(|e| error::driver("cuDeviceTotalMem", e))? as u64;
        let sms = attribute(
            dev,
            CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
        )?;
        let major = attribute(
            dev,
            CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
        )?;
        let minor = attribute(
            dev,
            CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
        )?;
        let cc = (major * 10 + minor) as u32;
        match nvrtc.target_for(cc) {
            None => {
                log::warn!(
                    "cuda:{ordinal} ({name}, sm_{cc}) skipped: NVRTC {}.{} has no target it runs",
                    nvrtc.version.0,
                    nvrtc.version.1
                );
                skipped.push(format!("{name} (sm_{cc})"));
                continue;
            }
            Some(compile::Target::Ptx(_)) if ptx_unloadable(nvrtc.version, version).is_some() => {
                let reason = ptx_unloadable(nvrtc.version, version).unwrap_or_default();
                log::warn!(
                    "cuda:{ordinal} ({name}, sm_{cc}) skipped: no CUBIN target, and {reason}"
                );
                skipped.push(format!("{name} (sm_{cc}: {reason})"));
                continue;
            }
            Some(t @ compile::Target::Ptx(_)) => log::info!(
                "cuda:{ordinal} ({name}, sm_{cc}): NVRTC {}.{} has no sm_{cc} CUBIN target; kernels are built as {t}",
                nvrtc.version.0,
                nvrtc.version.1
            ),
            Some(_) => {}
        }
        found.push(DeviceInfo {
            id: DeviceId::Cuda(ordinal as usize),
            backend: BackendKind::Cuda,
            name,
            vendor: "NVIDIA Corporation".into(),
            kind: DeviceKind::Gpu,
            memory,
            compute_units: sms.max(0) as u32,
            arch: format!("sm_{cc}"),
            driver: format!("CUDA {} ({version})", version_text(version)),
        });
    }
    if found.is_empty() {
        return Err(error::unavailable(format!(
            "NVRTC {}.{} cannot build for any device here: {}",
            nvrtc.version.0,
            nvrtc.version.1,
            skipped.join(", ")
        )));
    }
    Ok(found)
}

/// Ops for one CUDA device.
pub(crate) fn create_ops(info: &DeviceInfo, options: &ContextOptions) -> Result<Engine> {
    crate::backend::gpu::create(CudaDevice::open(info, options)?, options)
}

/// The CUDA op set, whole or as the modules a context compiles. For tests and tools.
#[cfg(feature = "testing")]
#[doc(hidden)]
pub use kernels::{op_set_modules, op_set_source};

/// Compiles `source` with NVRTC to a CUBIN for `arch` (`sm_80`, `sm_90`, the
/// architecture-specific `sm_90a`, ...) with the options every CUDA build uses. Needs NVRTC, not
/// a GPU. For tests and tools.
#[cfg(feature = "testing")]
#[doc(hidden)]
pub fn compile_for_arch(source: &str, arch: &str) -> Result<Vec<u8>> {
    let (base, specific) = match arch.strip_suffix('a') {
        Some(base) => (base, true),
        None => (arch, false),
    };
    let sm = compile::parse_sm(base).ok_or_else(|| {
        Error::InvalidArgument(format!("'{arch}' is not an sm_XY or sm_XYa architecture"))
    })?;
    if !compile::present() {
        return Err(error::unavailable(format!(
            "NVRTC not found (tried {})",
            compile::candidates("nvrtc")
        )));
    }
    let target = if specific {
        compile::Target::CubinArchSpecific(sm)
    } else {
        compile::Target::Cubin(sm)
    };
    compile::compile(source, target, &[], compile::Environment::default(), arch)
}

/// Compiles a HIP C++ `source` with NVRTC to a CUBIN for `arch` the way a CUDA context with
/// `ContextOptions::hip_sources_via_nvrtc` compiles a user's HIP kernel: the HIP-to-CUDA prelude
/// is the in-memory `hip/hip_runtime.h` and is pre-included. Needs NVRTC, not a GPU. For tests
/// and tools.
#[cfg(feature = "testing")]
#[doc(hidden)]
pub fn compile_hip_for_arch(source: &str, arch: &str) -> Result<Vec<u8>> {
    let sm = compile::parse_sm(arch)
        .ok_or_else(|| Error::InvalidArgument(format!("'{arch}' is not an sm_XY architecture")))?;
    if !compile::present() {
        return Err(error::unavailable(format!(
            "NVRTC not found (tried {})",
            compile::candidates("nvrtc")
        )));
    }
    compile::compile(
        source,
        compile::Target::Cubin(sm),
        &[],
        compile::hip_environment(),
        arch,
    )
}

/// The PCI bus id of CUDA device `ordinal` as NVML spells it (`00000000:BB:DD.0`), so the
/// monitor can find the same GPU in NVML whatever order `CUDA_DEVICE_ORDER` and
/// `CUDA_VISIBLE_DEVICES` give the CUDA ordinals. `None` when the driver is absent or says no.
#[cfg(feature = "monitor")]
pub(crate) fn pci_bus_id(ordinal: usize) -> Option<String> {
    use cudarc::driver::sys::CUdevice_attribute as A;
    // SAFETY: only tries to dlopen the candidate names of libcuda; loads no symbols.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return None;
    }
    result::init().ok()?;
    let dev = result::device::get(i32::try_from(ordinal).ok()?).ok()?;
    // SAFETY: `dev` came from cuDeviceGet on an initialized driver.
    let attr = |a| unsafe { result::device::get_attribute(dev, a) }.ok();
    let domain = attr(A::CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID)?;
    let bus = attr(A::CU_DEVICE_ATTRIBUTE_PCI_BUS_ID)?;
    let device = attr(A::CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID)?;
    Some(format!("{domain:08X}:{bus:02X}:{device:02X}.0"))
}
