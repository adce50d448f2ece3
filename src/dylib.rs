//! Finding, opening and binding the C libraries this crate loads at run time with `libloading`
//! (the HIP runtime, hiprtc, ROCm SMI, NCCL and RCCL).

use std::path::{Path, PathBuf};

use libloading::Library;

/// Where to look for a library called one of `names`: each name that exists in `$VAR/lib` for
/// each of `vars` that is set, then in each of `dirs`; then the bare names, for the system
/// loader's search (`LD_LIBRARY_PATH`, the ld.so cache).
pub(crate) fn search_paths(vars: &[&str], dirs: &[&str], names: &[&str]) -> Vec<PathBuf> {
    let dirs: Vec<PathBuf> = vars
        .iter()
        .filter_map(|var| env_path(var))
        .map(|root| root.join("lib"))
        .chain(dirs.iter().map(PathBuf::from))
        .collect();
    let mut out = in_dirs(&dirs, names);
    out.extend(names.iter().map(PathBuf::from));
    out
}

/// Each of `names` that exists in one of `dirs`, in that order.
pub(crate) fn in_dirs(dirs: &[PathBuf], names: &[&str]) -> Vec<PathBuf> {
    dirs.iter()
        .flat_map(|dir| names.iter().map(move |name| dir.join(name)))
        .filter(|p| p.exists())
        .collect()
}

/// The value of `var` as a path, when it is set and not empty.
pub(crate) fn env_path(var: &str) -> Option<PathBuf> {
    std::env::var_os(var)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// Loads the library at `path`.
pub(crate) fn open(path: &Path) -> Result<Library, libloading::Error> {
    // SAFETY: loading a shared library runs its initializers; the libraries this crate loads
    // (the HIP runtime, hiprtc, ROCm SMI, NCCL, RCCL, and the tests/hip-shim fixture) are ordinary C
    // libraries whose initializers only set up internal state (no device work happens before
    // their own init calls). A file named by an `RNN_*_LIBRARY` variable is trusted like the
    // loader's search path: the user chose it.
    unsafe { Library::new(path) }
}

/// The first of `paths` that loads, and its path as text; `Err` lists each path tried with why
/// it did not load.
pub(crate) fn open_first(paths: &[PathBuf]) -> Result<(Library, String), String> {
    let mut tried = Vec::new();
    for path in paths {
        match open(path) {
            Ok(lib) => return Ok((lib, path.display().to_string())),
            Err(e) => tried.push(format!("{} ({e})", path.display())),
        }
    }
    Err(format!(
        "no library could be loaded; tried {}",
        tried.join(", ")
    ))
}

/// Looks up `name` in `lib` (the file `file`, for the error) and copies the function pointer out
/// of the `Symbol`.
///
/// # Safety
/// `T` must be the exact C signature of `name`, and the pointer must not outlive `lib`.
pub(crate) unsafe fn sym<T: Copy>(lib: &Library, name: &str, file: &str) -> Result<T, String> {
    let mut cname = name.as_bytes().to_vec();
    cname.push(0);
    // SAFETY: forwarded to the caller: `T` is the symbol's true type.
    unsafe { lib.get::<T>(&cname) }
        .map(|s| *s)
        .map_err(|e| format!("{file} lacks {name}: {e}"))
}
