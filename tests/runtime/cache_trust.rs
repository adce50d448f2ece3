//! Who may write into the kernel cache: the directory is created private (0700, entries 0600),
//! and a directory another user owns, or that its group or others may write to, is not used
//! (memory-only, one warning), so nobody else can plant a kernel this process would run.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::sync::atomic::Ordering;

use rnn::cache::KernelCache;

use super::cache::{TempDir, count_cache_warnings, key, names, run};
use crate::support::run_child;

fn mode(path: &Path) -> u32 {
    fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

fn chmod(path: &Path, mode: u32) {
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

/// Stores an entry for `source` through a trusted cache in `dir`, as an earlier run would.
fn plant(dir: &Path, source: &str, binary: &str) {
    let before = mode(dir);
    chmod(dir, 0o700);
    let r = run(&KernelCache::at(dir), &key(source), binary, true);
    assert_eq!((r.builds, r.loads), (1, 0));
    chmod(dir, before);
}

#[test]
fn cache_creates_its_directory_and_entries_private() {
    let tmp = TempDir::new("private");
    let dir = tmp.path().join("made").join("here");
    let cache = KernelCache::at(&dir);
    let r = run(&cache, &key("k"), "BIN", true);
    assert_eq!(r.module.unwrap(), "built:BIN");
    assert_eq!(mode(&tmp.path().join("made")), 0o700);
    assert_eq!(mode(&dir), 0o700);
    let entries = names(&dir);
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert_eq!(mode(&dir.join(&entries[0])), 0o600);
    // And it is used: the next instance loads what this one stored.
    let again = run(&KernelCache::at(&dir), &key("k"), "BIN", true);
    assert_eq!((again.builds, again.loads), (0, 1));
}

#[test]
fn cache_uses_an_existing_private_or_read_only_shared_directory() {
    for m in [0o700, 0o750, 0o755] {
        let tmp = TempDir::new("own");
        chmod(tmp.path(), m);
        run(&KernelCache::at(tmp.path()), &key("k"), "BIN", true);
        let r = run(&KernelCache::at(tmp.path()), &key("k"), "BIN", true);
        assert_eq!((r.builds, r.loads), (0, 1), "mode {m:o}");
    }
}

#[test]
fn cache_refuses_a_directory_others_can_write() {
    for m in [0o770, 0o775, 0o707, 0o777, 0o1777] {
        let tmp = TempDir::new("shared");
        // A valid entry is already there (planted, or left from before the mode changed):
        // it must not be loaded.
        plant(tmp.path(), "k", "PLANTED");
        chmod(tmp.path(), m);
        let before = names(tmp.path());
        for _ in 0..2 {
            let r = run(&KernelCache::at(tmp.path()), &key("k"), "FRESH", true);
            assert_eq!((r.builds, r.loads), (1, 0), "mode {m:o}");
            assert_eq!(r.module.unwrap(), "built:FRESH");
            let other = run(&KernelCache::at(tmp.path()), &key("other"), "X", true);
            assert_eq!((other.builds, other.loads), (1, 0), "mode {m:o}");
        }
        assert_eq!(names(tmp.path()), before, "mode {m:o}: nothing written");
        assert_eq!(mode(tmp.path()), m, "the directory is left as it was");
        chmod(tmp.path(), 0o700);
    }
}

/// The effective user id, read off a file this process creates.
fn my_uid(tmp: &Path) -> u32 {
    let probe = tmp.join("uid-probe");
    fs::write(&probe, b"").unwrap();
    let uid = fs::metadata(&probe).unwrap().uid();
    fs::remove_file(&probe).unwrap();
    uid
}

#[test]
fn cache_refuses_a_directory_another_user_owns() {
    let tmp = TempDir::new("foreign");
    let uid = my_uid(tmp.path());
    let foreign = if uid == 0 {
        // As root (CI, the GPU machine): hand a private directory with a planted entry to
        // another user id.
        let dir = tmp.path().join("theirs");
        fs::create_dir(&dir).unwrap();
        plant(&dir, "k", "PLANTED");
        chmod(&dir, 0o755);
        std::os::unix::fs::chown(&dir, Some(65_534), Some(65_534)).unwrap();
        dir
    } else {
        // Without root nothing can be given away: the root directory is another user's.
        Path::new("/").to_path_buf()
    };
    let before = names(&foreign);
    for _ in 0..2 {
        let r = run(&KernelCache::at(&foreign), &key("k"), "FRESH", true);
        assert_eq!((r.builds, r.loads), (1, 0));
        assert_eq!(r.module.unwrap(), "built:FRESH");
    }
    assert_eq!(names(&foreign), before, "nothing written");
}

/// Set in the child of `cache_refusal_warns_once_with_the_reason`.
const REFUSE_CHILD: &str = "RNN_CACHE_TEST_REFUSE_CHILD";

#[test]
fn cache_refusal_warns_once_with_the_reason() {
    if let Ok(dir) = std::env::var(REFUSE_CHILD) {
        let logger = count_cache_warnings();
        for i in 0..5 {
            let r = run(
                &KernelCache::at(&dir),
                &key(&format!("kernel {i}")),
                "B",
                true,
            );
            assert_eq!(r.module.unwrap(), "built:B");
        }
        println!("warnings: {}", logger.0.load(Ordering::Relaxed));
        return;
    }
    let tmp = TempDir::new("refuse-warn");
    chmod(tmp.path(), 0o777);
    let stdout = run_child(
        "cache_trust::cache_refusal_warns_once_with_the_reason",
        &[(REFUSE_CHILD, tmp.path().as_os_str())],
    );
    assert!(
        stdout.lines().any(|l| l == "warnings: 1"),
        "expected one warning:\n{stdout}"
    );
    assert!(
        stdout.contains("lets its group or other users write into it")
            && stdout.contains("chmod 700"),
        "the warning says why and how to fix it:\n{stdout}"
    );
    chmod(tmp.path(), 0o700);
}
