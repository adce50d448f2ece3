//! The ROCm/HIP backend: `libamdhip64` and hiprtc loaded at run time (no ROCm needed to build).
//!
//! - Discovery: `RNN_HIP_LIBRARY=/path/to/libamdhip64.so` loads exactly that runtime, with
//!   hiprtc from `RNN_HIPRTC_LIBRARY` when set, else from a `libhiprtc.so` (`.so.7`, `.so.6`,
//!   `.so.5`) in the same directory, else from the runtime itself; a file that does not load or
//!   lacks a symbol makes the backend unavailable with that reason. Without it, the runtime is
//!   searched in `$ROCM_PATH/lib`, `$HIP_PATH/lib`, `/opt/rocm/lib`, then the system loader
//!   paths (`libamdhip64.so`, `.so.7`, `.so.6`, `.so.5`), and hiprtc comes from `libhiprtc`
//!   (ROCm >= 5.3) or, where that is absent, from `libamdhip64` itself (ROCm <= 5.2). The
//!   backend status names the files used. A runtime that loads but reports no device
//!   (`hipInit`/`hipGetDeviceCount` answering `hipErrorNoDevice`/`hipErrorInvalidDevice`, or a
//!   count of 0) is an available runtime with zero devices; a missing library makes the backend
//!   unavailable with the paths tried.
//! - Device facts come from `hipDeviceGetName`, `hipDeviceTotalMem` and `hipDeviceGetAttribute`
//!   (whose attribute numbers are the same in ROCm 5 and 6). The architecture (`gcnArchName`) is
//!   only available in `hipDeviceProp_t`, whose layout changed in ROCm 6: it is read into a 16 KiB
//!   buffer through `hipGetDevicePropertiesR0600` at the ROCm 6 offset, else through the pre-6
//!   `hipGetDeviceProperties` at the ROCm 5 offset, and validated (`gfx...`, printable); if the
//!   value there is not an arch name the buffer is scanned for the single `gfx...` string.
//!   `RNN_HIP_ARCH=gfx90a` overrides the detected arch.
//! - Kernels: the CUDA op-set sources (`kernels-cu/`) behind the `kernels-hip/` vendor header
//!   (CUDA spellings to HIP, wavefront-width reductions), compiled by hiprtc with
//!   `--offload-arch=<gfx...> -O3` into a code object that goes through the shared kernel cache.
//! - Graphs: with `hipStreamBeginCapture` ... `hipGraphLaunch` (optional symbols, in every ROCm
//!   since 5.0) a whole training step is recorded and replayed as on CUDA (`graph.rs`); while
//!   recording, allocation, uploads, downloads and waits are refused. A runtime without them
//!   records no graphs and steps run op by op.
//!
//! What was checked, and what was not:
//! - On a machine without an AMD GPU (ROCm 5.2.3 `libamdhip64.so.5` with hiprtc inside it): the
//!   whole op set compiles with hiprtc for gfx908, gfx90a and gfx1030, and each code object is an
//!   AMDGPU ELF that exports every entry point of `docs/kernel-abi.md`; a broken kernel gives
//!   [`crate::Error::Compile`] with the hiprtc log; discovery reports the runtime as available
//!   with 0 devices (`tests/runtime/hip_compile.rs`).
//! - The host side of this backend runs on an NVIDIA GPU through `tests/hip-shim`: a C library
//!   exporting exactly the HIP runtime and hiprtc symbols bound in `ffi.rs`, with ROCm's
//!   prototypes, error codes and `hipDeviceProp_t` layouts, implemented over the CUDA driver API
//!   and NVRTC (its hiprtc compiles the HIP sources behind `kernels-hip/nvrtc_prelude.h`, as the
//!   `hip-nvrtc` path does; its devices report `gfx90a:sramecc+:xnack-` and wave size 32). With
//!   `RNN_HIP_LIBRARY` pointing at it (`scripts/gpu-machine.sh hip-shim`), the whole test suite,
//!   an example and compute-sanitizer run on `hip:0`, which exercises this code's FFI
//!   signatures, discovery, the `gcnArchName` read in both layouts, memory with its
//!   out-of-memory mapping and the pool's release-and-retry, streams and copies, module loading
//!   (fresh and from the disk cache, including entries the driver rejects), launches, graph
//!   capture and replay, error mapping, and the HIP kernels' numerics at wave size 32. In CI
//!   (no GPU) the shim is built, its exports are checked against the names bound in `ffi.rs`,
//!   and it answers like ROCm without a GPU (`tests/runtime/hip_shim.rs`).
//! - NOT verified: no AMD GPU has ever run this backend. The shim has ROCm's interface but
//!   CUDA's behaviour, so ROCm's own runtime (its allocator, copy and stream semantics, graph
//!   capture, the error codes only it produces, AMDGPU code-object loading), AMD's drivers and
//!   hiprtc's code generation for real targets beyond compiling, and wave-64 execution of the
//!   kernels (only compiled, for gfx908/gfx90a) remain untested.

mod compile;
mod device;
mod error;
mod ffi;
mod graph;
pub(crate) mod kernels;
#[cfg(feature = "monitor")]
pub(crate) mod smi;

use std::ffi::{c_char, c_int};

use crate::context_options::ContextOptions;
use crate::device::{BackendKind, DeviceId, DeviceInfo, DeviceKind};
use crate::error::{Error, Result};
use crate::ops::Engine;

use self::error::{check, unavailable, version_string};
use self::ffi::{HIP_ERROR_INVALID_DEVICE, HIP_ERROR_NO_DEVICE, HIP_SUCCESS, HipApi};

/// Lists the HIP devices, `Ok(vec![])` when the runtime loads but sees no device, or says why the
/// runtime cannot be used.
pub(crate) fn probe() -> Result<Vec<DeviceInfo>> {
    let loaded = ffi::api().map_err(unavailable)?;
    // A bad override is the user's error for the whole backend (the status reason), not a
    // warning per device.
    arch_override()?;
    let api = &loaded.hip;
    // SAFETY: hipInit takes a flags value (0 is the only defined one) and may be called repeatedly.
    let code = unsafe { (api.init)(0) };
    if code == HIP_ERROR_NO_DEVICE || code == HIP_ERROR_INVALID_DEVICE {
        let (name, _) = api.error_text(code);
        log::info!(
            "hip: runtime {} loaded, no device (hipInit: {name}, code {code})",
            api.path
        );
        return Ok(Vec::new());
    }
    if code != HIP_SUCCESS {
        let e = error::backend_error(api, code, "hipInit");
        return Err(unavailable(format!("{} loaded but {e}", api.path)));
    }
    let mut count: c_int = 0;
    // SAFETY: `count` is a valid out-pointer.
    let code = unsafe { (api.get_device_count)(&mut count) };
    if code == HIP_ERROR_NO_DEVICE || (code == HIP_SUCCESS && count <= 0) {
        log::info!("hip: runtime {} loaded, no device", api.path);
        return Ok(Vec::new());
    }
    if code != HIP_SUCCESS {
        let e = error::backend_error(api, code, "hipGetDeviceCount");
        return Err(unavailable(format!("{} loaded but {e}", api.path)));
    }
    if let Err(reason) = &loaded.rtc {
        return Err(unavailable(format!(
            "{count} device(s) found but hiprtc is missing, so no kernel can be compiled: {reason}"
        )));
    }
    let mut devices = Vec::new();
    for ordinal in 0..count {
        match device_info(api, ordinal) {
            Ok(d) => devices.push(d),
            Err(e) => log::warn!("hip:{ordinal}: skipped: {e}"),
        }
    }
    Ok(devices)
}

/// The files the loaded runtime and hiprtc came from (`runtime <path>, hiprtc <path>`), for the
/// backend status; `None` when no runtime loaded (the status then says why).
pub(crate) fn origin() -> Option<String> {
    let loaded = ffi::api().ok()?;
    let rtc = match &loaded.rtc {
        Ok(rtc) if rtc.path == loaded.hip.path => "in the runtime".to_string(),
        Ok(rtc) => rtc.path.clone(),
        Err(_) => "missing".to_string(),
    };
    Some(format!("runtime {}, hiprtc {rtc}", loaded.hip.path))
}

/// Name, memory, compute units, arch and versions of one device.
fn device_info(api: &HipApi, ordinal: c_int) -> Result<DeviceInfo> {
    let mut name = [0 as c_char; 256];
    // SAFETY: `name` is writable for the 256 bytes passed as its length.
    let code = unsafe { (api.device_get_name)(name.as_mut_ptr(), 256, ordinal) };
    check(api, code, "hipDeviceGetName")?;
    let name: Vec<u8> = name
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    let name = String::from_utf8_lossy(&name).trim().to_string();

    let mut memory = 0usize;
    // SAFETY: `memory` is a valid out-pointer.
    let code = unsafe { (api.device_total_mem)(&mut memory, ordinal) };
    check(api, code, "hipDeviceTotalMem")?;

    let mut units: c_int = 0;
    // SAFETY: `units` is a valid out-pointer; the attribute number is the same in ROCm 5 and 6.
    let code =
        unsafe { (api.device_get_attribute)(&mut units, ffi::ATTR_MULTIPROCESSOR_COUNT, ordinal) };
    check(api, code, "hipDeviceGetAttribute(MultiprocessorCount)")?;
    let mut wave: c_int = 0;
    // SAFETY: as above.
    let code = unsafe { (api.device_get_attribute)(&mut wave, ffi::ATTR_WARP_SIZE, ordinal) };
    check(api, code, "hipDeviceGetAttribute(WarpSize)")?;

    let arch = arch_of(api, ordinal)?;
    let (mut runtime, mut driver) = (0, 0);
    // SAFETY: valid out-pointers to one `int` each.
    let code = unsafe { (api.runtime_get_version)(&mut runtime) };
    check(api, code, "hipRuntimeGetVersion")?;
    // SAFETY: as above.
    let code = unsafe { (api.driver_get_version)(&mut driver) };
    check(api, code, "hipDriverGetVersion")?;
    log::debug!("hip:{ordinal}: {name}, {arch}, wave{wave}, {units} CUs");

    Ok(DeviceInfo {
        id: DeviceId::Hip(ordinal as usize),
        backend: BackendKind::Hip,
        name: if name.is_empty() { arch.clone() } else { name },
        vendor: "Advanced Micro Devices, Inc.".to_string(),
        kind: DeviceKind::Gpu,
        memory: memory as u64,
        compute_units: units.max(0) as u32,
        arch,
        driver: format!(
            "HIP runtime {} ({}), driver {}",
            version_string(runtime),
            api.path,
            version_string(driver)
        ),
    })
}

/// `RNN_HIP_ARCH` when set: an AMDGPU target (`gfx90a`, `gfx942:sramecc+:xnack-`), else
/// [`Error::InvalidEnv`].
fn arch_override() -> Result<Option<String>> {
    match std::env::var("RNN_HIP_ARCH") {
        Ok(v) => parse_arch(&v).map(Some),
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(v)) => Err(Error::InvalidEnv {
            name: "RNN_HIP_ARCH".into(),
            value: v.to_string_lossy().into_owned(),
            reason: "not valid UTF-8".into(),
        }),
    }
}

/// Checks an AMDGPU target: `gfx` and hex digits, then optional `:feature+` / `:feature-`.
fn parse_arch(value: &str) -> Result<String> {
    let v = value.trim();
    let mut parts = v.split(':');
    let base_ok = parts
        .next()
        .and_then(|b| b.strip_prefix("gfx"))
        .is_some_and(|d| {
            !d.is_empty()
                && d.bytes()
                    .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c))
        });
    let features_ok = parts.all(|f| {
        f.len() > 1
            && (f.ends_with('+') || f.ends_with('-'))
            && f[..f.len() - 1].bytes().all(|c| c.is_ascii_lowercase())
    });
    if base_ok && features_ok {
        Ok(v.to_string())
    } else {
        Err(Error::InvalidEnv {
            name: "RNN_HIP_ARCH".into(),
            value: value.to_string(),
            reason: "expected an AMDGPU target such as gfx90a or gfx90a:sramecc+:xnack-".into(),
        })
    }
}

/// The full `gcnArchName` (`gfx90a:sramecc+:xnack-`), or `RNN_HIP_ARCH` when set.
fn arch_of(api: &HipApi, ordinal: c_int) -> Result<String> {
    if let Some(v) = arch_override()? {
        return Ok(v);
    }
    match api.gcn_arch_name(ordinal) {
        Ok(Some(a)) => Ok(a),
        Ok(None) => Err(unavailable(format!(
            "hip:{ordinal}: gcnArchName could not be read from hipDeviceProp_t of {}; \
             set RNN_HIP_ARCH (e.g. gfx90a)",
            api.path
        ))),
        Err(code) => Err(error::backend_error(api, code, "hipGetDeviceProperties")),
    }
}

/// Ops for one HIP device.
pub(crate) fn create_ops(info: &DeviceInfo, options: &ContextOptions) -> Result<Engine> {
    let device = device::HipDevice::new(info, &info.arch)?;
    crate::backend::gpu::create(device, options)
}

/// Compiles `source` with hiprtc for `arch` (e.g. `gfx90a`) with the backend's options
/// (`--offload-arch=<arch> -O3`) and returns the code object. Needs no AMD GPU. For tests and
/// tools; a compile failure is [`Error::Compile`] with hiprtc's log.
#[cfg(feature = "testing")]
#[doc(hidden)]
pub fn compile_for_arch(source: &str, arch: &str) -> Result<Vec<u8>> {
    let loaded = ffi::api().map_err(unavailable)?;
    let rtc = loaded
        .rtc
        .as_ref()
        .map_err(|r| unavailable(format!("hiprtc not found: {r}")))?;
    compile::compile(rtc, source, &compile::options_for(arch, &[]), arch)
}

/// `(major, minor)` of the hiprtc found, or why there is none.
#[cfg(feature = "testing")]
#[doc(hidden)]
pub fn hiprtc_version() -> Result<(i32, i32)> {
    let loaded = ffi::api().map_err(unavailable)?;
    match &loaded.rtc {
        Ok(rtc) => Ok(rtc.version()),
        Err(r) => Err(unavailable(format!("hiprtc not found: {r}"))),
    }
}

/// The HIP op set, whole or as the modules a context compiles (hiprtc input). For tests and
/// tools.
#[cfg(feature = "testing")]
#[doc(hidden)]
pub use kernels::{op_set_modules, op_set_source};

/// The HIP op set behind the HIP-to-CUDA prelude (NVRTC input). For tests.
#[cfg(all(feature = "testing", feature = "cuda"))]
#[doc(hidden)]
pub use kernels::op_set_source_for_nvrtc;

#[cfg(test)]
mod tests {
    use super::parse_arch;
    use crate::error::Error;

    #[test]
    fn arch_overrides_are_amdgpu_targets() {
        for ok in ["gfx90a", " gfx1030 ", "gfx942:sramecc+:xnack-", "gfx908"] {
            assert_eq!(parse_arch(ok).unwrap(), ok.trim());
        }
        for bad in [
            "",
            "gfx",
            "sm_90",
            "gfx90a:",
            "gfx90a:xnack",
            "gfxzz",
            "gfx90a;rm -rf",
        ] {
            match parse_arch(bad) {
                Err(Error::InvalidEnv { name, .. }) => assert_eq!(name, "RNN_HIP_ARCH"),
                r => panic!("{bad:?} gave {r:?}"),
            }
        }
    }
}
