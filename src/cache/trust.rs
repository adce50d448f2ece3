//! Whether a cache directory may hold binaries that this process will load and run.
//!
//! An entry's checksum proves that the file is intact, not who wrote it: anyone who can write
//! into the directory can plant a kernel that then runs on the GPU with the user's data. So the
//! directory is created private (0700, entries 0600), and an existing one is used only when
//! the effective user owns it and neither its group nor others may write to it — the rule pip
//! applies to its cache. Anything else makes the disk cache off for that directory (kernels are
//! still compiled and kept in memory), with one warning that says why and how to fix it.
//!
//! On platforms without Unix permissions every directory is trusted, as before.

use std::collections::HashSet;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

/// What [`check`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// A directory this process may read entries from and write entries to.
    Trusted,
    /// Nothing usable at the path yet (no directory, or the path cannot be inspected): there is
    /// nothing to load; storing creates the directory privately or reports why it cannot.
    Absent,
    /// A directory someone else could write into; the reason, for the warning.
    Refused(String),
}

/// Mode bits that let a group or other users change a directory's entries.
#[cfg(unix)]
const SHARED_WRITE: u32 = 0o022;

/// The trust verdict for `dir` (symbolic links are followed: what counts is the directory
/// entries are read from).
pub(crate) fn check(dir: &Path) -> Verdict {
    match fs::metadata(dir) {
        Ok(meta) if meta.is_dir() => judge(&meta),
        // A regular file in the way, a missing directory, a parent we cannot search: the store
        // path reports these (as an unwritable directory) when it tries to create it.
        Ok(_) | Err(_) => Verdict::Absent,
    }
}

#[cfg(unix)]
fn judge(meta: &fs::Metadata) -> Verdict {
    use std::os::unix::fs::MetadataExt;
    let me = rustix::process::geteuid().as_raw();
    let mode = meta.mode() & 0o7777;
    if meta.uid() != me {
        Verdict::Refused(format!(
            "it is owned by user id {}, not by this process's user id {me}",
            meta.uid()
        ))
    } else if mode & SHARED_WRITE != 0 {
        Verdict::Refused(format!(
            "its mode {mode:o} lets its group or other users write into it"
        ))
    } else {
        Verdict::Trusted
    }
}

#[cfg(not(unix))]
fn judge(_meta: &fs::Metadata) -> Verdict {
    Verdict::Trusted
}

/// Creates `dir` and any missing parents, each readable and writable by the owner only.
pub(crate) fn create_private_dir(dir: &Path) -> io::Result<()> {
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir)
}

/// Directories already refused in this process: each is warned about once, not per kernel.
static REFUSED: Mutex<Option<HashSet<PathBuf>>> = Mutex::new(None);

/// Logs, once per directory and process, that `dir` is not used and why.
pub(crate) fn warn_refused(dir: &Path, why: &str) {
    let mut set = REFUSED.lock().unwrap_or_else(PoisonError::into_inner);
    if set
        .get_or_insert_with(HashSet::new)
        .insert(dir.to_path_buf())
    {
        log::warn!(
            "kernel cache directory {} is not used because {why}: another user could place \
             kernels there that this process would run. Compiled kernels are kept in memory \
             only. Fix: make it yours and private (chmod 700), remove it so it is created \
             privately, or set RNN_CACHE_DIR to a private directory",
            dir.display()
        );
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn scratch(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("rnn-trust-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn private_creation_and_shared_write_bits() {
        let root = scratch("modes");
        let dir = root.join("a").join("b");
        create_private_dir(&dir).unwrap();
        for d in [&root, &root.join("a"), &dir] {
            assert_eq!(fs::metadata(d).unwrap().permissions().mode() & 0o777, 0o700);
        }
        assert_eq!(check(&dir), Verdict::Trusted);
        // Readable by others is fine; writable by the group or others is not.
        for (mode, trusted) in [
            (0o755, true),
            (0o775, false),
            (0o757, false),
            (0o1777, false),
        ] {
            fs::set_permissions(&dir, fs::Permissions::from_mode(mode)).unwrap();
            assert_eq!(check(&dir) == Verdict::Trusted, trusted, "mode {mode:o}");
        }
        assert_eq!(check(&dir.join("missing")), Verdict::Absent);
        fs::remove_dir_all(&root).unwrap();
    }
}
