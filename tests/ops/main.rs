//! The op set on every backend: CPU against plain reference loops, every GPU backend against the
//! CPU backend (property tests, poisoned outputs, relative-error bounds).

mod backend_suite;
mod concurrency;
mod cpu_reference;
#[path = "../support/mod.rs"]
mod support;
