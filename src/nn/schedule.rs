//! Learning-rate schedules and early stopping. A schedule is a pure function of the global step,
//! so it needs no state of its own: resuming at step `s` resumes the schedule there too. The
//! trainer writes each new rate into the optimizer's device state between steps
//! ([`super::OptimizerState::set_learning_rate`]), which a recorded step graph reads, so nothing
//! is compiled or recorded again.

use crate::error::{Error, Result};

/// How the learning rate changes over a run. `base` below is
/// [`super::TrainingConfig::learning_rate`], `s` the 0-based global step about to run and `T`
/// the run's total steps (`epochs * steps per epoch`).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
#[non_exhaustive]
pub enum LrSchedule {
    /// `base` throughout.
    #[default]
    Constant,
    /// `base * gamma^(epoch / every_epochs)` (0-based epoch; PyTorch's `StepLR`).
    Step {
        /// Epochs between decays (> 0).
        every_epochs: usize,
        /// Factor per decay, in `(0, 1]`.
        gamma: f32,
    },
    /// Cosine annealing from `base` to `min_lr` over the run: `min_lr + (base - min_lr) *
    /// (1 + cos(pi * s / T)) / 2`.
    Cosine {
        /// The rate at the end (>= 0, below `base`).
        min_lr: f32,
    },
    /// Linear warmup from `base / warmup_steps` to `base` over the first `warmup_steps`
    /// steps, then cosine annealing to `min_lr` over the remaining ones.
    WarmupCosine {
        /// Steps of linear warmup (> 0).
        warmup_steps: usize,
        /// The rate at the end (>= 0, below `base`).
        min_lr: f32,
    },
}

impl LrSchedule {
    /// Checks the parameters against the base rate.
    pub fn validate(&self, base: f32) -> Result<()> {
        let bad = |what: String| Err(Error::InvalidArgument(what));
        let min_ok = |min_lr: f32| min_lr.is_finite() && min_lr >= 0.0 && min_lr <= base;
        match *self {
            LrSchedule::Constant => Ok(()),
            LrSchedule::Step {
                every_epochs,
                gamma,
            } => {
                if every_epochs == 0 {
                    return bad("LrSchedule::Step every_epochs must be > 0".into());
                }
                if !(gamma > 0.0 && gamma <= 1.0) {
                    return bad(format!(
                        "LrSchedule::Step gamma must be in (0, 1], got {gamma}"
                    ));
                }
                Ok(())
            }
            LrSchedule::Cosine { min_lr } if !min_ok(min_lr) => bad(format!(
                "LrSchedule::Cosine min_lr must be in [0, learning_rate {base}], got {min_lr}"
            )),
            LrSchedule::WarmupCosine {
                warmup_steps: 0, ..
            } => bad("LrSchedule::WarmupCosine warmup_steps must be > 0".into()),
            LrSchedule::WarmupCosine { min_lr, .. } if !min_ok(min_lr) => bad(format!(
                "LrSchedule::WarmupCosine min_lr must be in [0, learning_rate {base}], got {min_lr}"
            )),
            _ => Ok(()),
        }
    }

    /// The rate of global step `step` (0-based) of a run of `total_steps` steps with
    /// `steps_per_epoch` steps per epoch.
    pub fn learning_rate(
        &self,
        base: f32,
        step: u64,
        total_steps: u64,
        steps_per_epoch: u64,
    ) -> f32 {
        let cosine = |min_lr: f32, done: u64, over: u64| -> f32 {
            let t = if over == 0 {
                1.0
            } else {
                (done.min(over) as f64) / over as f64
            };
            let c = 0.5 * (1.0 + (std::f64::consts::PI * t).cos());
            (min_lr as f64 + (base as f64 - min_lr as f64) * c) as f32
        };
        match *self {
            LrSchedule::Constant => base,
            LrSchedule::Step {
                every_epochs,
                gamma,
            } => {
                let epoch = step / steps_per_epoch.max(1);
                let decays = (epoch / every_epochs.max(1) as u64).min(i32::MAX as u64) as i32;
                (base as f64 * (gamma as f64).powi(decays)) as f32
            }
            LrSchedule::Cosine { min_lr } => cosine(min_lr, step, total_steps),
            LrSchedule::WarmupCosine {
                warmup_steps,
                min_lr,
            } => {
                let w = warmup_steps as u64;
                if step < w {
                    (base as f64 * (step + 1) as f64 / w as f64) as f32
                } else {
                    cosine(min_lr, step - w, total_steps.saturating_sub(w))
                }
            }
        }
    }
}

/// Stop when the validation loss has not improved for `patience` epochs (needs a
/// [`super::TrainingConfig::validation_split`] above 0).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EarlyStopping {
    /// Epochs without improvement before stopping (> 0).
    pub patience: usize,
    /// An improvement is a validation loss below the best by more than this (>= 0).
    pub min_delta: f32,
    /// At the end, put back the parameters of the epoch with the best validation loss.
    pub restore_best: bool,
}

impl Default for EarlyStopping {
    fn default() -> Self {
        EarlyStopping {
            patience: 5,
            min_delta: 0.0,
            restore_best: true,
        }
    }
}

impl EarlyStopping {
    /// Checks the fields.
    pub fn validate(&self) -> Result<()> {
        if self.patience == 0 {
            return Err(Error::InvalidArgument(
                "early stopping patience must be > 0".into(),
            ));
        }
        if !self.min_delta.is_finite() || self.min_delta < 0.0 {
            return Err(Error::InvalidArgument(format!(
                "early stopping min_delta must be finite and >= 0, got {}",
                self.min_delta
            )));
        }
        Ok(())
    }
}

/// Early stopping's running state (kept in training checkpoints).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct EarlyState {
    /// Best validation loss so far and its 1-based epoch.
    pub best: Option<(f32, usize)>,
    /// Epochs since the best.
    pub bad_epochs: usize,
    /// The parameters of the best epoch (with `restore_best`).
    pub best_params: Option<Vec<f32>>,
}

impl EarlyState {
    /// Records one epoch's validation loss; returns whether it is a new best (the caller then
    /// saves the parameters when restoring) and whether training should stop.
    pub fn observe(&mut self, rule: &EarlyStopping, epoch: usize, val_loss: f32) -> (bool, bool) {
        let improved = match self.best {
            None => val_loss.is_finite(),
            Some((best, _)) => val_loss < best - rule.min_delta,
        };
        if improved {
            self.best = Some((val_loss, epoch));
            self.bad_epochs = 0;
        } else {
            self.bad_epochs += 1;
        }
        (improved, self.bad_epochs >= rule.patience)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedules_follow_their_formulas() {
        let base = 0.1;
        let step = LrSchedule::Step {
            every_epochs: 2,
            gamma: 0.5,
        };
        // 10 steps per epoch: epochs 0-1 at base, 2-3 halved, 4 quartered.
        assert_eq!(step.learning_rate(base, 19, 100, 10), base);
        assert_eq!(step.learning_rate(base, 20, 100, 10), 0.05);
        assert_eq!(step.learning_rate(base, 45, 100, 10), 0.025);

        let cos = LrSchedule::Cosine { min_lr: 0.01 };
        assert_eq!(cos.learning_rate(base, 0, 100, 10), base);
        assert!((cos.learning_rate(base, 50, 100, 10) - 0.055).abs() < 1e-7);
        assert!((cos.learning_rate(base, 100, 100, 10) - 0.01).abs() < 1e-7);

        let wc = LrSchedule::WarmupCosine {
            warmup_steps: 4,
            min_lr: 0.0,
        };
        let rates: Vec<f32> = (0..4).map(|s| wc.learning_rate(base, s, 104, 10)).collect();
        assert_eq!(rates, vec![0.025, 0.05, 0.075, 0.1]);
        assert_eq!(wc.learning_rate(base, 4, 104, 10), base);
        assert!(wc.learning_rate(base, 54, 104, 10) < 0.0501);
        assert!(wc.learning_rate(base, 103, 104, 10) < 1e-4);
    }

    #[test]
    fn bad_schedules_and_rules_are_errors() {
        for s in [
            LrSchedule::Step {
                every_epochs: 0,
                gamma: 0.5,
            },
            LrSchedule::Step {
                every_epochs: 1,
                gamma: 0.0,
            },
            LrSchedule::Cosine { min_lr: 1.0 },
            LrSchedule::WarmupCosine {
                warmup_steps: 0,
                min_lr: 0.0,
            },
        ] {
            assert!(
                matches!(s.validate(0.1), Err(Error::InvalidArgument(_))),
                "{s:?}"
            );
        }
        let rule = EarlyStopping {
            patience: 0,
            ..Default::default()
        };
        assert!(rule.validate().is_err());
    }

    #[test]
    fn early_state_counts_epochs_without_improvement() {
        let rule = EarlyStopping {
            patience: 2,
            min_delta: 0.01,
            restore_best: true,
        };
        let mut s = EarlyState::default();
        assert_eq!(s.observe(&rule, 1, 1.0), (true, false));
        assert_eq!(s.observe(&rule, 2, 0.995), (false, false)); // within min_delta
        assert_eq!(s.observe(&rule, 3, 0.5), (true, false));
        assert_eq!(s.observe(&rule, 4, 0.6), (false, false));
        assert_eq!(s.observe(&rule, 5, 0.7), (false, true));
        assert_eq!(s.best, Some((0.5, 3)));
    }
}
