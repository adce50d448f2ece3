//! Runtimes: discovery, the kernel cache, kernel compilation for every dialect and target, the
//! HIP backend's library selection with the `tests/hip-shim` fixture, and the crate's module graph
//! (no import circles).

mod cache;
#[cfg(unix)]
mod cache_trust;
#[cfg(feature = "cuda")]
mod cuda_compile;
#[cfg(feature = "hip")]
mod hip_compile;
#[cfg(feature = "hip")]
mod hip_shim;
#[cfg(feature = "opencl")]
mod lazy_modules;
mod module_graph;
#[cfg(feature = "cuda")]
mod opencl_inline_ptx;
#[cfg(any(feature = "cuda", feature = "opencl"))]
mod product;
#[path = "../support/mod.rs"]
mod support;
#[cfg(feature = "opencl")]
mod tier0;
#[cfg(feature = "cuda")]
mod vendor_stand_in;
