//! The disk kernel cache, driven with fake binaries (no GPU needed): hits across instances (a
//! second process start), key sensitivity, self-healing of corrupt and rejected entries,
//! unwritable directories, `RNN_CACHE`, and several processes filling one cache at once.

use std::cell::Cell;
use std::ffi::{OsStr, OsString};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rnn::Error;
use rnn::cache::{CacheEnv, CacheKey, KernelCache};

use crate::support::run_child;

/// A fresh directory under the system temp dir, removed on drop.
pub(super) struct TempDir(pub(super) PathBuf);

impl TempDir {
    pub(super) fn new(tag: &str) -> Self {
        static N: AtomicUsize = AtomicUsize::new(0);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let path = std::env::temp_dir().join(format!(
            "rnn-cache-test-{tag}-{}-{}-{nanos}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }

    pub(super) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

const OPTS: &[String] = &[];

pub(super) fn key(source: &str) -> CacheKey<'_> {
    CacheKey {
        source,
        options: OPTS,
        device: "Fake Device",
        arch: "sm_00",
        compiler: "fakecc 1.0 / driver 2.0",
    }
}

/// How often `build` and `load` ran in one `get_or_build`, and what it returned.
#[derive(Debug)]
pub(super) struct Run {
    pub(super) module: rnn::Result<String>,
    pub(super) builds: usize,
    pub(super) loads: usize,
}

/// `get_or_build` with a build that returns `binary` and a load that accepts any binary
/// (`accept`) or rejects it. Modules are `built:<binary>` / `loaded:<binary>`.
pub(super) fn run(cache: &KernelCache, key: &CacheKey<'_>, binary: &str, accept: bool) -> Run {
    let builds = Cell::new(0);
    let loads = Cell::new(0);
    let module = cache.get_or_build(
        key,
        || {
            builds.set(builds.get() + 1);
            Ok((binary.as_bytes().to_vec(), format!("built:{binary}")))
        },
        |bin| {
            loads.set(loads.get() + 1);
            if accept {
                Ok(format!("loaded:{}", String::from_utf8_lossy(bin)))
            } else {
                Err(Error::InvalidData("driver rejects this binary".into()))
            }
        },
    );
    Run {
        module,
        builds: builds.get(),
        loads: loads.get(),
    }
}

/// A cache in a fresh temporary directory (`tag`) holding one entry, for `key(source)`, built
/// from `binary`; with that entry's path. Keep the directory until the test ends.
fn stocked(
    tag: &str,
    source: &'static str,
    binary: &str,
) -> (TempDir, KernelCache, CacheKey<'static>, PathBuf) {
    let tmp = TempDir::new(tag);
    let cache = KernelCache::at(tmp.path());
    let k = key(source);
    assert_eq!(
        run(&cache, &k, binary, true).builds,
        1,
        "{tag}: the first run builds"
    );
    let path = cache.entry_path(&k).unwrap();
    (tmp, cache, k, path)
}

/// Every file name in `dir`, sorted.
pub(super) fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn cache_miss_then_hit_in_a_new_instance() {
    let tmp = TempDir::new("hit");
    let dir = tmp.path().join("nested/cache");
    let k = key("__kernel void f() {}");
    let first = run(&KernelCache::at(&dir), &k, "BINARY-1", true);
    assert_eq!((first.builds, first.loads), (1, 0));
    assert_eq!(first.module.unwrap(), "built:BINARY-1");

    // A new KernelCache on the same directory is what a second process start sees.
    let again = KernelCache::at(&dir);
    let stats = again.stats().unwrap();
    assert_eq!(stats.entries, 1);
    assert!(stats.bytes > "BINARY-1".len() as u64, "{stats:?}");
    let second = run(&again, &k, "SHOULD-NOT-BUILD", true);
    assert_eq!((second.builds, second.loads), (0, 1));
    assert_eq!(second.module.unwrap(), "loaded:BINARY-1");
    assert_eq!(
        names(&dir),
        vec![
            again
                .entry_path(&k)
                .unwrap()
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned()
        ]
    );
}

#[test]
fn cache_key_sensitivity() {
    let tmp = TempDir::new("keys");
    let cache = KernelCache::at(tmp.path());
    let opts = vec!["-DX=1".to_string()];
    let other_opts = vec!["-DX=2".to_string()];
    let base = CacheKey {
        options: &opts,
        ..key("src")
    };
    assert_eq!(run(&cache, &base, "base", true).builds, 1);
    assert_eq!(
        run(&cache, &base, "base", true).builds,
        0,
        "same key must hit"
    );

    let variants = [
        (
            "source",
            CacheKey {
                source: "src ",
                ..base.clone()
            },
        ),
        (
            "options",
            CacheKey {
                options: &other_opts,
                ..base.clone()
            },
        ),
        (
            "no options",
            CacheKey {
                options: OPTS,
                ..base.clone()
            },
        ),
        (
            "device",
            CacheKey {
                device: "Other Device",
                ..base.clone()
            },
        ),
        (
            "arch",
            CacheKey {
                arch: "sm_01",
                ..base.clone()
            },
        ),
        (
            "compiler",
            CacheKey {
                compiler: "fakecc 1.1 / driver 2.0",
                ..base.clone()
            },
        ),
    ];
    for (what, k) in &variants {
        let r = run(&cache, k, what, true);
        assert_eq!((r.builds, r.loads), (1, 0), "a different {what} must miss");
        assert_eq!(r.module.unwrap(), format!("built:{what}"));
    }
    assert_eq!(cache.stats().unwrap().entries, 1 + variants.len());
    // The base entry was not overwritten by any variant.
    assert_eq!(run(&cache, &base, "x", true).module.unwrap(), "loaded:base");
}

#[test]
fn cache_corrupt_entries_are_deleted_and_rebuilt() {
    type Corrupt = fn(&Path);
    let corruptions: [(&str, Corrupt); 5] = [
        ("truncated", |p| {
            let b = fs::read(p).unwrap();
            fs::write(p, &b[..b.len() - 3]).unwrap();
        }),
        ("truncated header", |p| {
            let b = fs::read(p).unwrap();
            fs::write(p, &b[..20]).unwrap();
        }),
        ("flipped payload byte", |p| {
            let mut b = fs::read(p).unwrap();
            let last = b.len() - 1;
            b[last] ^= 0x01;
            fs::write(p, b).unwrap();
        }),
        ("garbage", |p| {
            fs::write(p, b"this is not a kernel cache entry at all, just text......................................").unwrap()
        }),
        ("zero length", |p| fs::write(p, b"").unwrap()),
    ];
    for (what, corrupt) in corruptions {
        let (_tmp, cache, k, path) = stocked("corrupt", what, "GOOD-BINARY");
        corrupt(&path);

        let r = run(&cache, &k, "REBUILT", true);
        assert_eq!(
            (r.builds, r.loads),
            (1, 0),
            "{what}: must rebuild without loading"
        );
        assert_eq!(r.module.unwrap(), "built:REBUILT", "{what}");
        // The bad entry was replaced by a valid one.
        let r = run(&cache, &k, "NOPE", true);
        assert_eq!((r.builds, r.loads), (0, 1), "{what}");
        assert_eq!(r.module.unwrap(), "loaded:REBUILT", "{what}");
    }
}

#[test]
fn cache_corrupt_entry_is_deleted_even_when_the_rebuild_fails() {
    let (_tmp, cache, k, path) = stocked("corrupt-fail", "k", "GOOD");
    fs::write(&path, b"garbage").unwrap();
    let err = cache
        .get_or_build(
            &k,
            || -> rnn::Result<(Vec<u8>, ())> {
                Err(Error::Compile {
                    device: "Fake".into(),
                    log: "error: expected ';'".into(),
                })
            },
            |_| Ok(()),
        )
        .unwrap_err();
    // The user sees the compile error, not anything about the cache.
    assert!(matches!(err, Error::Compile { .. }), "{err}");
    assert!(!path.exists(), "the corrupt entry must be gone");
}

#[test]
fn cache_rejected_binary_is_deleted_and_rebuilt() {
    let (_tmp, cache, k, path) = stocked("reject", "kernel", "OLD");

    let r = run(&cache, &k, "NEW", false);
    assert_eq!((r.builds, r.loads), (1, 1));
    assert_eq!(r.module.unwrap(), "built:NEW");
    let r = run(&cache, &k, "X", true);
    assert_eq!((r.builds, r.loads), (0, 1));
    assert_eq!(
        r.module.unwrap(),
        "loaded:NEW",
        "the rejected entry was replaced"
    );

    // With a failing build the rejected entry is still deleted and the build error returned.
    let err = cache
        .get_or_build(
            &k,
            || -> rnn::Result<(Vec<u8>, ())> { Err(Error::InvalidArgument("no".into())) },
            |_| Err(Error::InvalidData("rejected".into())),
        )
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    assert!(!path.exists());
}

#[test]
fn cache_entry_survives_a_transient_load_failure() {
    let (_tmp, cache, k, path) = stocked("transient", "kernel", "OLD");
    let transient = |i: usize| match i {
        0 => Error::OutOfMemory {
            device: "gpu".into(),
            requested: 1 << 20,
            free: 0,
            total: 1 << 30,
        },
        // CUDA_ERROR_INVALID_CONTEXT: the context, not the binary, is the problem.
        _ => Error::Backend {
            backend: rnn::BackendKind::Cuda,
            call: "cuModuleLoadData".into(),
            code: 201,
            message: "CUDA_ERROR_INVALID_CONTEXT".into(),
        },
    };
    for i in 0..2 {
        let err = cache
            .get_or_build(
                &k,
                || -> rnn::Result<(Vec<u8>, ())> { Err(Error::InvalidArgument("no".into())) },
                |_| Err(transient(i)),
            )
            .unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
        assert!(
            path.exists(),
            "a transient {} must not delete the entry",
            transient(i)
        );
    }
    let r = run(&cache, &k, "X", true);
    assert_eq!((r.builds, r.loads), (0, 1));
    assert_eq!(r.module.unwrap(), "loaded:OLD");

    // A driver's invalid-image status does delete it (CUDA's statuses are known to a build
    // with the CUDA backend).
    #[cfg(feature = "cuda")]
    let _ = cache.get_or_build(
        &k,
        || -> rnn::Result<(Vec<u8>, ())> { Err(Error::InvalidArgument("no".into())) },
        |_| {
            Err(Error::Backend {
                backend: rnn::BackendKind::Cuda,
                call: "cuModuleLoadData".into(),
                code: 200,
                message: "CUDA_ERROR_INVALID_IMAGE".into(),
            })
        },
    );
    #[cfg(feature = "cuda")]
    assert!(!path.exists());
}

#[test]
fn cache_unwritable_dir_degrades_to_memory_only() {
    let tmp = TempDir::new("unwritable");
    let file = tmp.path().join("a-regular-file");
    fs::write(&file, b"not a directory").unwrap();
    let cache = KernelCache::at(file.join("cache"));
    for i in 0..3 {
        let k = key(if i == 1 { "other" } else { "same" });
        let r = run(&cache, &k, "BIN", true);
        assert_eq!((r.builds, r.loads), (1, 0));
        assert_eq!(r.module.unwrap(), "built:BIN");
    }
    assert_eq!(fs::read(&file).unwrap(), b"not a directory");
    assert_eq!(names(tmp.path()), vec!["a-regular-file".to_string()]);
    assert_eq!(cache.stats().unwrap().entries, 0);
    assert_eq!(cache.clear().unwrap(), 0);
}

#[test]
fn cache_env_values_select_the_directory_and_off_switch() {
    let os = |s: &str| Some(OsString::from(s));
    let env = CacheEnv {
        cache: None,
        cache_dir: os("/explicit"),
        xdg_cache_home: os("/xdg"),
        home: os("/home/u"),
    };
    let dir = |e: &CacheEnv| {
        KernelCache::from_cache_env(e)
            .unwrap()
            .dir()
            .map(Path::to_path_buf)
    };
    assert_eq!(dir(&env), Some(PathBuf::from("/explicit")));
    let no_explicit = CacheEnv {
        cache_dir: os(""),
        ..env.clone()
    };
    assert_eq!(dir(&no_explicit), Some(PathBuf::from("/xdg/rnn")));
    let relative_xdg = CacheEnv {
        xdg_cache_home: os("rel"),
        ..no_explicit.clone()
    };
    assert_eq!(
        dir(&relative_xdg),
        Some(PathBuf::from("/home/u/.cache/rnn"))
    );
    assert_eq!(dir(&CacheEnv::default()), None, "no place for a cache: off");

    for on in ["on", "ON", "1", "true", "True", ""] {
        let e = CacheEnv {
            cache: os(on),
            ..env.clone()
        };
        assert_eq!(
            dir(&e),
            Some(PathBuf::from("/explicit")),
            "RNN_CACHE={on:?}"
        );
    }
    for off in ["off", "OFF", "0", "false", " False "] {
        let e = CacheEnv {
            cache: os(off),
            ..env.clone()
        };
        assert_eq!(dir(&e), None, "RNN_CACHE={off:?}");
    }
    for bad in ["maybe", "yes please", "2"] {
        let e = CacheEnv {
            cache: os(bad),
            ..env.clone()
        };
        match KernelCache::from_cache_env(&e) {
            Err(Error::InvalidEnv { name, value, .. }) => {
                assert_eq!((name.as_str(), value.as_str()), ("RNN_CACHE", bad));
            }
            other => panic!("RNN_CACHE={bad:?} gave {other:?}"),
        }
    }
}

#[test]
fn cache_off_always_builds_and_writes_nothing() {
    let tmp = TempDir::new("off");
    let env = CacheEnv {
        cache: Some("off".into()),
        cache_dir: Some(tmp.path().as_os_str().to_owned()),
        ..CacheEnv::default()
    };
    for cache in [
        KernelCache::from_cache_env(&env).unwrap(),
        KernelCache::disabled(),
    ] {
        assert_eq!(cache.dir(), None);
        let k = key("k");
        for _ in 0..2 {
            let r = run(&cache, &k, "B", true);
            assert_eq!((r.builds, r.loads), (1, 0));
        }
        assert_eq!(cache.entry_path(&k), None);
        assert_eq!(cache.stats().unwrap().entries, 0);
    }
    assert!(names(tmp.path()).is_empty());
}

#[test]
fn cache_clear_removes_only_its_own_entries() {
    let tmp = TempDir::new("clear");
    let cache = KernelCache::at(tmp.path());
    run(&cache, &key("a"), "AAAA", true);
    run(&cache, &key("b"), "BBBB", true);
    let foreign = [
        "notes.txt",
        "abc.rnnk",
        &format!("{}.bin", "0".repeat(64)),
        &format!("{}.rnnk", "A".repeat(64)),
    ];
    for name in foreign {
        fs::write(tmp.path().join(name), b"keep me").unwrap();
    }
    fs::create_dir(tmp.path().join("subdir")).unwrap();
    let stats = cache.stats().unwrap();
    assert_eq!(stats.entries, 2);
    assert_eq!(cache.clear().unwrap(), 2);
    assert_eq!(cache.stats().unwrap().entries, 0);
    let mut left = foreign.map(str::to_string).to_vec();
    left.push("subdir".into());
    left.sort();
    assert_eq!(names(tmp.path()), left);
    // Cleared means the next lookup builds again.
    assert_eq!(run(&cache, &key("a"), "AAAA", true).builds, 1);
}

/// Set in child processes of `cache_concurrent_processes`: the shared cache directory.
const CHILD_DIR: &str = "RNN_CACHE_TEST_CHILD_DIR";
/// Set in child processes: their index, and the file whose appearance starts them together.
const CHILD_INDEX: &str = "RNN_CACHE_TEST_CHILD_INDEX";
const CHILD_GO: &str = "RNN_CACHE_TEST_CHILD_GO";

const SHARED_KEYS: [(&str, &str); 2] = [
    ("kernel one", "BINARY-ONE-0123456789"),
    ("kernel two", "BINARY-TWO-abcdefghij"),
];

/// One child: waits for the go signal, then gets both shared kernels, building slowly so the
/// other children's builds and renames overlap with its own.
fn concurrent_child(dir: &str) {
    let index: usize = std::env::var(CHILD_INDEX).unwrap().parse().unwrap();
    let go = PathBuf::from(std::env::var(CHILD_GO).unwrap());
    let deadline = Instant::now() + Duration::from_secs(30);
    while !go.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    let cache = KernelCache::at(dir);
    let mut order = SHARED_KEYS.to_vec();
    if index % 2 == 1 {
        order.reverse();
    }
    for (source, binary) in order {
        let module = cache
            .get_or_build(
                &key(source),
                || {
                    std::thread::sleep(Duration::from_millis(20));
                    Ok((binary.as_bytes().to_vec(), binary.to_string()))
                },
                |bin| Ok(String::from_utf8(bin.to_vec()).unwrap()),
            )
            .unwrap();
        assert_eq!(module, binary, "child {index}");
    }
    println!("child {index} done");
}

#[test]
fn cache_concurrent_processes() {
    if let Ok(dir) = std::env::var(CHILD_DIR) {
        return concurrent_child(&dir);
    }
    const N: usize = 8;
    let tmp = TempDir::new("procs");
    let dir = tmp.path().join("cache");
    let go = tmp.path().join("go");
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..N)
        .map(|i| {
            Command::new(&exe)
                .args([
                    "--exact",
                    "cache::cache_concurrent_processes",
                    "--nocapture",
                ])
                .env(CHILD_DIR, &dir)
                .env(CHILD_INDEX, i.to_string())
                .env(CHILD_GO, &go)
                .output_async()
        })
        .collect();
    fs::write(&go, b"").unwrap();
    for (i, child) in children.into_iter().enumerate() {
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains(&format!("child {i} done")),
            "child {i} failed: {}\n{stdout}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }

    let cache = KernelCache::at(&dir);
    let mut expected: Vec<String> = SHARED_KEYS
        .iter()
        .map(|(s, _)| {
            let p = cache.entry_path(&key(s)).unwrap();
            p.file_name().unwrap().to_string_lossy().into_owned()
        })
        .collect();
    expected.sort();
    assert_eq!(
        names(&dir),
        expected,
        "exactly the two entries, no temp files"
    );
    for (source, binary) in SHARED_KEYS {
        let r = run(&cache, &key(source), "MUST-NOT-BUILD", true);
        assert_eq!((r.builds, r.loads), (0, 1));
        assert_eq!(r.module.unwrap(), format!("loaded:{binary}"));
    }
}

/// Spawning without waiting, so all children run at once.
trait SpawnAsync {
    fn output_async(&mut self) -> std::process::Child;
}

impl SpawnAsync for Command {
    fn output_async(&mut self) -> std::process::Child {
        self.stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    }
}

/// Set in the child of `cache_unwritable_warns_once`.
const WARN_CHILD: &str = "RNN_CACHE_TEST_WARN_CHILD";

/// Counts warnings logged by the cache module.
pub(super) struct CountingLogger(pub(super) AtomicUsize);

/// Installs a [`CountingLogger`] as the process's logger, at warning level: once per process,
/// so in a test's child process.
pub(super) fn count_cache_warnings() -> &'static CountingLogger {
    static LOGGER: CountingLogger = CountingLogger(AtomicUsize::new(0));
    log::set_logger(&LOGGER).unwrap();
    log::set_max_level(log::LevelFilter::Warn);
    &LOGGER
}

impl log::Log for CountingLogger {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        m.level() <= log::Level::Warn
    }
    fn log(&self, r: &log::Record<'_>) {
        if r.level() == log::Level::Warn && r.target().starts_with("rnn::cache") {
            self.0.fetch_add(1, Ordering::Relaxed);
            println!("WARN {}", r.args());
        }
    }
    fn flush(&self) {}
}

#[test]
fn cache_unwritable_warns_once() {
    if let Ok(file) = std::env::var(WARN_CHILD) {
        // A fresh process: no other test has installed a logger or touched this directory.
        let logger = count_cache_warnings();
        for i in 0..5 {
            // A new KernelCache each time, as backends create one per compile.
            let cache = KernelCache::at(Path::new(&file).join("cache"));
            let r = run(&cache, &key(&format!("kernel {i}")), "B", true);
            assert_eq!(r.module.unwrap(), "built:B");
        }
        println!("warnings: {}", logger.0.load(Ordering::Relaxed));
        return;
    }
    let tmp = TempDir::new("warn");
    let file = tmp.path().join("file");
    fs::write(&file, b"x").unwrap();
    let stdout = run_child(
        "cache::cache_unwritable_warns_once",
        &[(WARN_CHILD, file.as_os_str())],
    );
    assert!(
        stdout.lines().any(|l| l == "warnings: 1"),
        "expected exactly one warning:\n{stdout}"
    );
}

/// Set in the children of `cache_from_env_reads_the_process_environment`.
const ENV_CHILD: &str = "RNN_CACHE_TEST_ENV_CHILD";

/// `from_env` itself, in child processes (changing this process's environment is `unsafe`):
/// `RNN_CACHE=off` disables, an invalid value keeps the cache on rather than failing.
#[test]
fn cache_from_env_reads_the_process_environment() {
    if std::env::var_os(ENV_CHILD).is_some() {
        let dir = KernelCache::from_env().dir().map(Path::to_path_buf);
        println!("dir={dir:?}");
        return;
    }
    let tmp = TempDir::new("env");
    let child = |cache: &str| {
        let env = [
            (ENV_CHILD, OsStr::new("1")),
            ("RNN_CACHE", OsStr::new(cache)),
            ("RNN_CACHE_DIR", tmp.path().as_os_str()),
        ];
        run_child("cache::cache_from_env_reads_the_process_environment", &env)
    };
    let on = format!("dir={:?}", Some(tmp.path()));
    assert!(child("on").contains(&on), "{}", child("on"));
    assert!(child("off").contains("dir=None"), "{}", child("off"));
    assert!(
        child("not-a-switch").contains(&on),
        "{}",
        child("not-a-switch")
    );
}
