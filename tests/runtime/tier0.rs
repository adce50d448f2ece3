//! Tiered kernels on a cold start: with a background prefetch and an empty kernel cache, a GEMM
//! launches the tier-0 stand-in (`sgemm_tier0`) and a `fill` tier 0's copy, and nothing else is
//! built (on OpenCL the GEMM families are built on first use, carried by the stand-in until it
//! has done enough work); once the families are built the GEMM runs its own kernel. From a
//! warm cache the stand-in is never built: no tier-0 entry appears in the cache and the kernels
//! are final from the first GEMM on. In child processes on an OpenCL device (PoCL in CI), each
//! with its own `RNN_CACHE_DIR`, as `lazy_modules.rs` runs them.

use rnn::cache::KernelCache;

use super::cache::TempDir;
use super::lazy_modules::{child_context, run_child, skip_without_opencl};
use super::product::checked_product;

/// Set in the children: `gemm` (two products around a `warm_up`), `one_gemm` (a product and
/// the context's drop), `gemm_until_final` (a product, then a wait for the kernels to be final)
/// or `warm_up`.
const CHILD_WORK: &str = "RNN_TIER0_CHILD";

/// One `70 x 50 x 40` product on `ctx`, as [`checked_product`].
fn checked_gemm(ctx: &rnn::Context) -> bool {
    checked_product(ctx, (70, 50, 40))
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
        "one_gemm" => {
            println!("final after the first gemm: {}", checked_gemm(&ctx));
        }
        "gemm_until_final" => {
            checked_gemm(&ctx);
            // The prefetch builds the family the stand-in carried; graphs wait until then.
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
            while !ctx.execution().kernels_final() && std::time::Instant::now() < deadline {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            println!("final in the end: {}", ctx.execution().kernels_final());
        }
        other => panic!("unknown work {other}"),
    }
    println!("child done");
}

/// The child's output for `work` with the prefetch on or off in `cache`, or `None` when it
/// found no OpenCL device.
fn child_run(work: &str, prefetch: bool, cache: &TempDir) -> Option<String> {
    child_of(
        "tier0::a_cold_start_uses_tier0_and_a_warm_one_never",
        work,
        prefetch,
        cache,
    )
}

/// The output of test `test` run as a child doing `work`, as [`child_run`].
fn child_of(test: &str, work: &str, prefetch: bool, cache: &TempDir) -> Option<String> {
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

#[test]
fn a_start_after_a_cold_one_builds_the_family_its_stand_in_carried() {
    if let Ok(work) = std::env::var(CHILD_WORK) {
        return child(&work);
    }
    let test = "tier0::a_start_after_a_cold_one_builds_the_family_its_stand_in_carried";
    let cache = TempDir::new("tier0-second");
    // Cold: the stand-in carries the product, far below the work that would start its
    // family's build: tier 0 is all the cache gets.
    let Some(out) = child_of(test, "one_gemm", true, &cache) else {
        return skip_without_opencl(test);
    };
    assert!(out.contains("final after the first gemm: true"), "{out}");
    assert_eq!(
        entries(&cache),
        1,
        "a cold start that built more than tier 0"
    );
    // The second start finds tier 0 cached: its prefetch loads it and builds the family the
    // stand-in carried (and the other one it may carry, `gemm_thin`, unless the context is
    // dropped first); the stand-in takes the product meanwhile, and graphs wait for the family.
    let out = child_of(test, "gemm_until_final", true, &cache).unwrap();
    assert!(out.contains("final in the end: true"), "{out}");
    let second = entries(&cache);
    assert!(
        (2..=3).contains(&second),
        "tier 0 and the GEMM families, not {second} entries"
    );
    // The third runs the family's kernel, loaded from the cache: no stand-in, so no build
    // keeps the kernels from being final; it builds no more than a GEMM family left over.
    let out = child_of(test, "one_gemm", true, &cache).unwrap();
    assert!(out.contains("final after the first gemm: true"), "{out}");
    assert!(
        entries(&cache) <= 3,
        "a third start built more than the GEMM families"
    );
}
