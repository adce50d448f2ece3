//! Tiered kernels for cold starts, as JIT compilers tier code: the op set's `tier0` family
//! (`kernels-{cu,cl}/tier0.*`) holds stand-ins that compile in a fraction of a second for the
//! f32 GEMM families, whose tensor-core and warpgroup kernels take the longest to build, and
//! copies of the other kernels a dense training step launches ([`crate::kernel::TIER0_COPIES`]:
//! the same source, so the same results). On a cold start (a background prefetch running, the
//! family's binary not in the disk cache) a GEMM launches its stand-in until its family is built,
//! and a copied kernel runs from tier 0 until its family is built for another of its kernels;
//! with the families in the disk cache tier 0 is never built. The stand-ins keep the contract of
//! the launches they replace, so results agree within the GEMM tolerance.
//!
//! Graphs never hold a stand-in: a launch while recording waits for the family instead
//! (`OpSet::tier0_for`), and the step graphs record only once every family a stand-in ran for is
//! built (`Execution::kernels_final`). A copy is its family's kernel, and graphs may hold it.

use std::ffi::OsStr;

use crate::backend_kind::BackendKind;
use crate::env_switch::Switch;
use crate::error::Result;

/// `RNN_KERNEL_TIER0`: on (empty, `1`, `on`, `true`, `yes`) uses the stand-ins and the copies on
/// cold starts with a prefetch on every backend, unset on OpenCL devices only
/// ([`TierMode::from_env`]), off (`0`, `off`, `false`, `no`) never, `force` for every launch they
/// cover, cold or warm, recorded or not (as `ContextOptions::force_tier0`, with which the
/// backend suites test them on every backend).
pub(crate) const TIER0_ENV: &str = "RNN_KERNEL_TIER0";

/// The families the stand-ins replace (the f32 GEMMs of each dialect; names a dialect lacks
/// are ignored).
pub(super) const COVERED: [&str; 3] = ["gemm", "gemm_tc", "gemm_thin"];

/// When GEMM launches use the tier-0 stand-ins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TierMode {
    /// On cold starts with a prefetch, until the family is built.
    Auto,
    Off,
    /// Always.
    Force,
}

impl TierMode {
    /// The mode `RNN_KERNEL_TIER0` (its value `value`, if set) asks for: `force`, or a switch
    /// whose on (unset, empty, `1`, `on`, ...) is [`TierMode::Auto`]; anything else is
    /// [`crate::Error::InvalidEnv`].
    pub(super) fn parse(value: Option<&OsStr>) -> Result<Self> {
        if value
            .and_then(OsStr::to_str)
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("force"))
        {
            return Ok(TierMode::Force);
        }
        let switch = Switch {
            name: TIER0_ENV,
            unset: true,
            empty: true,
            yes_no: true,
        };
        Ok(if switch.parse(value)? {
            TierMode::Auto
        } else {
            TierMode::Off
        })
    }

    /// The mode of the environment for a device of `backend`. Unset, tier 0 serves OpenCL
    /// devices only: there NVIDIA's compiler builds one program at a time, so the first step
    /// waited for the GEMM family (H200, 2026-11-26: 4.2 s to the first step with the
    /// stand-ins, 42.7 s without, the whole example the same), while under CUDA NVRTC builds
    /// the families in parallel: there the stand-ins made cold and warm starts slower (first
    /// step 6.2 s against 5.1, warm 1.37 s against 1.23), and tier 0 with its copies built
    /// slower than the families it copies (2.17 s against 1.38 for the slowest, `reduce`, H200,
    /// 2026-11-27: first step 2.92 s against 1.81). Set to on, it serves every backend.
    pub(super) fn from_env(backend: BackendKind) -> Result<Self> {
        Self::for_backend(std::env::var_os(TIER0_ENV).as_deref(), backend)
    }

    /// [`TierMode::from_env`] with `RNN_KERNEL_TIER0` set to `value` (or unset).
    fn for_backend(value: Option<&OsStr>, backend: BackendKind) -> Result<Self> {
        let mode = Self::parse(value)?;
        Ok(match (value, mode) {
            (None, TierMode::Auto) if backend != BackendKind::OpenCl => TierMode::Off,
            _ => mode,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tier0_switch_reads_auto_off_and_force() {
        let parse = |v: &str| TierMode::parse(Some(OsStr::new(v)));
        assert_eq!(TierMode::parse(None).unwrap(), TierMode::Auto);
        assert_eq!(parse("").unwrap(), TierMode::Auto);
        assert_eq!(parse(" On ").unwrap(), TierMode::Auto);
        assert_eq!(parse("off").unwrap(), TierMode::Off);
        assert_eq!(parse("0").unwrap(), TierMode::Off);
        assert_eq!(parse("FORCE").unwrap(), TierMode::Force);
        let err = parse("fast").unwrap_err();
        assert!(err.to_string().contains(TIER0_ENV), "{err}");
    }

    #[test]
    fn unset_tier0_serves_opencl_devices_only() {
        use BackendKind::{Cuda, Hip, OpenCl};
        let mode = |v: Option<&str>, b| TierMode::for_backend(v.map(OsStr::new), b).unwrap();
        assert_eq!(mode(None, Cuda), TierMode::Off);
        assert_eq!(mode(None, Hip), TierMode::Off);
        assert_eq!(mode(None, OpenCl), TierMode::Auto);
        assert_eq!(mode(Some("on"), Cuda), TierMode::Auto);
        assert_eq!(mode(Some("off"), OpenCl), TierMode::Off);
    }
}
