//! Optimizer state over the flat parameter buffer: one op launch per step.

use crate::buffer::{Buffer, View};
use crate::error::{Error, Result};
use crate::ops::{Ops, OptimBuffers, optimizer_state, zeros};

use super::config::{Optimizer, OptimizerStep};

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
        })
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
        self.queue(ops, params, grads)?;
        self.count_step();
        Ok(())
    }

    /// Counts a step queued by [`OptimizerState::queue`] (or replayed from a graph that
    /// recorded one).
    pub(crate) fn count_step(&mut self) {
        self.step += 1;
    }

    /// Queues one update without counting it: the same launch every call, as a recorded
    /// graph needs. The device advances its own step count.
    pub(crate) fn queue(&self, ops: &dyn Ops, params: View<'_>, grads: View<'_>) -> Result<()> {
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
        match self.optimizer.step() {
            OptimizerStep::Sgd(s) => {
                // Without momentum the op does not touch the velocity; any view of the right
                // length satisfies the signature.
                let vel = self.a.as_ref().map_or(grads, |b| b.view());
                ops.sgd_step(buffers, vel, s)
            }
            OptimizerStep::Adam(s) => {
                let (Some(m), Some(v)) = (&self.a, &self.b) else {
                    unreachable!("Adam state has both moments");
                };
                ops.adam_step(buffers, m.view(), v.view(), s)
            }
        }
    }
}
