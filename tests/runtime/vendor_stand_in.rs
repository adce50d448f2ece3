//! On a cold CUDA start with a background prefetch, cuBLAS takes the thin products while the
//! thin kernels' family builds (`OpSet::vendor_stands_in`): the first product is right at once,
//! graphs wait for the family, and after `warm_up` the family's own kernel runs. In a child
//! process with its own empty `RNN_CACHE_DIR` and only the CUDA runtime loaded.

use std::ffi::OsStr;

use rnn::GpuManager;

use super::cache::TempDir;
use super::product::checked_product;
use super::support::{Target, is_required, run_child};

/// Set in the child.
const CHILD: &str = "RNN_VENDOR_STAND_IN_CHILD";

/// A product with a short side (n <= 16): the thin kernels' (`sgemm_thin`).
const THIN: (usize, usize, usize) = (2048, 8, 300);

fn child() {
    let manager = GpuManager::new().unwrap();
    let Some(device) = manager
        .devices()
        .iter()
        .find(|d| d.backend == rnn::BackendKind::Cuda)
    else {
        println!("child: no CUDA device");
        return;
    };
    let ctx = manager.create_context(device.id).unwrap();
    println!(
        "final after the first product: {}",
        checked_product(&ctx, THIN)
    );
    ctx.warm_up().unwrap();
    println!("final after warm_up: {}", checked_product(&ctx, THIN));
    println!("child done");
}

#[test]
fn a_cold_cuda_start_puts_thin_products_on_cublas_while_their_kernels_build() {
    if std::env::var_os(CHILD).is_some() {
        return child();
    }
    let cache = TempDir::new("vendor-stand-in");
    let test =
        "vendor_stand_in::a_cold_cuda_start_puts_thin_products_on_cublas_while_their_kernels_build";
    // The disk cache on, in an empty directory; the prefetch on; tier 0 off, as unset on CUDA.
    let env: [(&str, &OsStr); 6] = [
        (CHILD, OsStr::new("1")),
        ("RNN_CACHE_DIR", cache.path().as_os_str()),
        ("RNN_CACHE", OsStr::new("on")),
        ("RNN_KERNEL_PREFETCH", OsStr::new("1")),
        ("RNN_KERNEL_TIER0", OsStr::new("off")),
        ("RNN_BACKENDS", OsStr::new("cuda")),
    ];
    let stdout = run_child(test, &env);
    if stdout.contains("child: no CUDA device") {
        assert!(
            !is_required(Target::Cuda),
            "required backend missing (RNN_REQUIRE_BACKENDS): no CUDA device"
        );
        println!("SKIP {test}: no CUDA device");
        return;
    }
    assert!(stdout.contains("child done"), "{stdout}");
    // Where CUDA is required (the GPU machine, which has cuBLAS), the first product ran on
    // cuBLAS while the thin kernels built (NVRTC takes seconds): graphs waited for them.
    if is_required(Target::Cuda) {
        assert!(
            stdout.contains("final after the first product: false"),
            "{stdout}"
        );
    }
    assert!(stdout.contains("final after warm_up: true"), "{stdout}");
}
