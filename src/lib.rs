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
//!
//! ## Cargo features
//!
//! All are on by default. Each runtime is loaded at run time either way; a feature decides
//! whether its binding is compiled at all.
//!
//! | Feature    | What it builds | Dependencies |
//! |------------|----------------|--------------|
//! | `cuda`     | the CUDA backend (driver API, NVRTC, cuBLAS) | `cudarc` |
//! | `opencl`   | the OpenCL backend | `opencl3`, `cl3` |
//! | `hip`      | the ROCm/HIP backend (`libamdhip64`, hiprtc) | — (`libloading`) |
//! | `nccl`     | the NCCL/RCCL binding of [`dist`] (several GPUs); useful with `cuda` (NCCL) or `hip` (RCCL), and implies neither | — (`libloading`) |
//! | `plot`     | `TrainingHistory::plot` and `nn::plot_history` (PNG, SVG) | `plotters`, `png` |
//! | `progress` | the progress bar of [`nn::Progress::Auto`] on a terminal | `indicatif` |
//! | `monitor`  | live device figures in [`monitor`]: NVML with `cuda`, ROCm SMI with `hip` | `nvml-wrapper` |
//! | `onnx`     | `Network::export_onnx` (ONNX files for ONNX Runtime and other tools) | `prost` |
//!
//! Without a runtime's feature, [`GpuManager::backends`] lists that runtime as unavailable,
//! "built without the `cuda` feature", and `RNN_DEVICE=cuda:0` is an error that says so; the
//! CPU backend is always built. Without `nccl`, multi-GPU training is
//! [`Error::CollectiveUnavailable`] with the same kind of reason. Without `plot`, the plotting
//! functions are absent (a compile error where they are called, rather than a run-time one);
//! without `progress`, `Progress::Auto` prints one plain line per epoch; without `monitor`,
//! [`monitor::figures`] is `None` and [`monitor::libraries`] says which feature is missing.
//!
//! The `testing` feature (off by default) exposes hooks for this crate's own tests and
//! benches; it is not part of the API.
#![warn(missing_docs)]
// The GPU op set (`backend::gpu`) and its launch machinery are generic over `backend::Device`: a
// build without any GPU runtime instantiates none of it. The default build's lints keep that
// code honest.
#![cfg_attr(
    not(any(feature = "cuda", feature = "opencl", feature = "hip")),
    allow(dead_code, unused_imports)
)]

pub mod backend;
mod backend_kind;
mod buffer;
pub mod cache;
mod context;
mod context_options;
mod device;
pub mod dist;
mod dtype;
mod dylib;
mod env_switch;
mod error;
mod fsutil;
pub mod graph;
pub mod kernel;
mod manager;
mod memory_limit;
pub mod monitor;
pub mod nn;
pub mod ops;
mod recurrent_algorithm;
mod tensor;

// The README's examples compile and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

pub use buffer::{Buffer, View};
pub use context::{Context, ContextOptions};
pub use device::{BackendKind, DeviceId, DeviceInfo, DeviceKind};
pub use dtype::{DType, Element};
pub use error::{Error, Result};
pub use kernel::{Dialect, Kernel, KernelArg, KernelSource, LaunchConfig};
pub use manager::{BackendStatus, GpuManager};
// The op layer's argument types, beside the trait that takes them; its helpers stay in `ops`.
#[doc(hidden)]
pub use backend::gpu::{HalfGemmDevice, half_gemm_route};
pub use ops::{Activation, AdamStep, Gemm, KernelTime, Ops, SeqShape, SgdStep};
pub use recurrent_algorithm::RecurrentAlgorithm;
pub use tensor::Tensor;
