//! Runtimes: discovery, the kernel cache, kernel compilation for every dialect and target, and
//! the HIP backend's library selection with the `tests/hip-shim` fixture.

mod cache;
#[cfg(unix)]
mod cache_trust;
mod cuda_compile;
mod hip_compile;
mod hip_shim;
#[path = "../support/mod.rs"]
mod support;
