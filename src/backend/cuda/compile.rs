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
    /// PTX for `compute_<code>`: the driver JIT-compiles it for the device at load time.
    Ptx(u32),
}

impl Target {
    fn arch_option(self) -> String {
        match self {
            Target::Cubin(c) => format!("--gpu-architecture=sm_{c}"),
            Target::Ptx(c) => format!("--gpu-architecture=compute_{c}"),
        }
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Cubin(c) => write!(f, "cubin sm_{c}"),
            Target::Ptx(c) => write!(f, "ptx compute_{c}"),
        }
    }
}

/// The library names cudarc tries for a CUDA library, for "not found" messages.
pub(crate) fn candidates(lib: &str) -> String {
    cudarc::get_lib_name_candidates(lib).join(", ")
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

/// Compiles `source` for `target`. The result is a CUBIN, or NUL-terminated PTX text. A compile
/// failure is [`Error::Compile`] carrying NVRTC's complete log. Requires [`present`].
pub(crate) fn compile(
    source: &str,
    target: Target,
    extra: &[String],
    device: &str,
) -> Result<Vec<u8>> {
    let src = CString::new(source)
        .map_err(|_| Error::InvalidArgument("kernel source contains a NUL byte".into()))?;
    let mut options = vec![
        target.arch_option(),
        "-default-device".to_string(),
        "--std=c++17".to_string(),
    ];
    options.extend(extra.iter().cloned());
    if let Some(bad) = options.iter().find(|o| o.contains('\0')) {
        return Err(Error::InvalidArgument(format!(
            "compiler option {bad:?} contains a NUL byte"
        )));
    }
    let prog = Program(
        nvrtc::create_program(&src, Some(c"rnn_kernels.cu"))
            .map_err(|e| error::nvrtc("nvrtcCreateProgram", e))?,
    );
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
        Target::Cubin(_) => {
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
pub(crate) fn parse_sm(arch: &str) -> Option<u32> {
    arch.strip_prefix("sm_")
        .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|s| s.parse().ok())
}
