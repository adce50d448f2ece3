//! # rnn
//!
//! Finds every GPU a machine has — through CUDA, OpenCL and ROCm/HIP, all loaded at run time —
//! compiles and caches compute kernels for it, and trains dense and recurrent neural networks on
//! whichever device is chosen. A multi-threaded CPU backend is the fallback and the numerical
//! reference.
//!
//! ```
//! let manager = rnn::GpuManager::new()?;
//! for d in manager.devices() {
//!     println!("{d}");
//! }
//! let ctx = manager.create_context(rnn::DeviceId::Cpu)?;
//! let t = ctx.tensor(&[3], &[1.0, 2.0, 3.0])?;
//! assert_eq!(t.to_vec()?, vec![1.0, 2.0, 3.0]);
//! # Ok::<(), rnn::Error>(())
//! ```
#![warn(missing_docs)]

pub mod backend;
mod backend_kind;
mod buffer;
pub mod cache;
mod context;
mod context_options;
mod device;
pub mod dist;
mod env_switch;
mod error;
mod fsutil;
pub mod graph;
pub mod kernel;
mod manager;
pub mod monitor;
pub mod nn;
pub mod ops;
mod tensor;

// The README's examples compile and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

pub use buffer::{Buffer, View};
pub use context::{Context, ContextOptions};
pub use device::{BackendKind, DeviceId, DeviceInfo, DeviceKind};
pub use error::{Error, Result};
pub use kernel::{Dialect, Kernel, KernelArg, KernelSource, LaunchConfig};
pub use manager::{BackendStatus, GpuManager};
pub use ops::{
    Activation, AdamStep, Gemm, KernelTime, Ops, RNG_STATE_LEN, SeqShape, SgdStep, rng_state,
};
pub use tensor::Tensor;
