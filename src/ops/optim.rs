//! Optimizers: one launch over the flat parameter, gradient and state buffers.

use super::{MemoryOps, OptimBuffers};
use crate::buffer::{Buffer, View};
use crate::error::Result;

/// Length of the device-side optimizer state read and advanced by [`OptimOps::sgd_step`] and
/// [`OptimOps::adam_step`]: `[lr, steps taken, 1 - beta1^steps, 1 - beta2^steps]`.
///
/// The learning rate and the step count live in device memory (not in kernel arguments) so a
/// captured training step ([`crate::Context::capture_begin`]) replays correctly while they change:
/// write a new learning rate into element 0 with [`MemoryOps::upload`] between steps. Make one with
/// [`optimizer_state`]. The step count is a float, exact up to 2^24 (16.7 million) steps; past
/// that it stops advancing, when Adam's bias corrections are 1 to float precision anyway.
pub const OPTIMIZER_STATE_LEN: usize = 4;

/// A fresh optimizer state (see [`OPTIMIZER_STATE_LEN`]): learning rate `lr`, no step taken.
pub fn optimizer_state(ops: &(impl MemoryOps + ?Sized), lr: f32) -> Result<Buffer> {
    let b = ops.alloc(OPTIMIZER_STATE_LEN)?;
    ops.upload(b.view(), &[lr, 0.0, 0.0, 0.0])?;
    Ok(b)
}

/// Hyper-parameters of one SGD step over a flat parameter buffer (the learning rate is in the
/// device-side state, see [`OPTIMIZER_STATE_LEN`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SgdStep {
    /// Momentum factor (0 disables the velocity buffer update).
    pub momentum: f32,
    /// L2 penalty added to the gradient (`g + wd * p`).
    pub weight_decay: f32,
    /// Nesterov momentum.
    pub nesterov: bool,
}

/// Hyper-parameters of one Adam/AdamW step (the learning rate and the step number are in the
/// device-side state, see [`OPTIMIZER_STATE_LEN`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdamStep {
    /// First-moment decay.
    pub beta1: f32,
    /// Second-moment decay.
    pub beta2: f32,
    /// Denominator epsilon (added after the square root, as PyTorch does).
    pub eps: f32,
    /// Weight decay: L2 on the gradient for Adam, decoupled (`p -= lr * wd * p`) for AdamW.
    pub weight_decay: f32,
    /// AdamW (decoupled weight decay) instead of Adam.
    pub decoupled: bool,
}

/// Optimizers: one launch over the flat parameter, gradient and state buffers.
pub trait OptimOps: MemoryOps {
    /// SGD with momentum: `g' = g + wd p`; `v = momentum v + g'`; step with `v` (or
    /// `g' + momentum v` for Nesterov); `p -= lr * step`, with `lr = state[0]`; then advances
    /// `state` by one step (see [`OPTIMIZER_STATE_LEN`]). With `momentum == 0`, `velocity` is
    /// not touched.
    fn sgd_step(&self, b: OptimBuffers<'_>, velocity: View<'_>, s: SgdStep) -> Result<()>;

    /// Adam/AdamW with PyTorch's semantics (bias-corrected moments, eps after the square root):
    /// takes step `t = state[1] + 1` with learning rate `state[0]`, and leaves `t` and its bias
    /// corrections in `state` (see [`OPTIMIZER_STATE_LEN`]).
    fn adam_step(&self, b: OptimBuffers<'_>, m: View<'_>, v: View<'_>, s: AdamStep) -> Result<()>;
}
