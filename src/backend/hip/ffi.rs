//! The HIP runtime and hiprtc, loaded at run time with `libloading`. This file is the only place
//! that names the C symbols; everything else calls the typed function pointers below.
//!
//! The symbol set is deliberately small and limited to functions whose signatures did not change
//! between ROCm 5.x and 6.x. `hipDeviceProp_t` changed layout in ROCm 6, so it is only read
//! through an over-sized buffer at a known offset (see [`HipApi::gcn_arch_name`]).
//!
//! Which files: `RNN_HIP_LIBRARY` names the runtime exactly (a ROCm install outside the search
//! path, or the `tests/hip-shim` fixture); hiprtc then comes from `RNN_HIPRTC_LIBRARY` when set,
//! else from a `libhiprtc` next to that runtime (ROCm >= 5.3 ships it separately), else from the
//! runtime itself (ROCm <= 5.2). Without `RNN_HIP_LIBRARY` both are searched for (see
//! [`candidates`]). A file that cannot be loaded, or lacks a required symbol, is an `Err` naming
//! it, so the backend is unavailable with that reason.
//!
//! Every symbol name this file binds is checked against the exports of the `tests/hip-shim`
//! fixture by `tests/runtime/hip_shim.rs`, which reads the string literals of this file.

use std::ffi::{CStr, c_char, c_int, c_uint, c_void};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use libloading::Library;

use crate::dylib::{env_path, in_dirs, open, open_first, search_paths, sym};

/// `hipError_t`.
pub(crate) type HipError = c_int;
/// `hiprtcResult`.
pub(crate) type RtcResult = c_int;
/// `hipStream_t` (opaque pointer).
pub(crate) type Stream = *mut c_void;
/// `hipModule_t` (opaque pointer).
pub(crate) type Module = *mut c_void;
/// `hipFunction_t` (opaque pointer).
pub(crate) type Function = *mut c_void;
/// `hiprtcProgram` (opaque pointer).
pub(crate) type Program = *mut c_void;
/// `hipGraph_t` (opaque pointer).
pub(crate) type Graph = *mut c_void;
/// `hipGraphExec_t` (opaque pointer).
pub(crate) type GraphExec = *mut c_void;
/// `hipGraphNode_t` (opaque pointer).
pub(crate) type GraphNode = *mut c_void;

pub(crate) const HIP_SUCCESS: HipError = 0;
pub(crate) const HIP_ERROR_OUT_OF_MEMORY: HipError = 2;
pub(crate) const HIP_ERROR_NO_DEVICE: HipError = 100;
pub(crate) const HIP_ERROR_INVALID_DEVICE: HipError = 101;
pub(crate) const HIPRTC_SUCCESS: RtcResult = 0;

/// `hipDeviceAttributeMultiprocessorCount`: the same value in ROCm 5.x and 6.x (the
/// CUDA-compatible block of `hipDeviceAttribute_t` only renamed unused slots in 6.0).
pub(crate) const ATTR_MULTIPROCESSOR_COUNT: c_int = 63;
/// `hipDeviceAttributeWarpSize` (same in 5.x and 6.x).
pub(crate) const ATTR_WARP_SIZE: c_int = 87;

/// Offset of `gcnArchName[256]` in the pre-6.0 `hipDeviceProp_t` (`hipDeviceProp_tR0000`),
/// computed from the ROCm 5.x header layout on x86-64.
const GCN_ARCH_NAME_OFFSET_R0000: usize = 396;
/// Offset of `gcnArchName[256]` in `hipDeviceProp_tR0600` (ROCm 6.x), x86-64.
const GCN_ARCH_NAME_OFFSET_R0600: usize = 1160;
/// Both structs are under 1.5 KiB (792 and 1472 bytes, pinned with the offsets above by the
/// static assertions of tests/hip-shim/hip_abi.h); the buffer is much larger so a runtime whose
/// struct grew further cannot write past it.
const DEVICE_PROP_BUFFER: usize = 16 * 1024;

type FnInit = unsafe extern "C" fn(c_uint) -> HipError;
type FnGetInt = unsafe extern "C" fn(*mut c_int) -> HipError;
type FnDeviceGetName = unsafe extern "C" fn(*mut c_char, c_int, c_int) -> HipError;
type FnDeviceGetAttribute = unsafe extern "C" fn(*mut c_int, c_int, c_int) -> HipError;
type FnDeviceTotalMem = unsafe extern "C" fn(*mut usize, c_int) -> HipError;
type FnErrorText = unsafe extern "C" fn(HipError) -> *const c_char;
type FnSetDevice = unsafe extern "C" fn(c_int) -> HipError;
type FnGetDeviceProperties = unsafe extern "C" fn(*mut c_void, c_int) -> HipError;
type FnMalloc = unsafe extern "C" fn(*mut *mut c_void, usize) -> HipError;
type FnFree = unsafe extern "C" fn(*mut c_void) -> HipError;
type FnMemGetInfo = unsafe extern "C" fn(*mut usize, *mut usize) -> HipError;
type FnMemcpyHtoDAsync = unsafe extern "C" fn(u64, *const c_void, usize, Stream) -> HipError;
type FnMemcpyDtoHAsync = unsafe extern "C" fn(*mut c_void, u64, usize, Stream) -> HipError;
type FnMemcpyDtoDAsync = unsafe extern "C" fn(u64, u64, usize, Stream) -> HipError;
type FnStreamCreate = unsafe extern "C" fn(*mut Stream) -> HipError;
type FnStreamOp = unsafe extern "C" fn(Stream) -> HipError;
type FnModuleLoadData = unsafe extern "C" fn(*mut Module, *const c_void) -> HipError;
type FnModuleGetFunction = unsafe extern "C" fn(*mut Function, Module, *const c_char) -> HipError;
type FnModuleLaunchKernel = unsafe extern "C" fn(
    Function,
    c_uint,
    c_uint,
    c_uint,
    c_uint,
    c_uint,
    c_uint,
    c_uint,
    Stream,
    *mut *mut c_void,
    *mut *mut c_void,
) -> HipError;
type FnModuleUnload = unsafe extern "C" fn(Module) -> HipError;
/// `hipStreamBeginCapture(stream, hipStreamCaptureMode)`; the modes are Global 0, ThreadLocal 1,
/// Relaxed 2 (CUDA's numbers).
type FnStreamBeginCapture = unsafe extern "C" fn(Stream, c_int) -> HipError;
type FnStreamEndCapture = unsafe extern "C" fn(Stream, *mut Graph) -> HipError;
/// `hipGraphInstantiate(exec, graph, errorNode, logBuffer, bufferSize)`.
type FnGraphInstantiate =
    unsafe extern "C" fn(*mut GraphExec, Graph, *mut GraphNode, *mut c_char, usize) -> HipError;
type FnGraphLaunch = unsafe extern "C" fn(GraphExec, Stream) -> HipError;
type FnGraphExecDestroy = unsafe extern "C" fn(GraphExec) -> HipError;
type FnGraphDestroy = unsafe extern "C" fn(Graph) -> HipError;
/// `hipModuleLaunchCooperativeKernel`: `hipModuleLaunchKernel`'s arguments without `extra`.
type FnModuleLaunchCooperativeKernel = unsafe extern "C" fn(
    Function,
    c_uint,
    c_uint,
    c_uint,
    c_uint,
    c_uint,
    c_uint,
    c_uint,
    Stream,
    *mut *mut c_void,
) -> HipError;
/// `hipModuleOccupancyMaxActiveBlocksPerMultiprocessor(numBlocks, f, blockSize, dynShared)`.
type FnOccupancy = unsafe extern "C" fn(*mut c_int, Function, c_int, usize) -> HipError;

type FnRtcCreateProgram = unsafe extern "C" fn(
    *mut Program,
    *const c_char,
    *const c_char,
    c_int,
    *const *const c_char,
    *const *const c_char,
) -> RtcResult;
type FnRtcCompileProgram = unsafe extern "C" fn(Program, c_int, *const *const c_char) -> RtcResult;
type FnRtcGetSize = unsafe extern "C" fn(Program, *mut usize) -> RtcResult;
type FnRtcGetBytes = unsafe extern "C" fn(Program, *mut c_char) -> RtcResult;
type FnRtcDestroyProgram = unsafe extern "C" fn(*mut Program) -> RtcResult;
type FnRtcVersion = unsafe extern "C" fn(*mut c_int, *mut c_int) -> RtcResult;
type FnRtcErrorString = unsafe extern "C" fn(RtcResult) -> *const c_char;

/// The HIP runtime entry points this crate uses. Every pointer stays valid while `_lib` lives,
/// and the struct lives for the whole process (see [`api`]).
pub(crate) struct HipApi {
    pub(crate) init: FnInit,
    pub(crate) get_device_count: FnGetInt,
    pub(crate) device_get_name: FnDeviceGetName,
    pub(crate) device_get_attribute: FnDeviceGetAttribute,
    pub(crate) device_total_mem: FnDeviceTotalMem,
    pub(crate) driver_get_version: FnGetInt,
    pub(crate) runtime_get_version: FnGetInt,
    pub(crate) get_error_name: FnErrorText,
    pub(crate) get_error_string: FnErrorText,
    pub(crate) set_device: FnSetDevice,
    /// `hipGetDevicePropertiesR0600` (ROCm 6) or `hipGetDeviceProperties` (ROCm 5), with the
    /// matching `gcnArchName` offset.
    get_device_properties: Option<(FnGetDeviceProperties, usize)>,
    pub(crate) malloc: FnMalloc,
    pub(crate) free: FnFree,
    pub(crate) mem_get_info: FnMemGetInfo,
    pub(crate) memcpy_htod_async: FnMemcpyHtoDAsync,
    pub(crate) memcpy_dtoh_async: FnMemcpyDtoHAsync,
    pub(crate) memcpy_dtod_async: FnMemcpyDtoDAsync,
    pub(crate) stream_create: FnStreamCreate,
    pub(crate) stream_synchronize: FnStreamOp,
    pub(crate) stream_destroy: FnStreamOp,
    pub(crate) module_load_data: FnModuleLoadData,
    pub(crate) module_get_function: FnModuleGetFunction,
    pub(crate) module_launch_kernel: FnModuleLaunchKernel,
    pub(crate) module_unload: FnModuleUnload,
    /// Entry points older runtimes lack; see [`HipOptional`].
    pub(crate) optional: HipOptional,
    /// Which file was loaded, for messages.
    pub(crate) path: String,
    _lib: Library,
}

/// Entry points bound when the runtime has them (`None` where a release predates them):
/// stream capture into graphs (one replayable launch of a whole training step, see
/// `graph.rs`), and cooperative launch with its occupancy query (for persistent whole-sequence
/// kernels; not called by the backend yet). Signatures as in ROCm 6's hip_runtime_api.h, all
/// present since ROCm 5.0.
pub(crate) struct HipOptional {
    /// All six graph entry points, or `None` when any is missing (the device then records no
    /// graphs and training steps run op by op).
    pub(crate) graphs: Option<GraphApi>,
    #[expect(
        dead_code,
        reason = "bound for cooperative launch, which HIP does not use yet"
    )]
    pub(crate) module_launch_cooperative_kernel: Option<FnModuleLaunchCooperativeKernel>,
    #[expect(
        dead_code,
        reason = "bound for cooperative launch, which HIP does not use yet"
    )]
    pub(crate) module_occupancy_max_active_blocks: Option<FnOccupancy>,
}

/// `hipStreamBeginCapture`, `hipStreamEndCapture`, `hipGraphInstantiate`, `hipGraphLaunch`,
/// `hipGraphExecDestroy`, `hipGraphDestroy`.
#[derive(Clone, Copy)]
pub(crate) struct GraphApi {
    pub(crate) stream_begin_capture: FnStreamBeginCapture,
    pub(crate) stream_end_capture: FnStreamEndCapture,
    pub(crate) graph_instantiate: FnGraphInstantiate,
    pub(crate) graph_launch: FnGraphLaunch,
    pub(crate) graph_exec_destroy: FnGraphExecDestroy,
    pub(crate) graph_destroy: FnGraphDestroy,
}

/// `hipStreamCaptureModeThreadLocal`.
pub(crate) const STREAM_CAPTURE_MODE_THREAD_LOCAL: c_int = 1;

/// The hiprtc entry points: from `libhiprtc` (ROCm >= 5.3) or from `libamdhip64` (ROCm <= 5.2).
pub(crate) struct RtcApi {
    pub(crate) create_program: FnRtcCreateProgram,
    pub(crate) compile_program: FnRtcCompileProgram,
    pub(crate) get_program_log_size: FnRtcGetSize,
    pub(crate) get_program_log: FnRtcGetBytes,
    pub(crate) get_code_size: FnRtcGetSize,
    pub(crate) get_code: FnRtcGetBytes,
    pub(crate) destroy_program: FnRtcDestroyProgram,
    version: FnRtcVersion,
    pub(crate) get_error_string: FnRtcErrorString,
    /// Which file the symbols came from, for messages.
    pub(crate) path: String,
    // Keeps a separately loaded libhiprtc mapped; `None` when the symbols live in libamdhip64,
    // which `HipApi` keeps mapped for the whole process.
    _lib: Option<Library>,
}

/// Both libraries, loaded once per process.
pub(crate) struct Loaded {
    /// The runtime.
    pub(crate) hip: HipApi,
    /// hiprtc, or why it could not be loaded.
    pub(crate) rtc: Result<RtcApi, String>,
}

/// The unversioned name (a development install), then each ROCm major release, newest first.
const HIP_NAMES: [&str; 4] = [
    "libamdhip64.so",
    "libamdhip64.so.7",
    "libamdhip64.so.6",
    "libamdhip64.so.5",
];
const RTC_NAMES: [&str; 4] = [
    "libhiprtc.so",
    "libhiprtc.so.7",
    "libhiprtc.so.6",
    "libhiprtc.so.5",
];
/// The HIP runtime to load, instead of searching for one.
pub(crate) const LIBRARY_ENV: &str = "RNN_HIP_LIBRARY";
/// The hiprtc library to load, instead of looking next to the runtime.
pub(crate) const RTC_LIBRARY_ENV: &str = "RNN_HIPRTC_LIBRARY";

/// Candidate paths: each name in `$ROCM_PATH/lib`, `$HIP_PATH/lib`, `/opt/rocm/lib`, then the
/// bare name for the system loader's search.
fn candidates(names: &[&str]) -> Vec<PathBuf> {
    search_paths(&["ROCM_PATH", "HIP_PATH"], &["/opt/rocm/lib"], names)
}

/// Exactly the file `var` names.
fn open_env(var: &str, path: &Path) -> Result<(Library, String), String> {
    open(path)
        .map(|lib| (lib, path.display().to_string()))
        .map_err(|e| format!("{var}={} could not be loaded: {e}", path.display()))
}

/// [`sym`] for an entry point older runtimes may lack: `None` when absent.
///
/// # Safety
/// As for [`sym`].
unsafe fn opt<T: Copy>(lib: &Library, name: &str) -> Option<T> {
    // SAFETY: forwarded to the caller.
    unsafe { sym(lib, name, "") }.ok()
}

impl HipApi {
    /// The runtime `RNN_HIP_LIBRARY` names, else the first one found.
    fn load() -> Result<Self, String> {
        let (lib, path) = match env_path(LIBRARY_ENV) {
            Some(p) => open_env(LIBRARY_ENV, &p)?,
            None => open_first(&candidates(&HIP_NAMES))
                .map_err(|e| format!("HIP runtime not found: {e}"))?,
        };
        let p = path.as_str();
        // SAFETY: every type below is the C prototype of the symbol of the same name in
        // hip_runtime_api.h (unchanged from ROCm 5.0 to 6.x); the pointers are stored next to
        // `lib`, which keeps them valid.
        unsafe {
            let get_device_properties = match sym(&lib, "hipGetDevicePropertiesR0600", p) {
                Ok(f) => Some((f, GCN_ARCH_NAME_OFFSET_R0600)),
                Err(_) => sym(&lib, "hipGetDeviceProperties", p)
                    .ok()
                    .map(|f| (f, GCN_ARCH_NAME_OFFSET_R0000)),
            };
            let graphs = (|| {
                Some(GraphApi {
                    stream_begin_capture: opt(&lib, "hipStreamBeginCapture")?,
                    stream_end_capture: opt(&lib, "hipStreamEndCapture")?,
                    graph_instantiate: opt(&lib, "hipGraphInstantiate")?,
                    graph_launch: opt(&lib, "hipGraphLaunch")?,
                    graph_exec_destroy: opt(&lib, "hipGraphExecDestroy")?,
                    graph_destroy: opt(&lib, "hipGraphDestroy")?,
                })
            })();
            let optional = HipOptional {
                graphs,
                module_launch_cooperative_kernel: opt(&lib, "hipModuleLaunchCooperativeKernel"),
                module_occupancy_max_active_blocks: opt(
                    &lib,
                    "hipModuleOccupancyMaxActiveBlocksPerMultiprocessor",
                ),
            };
            Ok(HipApi {
                init: sym(&lib, "hipInit", p)?,
                get_device_count: sym(&lib, "hipGetDeviceCount", p)?,
                device_get_name: sym(&lib, "hipDeviceGetName", p)?,
                device_get_attribute: sym(&lib, "hipDeviceGetAttribute", p)?,
                device_total_mem: sym(&lib, "hipDeviceTotalMem", p)?,
                driver_get_version: sym(&lib, "hipDriverGetVersion", p)?,
                runtime_get_version: sym(&lib, "hipRuntimeGetVersion", p)?,
                get_error_name: sym(&lib, "hipGetErrorName", p)?,
                get_error_string: sym(&lib, "hipGetErrorString", p)?,
                set_device: sym(&lib, "hipSetDevice", p)?,
                get_device_properties,
                malloc: sym(&lib, "hipMalloc", p)?,
                free: sym(&lib, "hipFree", p)?,
                mem_get_info: sym(&lib, "hipMemGetInfo", p)?,
                memcpy_htod_async: sym(&lib, "hipMemcpyHtoDAsync", p)?,
                memcpy_dtoh_async: sym(&lib, "hipMemcpyDtoHAsync", p)?,
                memcpy_dtod_async: sym(&lib, "hipMemcpyDtoDAsync", p)?,
                stream_create: sym(&lib, "hipStreamCreate", p)?,
                stream_synchronize: sym(&lib, "hipStreamSynchronize", p)?,
                stream_destroy: sym(&lib, "hipStreamDestroy", p)?,
                module_load_data: sym(&lib, "hipModuleLoadData", p)?,
                module_get_function: sym(&lib, "hipModuleGetFunction", p)?,
                module_launch_kernel: sym(&lib, "hipModuleLaunchKernel", p)?,
                module_unload: sym(&lib, "hipModuleUnload", p)?,
                optional,
                path,
                _lib: lib,
            })
        }
    }

    /// `hipGetErrorName` and `hipGetErrorString` of `code`.
    pub(crate) fn error_text(&self, code: HipError) -> (String, String) {
        // SAFETY: both functions accept any value and return a pointer to a static
        // NUL-terminated string (or null, handled by `c_text`).
        let (name, text) = unsafe { ((self.get_error_name)(code), (self.get_error_string)(code)) };
        (c_text(name), c_text(text))
    }

    /// The device's `gcnArchName` (e.g. `gfx90a:sramecc+:xnack-`).
    ///
    /// `hipDeviceProp_t` is written into a 16 KiB zeroed buffer (far larger than either known
    /// layout) by the entry point that matches the layout whose offset is used: the R0600 symbol
    /// with the ROCm 6 offset, else the pre-6 symbol with the ROCm 5 offset. The string found
    /// there must look like an arch name (`gfx` + printable ASCII, NUL-terminated); if it does not
    /// (an unknown future layout) the buffer is scanned for the one NUL-delimited string that
    /// starts with `gfx`. Returns `None` when neither works; callers then fail with a message.
    pub(crate) fn gcn_arch_name(&self, device: c_int) -> Result<Option<String>, HipError> {
        let Some((get, offset)) = self.get_device_properties else {
            return Ok(None);
        };
        let mut buf = vec![0u8; DEVICE_PROP_BUFFER];
        // SAFETY: `buf` is writable for 16 KiB, more than `sizeof(hipDeviceProp_t)` of any ROCm
        // release (912 bytes in 5.x, 1472 in 6.x), so the runtime cannot write past it.
        let code = unsafe { get(buf.as_mut_ptr().cast(), device) };
        if code != HIP_SUCCESS {
            return Err(code);
        }
        if let Some(s) = arch_at(&buf, offset) {
            return Ok(Some(s));
        }
        let found: Vec<String> = (0..buf.len())
            .filter(|&i| i == 0 || buf[i - 1] == 0)
            .filter_map(|i| arch_at(&buf, i))
            .collect();
        Ok(match found.as_slice() {
            [one] => Some(one.clone()),
            _ => None,
        })
    }
}

/// A NUL-terminated `gfx...` string of printable ASCII at `offset`, if there is one.
fn arch_at(buf: &[u8], offset: usize) -> Option<String> {
    let tail = buf.get(offset..)?;
    let end = tail.iter().take(256).position(|&b| b == 0)?;
    let s = &tail[..end];
    (s.starts_with(b"gfx") && s.len() > 3 && s.iter().all(|b| b.is_ascii_graphic()))
        .then(|| String::from_utf8_lossy(s).into_owned())
}

impl RtcApi {
    /// hiprtc from `RNN_HIPRTC_LIBRARY`; else from a libhiprtc found (next to the runtime when
    /// `RNN_HIP_LIBRARY` chose it, so a runtime and a hiprtc of different ROCm releases are never
    /// paired; by the usual search otherwise); else from libamdhip64 itself (ROCm 5.2 and older
    /// ship hiprtc inside the runtime).
    fn load(hip: &HipApi) -> Result<Self, String> {
        if let Some(p) = env_path(RTC_LIBRARY_ENV) {
            let (lib, path) = open_env(RTC_LIBRARY_ENV, &p)?;
            return Self::bind(Some(lib), path, hip);
        }
        let separate = match env_path(LIBRARY_ENV) {
            Some(runtime) => {
                let dir = runtime.parent().map(Path::to_path_buf).unwrap_or_default();
                open_first(&in_dirs(&[dir], &RTC_NAMES))
            }
            None => open_first(&candidates(&RTC_NAMES)),
        };
        match separate {
            Ok((lib, path)) => Self::bind(Some(lib), path, hip),
            Err(not_found) => Self::bind(None, hip.path.clone(), hip)
                .map_err(|lacks| format!("{lacks}; and no separate hiprtc: {not_found}")),
        }
    }

    /// The hiprtc symbols of `lib`, or of the runtime's library when `lib` is `None`.
    fn bind(lib: Option<Library>, path: String, hip: &HipApi) -> Result<Self, String> {
        let source: &Library = lib.as_ref().unwrap_or(&hip._lib);
        let p = path.as_str();
        // SAFETY: each type is the C prototype from hiprtc.h of the symbol of the same name; the
        // library that holds them is kept mapped by `_lib` or (for libamdhip64) by the
        // process-lifetime `HipApi`.
        unsafe {
            Ok(RtcApi {
                create_program: sym(source, "hiprtcCreateProgram", p)?,
                compile_program: sym(source, "hiprtcCompileProgram", p)?,
                get_program_log_size: sym(source, "hiprtcGetProgramLogSize", p)?,
                get_program_log: sym(source, "hiprtcGetProgramLog", p)?,
                get_code_size: sym(source, "hiprtcGetCodeSize", p)?,
                get_code: sym(source, "hiprtcGetCode", p)?,
                destroy_program: sym(source, "hiprtcDestroyProgram", p)?,
                version: sym(source, "hiprtcVersion", p)?,
                get_error_string: sym(source, "hiprtcGetErrorString", p)?,
                path,
                _lib: lib,
            })
        }
    }

    /// `(major, minor)` from `hiprtcVersion`.
    pub(crate) fn version(&self) -> (i32, i32) {
        let (mut major, mut minor) = (0, 0);
        // SAFETY: both out-pointers are valid for one `int` each.
        unsafe { (self.version)(&mut major, &mut minor) };
        (major, minor)
    }

    /// `hiprtcGetErrorString` of `code`.
    pub(crate) fn error_text(&self, code: RtcResult) -> String {
        // SAFETY: accepts any value; returns a static NUL-terminated string or null.
        c_text(unsafe { (self.get_error_string)(code) })
    }
}

/// Copies a C string the runtime owns; null becomes an empty string.
fn c_text(p: *const c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: non-null pointers handed to this function come from the HIP/hiprtc error-text
    // functions, which return static NUL-terminated strings.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

// SAFETY: the structs hold plain function pointers into libraries that are never unloaded while
// they live; the HIP runtime and hiprtc are thread-safe (documented by AMD for all API calls).
unsafe impl Send for HipApi {}
// SAFETY: as above; no interior mutability on the Rust side.
unsafe impl Sync for HipApi {}
// SAFETY: as above.
unsafe impl Send for RtcApi {}
// SAFETY: as above.
unsafe impl Sync for RtcApi {}

/// The libraries, loaded on first use and kept for the life of the process (unloading the HIP
/// runtime while streams or modules exist is undefined). `Err` says which files were tried, or
/// which file could not be used and why.
pub(crate) fn api() -> Result<&'static Loaded, String> {
    static LOADED: OnceLock<Result<Loaded, String>> = OnceLock::new();
    LOADED
        .get_or_init(|| {
            let hip = HipApi::load()?;
            let rtc = RtcApi::load(&hip);
            Ok(Loaded { hip, rtc })
        })
        .as_ref()
        .map_err(Clone::clone)
}
