//! NVRTC: CUDA C++ to a CUBIN for the device's exact architecture (or, when this NVRTC cannot
//! emit code for it, PTX for the newest virtual architecture it has that the device runs).

use std::ffi::{CString, c_char};

use cudarc::nvrtc::result as nvrtc;
use cudarc::nvrtc::sys;

use super::error;
use crate::error::{Error, Result};

/// What a compile produces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Target {
    /// Machine code for `sm_<code>`: loads only on that architecture, no JIT.
    Cubin(u32),
    /// Machine code for `sm_<code>a`, the architecture-specific target with the features that
    /// only that architecture has (sm_90a: warpgroup MMA, `__CUDA_ARCH_FEAT_SM90_ALL`).
    CubinArchSpecific(u32),
    /// PTX for `compute_<code>`: the driver JIT-compiles it for the device at load time.
    Ptx(u32),
}

impl Target {
    /// The architecture number (`90` for sm_90 and compute_90).
    pub(crate) fn code(self) -> u32 {
        match self {
            Target::Cubin(c) | Target::CubinArchSpecific(c) | Target::Ptx(c) => c,
        }
    }

    fn arch_option(self) -> String {
        match self {
            Target::Cubin(c) => format!("--gpu-architecture=sm_{c}"),
            Target::CubinArchSpecific(c) => format!("--gpu-architecture=sm_{c}a"),
            Target::Ptx(c) => format!("--gpu-architecture=compute_{c}"),
        }
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Cubin(c) => write!(f, "cubin sm_{c}"),
            Target::CubinArchSpecific(c) => write!(f, "cubin sm_{c}a"),
            Target::Ptx(c) => write!(f, "ptx compute_{c}"),
        }
    }
}

/// The library names cudarc tries for a CUDA library, for "not found" messages.
pub(crate) fn candidates(lib: &str) -> String {
    unique_in_order(cudarc::get_lib_name_candidates(lib)).join(", ")
}

/// `names` without repeats, first occurrence kept: cudarc's list names `libcuda.so.12` twice
/// when the version it was built for is 12.
fn unique_in_order(names: Vec<String>) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    names
        .into_iter()
        .filter(|n| seen.insert(n.clone()))
        .collect()
}

/// Whether an NVRTC library can be opened. Must be true before any other function here runs:
/// cudarc's loader panics when the library is absent.
pub(crate) fn present() -> bool {
    // SAFETY: only tries to dlopen the candidate names; loads no symbols.
    unsafe { sys::is_culib_present() }
}

fn has_symbol(name: &str) -> bool {
    // SAFETY: `present()` was checked by every caller, so `culib()` finds the library instead of
    // panicking; looking a symbol up has no side effects.
    unsafe {
        sys::culib()
            .get::<unsafe extern "C" fn()>(name.as_bytes())
            .is_ok()
    }
}

/// Facts about the NVRTC found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NvrtcInfo {
    /// `(major, minor)`.
    pub version: (i32, i32),
    /// Real architectures it compiles for (`90` for sm_90); empty when this NVRTC cannot say.
    pub archs: Vec<u32>,
    /// Whether it can emit CUBIN (`nvrtcGetCUBIN`, NVRTC 11.1+).
    pub cubin: bool,
}

impl NvrtcInfo {
    /// Queries the loaded NVRTC. Requires [`present`].
    pub fn query() -> Result<Self> {
        let (mut major, mut minor) = (0, 0);
        // SAFETY: both out-pointers are valid for writes; the library is loaded (`present`).
        unsafe { sys::nvrtcVersion(&mut major, &mut minor) }
            .result()
            .map_err(|e| error::nvrtc("nvrtcVersion", e))?;
        let mut archs = Vec::new();
        if has_symbol("nvrtcGetNumSupportedArchs") && has_symbol("nvrtcGetSupportedArchs") {
            let mut n = 0;
            // SAFETY: valid out-pointer.
            unsafe { sys::nvrtcGetNumSupportedArchs(&mut n) }
                .result()
                .map_err(|e| error::nvrtc("nvrtcGetNumSupportedArchs", e))?;
            let mut list = vec![0i32; n.max(0) as usize];
            // SAFETY: `list` holds exactly the number of entries NVRTC just reported.
            unsafe { sys::nvrtcGetSupportedArchs(list.as_mut_ptr()) }
                .result()
                .map_err(|e| error::nvrtc("nvrtcGetSupportedArchs", e))?;
            archs = list
                .into_iter()
                .filter(|&a| a > 0)
                .map(|a| a as u32)
                .collect();
            archs.sort_unstable();
        }
        let cubin = has_symbol("nvrtcGetCUBIN") && has_symbol("nvrtcGetCUBINSize");
        Ok(NvrtcInfo {
            version: (major, minor),
            archs,
            cubin,
        })
    }

    /// What to build for a device of compute capability `cc` (e.g. 90), or `None` when this
    /// NVRTC has no target the device can run.
    pub fn target_for(&self, cc: u32) -> Option<Target> {
        if self.archs.is_empty() {
            // Older NVRTC without the query: trust it knows the device.
            return Some(if self.cubin {
                Target::Cubin(cc)
            } else {
                Target::Ptx(cc)
            });
        }
        if self.cubin && self.archs.contains(&cc) {
            // sm_90a (NVRTC 12.0+) is sm_90 plus the Hopper-only instructions the op set's
            // warpgroup GEMM uses; its CUBIN loads only on compute capability 9.0, which is this
            // device.
            if cc == 90 && self.version.0 >= 12 {
                return Some(Target::CubinArchSpecific(cc));
            }
            return Some(Target::Cubin(cc));
        }
        // PTX for an older virtual architecture runs on newer devices (JIT at load).
        self.archs
            .iter()
            .copied()
            .filter(|&a| a <= cc)
            .max()
            .map(Target::Ptx)
    }
}

struct Program(sys::nvrtcProgram);

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: the program came from nvrtcCreateProgram and is destroyed exactly once here.
        if let Err(e) = unsafe { nvrtc::destroy_program(self.0) } {
            log::warn!("nvrtcDestroyProgram failed: {}", error::nvrtc_message(e));
        }
    }
}

fn bytes(v: Vec<c_char>) -> Vec<u8> {
    v.into_iter().map(|c| c as u8).collect()
}

/// An in-memory header NVRTC resolves `#include <name>` to, instead of searching the disk.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Header<'a> {
    /// The name as the source spells it in `#include <...>`.
    pub name: &'a str,
    /// The header's text.
    pub text: &'a str,
}

/// What NVRTC sees besides the source: in-memory headers, and those of them to include before
/// the source's first line (`--pre-include`), as hiprtc does with the HIP runtime header.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Environment<'a> {
    pub headers: &'a [Header<'a>],
    pub pre_include: &'a [&'a str],
}

/// The HIP-to-CUDA prelude as the in-memory `hip/hip_runtime.h`.
const HIP_HEADERS: [Header<'static>; 1] = [Header {
    name: crate::backend::hip::kernels::NVRTC_RUNTIME_HEADER,
    text: crate::backend::hip::kernels::NVRTC_PRELUDE,
}];
const HIP_PRE_INCLUDE: [&str; 1] = [crate::backend::hip::kernels::NVRTC_RUNTIME_HEADER];

/// How NVRTC compiles a HIP source: the prelude is the in-memory `hip/hip_runtime.h`, so a HIP
/// source that includes it compiles unchanged, and it is pre-included, as hiprtc pre-includes
/// the HIP runtime, so one that does not include it compiles too. The prelude has an include
/// guard, so the op set (which inlines it) sees it once.
pub(crate) fn hip_environment() -> Environment<'static> {
    Environment {
        headers: &HIP_HEADERS,
        pre_include: &HIP_PRE_INCLUDE,
    }
}

/// A short fingerprint of [`hip_environment`] for cache keys.
pub(crate) fn hip_environment_identity() -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(crate::backend::hip::kernels::NVRTC_PRELUDE.as_bytes());
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("hip prelude {hex}")
}

fn c_string(text: &str, what: &str) -> Result<CString> {
    CString::new(text).map_err(|_| Error::InvalidArgument(format!("{what} contains a NUL byte")))
}

/// Compiles `source` for `target`. The result is a CUBIN, or NUL-terminated PTX text. A compile
/// failure is [`Error::Compile`] carrying NVRTC's complete log. Requires [`present`].
pub(crate) fn compile(
    source: &str,
    target: Target,
    extra: &[String],
    env: Environment<'_>,
    device: &str,
) -> Result<Vec<u8>> {
    let src = c_string(source, "kernel source")?;
    let mut options = vec![
        target.arch_option(),
        "-default-device".to_string(),
        "--std=c++17".to_string(),
    ];
    options.extend(env.pre_include.iter().map(|h| format!("--pre-include={h}")));
    options.extend(extra.iter().cloned());
    if let Some(bad) = options.iter().find(|o| o.contains('\0')) {
        return Err(Error::InvalidArgument(format!(
            "compiler option {bad:?} contains a NUL byte"
        )));
    }
    let names = env
        .headers
        .iter()
        .map(|h| c_string(h.name, "header name"))
        .collect::<Result<Vec<_>>>()?;
    let texts = env
        .headers
        .iter()
        .map(|h| c_string(h.text, "header text"))
        .collect::<Result<Vec<_>>>()?;
    let name_ptrs: Vec<*const c_char> = names.iter().map(|c| c.as_ptr()).collect();
    let text_ptrs: Vec<*const c_char> = texts.iter().map(|c| c.as_ptr()).collect();
    let count = i32::try_from(env.headers.len())
        .map_err(|_| Error::InvalidArgument("too many in-memory headers".into()))?;
    let mut raw = std::mem::MaybeUninit::uninit();
    // SAFETY: every pointer is a NUL-terminated string owned by `src`, `names` or `texts`, which
    // outlive the call (NVRTC copies them); both arrays hold exactly `count` entries, and null
    // arrays are never passed with a non-zero count.
    unsafe {
        sys::nvrtcCreateProgram(
            raw.as_mut_ptr(),
            src.as_ptr(),
            c"rnn_kernels.cu".as_ptr(),
            count,
            if count == 0 {
                std::ptr::null()
            } else {
                text_ptrs.as_ptr()
            },
            if count == 0 {
                std::ptr::null()
            } else {
                name_ptrs.as_ptr()
            },
        )
    }
    .result()
    .map_err(|e| error::nvrtc("nvrtcCreateProgram", e))?;
    // SAFETY: nvrtcCreateProgram succeeded, so it wrote the program handle.
    let prog = Program(unsafe { raw.assume_init() });
    // SAFETY: `prog` is a live program; the options were checked for interior NULs above, so
    // cudarc's CString conversion cannot fail.
    let compiled = unsafe { nvrtc::compile_program(prog.0, &options) };
    // SAFETY: live program; the log exists after a compile attempt, successful or not.
    let log = unsafe { nvrtc::get_program_log(prog.0) }
        .map(|l| {
            String::from_utf8_lossy(&bytes(l))
                .trim_end_matches('\0')
                .to_string()
        })
        .unwrap_or_default();
    if let Err(e) = compiled {
        return Err(Error::Compile {
            device: device.to_string(),
            log: format!(
                "NVRTC {} for {target} (options: {}):\n{log}",
                error::nvrtc_message(e),
                options.join(" ")
            ),
        });
    }
    if !log.trim().is_empty() {
        log::debug!("NVRTC log for {device} ({target}):\n{log}");
    }
    match target {
        Target::Cubin(_) | Target::CubinArchSpecific(_) => {
            let mut size = 0usize;
            // SAFETY: live, successfully compiled program; valid out-pointer.
            unsafe { sys::nvrtcGetCUBINSize(prog.0, &mut size) }
                .result()
                .map_err(|e| error::nvrtc("nvrtcGetCUBINSize", e))?;
            let mut out = vec![0u8; size];
            // SAFETY: `out` has exactly the size NVRTC reported for the CUBIN.
            unsafe { sys::nvrtcGetCUBIN(prog.0, out.as_mut_ptr().cast()) }
                .result()
                .map_err(|e| error::nvrtc("nvrtcGetCUBIN", e))?;
            Ok(out)
        }
        Target::Ptx(_) => {
            // SAFETY: live, successfully compiled program. The text includes its final NUL,
            // which cuModuleLoadData needs.
            let ptx =
                unsafe { nvrtc::get_ptx(prog.0) }.map_err(|e| error::nvrtc("nvrtcGetPTX", e))?;
            Ok(bytes(ptx))
        }
    }
}

/// Parses `sm_XY` into the number `XY`.
#[cfg(feature = "testing")]
pub(crate) fn parse_sm(arch: &str) -> Option<u32> {
    arch.strip_prefix("sm_")
        .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|s| s.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn library_candidates_are_listed_once_each() {
        let listed = candidates("cuda");
        let names: Vec<&str> = listed.split(", ").collect();
        let unique: std::collections::HashSet<&str> = names.iter().copied().collect();
        assert_eq!(names.len(), unique.len(), "repeated names in {listed}");
        assert!(
            cudarc::get_lib_name_candidates("cuda").len() > names.len(),
            "cudarc's own list has repeats this must remove"
        );
        assert!(names.contains(&"libcuda.so"), "{listed}");
    }

    #[test]
    fn hopper_gets_the_arch_specific_cubin_from_nvrtc_12() {
        let info = |version, archs: &[u32]| NvrtcInfo {
            version,
            archs: archs.to_vec(),
            cubin: true,
        };
        let nvrtc12 = info((12, 6), &[75, 80, 86, 89, 90]);
        assert_eq!(nvrtc12.target_for(90), Some(Target::CubinArchSpecific(90)));
        assert_eq!(nvrtc12.target_for(80), Some(Target::Cubin(80)));
        assert_eq!(
            Target::CubinArchSpecific(90).arch_option(),
            "--gpu-architecture=sm_90a"
        );
        // NVRTC 11.8 knows sm_90 but not sm_90a; a newer device gets PTX it can JIT.
        assert_eq!(
            info((11, 8), &[80, 90]).target_for(90),
            Some(Target::Cubin(90))
        );
        assert_eq!(nvrtc12.target_for(100), Some(Target::Ptx(90)));
    }
}
