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

    /// Dynamic loss scaling, before the optimizer step: `grads[i] *= 1 / scaler[0]` (f32
    /// gradients of a loss multiplied by the scale), and `found_inf[0] = 1` if any gradient is
    /// inf or NaN, else `0`. `scaler` is a [`SCALER_STATE_LEN`] state ([`scaler_state`]),
    /// `found_inf` one f32; all f32, on the device: no host sync, so a captured training step
    /// replays it.
    fn unscale_and_check(
        &self,
        grads: View<'_>,
        scaler: View<'_>,
        found_inf: View<'_>,
    ) -> Result<()>;

    /// Updates the loss scale after a step as PyTorch's `GradScaler` does: where `found_inf[0]`
    /// is set, `scale *= backoff` and the growth tracker restarts; else the tracker counts the
    /// step, and after `interval` clean steps in a row `scale *= growth` (kept only if finite)
    /// and the tracker restarts. On the device, like [`OptimOps::unscale_and_check`].
    fn update_scale(&self, scaler: View<'_>, found_inf: View<'_>, s: ScaleUpdate) -> Result<()>;

    /// [`OptimOps::sgd_step`] for mixed-precision training: skipped entirely (parameters,
    /// velocity and state unchanged) where `mp.found_inf[0]` is not 0; else the f32 update,
    /// whose new parameters are also stored, rounded, in `mp.low` (bf16 or f16).
    fn sgd_step_mixed(
        &self,
        b: OptimBuffers<'_>,
        velocity: View<'_>,
        s: SgdStep,
        mp: MixedUpdate<'_>,
    ) -> Result<()>;

    /// [`OptimOps::adam_step`] for mixed-precision training, skipped and writing the low copy
    /// as [`OptimOps::sgd_step_mixed`] does.
    fn adam_step_mixed(
        &self,
        b: OptimBuffers<'_>,
        m: View<'_>,
        v: View<'_>,
        s: AdamStep,
        mp: MixedUpdate<'_>,
    ) -> Result<()>;
}

/// Length of the device-side loss-scaler state of [`OptimOps::unscale_and_check`] and
/// [`OptimOps::update_scale`]: `[scale, growth tracker]` (clean steps in a row).
pub const SCALER_STATE_LEN: usize = 2;

/// A new loss-scaler state: the scale `init` (PyTorch's `GradScaler` starts at 65536), no
/// clean steps yet.
pub fn scaler_state(ops: &(impl MemoryOps + ?Sized), init: f32) -> Result<Buffer> {
    let b = ops.alloc(SCALER_STATE_LEN)?;
    ops.upload(b.view(), &[init, 0.0])?;
    Ok(b)
}

/// How [`OptimOps::update_scale`] changes the scale; the default is PyTorch's `GradScaler`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScaleUpdate {
    /// Factor after `interval` clean steps in a row (2.0).
    pub growth: f32,
    /// Factor after a step with inf/NaN gradients (0.5).
    pub backoff: f32,
    /// Clean steps in a row before the scale grows (2000).
    pub interval: u32,
}

impl Default for ScaleUpdate {
    fn default() -> Self {
        ScaleUpdate {
            growth: 2.0,
            backoff: 0.5,
            interval: 2000,
        }
    }
}

/// The mixed-precision part of an optimizer step: the low copy of the parameters it refreshes
/// and the flag that skips it.
#[derive(Debug, Clone, Copy)]
pub struct MixedUpdate<'a> {
    /// The bf16 or f16 copy of the parameters (as long as they) that the forward reads.
    pub low: View<'a>,
    /// One f32: not 0 skips the step ([`OptimOps::unscale_and_check`] sets it; training
    /// without loss scaling passes a zero).
    pub found_inf: View<'a>,
}

impl<'a> MixedUpdate<'a> {
    /// The low copy and the skip flag.
    pub fn new(low: View<'a>, found_inf: View<'a>) -> Self {
        MixedUpdate { low, found_inf }
    }
}
