//! Neural networks: layers, losses, optimizers, the training loop.
// SKELETON: replaced by the nn implementation.
