//! Device memory and compiled code across the life of a process, on every GPU target:
//! - the disk kernel cache with the target's real binaries (CUBIN, OpenCL program binaries, HIP
//!   code objects): a first process builds and stores, a second loads them, an entry the driver
//!   rejects is deleted and rebuilt;
//! - out of memory: exhausting the device gives `Error::OutOfMemory`, and the pool gives its
//!   cached blocks back and retries, so a request that only fits then succeeds.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use rnn::{Error, KernelArg, LaunchConfig};

use super::{contexts, edges::axpb_source};
use crate::support::{Target, rel_err};

/// Set in the child processes of [`kernel_cache`].
const CACHE_CHILD: &str = "RNN_KERNEL_CACHE_TEST_CHILD";

/// The test module `backend_suite!` instantiates for `t` (for re-running one test in a child).
fn module_of(t: Target) -> &'static str {
    match t {
        Target::OpenCl => "opencl",
        Target::Cuda => "cuda",
        Target::Hip => "hip",
        Target::HipOnCuda => "hip_on_cuda",
        Target::Cpu => unreachable!("the CPU backend has no kernel cache"),
    }
}

/// What the kernel cache logged in one child process.
#[derive(Debug, Default, PartialEq, Eq)]
struct CacheEvents {
    hits: usize,
    misses: usize,
    /// Entries deleted because the driver refused the binary.
    rejected: usize,
    /// Entries deleted for any other reason (checksum, header).
    unusable: usize,
}

struct CacheLog([AtomicUsize; 4]);

impl log::Log for CacheLog {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        m.target().starts_with("rnn::cache")
    }
    fn log(&self, r: &log::Record<'_>) {
        if !self.enabled(r.metadata()) {
            return;
        }
        let msg = r.args().to_string();
        let slot = if msg.starts_with("kernel cache hit") {
            0
        } else if msg.starts_with("kernel cache miss") {
            1
        } else if msg.contains("rejected by the driver") {
            2
        } else if msg.contains("is unusable") {
            3
        } else {
            return;
        };
        self.0[slot].fetch_add(1, Ordering::Relaxed);
    }
    fn flush(&self) {}
}

/// The child: compiles and runs a user kernel on every device of `t` through the cache in
/// `$RNN_CACHE_DIR`, and prints what the cache did.
fn cache_child(t: Target) {
    static LOG: CacheLog = CacheLog([const { AtomicUsize::new(0) }; 4]);
    log::set_logger(&LOG).expect("the only logger of this child");
    log::set_max_level(log::LevelFilter::Debug);
    let src = axpb_source(t);
    let ctxs = contexts(t, "gpu_kernel_cache");
    assert!(!ctxs.is_empty(), "the parent saw devices of {}", t.name());
    for ctx in &ctxs {
        let k = ctx.compile(&src).expect("the kernel compiles or loads");
        let n = 300;
        let x: Vec<f32> = (0..n).map(|i| i as f32 - 150.0).collect();
        let (xb, yb) = (ctx.alloc(n).unwrap(), ctx.alloc(n).unwrap());
        ctx.ops().upload(xb.view(), &x).unwrap();
        ctx.ops().upload(yb.view(), &vec![f32::NAN; n]).unwrap();
        let args = [
            KernelArg::Buffer(xb.view()),
            KernelArg::Buffer(yb.view()),
            KernelArg::U32(n as u32),
            KernelArg::F32(2.0),
        ];
        ctx.launch(&k, LaunchConfig::for_elements(n, 64), &args)
            .unwrap();
        let mut y = vec![0.0; n];
        ctx.ops().download(yb.view(), &mut y).unwrap();
        let want: Vec<f32> = x.iter().map(|v| 2.0 * v + 1.0).collect();
        assert!(
            rel_err(&y, &want) < 1e-6,
            "{}: the kernel ran wrong",
            ctx.id()
        );
    }
    let c = |i: usize| LOG.0[i].load(Ordering::Relaxed);
    println!(
        "cache-events hits={} misses={} rejected={} unusable={}",
        c(0),
        c(1),
        c(2),
        c(3)
    );
}

/// Runs [`cache_child`] for `t` in a new process on the cache `dir`.
fn run_child(t: Target, dir: &Path) -> CacheEvents {
    let name = format!("backend_suite::{}::gpu_kernel_cache", module_of(t));
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", &name, "--nocapture", "--test-threads=1"])
        .env(CACHE_CHILD, "1")
        .env("RNN_CACHE_DIR", dir)
        .env_remove("RNN_CACHE")
        // Only the user kernel's entry: no op-set modules prefetched in the background.
        .env("RNN_KERNEL_PREFETCH", "0")
        .output()
        .expect("the test binary starts");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "child failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let line = stdout
        .lines()
        // The harness prints `test <name> ... ` on the same line, before the child's output.
        .find_map(|l| l.split_once("cache-events ").map(|(_, events)| events))
        .unwrap_or_else(|| panic!("no cache-events line:\n{stdout}"));
    let field = |key: &str| -> usize {
        line.split(' ')
            .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {key} in {line}"))
    };
    CacheEvents {
        hits: field("hits"),
        misses: field("misses"),
        rejected: field("rejected"),
        unusable: field("unusable"),
    }
}

/// The cache entries in `dir`.
fn entries(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|r| r.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    v.retain(|p| p.extension().is_some_and(|e| e == "rnnk"));
    v.sort();
    v
}

/// Header bytes of an entry before the payload length (magic, version, reserved, key digest); the
/// layout is documented in src/cache/entry.rs.
const KEY_END: usize = 8 + 4 + 4 + 32;
const HEADER: usize = KEY_END + 8 + 32;

/// Replaces the payload of `path` with `payload`, with a valid length and checksum, so only the
/// driver can tell it is no binary.
fn replace_payload(path: &Path, payload: &[u8]) {
    use sha2::{Digest, Sha256};
    let old = std::fs::read(path).unwrap();
    assert!(
        old.len() > HEADER && old.starts_with(b"RNNKCACH"),
        "not an entry"
    );
    let mut new = old[..KEY_END].to_vec();
    new.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    new.extend_from_slice(&Sha256::digest(payload));
    new.extend_from_slice(payload);
    std::fs::write(path, new).unwrap();
}

fn payload(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap()[HEADER..].to_vec()
}

pub fn kernel_cache(t: Target) {
    if std::env::var_os(CACHE_CHILD).is_some() {
        return cache_child(t);
    }
    let test = "gpu_kernel_cache";
    // SKIP (or the failure of a required target) happens here, not in a child.
    let devices = contexts(t, test).len();
    if devices == 0 {
        return;
    }
    let dir = std::env::temp_dir().join(format!(
        "rnn-kernel-cache-{}-{}",
        module_of(t),
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);

    let first = run_child(t, &dir);
    let stored = entries(&dir);
    assert_eq!(stored.len(), devices, "one entry per device; {first:?}");
    let built = CacheEvents {
        misses: devices,
        ..Default::default()
    };
    assert_eq!(first, built, "a fresh cache builds everything");

    // A second process start loads every binary.
    let hit = CacheEvents {
        hits: devices,
        ..Default::default()
    };
    assert_eq!(run_child(t, &dir), hit, "a new process loads from disk");

    // Entries whose bytes are intact but which no driver accepts are deleted and rebuilt.
    let originals: Vec<Vec<u8>> = stored.iter().map(|p| payload(p)).collect();
    let junk = b"not a code object: rnn kernel cache test\n\0";
    for p in &stored {
        replace_payload(p, junk);
    }
    let healed = run_child(t, &dir);
    assert_eq!(
        healed,
        CacheEvents {
            misses: devices,
            rejected: devices,
            ..Default::default()
        },
        "rejected entries are rebuilt"
    );
    assert_eq!(entries(&dir), stored, "rebuilt under the same keys");
    // The rebuilt payload is a real binary again, not necessarily the same bytes: NVIDIA's
    // OpenCL, for one, gives program binaries of different lengths for the same source.
    for (p, original) in stored.iter().zip(&originals) {
        let now = payload(p);
        assert!(
            now != junk && !now.is_empty() && !original.is_empty(),
            "{}: not rebuilt",
            p.display()
        );
    }
    assert_eq!(run_child(t, &dir), hit, "the rebuilt entries load");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Exhausts the device with blocks of 1/16 of its memory, then frees them into the pool and asks
/// for twice that block size: only the pool's release-and-retry can satisfy it.
pub fn oom_recovery(t: Target) {
    for ctx in contexts(t, "gpu_oom_recovery") {
        let ops = ctx.ops();
        let total = ctx.info().memory as usize;
        assert!(total > 0, "{}: no memory size", ctx.id());
        let chunk = (total / 16 / 4).max(1 << 20);
        let mut held = Vec::new();
        let err = loop {
            match ops.alloc(chunk) {
                Ok(b) => held.push(b),
                Err(e) => break e,
            }
            assert!(
                held.len() <= 64,
                "{}: {} blocks of 1/16",
                ctx.id(),
                held.len()
            );
        };
        match &err {
            Error::OutOfMemory {
                requested,
                free,
                total: reported,
                ..
            } => {
                assert_eq!(*requested, chunk * 4, "{err}");
                assert!(*reported > 0 && free <= reported, "{err}");
            }
            e => panic!("{}: exhausting memory gave {e}", ctx.id()),
        }
        assert!(held.len() >= 2, "{}: only {} blocks", ctx.id(), held.len());
        // The blocks are real: the far end of the last one holds what was written.
        let last = held.last().unwrap();
        let tail = last.slice(chunk - 16, 16).unwrap();
        ops.fill(tail, 1.5).unwrap();
        let mut out = vec![0.0; 16];
        ops.download(tail, &mut out).unwrap();
        assert!(out.iter().all(|v| *v == 1.5), "{}: {out:?}", ctx.id());
        let blocks = held.len();
        drop(held);
        let big = ops.alloc(chunk * 2).unwrap_or_else(|e| {
            panic!(
                "{}: after {blocks} blocks went back to the pool, 2 blocks' worth failed: {e}",
                ctx.id()
            )
        });
        let tail = big.slice(chunk * 2 - 16, 16).unwrap();
        ops.fill(tail, -2.0).unwrap();
        ops.download(tail, &mut out).unwrap();
        assert!(out.iter().all(|v| *v == -2.0), "{}: {out:?}", ctx.id());
    }
}
