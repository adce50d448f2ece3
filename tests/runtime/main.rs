//! Runtimes: discovery, the kernel cache, kernel compilation for every dialect and target.

mod cache;
#[path = "../support/mod.rs"]
mod support;
