//! hiprtc: HIP C++ source to an AMDGPU code object.

use std::ffi::{CString, c_char};

use parking_lot::Mutex;

use crate::error::{Error, Result};

use super::ffi::{HIPRTC_SUCCESS, Program, RtcApi, RtcResult};

/// hiprtc of ROCm 5.2 crashes (SIGSEGV, seen here) when two programs compile at once in one
/// process, so every hiprtc call sequence holds this lock. Compiles are rare (the cache keeps
/// the results), so the serialization costs nothing in steady state.
static HIPRTC_LOCK: Mutex<()> = Mutex::new(());

/// Destroys the program on every exit path.
struct ProgramGuard<'a> {
    rtc: &'a RtcApi,
    prog: Program,
}

impl Drop for ProgramGuard<'_> {
    fn drop(&mut self) {
        // SAFETY: `prog` came from a successful hiprtcCreateProgram and is destroyed once, here.
        unsafe { (self.rtc.destroy_program)(&mut self.prog) };
    }
}

/// The options hiprtc gets for `arch`: the target, then `-O3`, then the caller's `extra`.
pub(crate) fn options_for(arch: &str, extra: &[String]) -> Vec<String> {
    let mut opts = vec![format!("--offload-arch={arch}"), "-O3".to_string()];
    opts.extend(extra.iter().cloned());
    opts
}

fn rtc_error(rtc: &RtcApi, code: RtcResult, call: &str, device: &str) -> Error {
    Error::Compile {
        device: device.to_string(),
        log: format!(
            "{call} failed: {} (hiprtc code {code})",
            rtc.error_text(code)
        ),
    }
}

/// Compiles `source` with `options` (complete: include the target, see [`options_for`]) and
/// returns the code object. A compile failure is [`Error::Compile`] with hiprtc's full log.
/// `device` names the target in errors.
pub(crate) fn compile(
    rtc: &RtcApi,
    source: &str,
    options: &[String],
    device: &str,
) -> Result<Vec<u8>> {
    let src = CString::new(source)
        .map_err(|_| Error::InvalidArgument("HIP kernel source contains a NUL byte".to_string()))?;
    let name = CString::new("rnn_kernels.hip").expect("static name has no NUL");
    let opts: Vec<CString> = options
        .iter()
        .map(|o| {
            CString::new(o.as_str()).map_err(|_| {
                Error::InvalidArgument(format!("hiprtc option {o:?} contains a NUL byte"))
            })
        })
        .collect::<Result<_>>()?;
    let opt_ptrs: Vec<*const c_char> = opts.iter().map(|o| o.as_ptr()).collect();
    let num_opts = i32::try_from(opt_ptrs.len())
        .map_err(|_| Error::InvalidArgument("too many hiprtc options".to_string()))?;

    // hiprtc pre-includes the HIP runtime but (ROCm 5.x) cannot find <hip/hip_runtime.h> on
    // disk, so sources written for hipcc, which include it, would not compile; an empty
    // in-memory header of that name makes them compile unchanged.
    let header_name = c"hip/hip_runtime.h";
    let header_text = c"// pre-included by hiprtc\n";
    let header_names = [header_name.as_ptr()];
    let header_texts = [header_text.as_ptr()];

    let _serial = HIPRTC_LOCK.lock();
    let mut prog: Program = std::ptr::null_mut();
    // SAFETY: `src`, `name` and the header strings are NUL-terminated and outlive the call;
    // both header arrays hold exactly one entry.
    let code = unsafe {
        (rtc.create_program)(
            &mut prog,
            src.as_ptr(),
            name.as_ptr(),
            1,
            header_texts.as_ptr(),
            header_names.as_ptr(),
        )
    };
    if code != HIPRTC_SUCCESS {
        return Err(rtc_error(rtc, code, "hiprtcCreateProgram", device));
    }
    let guard = ProgramGuard { rtc, prog };

    // SAFETY: `opt_ptrs` holds `num_opts` pointers to NUL-terminated strings owned by `opts`,
    // alive for the call; `guard.prog` is a live program.
    let compiled = unsafe { (rtc.compile_program)(guard.prog, num_opts, opt_ptrs.as_ptr()) };
    let log = program_log(&guard);
    if compiled != HIPRTC_SUCCESS {
        let log = if log.trim().is_empty() {
            format!(
                "hiprtcCompileProgram failed: {} (hiprtc code {compiled}), no log",
                rtc.error_text(compiled)
            )
        } else {
            log
        };
        return Err(Error::Compile {
            device: device.to_string(),
            log,
        });
    }
    if !log.trim().is_empty() {
        log::debug!("hiprtc log for {device}:\n{log}");
    }

    let mut size = 0usize;
    // SAFETY: `size` is a valid out-pointer; the program compiled successfully.
    let code = unsafe { (rtc.get_code_size)(guard.prog, &mut size) };
    if code != HIPRTC_SUCCESS {
        return Err(rtc_error(rtc, code, "hiprtcGetCodeSize", device));
    }
    let mut binary = vec![0u8; size];
    if size > 0 {
        // SAFETY: `binary` is writable for exactly the `size` bytes hiprtc reported.
        let code = unsafe { (rtc.get_code)(guard.prog, binary.as_mut_ptr().cast()) };
        if code != HIPRTC_SUCCESS {
            return Err(rtc_error(rtc, code, "hiprtcGetCode", device));
        }
    }
    if binary.is_empty() {
        return Err(Error::Compile {
            device: device.to_string(),
            log: format!("hiprtc produced an empty code object\n{log}"),
        });
    }
    Ok(binary)
}

/// The program's log (empty when hiprtc has none or cannot report it).
fn program_log(guard: &ProgramGuard<'_>) -> String {
    let mut size = 0usize;
    // SAFETY: `size` is a valid out-pointer; the program is alive.
    let code = unsafe { (guard.rtc.get_program_log_size)(guard.prog, &mut size) };
    if code != HIPRTC_SUCCESS || size == 0 {
        return String::new();
    }
    let mut buf = vec![0u8; size];
    // SAFETY: `buf` is writable for the `size` bytes (NUL included) hiprtc reported.
    let code = unsafe { (guard.rtc.get_program_log)(guard.prog, buf.as_mut_ptr().cast()) };
    if code != HIPRTC_SUCCESS {
        return String::new();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}
