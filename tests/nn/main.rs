//! Layers, losses, optimizers and training: gradient checks, convergence, bad input.

#[path = "../support/mod.rs"]
mod support;

mod checkpoint;
mod data_parallel;
mod errors;
mod gated;
mod gradcheck;
mod optim;
mod robust;
mod train;
