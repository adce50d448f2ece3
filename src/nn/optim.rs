//! Optimizer state over the flat parameter buffer: one op launch per step.

use crate::buffer::{Buffer, View};
use crate::error::{Error, Result};
use crate::ops::{
    MixedUpdate, Ops, OptimBuffers, ScaleUpdate, optimizer_state, scaler_state, zeros,
};

use super::config::{Optimizer, OptimizerStep};
use super::precision::{INITIAL_LOSS_SCALE, Precision};

/// An optimizer's state read back from the device, for training checkpoints.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct OptimizerSnapshot {
    /// Steps taken.
    pub step: u64,
    /// The learning rate in the device state.
    pub lr: f32,
    /// The device state (`ops::OPTIMIZER_STATE_LEN` values).
    pub hyper: Vec<f32>,
    /// Velocity or Adam's first moment.
    pub a: Option<Vec<f32>>,
    /// Adam's second moment.
    pub b: Option<Vec<f32>>,
    /// An f16 run's loss scaler: `[scale, growth tracker, steps skipped]`.
    pub scaler: Option<Vec<f32>>,
}

/// The mixed-precision part of an optimizer ([`Precision::Bf16`], [`Precision::F16`]): the
/// device-side flag that skips a step and, for f16, the loss scaler.
struct Mixed {
    /// One f32, set by the unscale of an f16 step whose gradients hold inf/NaN; stays zero in
    /// bf16.
    found_inf: Buffer,
    /// f16: `[scale, growth tracker]` ([`crate::ops::SCALER_STATE_LEN`]) and one f32 counting
    /// the skipped steps, both advanced on the device.
    scaler: Option<(Buffer, Buffer)>,
}

/// The state of one optimizer over `len` parameters (velocity, or Adam's two moments, and the
/// learning rate and step count), kept on the device. Each [`OptimizerState::step`] is one
/// `sgd_step` or `adam_step` launch, with the same arguments every time, so it can be recorded
/// into a graph and replayed.
pub struct OptimizerState {
    optimizer: Optimizer,
    len: usize,
    step: u64,
    /// The learning rate last written to the device state.
    lr: f32,
    /// `[lr, step, bias corrections]` on the device (`ops::OPTIMIZER_STATE_LEN`).
    hyper: Buffer,
    a: Option<Buffer>,
    b: Option<Buffer>,
    mixed: Option<Mixed>,
}

impl std::fmt::Debug for OptimizerState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "OptimizerState({:?}, {} params, step {})",
            self.optimizer, self.len, self.step
        )
    }
}

impl OptimizerState {
    /// Zeroed state for `len` parameters on `ops`' device, starting at learning rate `lr`.
    pub fn new(ops: &dyn Ops, optimizer: Optimizer, len: usize, lr: f32) -> Result<Self> {
        optimizer.validate()?;
        let (a, b) = match optimizer {
            Optimizer::Sgd { momentum: 0.0, .. } => (None, None),
            Optimizer::Sgd { .. } => (Some(zeros(ops, len)?), None),
            Optimizer::Adam { .. } | Optimizer::AdamW { .. } => {
                (Some(zeros(ops, len)?), Some(zeros(ops, len)?))
            }
        };
        Ok(OptimizerState {
            optimizer,
            len,
            step: 0,
            lr,
            hyper: optimizer_state(ops, lr)?,
            a,
            b,
            mixed: None,
        })
    }

    /// This state made for training in `precision`: `Bf16` and `F16` take the mixed steps
    /// (`sgd_step_mixed`, `adam_step_mixed`: every optimizer of the crate has one), which also
    /// round the new parameters into the network's low copy; `F16` adds the loss scaler.
    pub(crate) fn for_precision(mut self, ops: &dyn Ops, precision: Precision) -> Result<Self> {
        self.mixed = match precision.low_dtype() {
            None => None,
            Some(_) => Some(Mixed {
                found_inf: zeros(ops, 1)?,
                scaler: precision
                    .scales_loss()
                    .then(|| -> Result<(Buffer, Buffer)> {
                        Ok((scaler_state(ops, INITIAL_LOSS_SCALE)?, zeros(ops, 1)?))
                    })
                    .transpose()?,
            }),
        };
        Ok(self)
    }

    /// The device-side loss scale (one f32) the loss gradient is multiplied by; `None` when
    /// the run does not scale (everything but f16).
    pub(crate) fn loss_scale(&self) -> Option<View<'_>> {
        let (scaler, _) = self.mixed.as_ref()?.scaler.as_ref()?;
        scaler.slice(0, 1).ok()
    }

    /// f16: divides the gradients by the loss scale and sets the skip flag where one is not
    /// finite. Nothing otherwise.
    pub(crate) fn unscale(&self, ops: &dyn Ops, grads: View<'_>) -> Result<()> {
        match self.mixed.as_ref() {
            Some(Mixed {
                found_inf,
                scaler: Some((scaler, _)),
            }) => ops.unscale_and_check(grads, scaler.view(), found_inf.view()),
            _ => Ok(()),
        }
    }

    /// f16, after the step: the scale backs off or grows (PyTorch's `GradScaler` rules) and
    /// a skipped step is counted, on the device. Nothing otherwise.
    pub(crate) fn update_scale(&self, ops: &dyn Ops) -> Result<()> {
        match self.mixed.as_ref() {
            Some(Mixed {
                found_inf,
                scaler: Some((scaler, skipped)),
            }) => {
                ops.axpy(1.0, found_inf.view(), skipped.view())?;
                ops.update_scale(scaler.view(), found_inf.view(), ScaleUpdate::default())
            }
            _ => Ok(()),
        }
    }

    /// f16: the loss scale and the steps skipped so far, read from the device; `None` for a
    /// run without loss scaling.
    pub(crate) fn scaler_report(&self, ops: &dyn Ops) -> Result<Option<(f32, u64)>> {
        let Some((scaler, skipped)) = self.mixed.as_ref().and_then(|m| m.scaler.as_ref()) else {
            return Ok(None);
        };
        let mut s = [0.0f32; 2];
        ops.download(scaler.view(), &mut s)?;
        let mut k = [0.0f32];
        ops.download(skipped.view(), &mut k)?;
        Ok(Some((s[0], k[0] as u64)))
    }

    /// The learning rate of the next steps.
    pub fn learning_rate(&self) -> f32 {
        self.lr
    }

    /// Changes the learning rate of the next steps: one small upload, only when it changed
    /// (a recorded step reads it from the device, so nothing is recorded again).
    pub fn set_learning_rate(&mut self, ops: &dyn Ops, lr: f32) -> Result<()> {
        if lr != self.lr {
            ops.upload(self.hyper.slice(0, 1)?, &[lr])?;
            self.lr = lr;
        }
        Ok(())
    }

    /// Steps taken so far.
    pub fn steps(&self) -> u64 {
        self.step
    }

    /// Everything a training checkpoint needs to continue exactly: the device state
    /// (learning rate, step count, bias corrections) and the moment buffers, read from the
    /// device.
    pub(crate) fn snapshot(&self, ops: &dyn Ops) -> Result<OptimizerSnapshot> {
        let read = |b: &Buffer| -> Result<Vec<f32>> {
            let mut v = vec![0.0; b.len()];
            ops.download(b.view(), &mut v)?;
            Ok(v)
        };
        Ok(OptimizerSnapshot {
            step: self.step,
            lr: self.lr,
            hyper: read(&self.hyper)?,
            a: self.a.as_ref().map(read).transpose()?,
            b: self.b.as_ref().map(read).transpose()?,
            scaler: match self.mixed.as_ref().and_then(|m| m.scaler.as_ref()) {
                Some((scaler, skipped)) => Some([read(scaler)?, read(skipped)?].concat()),
                None => None,
            },
        })
    }

    /// Puts back a [`OptimizerState::snapshot`] of an optimizer of the same kind and size.
    pub(crate) fn restore(&mut self, ops: &dyn Ops, snap: &OptimizerSnapshot) -> Result<()> {
        let fits = |b: &Option<Buffer>, v: &Option<Vec<f32>>| match (b, v) {
            (Some(b), Some(v)) => b.len() == v.len(),
            (None, None) => true,
            _ => false,
        };
        if snap.hyper.len() != self.hyper.len()
            || !fits(&self.a, &snap.a)
            || !fits(&self.b, &snap.b)
        {
            return Err(Error::InvalidArgument(format!(
                "the saved optimizer state does not fit {self:?}"
            )));
        }
        ops.upload(self.hyper.view(), &snap.hyper)?;
        // A checkpoint of another precision leaves this run's fresh scaler as it is.
        if let (Some((scaler, skipped)), Some(saved)) = (
            self.mixed.as_ref().and_then(|m| m.scaler.as_ref()),
            &snap.scaler,
        ) && saved.len() == scaler.len() + 1
        {
            ops.upload(scaler.view(), &saved[..scaler.len()])?;
            ops.upload(skipped.view(), &saved[scaler.len()..])?;
        }
        for (buf, values) in [(&self.a, &snap.a), (&self.b, &snap.b)] {
            if let (Some(buf), Some(values)) = (buf, values) {
                ops.upload(buf.view(), values)?;
            }
        }
        self.step = snap.step;
        self.lr = snap.lr;
        Ok(())
    }

    /// Applies one update to `params` from `grads` (both `len` long) at the current learning
    /// rate.
    pub fn step(&mut self, ops: &dyn Ops, params: View<'_>, grads: View<'_>) -> Result<()> {
        self.queue(ops, params, grads, None)?;
        self.count_step();
        Ok(())
    }

    /// Counts a step queued by [`OptimizerState::queue`] (or replayed from a graph that
    /// recorded one).
    pub(crate) fn count_step(&mut self) {
        self.step += 1;
    }

    /// Queues one update without counting it: the same launch every call, as a recorded
    /// graph needs. The device advances its own step count. A mixed-precision state takes the
    /// mixed step, which also writes `low`, the low copy of the parameters.
    pub(crate) fn queue(
        &self,
        ops: &dyn Ops,
        params: View<'_>,
        grads: View<'_>,
        low: Option<View<'_>>,
    ) -> Result<()> {
        if params.len() != self.len || grads.len() != self.len {
            return Err(Error::shape(
                "optimizer step",
                format!(
                    "state for {} parameters, given {} parameters and {} gradients",
                    self.len,
                    params.len(),
                    grads.len()
                ),
            ));
        }
        let buffers = OptimBuffers::new(params, grads, self.hyper.view());
        let mixed = match (&self.mixed, low) {
            (Some(m), Some(low)) => Some(MixedUpdate::new(low, m.found_inf.view())),
            (None, _) => None,
            (Some(_), None) => {
                return Err(Error::InvalidArgument(
                    "a mixed-precision optimizer step needs the low copy of the parameters \
                     (Network::set_precision makes it)"
                        .into(),
                ));
            }
        };
        match (self.optimizer.step(), mixed) {
            (OptimizerStep::Sgd(s), mp) => {
                // Without momentum the op does not touch the velocity; any view of the right
                // length satisfies the signature.
                let vel = self.a.as_ref().map_or(grads, |b| b.view());
                match mp {
                    Some(mp) => ops.sgd_step_mixed(buffers, vel, s, mp),
                    None => ops.sgd_step(buffers, vel, s),
                }
            }
            (OptimizerStep::Adam(s), mp) => {
                let (Some(m), Some(v)) = (&self.a, &self.b) else {
                    unreachable!("Adam state has both moments");
                };
                match mp {
                    Some(mp) => ops.adam_step_mixed(buffers, m.view(), v.view(), s, mp),
                    None => ops.adam_step(buffers, m.view(), v.view(), s),
                }
            }
        }
    }
}
