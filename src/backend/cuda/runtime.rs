//! Whether the CUDA driver and NVRTC found here can work together: loaded, initialized, and of
//! versions whose CUBINs (and PTX) the driver accepts. Asked by the probe and by each device
//! that opens.

use cudarc::driver::result;

use super::{compile, error};
use crate::error::Result;

/// Checks that the driver library loads and initializes, and that NVRTC is present and not
/// newer than the driver; returns the driver's CUDA version (e.g. 12080).
pub(super) fn check_runtime() -> Result<i32> {
    // SAFETY: only tries to dlopen the candidate names of libcuda; loads no symbols.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return Err(error::unavailable(format!(
            "CUDA driver library not found (tried {})",
            compile::candidates("cuda")
        )));
    }
    result::init().map_err(|e| {
        error::unavailable(format!(
            "cuInit failed: {} (code {})",
            error::driver_message(&e),
            e.0 as i64
        ))
    })?;
    let mut version = 0;
    // SAFETY: valid out-pointer; the driver is loaded and initialized.
    unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut version) }
        .result()
        .map_err(|e| error::driver("cuDriverGetVersion", e))?;
    if !compile::present() {
        return Err(error::unavailable(format!(
            "NVRTC not found (tried {}); CUDA kernels cannot be compiled",
            compile::candidates("nvrtc")
        )));
    }
    let nvrtc = compile::NvrtcInfo::query()?;
    let driver_major = version / 1000;
    if nvrtc.version.0 > driver_major {
        return Err(error::unavailable(format!(
            "NVRTC {}.{} is newer than the driver (CUDA {}): the driver rejects its CUBINs; \
             use an NVRTC {driver_major}.x or update the driver",
            nvrtc.version.0,
            nvrtc.version.1,
            version_text(version)
        )));
    }
    Ok(version)
}

pub(super) fn version_text(v: i32) -> String {
    format!("{}.{}", v / 1000, (v % 1000) / 10)
}

/// Why the driver (CUDA version `driver`, e.g. 12040) cannot load PTX from NVRTC `nvrtc`
/// (`(major, minor)`), if it cannot. [`check_runtime`] compares major versions only, which is
/// right for CUBINs (minor-version compatibility), but PTX carries an ISA version tied to the
/// NVRTC release, and a driver JIT-compiles only ISA versions up to its own CUDA version: PTX
/// from a newer minor release is rejected at load (CUDA_ERROR_UNSUPPORTED_PTX_VERSION).
pub(super) fn ptx_unloadable(nvrtc: (i32, i32), driver: i32) -> Option<String> {
    let ours = (driver / 1000, (driver % 1000) / 10);
    (nvrtc > ours).then(|| {
        format!(
            "NVRTC {}.{} emits PTX newer than the driver (CUDA {}) can load; use an NVRTC of \
             at most {}.{} or update the driver",
            nvrtc.0,
            nvrtc.1,
            version_text(driver),
            ours.0,
            ours.1
        )
    })
}

#[cfg(test)]
mod tests {
    use super::ptx_unloadable;

    #[test]
    fn ptx_needs_an_nvrtc_no_newer_than_the_driver_in_major_and_minor() {
        assert!(ptx_unloadable((12, 4), 12040).is_none());
        assert!(ptx_unloadable((12, 2), 12040).is_none());
        assert!(ptx_unloadable((11, 8), 12000).is_none());
        let why = ptx_unloadable((12, 9), 12040).expect("newer minor is rejected");
        assert!(why.contains("12.9") && why.contains("12.4"), "{why}");
        assert!(ptx_unloadable((13, 0), 12090).is_some());
    }
}
