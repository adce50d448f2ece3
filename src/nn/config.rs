//! [`TrainingConfig`] and [`Optimizer`]: what `Network::train` does and where it runs.

use std::path::PathBuf;

use crate::context::{Context, ContextOptions};
use crate::device::{BackendKind, DeviceId};
use crate::error::{Error, Result};
use crate::manager::{self, GpuManager};
use crate::ops::{AdamStep, SgdStep};

use super::precision::Precision;
use super::progress::Progress;
use super::schedule::{EarlyStopping, LrSchedule};

/// The optimizer and its hyper-parameters (the learning rate lives in [`TrainingConfig`]).
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum Optimizer {
    /// Stochastic gradient descent, PyTorch semantics.
    Sgd {
        /// Momentum factor; 0 disables momentum.
        momentum: f32,
        /// L2 penalty added to the gradient.
        weight_decay: f32,
        /// Nesterov momentum (needs `momentum > 0`).
        nesterov: bool,
    },
    /// Adam with L2 weight decay added to the gradient.
    Adam {
        /// First-moment decay.
        beta1: f32,
        /// Second-moment decay.
        beta2: f32,
        /// Added after the square root.
        eps: f32,
        /// L2 penalty added to the gradient.
        weight_decay: f32,
    },
    /// Adam with decoupled weight decay (`p -= lr * wd * p`).
    AdamW {
        /// First-moment decay.
        beta1: f32,
        /// Second-moment decay.
        beta2: f32,
        /// Added after the square root.
        eps: f32,
        /// Decoupled weight decay.
        weight_decay: f32,
    },
}

impl Optimizer {
    /// Plain SGD (no momentum, no weight decay).
    pub fn sgd() -> Self {
        Optimizer::Sgd {
            momentum: 0.0,
            weight_decay: 0.0,
            nesterov: false,
        }
    }

    /// SGD with momentum.
    pub fn sgd_momentum(momentum: f32) -> Self {
        Optimizer::Sgd {
            momentum,
            weight_decay: 0.0,
            nesterov: false,
        }
    }

    /// Adam with PyTorch's defaults (0.9, 0.999, 1e-8, no weight decay).
    pub fn adam() -> Self {
        Optimizer::Adam {
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 0.0,
        }
    }

    /// AdamW with PyTorch's defaults (0.9, 0.999, 1e-8, weight decay 0.01).
    pub fn adamw() -> Self {
        Optimizer::AdamW {
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 0.01,
        }
    }

    /// Checks every hyper-parameter.
    pub fn validate(&self) -> Result<()> {
        let bad = |what: String| Err(Error::InvalidArgument(what));
        let finite_nonneg = |name: &str, v: f32| -> Result<()> {
            if !v.is_finite() || v < 0.0 {
                return Err(Error::InvalidArgument(format!(
                    "optimizer {name} must be finite and >= 0, got {v}"
                )));
            }
            Ok(())
        };
        match self.step() {
            OptimizerStep::Sgd(s) => {
                finite_nonneg("momentum", s.momentum)?;
                finite_nonneg("weight_decay", s.weight_decay)?;
                if s.nesterov && s.momentum == 0.0 {
                    return bad("Nesterov momentum needs momentum > 0".into());
                }
            }
            OptimizerStep::Adam(s) => {
                for (name, b) in [("beta1", s.beta1), ("beta2", s.beta2)] {
                    if !(0.0..1.0).contains(&b) {
                        return bad(format!("Adam {name} must be in [0, 1), got {b}"));
                    }
                }
                if !s.eps.is_finite() || s.eps <= 0.0 {
                    let eps = s.eps;
                    return bad(format!("Adam eps must be finite and > 0, got {eps}"));
                }
                finite_nonneg("weight_decay", s.weight_decay)?;
            }
        }
        Ok(())
    }

    /// The hyper-parameters of one step of this optimizer, as its op takes them.
    pub(crate) fn step(&self) -> OptimizerStep {
        match *self {
            Optimizer::Sgd {
                momentum,
                weight_decay,
                nesterov,
            } => OptimizerStep::Sgd(SgdStep {
                momentum,
                weight_decay,
                nesterov,
            }),
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
            } => OptimizerStep::Adam(AdamStep {
                beta1,
                beta2,
                eps,
                weight_decay,
                decoupled: matches!(self, Optimizer::AdamW { .. }),
            }),
        }
    }
}

/// One step of an [`Optimizer`]: which op takes it, with its hyper-parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum OptimizerStep {
    /// [`crate::ops::OptimOps::sgd_step`].
    Sgd(SgdStep),
    /// [`crate::ops::OptimOps::adam_step`].
    Adam(AdamStep),
}

/// How and where [`crate::nn::Network::train`] trains.
///
/// Device choice: `use_gpu: false` trains on the CPU backend. `use_gpu: true` takes `device` if
/// set, else the `RNN_DEVICE` environment variable, else the best GPU
/// ([`GpuManager::best_gpu`]). When no GPU exists, `prefer_gpu: true` falls back to the CPU
/// backend with a logged warning and `prefer_gpu: false` is an error. When the chosen device is
/// not the one the network lives on, `train` moves the parameters there first.
#[derive(Debug, Clone, PartialEq)]
pub struct TrainingConfig {
    /// Train on a GPU (see the type docs); `false` means the CPU backend.
    pub use_gpu: bool,
    /// With `use_gpu`, fall back to the CPU (logged) when there is no GPU instead of failing.
    pub prefer_gpu: bool,
    /// A specific device; overrides `RNN_DEVICE` and the automatic choice.
    pub device: Option<DeviceId>,
    /// Data-parallel training on these devices, one replica per device (two or more CUDA
    /// devices with NCCL, HIP devices with RCCL, or [`DeviceId::Cpu`] listed two or more
    /// times for CPU replicas that average on the host): each step, every replica takes an
    /// equal share of the batch, the gradients are averaged across replicas with one
    /// all-reduce, and every replica takes the same optimizer step. `batch_size` is the global
    /// batch and must divide by the number of devices. Everything else (schedules, early
    /// stopping, callbacks, validation, training checkpoints and resume) works as on one
    /// device. Empty (the default): one device, chosen as `device`
    /// says; when `device` is also unset, an `RNN_DEVICE` holding a comma-separated list
    /// (`cuda:0,cuda:1`) fills this. Two GPU data-parallel runs started at once in one process
    /// take turns (NCCL communicators sharing a device can deadlock each other). See
    /// `Network::train` for the details.
    pub devices: Vec<DeviceId>,
    /// Data-parallel only: start each layer's gradient all-reduce on a second stream as soon
    /// as its backward is queued, so it overlaps the backward of the layers before it (as
    /// PyTorch DDP's buckets do). The forward and backward then run op by op instead of as a
    /// recorded graph. Off by default; CUDA with NCCL 2.10 or later (elsewhere it is ignored
    /// with a logged note).
    pub overlap_allreduce: bool,
    /// Passes over the training data (> 0).
    pub epochs: usize,
    /// Samples per step (> 0). The last batch of an epoch may be smaller.
    pub batch_size: usize,
    /// Step size (finite, > 0).
    pub learning_rate: f32,
    /// The update rule.
    pub optimizer: Optimizer,
    /// Scale gradients so their global L2 norm is at most this (on the device).
    pub clip_grad_norm: Option<f32>,
    /// Seeds shuffling and dropout masks (parameter init is seeded by the network builder).
    pub seed: u64,
    /// Reshuffle the training samples every epoch.
    pub shuffle: bool,
    /// Fraction of the samples, taken from the end, held out for validation: `[0, 1)`.
    pub validation_split: f32,
    /// Log the epoch line every this many epochs (0: never) with `log::info!`, when `progress`
    /// is [`Progress::Off`] (otherwise the progress output already shows it).
    pub log_every: usize,
    /// Record each training step (and each validation batch) once per batch size as a device
    /// graph and replay it, so a step is one launch (CUDA and HIP; other devices run op by op
    /// either way). The environment variable `RNN_GRAPHS=off` turns it off everywhere, to
    /// compare; [`super::Network::set_graphs`] governs evaluation and prediction outside
    /// training.
    pub graphs: bool,
    /// Progress bar on a terminal, plain per-epoch lines elsewhere, or nothing.
    pub progress: Progress,
    /// How the learning rate changes over the run (applied between steps, without recording
    /// anything again).
    pub schedule: LrSchedule,
    /// Stop when the validation loss stops improving (needs `validation_split > 0`).
    pub early_stopping: Option<EarlyStopping>,
    /// Write a training checkpoint here (atomically) every `checkpoint_every` epochs and at the
    /// last epoch, to continue with [`crate::nn::Network::resume_training`].
    pub checkpoint_path: Option<PathBuf>,
    /// Epochs between training checkpoints (> 0).
    pub checkpoint_every: usize,
    /// Truncated backpropagation through time: every recurrent cell starts each batch from
    /// the final state of the previous batch's same sample (detached: no gradient flows
    /// back across batches), and from zeros at the start of each epoch. The samples must be
    /// laid out so that sample `b` of one batch continues sample `b` of the batch before
    /// ([`super::Dataset::token_streams`] with `batch_size` streams), so it needs `shuffle`
    /// off and one-direction recurrent layers, and the samples that do not fill a last batch
    /// are skipped. Each data-parallel rank carries the states of its share of every batch.
    /// Off by default.
    pub carry_state: bool,
    /// With `shuffle`, group samples of similar length into the same batches (data sets with
    /// [`crate::nn::Dataset::with_lengths`] only): each epoch's shuffled order is cut into
    /// pools of 50 batches, each pool sorted by length (longest first) and its whole batches
    /// put in a random order; deterministic by `seed`.
    pub bucket_by_length: bool,
    /// The number format of the run ([`Precision`]): `F32` (the default); `Tf32` (TF32 GEMMs
    /// where the context allows them); `Bf16` or `F16` (activations and GEMM operands in the
    /// low type, f32 sums, master weights, gradients and optimizer state; `F16` with dynamic
    /// loss scaling). Every backend takes every precision (the CPU backend computes in f32 over
    /// bf16/f16 storage). Training leaves the network in this precision
    /// ([`super::Network::set_precision`]).
    pub precision: Precision,
}

impl Default for TrainingConfig {
    fn default() -> Self {
        TrainingConfig {
            use_gpu: true,
            prefer_gpu: true,
            device: None,
            devices: Vec::new(),
            overlap_allreduce: false,
            epochs: 10,
            batch_size: 64,
            learning_rate: 1e-3,
            optimizer: Optimizer::adam(),
            clip_grad_norm: None,
            seed: 0,
            shuffle: true,
            validation_split: 0.0,
            log_every: 1,
            graphs: true,
            progress: Progress::Auto,
            schedule: LrSchedule::Constant,
            early_stopping: None,
            checkpoint_path: None,
            checkpoint_every: 1,
            carry_state: false,
            bucket_by_length: false,
            precision: Precision::F32,
        }
    }
}

/// Parses an `RNN_DEVICE` value into a device id; a bad or blank value is
/// [`Error::InvalidEnv`] (the same error [`GpuManager`] gives for the variable).
pub fn parse_device_env(value: &str) -> Result<DeviceId> {
    crate::manager::parse_device_env(value)
}

impl TrainingConfig {
    /// Checks every field; each problem is a clear [`Error::InvalidArgument`].
    pub fn validate(&self) -> Result<()> {
        let bad = |what: String| Err(Error::InvalidArgument(what));
        if self.epochs == 0 {
            return bad("epochs must be > 0".into());
        }
        if self.batch_size == 0 {
            return bad("batch_size must be > 0".into());
        }
        if !self.learning_rate.is_finite() || self.learning_rate <= 0.0 {
            return bad(format!(
                "learning_rate must be finite and > 0, got {}",
                self.learning_rate
            ));
        }
        if !(0.0..1.0).contains(&self.validation_split) {
            return bad(format!(
                "validation_split must be in [0, 1), got {}",
                self.validation_split
            ));
        }
        if let Some(c) = self.clip_grad_norm
            && (!c.is_finite() || c <= 0.0)
        {
            return bad(format!("clip_grad_norm must be finite and > 0, got {c}"));
        }
        if !self.use_gpu && self.device.is_some_and(|d| d != DeviceId::Cpu) {
            return bad(format!(
                "use_gpu is false but device {} was requested",
                self.device.unwrap_or(DeviceId::Cpu)
            ));
        }
        self.schedule.validate(self.learning_rate)?;
        if let Some(rule) = &self.early_stopping {
            rule.validate()?;
            if self.validation_split == 0.0 {
                return bad("early stopping needs a validation_split above 0".into());
            }
        }
        if self.checkpoint_every == 0 {
            return bad("checkpoint_every must be > 0".into());
        }
        if self.carry_state && self.shuffle {
            return bad(
                "carry_state continues each sample's state in the next batch, so it needs \
                 shuffle off"
                    .into(),
            );
        }
        if !self.devices.is_empty() {
            if !self.use_gpu && self.devices.iter().any(|&d| d != DeviceId::Cpu) {
                return bad(
                    "use_gpu is false but GPU devices were listed for data-parallel training"
                        .into(),
                );
            }
            for (i, d) in self.devices.iter().enumerate() {
                // CPU replicas share the host; a GPU holds one replica.
                if *d != DeviceId::Cpu && self.devices[..i].contains(d) {
                    return bad(format!("device {d} is listed twice in devices"));
                }
            }
            if self.devices.len() > 1 && self.batch_size % self.devices.len() != 0 {
                return bad(format!(
                    "batch_size {} (the global batch) must divide evenly by the {} devices",
                    self.batch_size,
                    self.devices.len()
                ));
            }
        }
        self.optimizer.validate()
    }

    /// The devices of data-parallel training: `devices` when set, else the list in
    /// `env_device` (the value of `RNN_DEVICE`) when it has more than one entry and `device` is
    /// unset; empty for single-device training.
    pub fn data_parallel_devices(&self, env_device: Option<&str>) -> Result<Vec<DeviceId>> {
        if !self.devices.is_empty() || !self.use_gpu || self.device.is_some() {
            return Ok(self.devices.clone());
        }
        match env_device.filter(|v| v.contains(',')) {
            Some(v) => {
                let list = manager::parse_device_list_env(v)?;
                if self.batch_size % list.len() != 0 {
                    return Err(Error::InvalidArgument(format!(
                        "batch_size {} (the global batch) must divide evenly by the {} devices \
                         of RNN_DEVICE={v}",
                        self.batch_size,
                        list.len()
                    )));
                }
                Ok(list)
            }
            None => Ok(Vec::new()),
        }
    }

    /// The device id this configuration trains on, given the probed devices and the value of
    /// `RNN_DEVICE` (passed in so the rule can be checked without touching the environment).
    pub fn resolve_device(
        &self,
        manager: &GpuManager,
        env_device: Option<&str>,
    ) -> Result<DeviceId> {
        if !self.use_gpu {
            return Ok(DeviceId::Cpu);
        }
        if let Some(id) = self.device {
            return Ok(manager.device(id)?.id);
        }
        if let Some(value) = env_device.filter(|v| !v.trim().is_empty()) {
            let id = manager::parse_device_env(value)?;
            log::info!("training on {id} from RNN_DEVICE");
            return Ok(manager.device(id)?.id);
        }
        match manager.best_gpu() {
            Some(d) => Ok(d.id),
            None if self.prefer_gpu => {
                let reasons: Vec<String> = manager
                    .backends()
                    .iter()
                    .filter(|s| s.backend != BackendKind::Cpu)
                    .map(|s| format!("{}: {}", s.backend, s.detail))
                    .collect();
                log::warn!(
                    "no GPU found ({}); training on the CPU backend",
                    reasons.join("; ")
                );
                Ok(DeviceId::Cpu)
            }
            None => Err(Error::InvalidArgument(format!(
                "use_gpu is set, prefer_gpu is false and no GPU was found (devices: {})",
                manager.valid_ids()
            ))),
        }
    }

    /// A context on the device this configuration selects (probes the runtimes unless the
    /// answer is already known), with TF32 GEMMs allowed when `precision` is
    /// [`Precision::Tf32`].
    pub fn context(&self) -> Result<Context> {
        if !self.use_gpu {
            return Ok(Context::cpu());
        }
        let manager = GpuManager::new()?;
        let env = std::env::var("RNN_DEVICE").ok();
        let id = self.resolve_device(&manager, env.as_deref())?;
        if id == DeviceId::Cpu {
            return Ok(Context::cpu());
        }
        manager.create_context_with(id, self.context_options())
    }

    /// The options of a context this configuration creates: TF32 GEMMs allowed for
    /// [`Precision::Tf32`], else the defaults.
    pub(crate) fn context_options(&self) -> ContextOptions {
        ContextOptions {
            allow_tf32: self.precision == Precision::Tf32,
            ..ContextOptions::default()
        }
    }
}
