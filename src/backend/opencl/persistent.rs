//! Persistent (one-launch) recurrences on OpenCL: the `Device` side of geometry `Q`
//! (kernels-cl/seq.cl). OpenCL has no cooperative launch, so whether every work-group of a
//! grid runs at once is the driver's business. This backend relies on it only where the rule
//! is known: NVIDIA GPUs, whose OpenCL runs the kernels of an in-order queue one at a time and
//! starts every group of a grid no larger than the SM count when each group fits an SM (the
//! guarantee CUDA's cooperative launch checks). There the op set is built with
//! `RNN_CL_NV_PERSISTENT` and a grid may have one group per compute unit; everywhere else (AMD,
//! Intel, PoCL) the sequence ops loop their step kernels. `RNN_OPENCL_PERSISTENT=0` turns it off.

use super::device::ClDevice;
use super::launch::ClModule;
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

impl ClDevice {
    /// How many groups of `entry` (`threads` work-items, `shared_bytes` of dynamic local
    /// memory) may form one persistent grid: one per compute unit when a group fits (the
    /// kernel's register-limited group size and the local memory left by its static use),
    /// else 0. `None` where persistent kernels are off or the op set lacks `entry`.
    pub(super) fn persistent_groups(
        &self,
        module: &ClModule,
        entry: &str,
        threads: u32,
        shared_bytes: u32,
    ) -> Option<Result<u32>> {
        if !self.persistent {
            return None;
        }
        let limits = match module.limits(entry, &self.device) {
            Err(e) => return Some(Err(e)),
            Ok(None) => return None,
            Ok(Some(l)) => l,
        };
        let (max_threads, static_local) = limits;
        let fits = threads as usize <= max_threads
            && static_local.saturating_add(u64::from(shared_bytes)) <= self.local_mem;
        if !fits {
            log::debug!(
                "{}: {entry} with {threads} work-items and {shared_bytes} bytes of local memory \
                 does not fit a compute unit (kernel limit {max_threads} work-items, \
                 {static_local} bytes of static local memory, device {} bytes)",
                self.info.id,
                self.local_mem
            );
            return Some(Ok(0));
        }
        Some(Ok(self.info.compute_units))
    }
}

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
