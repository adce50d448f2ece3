//! The kernel cache shared by every GPU backend: compiled binaries on disk, keyed by everything
//! that decides the binary (see DESIGN.md, "Kernels and the cache").
//!
//! The cache never makes a compile fail: a missing, unreadable, corrupt or driver-rejected entry
//! is deleted (with a warning) and the kernel rebuilt; an entry that failed to load for a
//! transient reason (out of memory, a context error) is kept and the kernel rebuilt. A
//! directory that cannot be written (permissions, read-only file system, not a directory) makes
//! the cache read-only for the rest of the process, with one warning; other write failures
//! (a full disk) only skip that entry, with one warning per process.
//!
//! The directory is created private (0700, entries 0600), and a directory another user owns,
//! or that its group or others may write to, is not used at all (`trust`): the binaries are
//! run on the GPU, and a checksum proves integrity, not origin.

mod config;
mod entry;
mod key;
mod rejection;
mod trust;

use std::collections::HashSet;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use crate::error::{Error, Result};
use crate::fsutil::FileMode;
use rejection::is_binary_rejection;

pub use config::CacheEnv;
pub use key::CacheKey;

/// Size and entry count of the on-disk cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CacheStats {
    /// Number of cached binaries.
    pub entries: usize,
    /// Total bytes on disk.
    pub bytes: u64,
}

/// The on-disk kernel cache: `$RNN_CACHE_DIR`, else `$XDG_CACHE_HOME/rnn`, else `~/.cache/rnn`;
/// `RNN_CACHE=off` disables it.
///
/// Cheap to create and clone: it holds only the directory. Safe to share between threads and
/// between processes using the same directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelCache {
    dir: Option<PathBuf>,
}

/// Directories found unwritable in this process: writes are not retried there, and each is
/// warned about once (not once per kernel).
static UNWRITABLE: Mutex<Option<HashSet<PathBuf>>> = Mutex::new(None);

/// Records that `dir` cannot be written; true the first time (the caller then warns).
fn mark_unwritable(dir: &Path) -> bool {
    let mut set = UNWRITABLE.lock().unwrap_or_else(PoisonError::into_inner);
    set.get_or_insert_with(HashSet::new)
        .insert(dir.to_path_buf())
}

/// Whether a transient write failure was already warned about in this process.
static WRITE_FAILURE_WARNED: AtomicBool = AtomicBool::new(false);

/// True for failures that will not go away while the process runs: the directory cannot be
/// written at all. Anything else (no space left, an interrupted write) may succeed next time.
fn is_permanent_write_failure(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::PermissionDenied
            | io::ErrorKind::ReadOnlyFilesystem
            | io::ErrorKind::NotADirectory
    )
}

/// True when a read found nothing there: no such file, or a path under a regular file (which
/// can never hold entries). Both are a plain miss, not a failure.
fn is_absent(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
    )
}

fn is_unwritable(dir: &Path) -> bool {
    let set = UNWRITABLE.lock().unwrap_or_else(PoisonError::into_inner);
    set.as_ref().is_some_and(|s| s.contains(dir))
}

/// Temp files older than this are leftovers of a crashed writer; [`KernelCache::clear`] removes
/// them. Younger ones may belong to a process writing right now.
const STALE_TEMP: Duration = Duration::from_secs(600);

impl KernelCache {
    /// The cache as the environment configures it (see [`CacheEnv`] for the variables).
    ///
    /// This cannot fail: an invalid `RNN_CACHE` value is logged as a warning (once per
    /// process) and the cache stays on, since a typo there should not stop training. Use
    /// [`KernelCache::from_cache_env`] to get the error instead.
    pub fn from_env() -> Self {
        let env = CacheEnv::current();
        let on = config::enabled(env.cache.as_ref()).unwrap_or_else(|e| {
            config::warn_invalid_once(&e);
            true
        });
        KernelCache {
            dir: on.then(|| config::directory(&env)).flatten(),
        }
    }

    /// The cache for the given variable values. `RNN_CACHE` must be unset, empty, or one of
    /// `on`, `off`, `1`, `0`, `true`, `false` (any case); anything else is
    /// [`Error::InvalidEnv`]. With no usable directory variable the disk cache is off.
    pub fn from_cache_env(env: &CacheEnv) -> Result<Self> {
        let on = config::enabled(env.cache.as_ref())?;
        Ok(KernelCache {
            dir: on.then(|| config::directory(env)).flatten(),
        })
    }

    /// A cache in `dir` (created on first store).
    pub fn at(dir: impl Into<PathBuf>) -> Self {
        KernelCache {
            dir: Some(dir.into()),
        }
    }

    /// No disk cache: every [`KernelCache::get_or_build`] builds.
    pub fn disabled() -> Self {
        KernelCache { dir: None }
    }

    /// The cache directory, or `None` when the disk cache is off.
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// Where the entry for `key` lives, or `None` when the disk cache is off.
    pub fn entry_path(&self, key: &CacheKey<'_>) -> Option<PathBuf> {
        self.dir
            .as_ref()
            .map(|d| d.join(entry::file_name(&key.hex())))
    }

    /// Whether an entry for `key` is on disk (a look at the file, not at what it holds): a
    /// cheap guess at whether [`KernelCache::get_or_build`] will load rather than build.
    pub fn contains(&self, key: &CacheKey<'_>) -> bool {
        self.entry_path(key).is_some_and(|p| p.is_file())
    }

    /// The paths of this cache's entries; empty when the directory does not exist.
    fn entries(&self) -> Result<Vec<(PathBuf, fs::Metadata)>> {
        let Some(dir) = &self.dir else {
            return Ok(Vec::new());
        };
        let read = match fs::read_dir(dir) {
            Ok(r) => r,
            // Nothing stored yet, or a path that can never hold entries.
            Err(e) if is_absent(&e) => return Ok(Vec::new()),
            Err(e) => return Err(Error::io(dir, e)),
        };
        let mut out = Vec::new();
        for item in read {
            let item = item.map_err(|e| Error::io(dir, e))?;
            let name = item.file_name();
            if !name.to_str().is_some_and(entry::is_entry_name) {
                continue;
            }
            let path = item.path();
            match item.metadata() {
                Ok(m) if m.is_file() => out.push((path, m)),
                Ok(_) => {}
                // Removed by another process between listing and stat.
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::io(&path, e)),
            }
        }
        Ok(out)
    }

    /// Entries and bytes on disk (zero when the cache is off or the directory does not exist).
    pub fn stats(&self) -> Result<CacheStats> {
        let entries = self.entries()?;
        Ok(CacheStats {
            entries: entries.len(),
            bytes: entries.iter().map(|(_, m)| m.len()).sum(),
        })
    }

    /// Deletes every entry; returns how many were removed. Only this cache's own files are
    /// touched: entries, and temp files that a crashed writer left behind more than ten minutes
    /// ago. Anything else in the directory stays.
    pub fn clear(&self) -> Result<usize> {
        let mut removed = 0;
        for (path, _) in self.entries()? {
            match fs::remove_file(&path) {
                Ok(()) => removed += 1,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::io(&path, e)),
            }
        }
        if let Some(dir) = &self.dir {
            self.remove_stale_temps(dir);
        }
        log::debug!("kernel cache: cleared {removed} entries");
        Ok(removed)
    }

    fn remove_stale_temps(&self, dir: &Path) {
        let Ok(read) = fs::read_dir(dir) else { return };
        let now = SystemTime::now();
        for item in read.flatten() {
            if !item.file_name().to_str().is_some_and(entry::is_temp_name) {
                continue;
            }
            let stale = item
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| now.duration_since(t).ok())
                .is_some_and(|age| age > STALE_TEMP);
            if stale {
                let _ = fs::remove_file(item.path());
            }
        }
    }

    /// Returns the module for `key`: loaded from disk when a valid entry exists, else built and
    /// stored.
    ///
    /// `build` compiles and returns the binary with the loaded module; its error (a compile
    /// error) is returned as is. `load` turns a stored binary back into a module; when it fails
    /// `build` runs, and the entry is deleted first if the error rejects the binary itself (a
    /// driver's invalid-image status, [`Error::Compile`] or [`Error::InvalidData`]) rather than
    /// a transient failure such as [`Error::OutOfMemory`]. Disk problems are logged, never
    /// returned.
    pub fn get_or_build<M>(
        &self,
        key: &CacheKey<'_>,
        build: impl FnOnce() -> Result<(Vec<u8>, M)>,
        load: impl Fn(&[u8]) -> Result<M>,
    ) -> Result<M> {
        let Some(dir) = &self.dir else {
            return build().map(|(_, m)| m);
        };
        let digest = key.digest();
        let hex = key::hex(&digest);
        let path = dir.join(entry::file_name(&hex));
        let verdict = trust::check(dir);
        if let trust::Verdict::Refused(why) = &verdict {
            trust::warn_refused(dir, why);
            return build().map(|(_, m)| m);
        }
        let cached = match verdict {
            trust::Verdict::Trusted => self.try_load(&path, &digest, &load),
            _ => None,
        };
        if let Some(module) = cached {
            log::debug!("kernel cache hit {hex} ({})", key.device);
            return Ok(module);
        }
        log::debug!("kernel cache miss {hex} ({}): building", key.device);
        let (binary, module) = build()?;
        self.store(dir, &path, &digest, &binary);
        Ok(module)
    }

    /// The module from a valid entry, or `None` after deleting an unusable one.
    fn try_load<M>(
        &self,
        path: &Path,
        digest: &[u8; 32],
        load: &impl Fn(&[u8]) -> Result<M>,
    ) -> Option<M> {
        let bytes = match fs::read(path) {
            Ok(b) => b,
            // No entry, or no directory at all: a plain miss.
            Err(e) if is_absent(&e) => return None,
            Err(e) => {
                discard(path, &format!("unreadable ({e})"));
                return None;
            }
        };
        let payload = match entry::decode(digest, &bytes) {
            Ok(p) => p,
            Err(why) => {
                discard(path, &why.to_string());
                return None;
            }
        };
        match load(payload) {
            Ok(module) => Some(module),
            Err(e) if is_binary_rejection(&e) => {
                discard(path, &format!("rejected by the driver: {e}"));
                None
            }
            Err(e) => {
                // Out of memory, a lost context...: the entry is fine, only this load failed.
                log::warn!(
                    "kernel cache entry {} could not be loaded ({e}); keeping it and recompiling",
                    path.display()
                );
                None
            }
        }
    }

    /// Writes the entry; on failure the directory is treated as unwritable from now on.
    fn store(&self, dir: &Path, path: &Path, digest: &[u8; 32], binary: &[u8]) {
        if binary.is_empty() {
            log::debug!(
                "kernel cache: empty binary for {}, not stored",
                path.display()
            );
            return;
        }
        if is_unwritable(dir) {
            return;
        }
        let made = trust::create_private_dir(dir).map_err(|e| {
            // A regular file where the directory should be: create_dir_all reports it as
            // AlreadyExists (or NotADirectory for a file further up).
            if e.kind() == io::ErrorKind::AlreadyExists && !dir.is_dir() {
                io::Error::new(io::ErrorKind::NotADirectory, e)
            } else {
                e
            }
        });
        // Created by another user between the check and now, or made shared since: skip.
        if made.is_ok() {
            if let trust::Verdict::Refused(why) = trust::check(dir) {
                trust::warn_refused(dir, &why);
                return;
            }
        }
        let written = made.and_then(|()| {
            let bytes = entry::encode(digest, binary);
            crate::fsutil::write_atomic(path, &bytes, entry::TEMP_MARKER, FileMode::OwnerOnly)
        });
        match written {
            Ok(()) => log::debug!("kernel cache: stored {}", path.display()),
            Err(e) if is_permanent_write_failure(&e) => {
                if mark_unwritable(dir) {
                    log::warn!(
                        "kernel cache directory {} is not writable ({e}); compiled kernels are \
                         kept in memory only for the rest of this process",
                        dir.display()
                    );
                }
            }
            Err(e) => {
                if !WRITE_FAILURE_WARNED.swap(true, Ordering::Relaxed) {
                    log::warn!(
                        "kernel cache: could not store {} ({e}); will try again for later \
                         kernels",
                        path.display()
                    );
                } else {
                    log::debug!("kernel cache: could not store {} ({e})", path.display());
                }
            }
        }
    }
}

/// Deletes an unusable entry so the next start does not trip over it again.
fn discard(path: &Path, why: &str) {
    log::warn!(
        "kernel cache entry {} is unusable ({why}); deleting it and recompiling",
        path.display()
    );
    if let Err(e) = fs::remove_file(path) {
        if e.kind() != io::ErrorKind::NotFound {
            log::warn!("could not delete {}: {e}", path.display());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::is_permanent_write_failure;
    use std::io::{Error, ErrorKind};

    #[test]
    fn only_an_unwritable_directory_disables_the_cache() {
        for kind in [
            ErrorKind::PermissionDenied,
            ErrorKind::ReadOnlyFilesystem,
            ErrorKind::NotADirectory,
        ] {
            assert!(is_permanent_write_failure(&Error::from(kind)), "{kind:?}");
        }
        for kind in [
            ErrorKind::StorageFull,
            ErrorKind::QuotaExceeded,
            ErrorKind::Interrupted,
            ErrorKind::Other,
        ] {
            assert!(!is_permanent_write_failure(&Error::from(kind)), "{kind:?}");
        }
    }
}
