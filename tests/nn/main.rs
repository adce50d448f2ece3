//! Layers, losses, optimizers and training: gradient checks, convergence, bad input.

#[cfg(feature = "onnx")]
#[path = "../support/onnx_case.rs"]
mod onnx_case;
#[path = "../support/mod.rs"]
mod support;

mod checkpoint;
mod data_parallel;
mod errors;
mod eval_graphs;
mod fixtures;
mod follow;
mod gated;
mod gradcheck;
mod layers;
mod nccl_loop;
#[cfg(feature = "onnx")]
mod onnx;
mod optim;
mod replicas;
mod robust;
mod stacked;
mod stream;
mod train;
mod ux;
