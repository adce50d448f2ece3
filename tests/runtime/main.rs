//! Runtimes: discovery, the kernel cache, kernel compilation for every dialect and target, and
//! the HIP backend's library selection with the `tests/hip-shim` fixture.

mod cache;
#[cfg(feature = "cuda")]
mod cuda_compile;
#[cfg(feature = "hip")]
mod hip_compile;
#[cfg(feature = "hip")]
mod hip_shim;
#[path = "../support/mod.rs"]
mod support;
