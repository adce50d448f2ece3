//! Layers, losses, optimizers and training: gradient checks, convergence, bad input.

#[path = "../support/mod.rs"]
mod support;

mod checkpoint;
mod data_parallel;
mod errors;
mod eval_graphs;
mod follow;
mod gated;
mod gradcheck;
mod layers;
mod optim;
mod replicas;
mod robust;
mod stacked;
mod train;
mod ux;
