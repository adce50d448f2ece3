//! Persistent (one-launch) recurrences on OpenCL, geometry `Q` (kernels-cl/seq.cl): which devices
//! run them (the size of a grid is `ClDevice::persistent_groups`, launch.rs). OpenCL has no
//! cooperative launch, so whether every work-group of a grid runs at once is the driver's business.
//! This backend relies on it only where the rule is known: NVIDIA GPUs, whose OpenCL runs the
//! kernels of an in-order queue one at a time and starts every group of a grid no larger than the
//! SM count when each group fits an SM (the guarantee CUDA's cooperative launch checks). There the
//! op set is built with `RNN_CL_NV_PERSISTENT` and a grid may have one group per compute unit;
//! everywhere else (AMD, Intel, PoCL) the sequence ops loop their step kernels.
//! `RNN_OPENCL_PERSISTENT=0` turns it off.

use crate::device::{DeviceInfo, DeviceKind};
use crate::env_switch::Switch;
use crate::error::Result;

/// `RNN_OPENCL_PERSISTENT`: unset, empty, `1`, `on`, `true`, `yes` allow the persistent
/// kernels; `0`, `off`, `false`, `no` turn them off; anything else is an error.
const VAR: Switch = Switch {
    name: "RNN_OPENCL_PERSISTENT",
    unset: true,
    empty: true,
    yes_no: true,
};

/// Whether this process's `RNN_OPENCL_PERSISTENT` allows persistent kernels (see [`VAR`]).
pub(super) fn allowed_by_env() -> Result<bool> {
    VAR.read_env()
}

/// Whether this device runs the persistent kernels: an NVIDIA GPU (its OpenCL takes the inline
/// PTX the kernels use, and schedules as described above), not PoCL's CUDA device.
pub(super) fn supported(info: &DeviceInfo, platform: &str) -> bool {
    info.kind == DeviceKind::Gpu
        && info.vendor.to_ascii_uppercase().contains("NVIDIA")
        && platform.contains("NVIDIA")
}

/// The preprocessor line that compiles kernels-cl/seq.cl into the op set.
pub(super) const DEFINE: &str = "#define RNN_CL_NV_PERSISTENT 1\n";

#[cfg(test)]
mod tests {
    use super::VAR;
    use std::ffi::OsStr;

    #[test]
    fn the_variable_turns_persistent_kernels_off_or_is_refused() {
        assert!(VAR.parse(None).unwrap());
        for on in ["", "1", "on", "TRUE", " yes "] {
            assert!(VAR.parse(Some(OsStr::new(on))).unwrap(), "{on:?}");
        }
        for off in ["0", "off", "False", "no"] {
            assert!(!VAR.parse(Some(OsStr::new(off))).unwrap(), "{off:?}");
        }
        let err = VAR.parse(Some(OsStr::new("sometimes"))).unwrap_err();
        assert!(err.to_string().contains("RNN_OPENCL_PERSISTENT"), "{err}");
    }
}
