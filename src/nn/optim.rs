//! Optimizer state over the flat parameter buffer: one op launch per step.

use crate::buffer::{Buffer, View};
use crate::error::{Error, Result};
use crate::ops::{AdamStep, Ops, SgdStep, zeros};

use super::config::Optimizer;

/// The state of one optimizer over `len` parameters (velocity, or Adam's two moments), kept
/// on the device. Each [`OptimizerState::step`] is one `sgd_step` or `adam_step` launch.
pub struct OptimizerState {
    optimizer: Optimizer,
    len: usize,
    step: u64,
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
    /// Zeroed state for `len` parameters on `ops`' device.
    pub fn new(ops: &dyn Ops, optimizer: Optimizer, len: usize) -> Result<Self> {
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
            a,
            b,
        })
    }

    /// Steps taken so far.
    pub fn steps(&self) -> u64 {
        self.step
    }

    /// Applies one update to `params` from `grads` (both `len` long).
    pub fn step(
        &mut self,
        ops: &dyn Ops,
        params: View<'_>,
        grads: View<'_>,
        lr: f32,
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
        self.step += 1;
        match self.optimizer {
            Optimizer::Sgd {
                momentum,
                weight_decay,
                nesterov,
            } => {
                // Without momentum the op does not touch the velocity; any view of the right
                // length satisfies the signature.
                let vel = self.a.as_ref().map_or(grads, |b| b.view());
                ops.sgd_step(
                    params,
                    grads,
                    vel,
                    SgdStep {
                        lr,
                        momentum,
                        weight_decay,
                        nesterov,
                    },
                )
            }
            Optimizer::Adam {
                beta1,
                beta2,
                eps,
                weight_decay,
            }
            | Optimizer::AdamW {
                beta1,
                beta2,
                eps,
                weight_decay,
            } => {
                let (Some(m), Some(v)) = (&self.a, &self.b) else {
                    unreachable!("Adam state has both moments");
                };
                ops.adam_step(
                    params,
                    grads,
                    m.view(),
                    v.view(),
                    AdamStep {
                        lr,
                        beta1,
                        beta2,
                        eps,
                        weight_decay,
                        decoupled: matches!(self.optimizer, Optimizer::AdamW { .. }),
                        step: self.step,
                    },
                )
            }
        }
    }
}
