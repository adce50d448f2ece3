//! Crash-safe file writes shared by the kernel cache and checkpoints.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Who may read a file [`write_atomic`] creates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FileMode {
    /// The process's default (0666 less the umask): checkpoints, which users share.
    Default,
    /// Readable and writable by the owner only (0600): kernel cache entries.
    OwnerOnly,
}

/// Writes `bytes` to `path` so that readers see either the old file (or none) or the complete
/// new one: the data goes to a uniquely named temp file in the same directory (same file
/// system, so the rename is atomic), is flushed to disk, then renamed over `path`. Concurrent
/// writers of the same path, in this process or others, each use their own temp file; all
/// succeed and the last rename wins.
///
/// Temp files are named `.{file name}{temp_marker}{pid}-{counter}-{nanos}`, so a caller can
/// recognise (and sweep) leftovers of a crashed writer by its marker.
pub(crate) fn write_atomic(
    path: &Path,
    bytes: &[u8],
    temp_marker: &str,
    mode: FileMode,
) -> io::Result<()> {
    let dir = path
        .parent()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "path has no parent"))?;
    let stem = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let (tmp, mut file) = create_temp(dir, stem, temp_marker, mode)?;
    let written = file.write_all(bytes).and_then(|()| file.sync_all());
    drop(file);
    let result = written.and_then(|()| fs::rename(&tmp, path));
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// A new, exclusively created temp file in `dir`.
fn create_temp(
    dir: &Path,
    stem: &str,
    marker: &str,
    mode: FileMode,
) -> io::Result<(PathBuf, File)> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    loop {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let name = format!(".{stem}{marker}{}-{n}-{nanos}", std::process::id());
        let tmp = dir.join(name);
        let mut options = OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        if mode == FileMode::OwnerOnly {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        #[cfg(not(unix))]
        let _ = mode;
        match options.open(&tmp) {
            Ok(f) => return Ok((tmp, f)),
            // A leftover from a crashed process that had our pid: try the next counter value.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn concurrent_writers_of_one_path_all_succeed() {
        let dir = std::env::temp_dir().join(format!("rnn-fsutil-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("target.bin");
        std::thread::scope(|s| {
            for t in 0..8u8 {
                let path = &path;
                s.spawn(move || {
                    for _ in 0..20 {
                        write_atomic(path, &[t; 4096], ".test-tmp-", FileMode::Default).unwrap();
                    }
                });
            }
        });
        let data = fs::read(&path).unwrap();
        assert_eq!(data.len(), 4096);
        assert!(data.iter().all(|&b| b == data[0]));
        let names: Vec<String> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names,
            vec!["target.bin".to_string()],
            "temp files left behind"
        );
        fs::remove_dir_all(&dir).unwrap();
    }
}
