//! Runtimes: discovery, the kernel cache, kernel compilation for every dialect and target, the
//! HIP backend's library selection with the `tests/hip-shim` fixture, and the crate's module graph
//! (no import circles).

mod cache;
#[cfg(unix)]
mod cache_trust;
mod cuda_compile;
mod hip_compile;
mod hip_shim;
mod module_graph;
#[path = "../support/mod.rs"]
mod support;
