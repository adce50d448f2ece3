//! Tiered kernels on a cold start: with a background prefetch and an empty kernel cache, a GEMM
//! launches the tier-0 stand-in (`sgemm_tier0`) and a `fill` tier 0's copy, and nothing else is
//! built (on OpenCL the GEMM families are built on first use, carried by the stand-in until it
//! has done enough work); once the families are built the GEMM runs its own kernel. From a
//! warm cache the stand-in is never built: no tier-0 entry appears in the cache and the kernels
//! are final from the first GEMM on. In child processes on an OpenCL device (PoCL in CI), each
//! with its own `RNN_CACHE_DIR`, as `lazy_modules.rs` runs them.

use rnn::Gemm;
use rnn::cache::KernelCache;

use super::cache::TempDir;
use super::lazy_modules::{child_context, run_child, skip_without_opencl};

/// Set in the children: `gemm` (two products around a `warm_up`) or `warm_up`.
const CHILD_WORK: &str = "RNN_TIER0_CHILD";

/// One `m x n x k` product on `ctx`, checked against the host; whether the context's kernels
/// were final right after it.
fn checked_gemm(ctx: &rnn::Context) -> bool {
    let (m, n, k) = (70, 50, 40);
    let a: Vec<f32> = (0..m * k)
        .map(|i| ((i * 7 % 13) as f32 - 6.0) / 8.0)
        .collect();
    let b: Vec<f32> = (0..k * n)
        .map(|i| ((i * 5 % 11) as f32 - 5.0) / 4.0)
        .collect();
    let ops = ctx.ops();
    let (da, db, dc) = (
        ops.alloc(m * k).unwrap(),
        ops.alloc(k * n).unwrap(),
        ops.alloc(m * n).unwrap(),
    );
    ops.upload(da.view(), &a).unwrap();
    ops.upload(db.view(), &b).unwrap();
    ops.fill(dc.view(), f32::NAN).unwrap();
    ops.gemm(Gemm::new(m, n, k), da.view(), db.view(), dc.view())
        .unwrap();
    let finished = ctx.execution().kernels_final();
    let mut c = vec![0.0; m * n];
    ops.download(dc.view(), &mut c).unwrap();
    for i in 0..m {
        for j in 0..n {
            let want: f32 = (0..k).map(|p| a[i * k + p] * b[p * n + j]).sum();
            let got = c[i * n + j];
            assert!(
                (got - want).abs() <= 1e-4 * (1.0 + want.abs()),
                "c[{i}][{j}] = {got}, expected {want}"
            );
        }
    }
    finished
}

fn child(work: &str) {
    let Some(ctx) = child_context() else {
        return;
    };
    match work {
        "warm_up" => ctx.warm_up().unwrap(),
        "gemm" => {
            println!("final after the first gemm: {}", checked_gemm(&ctx));
            let cached = KernelCache::from_env().stats().unwrap().entries;
            println!("cache entries after the first gemm: {cached}");
            ctx.warm_up().unwrap();
            println!("final after warm_up: {}", checked_gemm(&ctx));
        }
        other => panic!("unknown work {other}"),
    }
    println!("child done");
}

/// The child's output for `work` with the prefetch on or off in `cache`, or `None` when it
/// found no OpenCL device.
fn child_run(work: &str, prefetch: bool, cache: &TempDir) -> Option<String> {
    let test = "tier0::a_cold_start_uses_tier0_and_a_warm_one_never";
    run_child(test, (CHILD_WORK, work), cache, prefetch)
}

fn entries(cache: &TempDir) -> usize {
    KernelCache::at(cache.path()).stats().unwrap().entries
}

#[test]
fn a_cold_start_uses_tier0_and_a_warm_one_never() {
    if let Ok(work) = std::env::var(CHILD_WORK) {
        return child(&work);
    }
    // Warm: every family in the cache first (warm_up builds no tier 0), then a prefetching
    // context's GEMM loads its family and builds nothing new.
    let warm = TempDir::new("tier0-warm");
    if child_run("warm_up", false, &warm).is_none() {
        return skip_without_opencl("a_cold_start_uses_tier0_and_a_warm_one_never");
    }
    let families = entries(&warm);
    let out = child_run("gemm", true, &warm).unwrap();
    assert!(out.contains("final after the first gemm: true"), "{out}");
    assert_eq!(entries(&warm), families, "a warm start built tier 0");
    // Cold: the prefetch builds tier 0 alone (one build at a time on OpenCL), whose stand-in
    // takes the GEMM and whose copy of `fill` the upload's fill: nothing else is built, and no
    // family is building, so the kernels are final (a recording would wait for the GEMM
    // family). After warm_up the family's kernel runs, and the cache holds the families and
    // tier 0.
    let cold = TempDir::new("tier0-cold");
    let out = child_run("gemm", true, &cold).unwrap();
    assert!(
        out.contains("cache entries after the first gemm: 1\n"),
        "{out}"
    );
    assert!(out.contains("final after the first gemm: true"), "{out}");
    assert!(out.contains("final after warm_up: true"), "{out}");
    assert_eq!(entries(&cold), families + 1, "the families and tier 0");
}
