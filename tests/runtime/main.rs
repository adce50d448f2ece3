//! Runtimes: discovery, the kernel cache, kernel compilation for every dialect and target.

mod cache;
mod cuda_compile;
mod hip_compile;
#[path = "../support/mod.rs"]
mod support;
