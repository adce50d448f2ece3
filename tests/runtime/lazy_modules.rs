//! The op set builds per kernel family on first use: a context that runs one elementwise op
//! builds (and caches) one module, `warm_up` builds them all. Observed through the entries of
//! a fresh kernel cache directory, in child processes (each a cold start, with its own
//! `RNN_CACHE_DIR`) on an OpenCL device (the CPU one where there is one: PoCL in CI; else a GPU,
//! NVIDIA's OpenCL on the GPU machine), with the background prefetch off.
//! Only the children load a runtime, and only OpenCL: PoCL's LLVM and hiprtc's, which other tests
//! of this binary load, abort a process that holds both.

use std::process::Command;

use rnn::cache::KernelCache;
use rnn::{Context, DeviceKind, GpuManager};

use super::cache::TempDir;
use super::support::{Target, is_required};

/// Set in the children: what to run (`fill`, `fill+softmax` or `warm_up`).
const CHILD_WORK: &str = "RNN_LAZY_MODULES_CHILD";

/// In a child: a context on the OpenCL device the children use (the CPU one where there is
/// one), or `None` after printing that there is none.
pub(super) fn child_context() -> Option<Context> {
    let manager = GpuManager::new().unwrap();
    let opencl = || {
        manager
            .devices()
            .iter()
            .filter(|d| d.backend == rnn::BackendKind::OpenCl)
    };
    let Some(device) = opencl()
        .find(|d| d.kind == DeviceKind::Cpu)
        .or_else(|| opencl().next())
    else {
        println!("child: no OpenCL device");
        return None;
    };
    Some(manager.create_context(device.id).unwrap())
}

/// Runs test `test` of this binary as a child doing `work` (in `var`) with its kernel cache in
/// `cache` and the background prefetch on or off; its output, or `None` when it found no
/// OpenCL device. A child that fails fails the test.
pub(super) fn run_child(
    test: &str,
    (var, work): (&str, &str),
    cache: &TempDir,
    prefetch: bool,
) -> Option<String> {
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--nocapture"])
        .env(var, work)
        .env("RNN_CACHE_DIR", cache.path())
        .env("RNN_KERNEL_PREFETCH", if prefetch { "1" } else { "0" })
        .env("RNN_BACKENDS", "opencl")
        .env_remove("RNN_CACHE")
        .env_remove("RNN_KERNEL_TIER0")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if stdout.contains("child: no OpenCL device") {
        return None;
    }
    assert!(
        out.status.success() && stdout.contains("child done"),
        "{work}: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    Some(stdout)
}

/// Skips a test whose child found no OpenCL device, or fails it where OpenCL is required.
pub(super) fn skip_without_opencl(test: &str) {
    assert!(
        !is_required(Target::OpenCl),
        "required backend missing (RNN_REQUIRE_BACKENDS): no OpenCL device"
    );
    println!("SKIP {test}: no OpenCL device");
}

fn child(work: &str) {
    let Some(ctx) = child_context() else {
        return;
    };
    let ops = ctx.ops();
    let x = ops.alloc(64).unwrap();
    let y = ops.alloc(64).unwrap();
    for step in work.split('+') {
        match step {
            "fill" => ops.fill(x.view(), 0.5).unwrap(),
            "softmax" => ops.softmax(x.view(), y.view(), 8, 8).unwrap(),
            "warm_up" => ctx.warm_up().unwrap(),
            other => panic!("unknown step {other}"),
        }
    }
    ops.synchronize().unwrap();
    println!("child done");
}

/// Runs the children's `work` in a fresh cache directory; the number of entries it left, or
/// `None` when the child found no OpenCL device.
fn entries_after(work: &str) -> Option<usize> {
    let tmp = TempDir::new("lazy");
    let test = "lazy_modules::op_set_modules_build_on_first_use";
    run_child(test, (CHILD_WORK, work), &tmp, false)?;
    Some(KernelCache::at(tmp.path()).stats().unwrap().entries)
}

#[test]
fn op_set_modules_build_on_first_use() {
    if let Ok(work) = std::env::var(CHILD_WORK) {
        return child(&work);
    }
    let Some(one) = entries_after("fill") else {
        return skip_without_opencl("op_set_modules_build_on_first_use");
    };
    assert_eq!(one, 1, "one elementwise op, one module");
    assert_eq!(
        entries_after("fill+softmax"),
        Some(2),
        "elementwise and reduce"
    );
    let all = entries_after("warm_up").unwrap();
    assert!(all >= 8, "warm_up built every family: {all} entries");
    assert_eq!(entries_after("fill+warm_up"), Some(all), "each module once");
}
