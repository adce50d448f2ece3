//! NCCL and RCCL (the same C API), loaded at run time with `libloading`. This file is the only
//! place that names their C symbols.
//!
//! Why not cudarc's `nccl` feature: cudarc 0.19's loader looks for `libnccl.so`,
//! `libnccl.so.12`, `.11`, `.10`, `.9`, `.1` and a few Windows-style names — never
//! `libnccl.so.2`, the only name that NVIDIA's `nvidia-nccl-cu12`/`-cu13` wheels and the
//! `libnccl2` distribution package install (`libnccl.so` comes only with the `-dev` package) —
//! and it panics (`panic_no_lib_found`) when none loads. Both facts make it unusable for
//! "missing NCCL is a clear error", so the few symbols needed are bound here, as the HIP
//! runtime is in `backend/hip/ffi.rs`.

use std::ffi::{CStr, c_char, c_int, c_void};
use std::path::PathBuf;
use std::sync::OnceLock;

use libloading::Library;

use crate::dylib::{env_path, open_first, search_paths, sym};

/// `ncclResult_t`.
pub(crate) type NcclResult = c_int;
/// `ncclComm_t` (opaque pointer).
pub(crate) type Comm = *mut c_void;
/// `cudaStream_t` / `hipStream_t` (opaque pointer).
pub(crate) type Stream = *mut c_void;

pub(crate) const NCCL_SUCCESS: NcclResult = 0;
/// `ncclInProgress`: a non-blocking call has not finished (not used: communicators here are
/// blocking, but the value is not an error).
pub(crate) const NCCL_IN_PROGRESS: NcclResult = 7;
/// `ncclFloat32`.
pub(crate) const NCCL_FLOAT32: c_int = 7;
/// `ncclSum`.
pub(crate) const NCCL_SUM: c_int = 0;
/// `ncclAvg` (NCCL >= 2.10, RCCL >= 2.10).
pub(crate) const NCCL_AVG: c_int = 4;
/// `NCCL_UNIQUE_ID_BYTES`.
pub const UNIQUE_ID_BYTES: usize = 128;

/// `ncclUniqueId`: 128 opaque bytes, passed by value.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct RawUniqueId {
    pub(crate) internal: [c_char; UNIQUE_ID_BYTES],
}

type FnGetVersion = unsafe extern "C" fn(*mut c_int) -> NcclResult;
type FnGetUniqueId = unsafe extern "C" fn(*mut RawUniqueId) -> NcclResult;
type FnCommInitRank = unsafe extern "C" fn(*mut Comm, c_int, RawUniqueId, c_int) -> NcclResult;
type FnCommInitAll = unsafe extern "C" fn(*mut Comm, c_int, *const c_int) -> NcclResult;
type FnCommOp = unsafe extern "C" fn(Comm) -> NcclResult;
type FnCommGetAsyncError = unsafe extern "C" fn(Comm, *mut NcclResult) -> NcclResult;
/// `ncclAllReduce(send, recv, count, datatype, op, comm, stream)` and
/// `ncclBroadcast(send, recv, count, datatype, root, comm, stream)`: the same C types.
type FnCollective = unsafe extern "C" fn(
    *const c_void,
    *mut c_void,
    usize,
    c_int,
    c_int,
    Comm,
    Stream,
) -> NcclResult;
type FnErrorString = unsafe extern "C" fn(NcclResult) -> *const c_char;

/// Which collective library: NCCL for CUDA devices, RCCL (same API) for HIP devices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CollectiveLibrary {
    /// NVIDIA's NCCL.
    Nccl,
    /// AMD's RCCL.
    Rccl,
}

impl CollectiveLibrary {
    /// `"NCCL"` or `"RCCL"`.
    pub fn name(self) -> &'static str {
        match self {
            CollectiveLibrary::Nccl => "NCCL",
            CollectiveLibrary::Rccl => "RCCL",
        }
    }

    /// File names tried, in order (each also in the directories of [`candidates`]).
    pub(crate) fn file_names(self) -> &'static [&'static str] {
        match self {
            CollectiveLibrary::Nccl => &["libnccl.so.2", "libnccl.so"],
            CollectiveLibrary::Rccl => &["librccl.so.1", "librccl.so"],
        }
    }

    /// The environment variable naming the library file explicitly.
    pub fn path_variable(self) -> &'static str {
        match self {
            CollectiveLibrary::Nccl => "RNN_NCCL_LIBRARY",
            CollectiveLibrary::Rccl => "RNN_RCCL_LIBRARY",
        }
    }

    /// How to install the library, for error messages.
    pub(crate) fn install_hint(self) -> String {
        match self {
            CollectiveLibrary::Nccl => format!(
                "install NCCL: `pip install nvidia-nccl-cu12` (or nvidia-nccl-cu13 for a CUDA 13 \
                 driver) and add the wheel's lib folder to LD_LIBRARY_PATH (python3 -c \"import \
                 nvidia.nccl; print(nvidia.nccl.__path__[0] + '/lib')\"; a PyTorch \
                 install has it under site-packages/nvidia/nccl/lib), or the \
                 distribution package (libnccl2 from NVIDIA's CUDA repository on Debian/Ubuntu, \
                 libnccl on RHEL), or set {} to the file",
                self.path_variable()
            ),
            CollectiveLibrary::Rccl => format!(
                "install RCCL (the rccl package of ROCm, /opt/rocm/lib/librccl.so) or set {} to \
                 the file",
                self.path_variable()
            ),
        }
    }
}

/// The bound functions of one loaded NCCL or RCCL.
pub(crate) struct Api {
    pub(crate) library: CollectiveLibrary,
    /// The file that loaded.
    pub(crate) path: String,
    /// `ncclGetVersion`: e.g. 22703 for 2.27.3.
    pub(crate) version: i32,
    pub(crate) get_unique_id: FnGetUniqueId,
    pub(crate) comm_init_rank: FnCommInitRank,
    pub(crate) comm_init_all: FnCommInitAll,
    pub(crate) comm_destroy: FnCommOp,
    pub(crate) comm_abort: FnCommOp,
    pub(crate) comm_get_async_error: FnCommGetAsyncError,
    pub(crate) all_reduce: FnCollective,
    pub(crate) broadcast: FnCollective,
    error_string: FnErrorString,
    /// Keeps every pointer above valid.
    _lib: Library,
}

impl std::fmt::Debug for Api {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {} ({})",
            self.library.name(),
            version_text(self.version),
            self.path
        )
    }
}

/// `22703` -> `"2.27.3"` (NCCL's encoding since 2.9: major*10000 + minor*100 + patch).
pub(crate) fn version_text(v: i32) -> String {
    if v >= 10000 {
        format!("{}.{}.{}", v / 10000, (v % 10000) / 100, v % 100)
    } else {
        format!("{}.{}.{}", v / 1000, (v % 1000) / 100, v % 100)
    }
}

/// Candidate paths: the file named by the library's variable (alone, when set), else each file
/// name in `$NCCL_HOME/lib` (NCCL) or `$ROCM_PATH/lib`, `/opt/rocm/lib` (RCCL), then the bare
/// names for the system loader (`LD_LIBRARY_PATH`, the ld.so cache).
pub(crate) fn candidates(library: CollectiveLibrary) -> Vec<PathBuf> {
    if let Some(p) = env_path(library.path_variable()) {
        return vec![p];
    }
    let (vars, dirs): (&[&str], &[&str]) = match library {
        CollectiveLibrary::Nccl => (&["NCCL_HOME"], &[]),
        CollectiveLibrary::Rccl => (&["ROCM_PATH", "HIP_PATH"], &["/opt/rocm/lib"]),
    };
    search_paths(vars, dirs, library.file_names())
}

impl Api {
    fn load(library: CollectiveLibrary) -> Result<Self, String> {
        // NCCL and RCCL do no device work before ncclCommInit*.
        let (lib, path) = open_first(&candidates(library)).map_err(|e| {
            format!(
                "{} not found: {e}; {}",
                library.name(),
                library.install_hint()
            )
        })?;
        Self::bind(library, lib, path)
    }

    fn bind(library: CollectiveLibrary, lib: Library, path: String) -> Result<Self, String> {
        let p = path.as_str();
        // SAFETY: every type below is the C prototype of the symbol of the same name in nccl.h
        // (RCCL's rccl.h declares the same); the pointers are stored next to `lib`, which keeps
        // them valid.
        unsafe {
            let get_version: FnGetVersion = sym(&lib, "ncclGetVersion", p)?;
            let mut version = 0;
            let code = get_version(&mut version);
            if code != NCCL_SUCCESS {
                return Err(format!("{p}: ncclGetVersion failed (code {code})"));
            }
            Ok(Api {
                library,
                version,
                get_unique_id: sym(&lib, "ncclGetUniqueId", p)?,
                comm_init_rank: sym(&lib, "ncclCommInitRank", p)?,
                comm_init_all: sym(&lib, "ncclCommInitAll", p)?,
                comm_destroy: sym(&lib, "ncclCommDestroy", p)?,
                comm_abort: sym(&lib, "ncclCommAbort", p)?,
                comm_get_async_error: sym(&lib, "ncclCommGetAsyncError", p)?,
                all_reduce: sym(&lib, "ncclAllReduce", p)?,
                broadcast: sym(&lib, "ncclBroadcast", p)?,
                error_string: sym(&lib, "ncclGetErrorString", p)?,
                path,
                _lib: lib,
            })
        }
    }

    /// The library's text for a result code.
    pub(crate) fn error_text(&self, code: NcclResult) -> String {
        // SAFETY: ncclGetErrorString returns a pointer to a static NUL-terminated string for
        // every value (unknown ones included).
        let p = unsafe { (self.error_string)(code) };
        if p.is_null() {
            return format!("unknown error {code}");
        }
        // SAFETY: non-null, NUL-terminated, static (see above).
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }

    /// Whether `ncclAvg` exists (2.10 and later).
    pub(crate) fn has_avg(&self) -> bool {
        self.version >= 21000
    }
}

static NCCL: OnceLock<Result<Api, String>> = OnceLock::new();
static RCCL: OnceLock<Result<Api, String>> = OnceLock::new();

/// The loaded library, or why it cannot be loaded (library names tried and how to install it).
/// Loaded once per process.
#[cfg(feature = "nccl")]
pub(crate) fn api(library: CollectiveLibrary) -> Result<&'static Api, String> {
    let slot = match library {
        CollectiveLibrary::Nccl => &NCCL,
        CollectiveLibrary::Rccl => &RCCL,
    };
    slot.get_or_init(|| Api::load(library))
        .as_ref()
        .map_err(Clone::clone)
}

/// Without the `nccl` feature: no library is loaded.
#[cfg(not(feature = "nccl"))]
pub(crate) fn api(_: CollectiveLibrary) -> Result<&'static Api, String> {
    Err("built without the `nccl` feature".into())
}
