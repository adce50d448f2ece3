//! Training checkpoints: everything needed to continue a run exactly where it stopped.
//!
//! One safetensors file, written atomically like [`Network::save`]: the parameters under their
//! PyTorch names (so [`Network::load`] and PyTorch read the weights from it as from a plain
//! checkpoint), plus `rnn.`-prefixed tensors for the optimizer's moments and device state, the
//! shuffle order and early stopping's best parameters, and metadata for the epoch, step count,
//! learning rate, RNG state, schedule, history so far and the architecture. The schedule's
//! position is the step count (schedules are functions of the global step).

use std::collections::HashMap;
use std::ops::ControlFlow;
use std::path::Path;

use safetensors::{Dtype, SafeTensors, tensor::TensorView};
use serde_json::{Value, json};

use crate::error::{Error, Result};

use super::checkpoint::write_safetensors;
use super::config::TrainingConfig;
use super::history::{EpochStats, TrainingHistory, epoch_from_json, epoch_json};
use super::network::Network;
use super::optim::OptimizerSnapshot;
use super::schedule::EarlyState;
use super::source::TrainData;

/// Marker in the names of temp files a training checkpoint is written through.
const TEMP_MARKER: &str = ".train-ckpt-tmp-";
/// Metadata key present only in training checkpoints; its value is the format version.
const MARKER: &str = "rnn.training_checkpoint";

/// A run's state between epochs.
#[derive(Clone)]
pub(crate) struct RunState {
    /// Epochs completed.
    pub epoch: usize,
    /// The shuffling RNG's state.
    pub rng: u64,
    /// The current order of the training samples (shuffled in place each epoch); for a
    /// stream, every shuffle window's order, one after another.
    pub order: Vec<u32>,
    /// A stream's shard order (empty for an in-memory data set).
    pub shards: Vec<u32>,
    /// The history so far.
    pub epochs: Vec<EpochStats>,
    /// Early stopping's state.
    pub early: EarlyState,
    /// The optimizer, read back from the device.
    pub optimizer: OptimizerSnapshot,
}

/// The architecture as text: two networks with the same text have the same layers, loss and
/// parameter tensors.
fn architecture(net: &Network) -> String {
    let tensors: Vec<String> = net
        .param_info()
        .iter()
        .map(|t| format!("{}{:?}", t.name, t.shape))
        .collect();
    format!(
        "layers {:?}; loss {:?}; tensors {}",
        net.layers(),
        net.loss(),
        tensors.join(" ")
    )
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Writes the training checkpoint of `state` (the parameters are read from the device).
pub(crate) fn save(
    net: &Network,
    path: &Path,
    config: &TrainingConfig,
    samples: usize,
    batch: usize,
    state: &RunState,
    epochs: &[EpochStats],
) -> Result<()> {
    let fmt = |reason: String| Error::Format {
        path: path.display().to_string(),
        reason,
    };
    let params = f32_bytes(&net.parameters()?);
    let opt = &state.optimizer;
    let mut owned: Vec<(String, Dtype, Vec<usize>, Vec<u8>)> = Vec::new();
    owned.push((
        "rnn.optimizer.state".into(),
        Dtype::F32,
        vec![opt.hyper.len()],
        f32_bytes(&opt.hyper),
    ));
    let named = [
        ("rnn.optimizer.a", &opt.a),
        ("rnn.optimizer.b", &opt.b),
        ("rnn.loss_scaler", &opt.scaler),
    ];
    for (name, v) in named {
        if let Some(v) = v {
            owned.push((name.into(), Dtype::F32, vec![v.len()], f32_bytes(v)));
        }
    }
    owned.push((
        "rnn.order".into(),
        Dtype::U32,
        vec![state.order.len()],
        state.order.iter().flat_map(|x| x.to_le_bytes()).collect(),
    ));
    if !state.shards.is_empty() {
        owned.push((
            "rnn.shard_order".into(),
            Dtype::U32,
            vec![state.shards.len()],
            state.shards.iter().flat_map(|x| x.to_le_bytes()).collect(),
        ));
    }
    if let Some(best) = &state.early.best_params {
        owned.push((
            "rnn.best_params".into(),
            Dtype::F32,
            vec![best.len()],
            f32_bytes(best),
        ));
    }
    let mut views = Vec::new();
    for t in net.param_info() {
        let data = &params[t.offset * 4..(t.offset + t.len()) * 4];
        let view = TensorView::new(Dtype::F32, t.shape.clone(), data)
            .map_err(|e| fmt(format!("tensor {}: {e}", t.name)))?;
        views.push((t.name.clone(), view));
    }
    for (name, dtype, shape, bytes) in &owned {
        let view = TensorView::new(*dtype, shape.clone(), bytes)
            .map_err(|e| fmt(format!("tensor {name}: {e}")))?;
        views.push((name.clone(), view));
    }
    let history: Vec<Value> = epochs.iter().map(epoch_json).collect();
    let early = json!({
        "best_loss": state.early.best.map(|(l, _)| l),
        "best_epoch": state.early.best.map(|(_, e)| e),
        "bad_epochs": state.early.bad_epochs,
    });
    let meta: HashMap<String, String> = [
        ("format", "pt".to_string()),
        (MARKER, "1".into()),
        ("rnn.architecture", architecture(net)),
        ("rnn.epoch", state.epoch.to_string()),
        ("rnn.step", opt.step.to_string()),
        ("rnn.learning_rate", opt.lr.to_string()),
        ("rnn.rng", state.rng.to_string()),
        ("rnn.samples", samples.to_string()),
        ("rnn.batch_size", batch.to_string()),
        ("rnn.optimizer", format!("{:?}", config.optimizer)),
        ("rnn.schedule", format!("{:?}", config.schedule)),
        ("rnn.epochs", config.epochs.to_string()),
        ("rnn.history", Value::Array(history).to_string()),
        ("rnn.early_stopping", early.to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    write_safetensors(path, views, meta, TEMP_MARKER)
}

/// Reads a training checkpoint into `net` (its parameters) and returns the run state.
fn load(net: &mut Network, path: &Path) -> Result<(RunState, HashMap<String, String>)> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    let fmt = |reason: String| Error::Format {
        path: path.display().to_string(),
        reason,
    };
    let (_, st_meta) = SafeTensors::read_metadata(&bytes).map_err(|e| fmt(e.to_string()))?;
    let meta = st_meta.metadata().clone().unwrap_or_default();
    if !meta.contains_key(MARKER) {
        return Err(fmt(
            "not a training checkpoint (no optimizer state; Network::load reads its weights)"
                .into(),
        ));
    }
    let saved_arch = meta.get("rnn.architecture").cloned().unwrap_or_default();
    let arch = architecture(net);
    if saved_arch != arch {
        return Err(Error::InvalidArgument(format!(
            "training checkpoint {} was written by a different architecture:\n  checkpoint: \
             {saved_arch}\n  this network: {arch}",
            path.display()
        )));
    }
    net.load(path)?;
    let st = SafeTensors::deserialize(&bytes).map_err(|e| fmt(e.to_string()))?;
    let floats = |name: &str| -> Result<Option<Vec<f32>>> {
        match st.tensor(name) {
            Err(_) => Ok(None),
            Ok(v) if v.dtype() == Dtype::F32 => Ok(Some(
                v.data()
                    .chunks_exact(4)
                    .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect(),
            )),
            Ok(v) => Err(fmt(format!(
                "tensor {name} is {:?}, expected F32",
                v.dtype()
            ))),
        }
    };
    let u32s = |name: &str| -> Option<Vec<u32>> {
        match st.tensor(name) {
            Ok(v) if v.dtype() == Dtype::U32 => Some(
                v.data()
                    .chunks_exact(4)
                    .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect(),
            ),
            _ => None,
        }
    };
    let order = u32s("rnn.order").ok_or_else(|| fmt("tensor rnn.order (U32) is missing".into()))?;
    let num = |key: &str| -> Result<u64> {
        meta.get(key)
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| fmt(format!("metadata {key} is missing or not a number")))
    };
    let lr: f32 = meta
        .get("rnn.learning_rate")
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| fmt("metadata rnn.learning_rate is missing".into()))?;
    let history: Vec<Value> = meta
        .get("rnn.history")
        .and_then(|h| serde_json::from_str(h).ok())
        .ok_or_else(|| fmt("metadata rnn.history is missing or not JSON".into()))?;
    let epochs = history
        .iter()
        .map(epoch_from_json)
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| fmt("metadata rnn.history has a malformed epoch".into()))?;
    let early: Value = meta
        .get("rnn.early_stopping")
        .and_then(|h| serde_json::from_str(h).ok())
        .unwrap_or(Value::Null);
    let best = match (early["best_loss"].as_f64(), early["best_epoch"].as_u64()) {
        (Some(l), Some(e)) => Some((l as f32, e as usize)),
        _ => None,
    };
    let state = RunState {
        epoch: num("rnn.epoch")? as usize,
        rng: num("rnn.rng")?,
        order,
        shards: u32s("rnn.shard_order").unwrap_or_default(),
        epochs,
        early: EarlyState {
            best,
            bad_epochs: early["bad_epochs"].as_u64().unwrap_or(0) as usize,
            best_params: floats("rnn.best_params")?,
        },
        optimizer: OptimizerSnapshot {
            step: num("rnn.step")?,
            lr,
            hyper: floats("rnn.optimizer.state")?
                .ok_or_else(|| fmt("tensor rnn.optimizer.state is missing".into()))?,
            a: floats("rnn.optimizer.a")?,
            b: floats("rnn.optimizer.b")?,
            scaler: floats("rnn.loss_scaler")?,
        },
    };
    Ok((state, meta))
}

/// Checks that a loaded run fits the run `config` describes on this data: the same number of
/// training samples, and no more epochs done than asked for (batch size and optimizer are
/// checked against the file's metadata by [`Network::resume_training`]).
pub(crate) fn check_run(state: &RunState, config: &TrainingConfig, samples: usize) -> Result<()> {
    if state.order.len() != samples {
        return Err(Error::InvalidArgument(format!(
            "the training checkpoint was written for {} training samples, this run has {samples}",
            state.order.len()
        )));
    }
    if state.epoch > config.epochs {
        return Err(Error::InvalidArgument(format!(
            "the training checkpoint is at epoch {}, beyond this run's {} epochs",
            state.epoch, config.epochs
        )));
    }
    Ok(())
}

impl Network {
    /// Continues the run whose training checkpoint ([`TrainingConfig::checkpoint_path`]) is at
    /// `path`: loads the parameters, optimizer state, step count, RNG state, shuffle order,
    /// early stopping state and history, then trains the remaining epochs of `config.epochs`
    /// on `data`. With the same data and configuration, the result is the one the
    /// uninterrupted run gives on the same backend (bit for bit on the CPU backend). With
    /// `config.devices`, every replica continues from the checkpoint's state.
    ///
    /// A checkpoint of another architecture, a plain weights file, or a run on other data,
    /// batch size or optimizer is an error that says which.
    ///
    /// A stream ([`super::DataStream`]) resumes at the start of the epoch after the
    /// checkpoint's, with the checkpoint's shard and shuffle-window orders; it must have the
    /// same shards and shuffle window.
    pub fn resume_training<'d>(
        &mut self,
        path: impl AsRef<Path>,
        data: impl Into<TrainData<'d>>,
        config: &TrainingConfig,
    ) -> Result<TrainingHistory> {
        self.resume_training_with(path, data, config, |_| ControlFlow::Continue(()))
    }

    /// [`Network::resume_training`] with a per-epoch callback, as in [`Network::train_with`].
    pub fn resume_training_with<'d>(
        &mut self,
        path: impl AsRef<Path>,
        data: impl Into<TrainData<'d>>,
        config: &TrainingConfig,
        mut on_epoch: impl FnMut(&EpochStats) -> ControlFlow<()>,
    ) -> Result<TrainingHistory> {
        let (path, data) = (path.as_ref(), data.into());
        config.validate()?;
        let (state, meta) = load(self, path)?;
        let want = |key: &str, now: String| -> Result<()> {
            match meta.get(key) {
                Some(saved) if *saved != now => Err(Error::InvalidArgument(format!(
                    "training checkpoint {} was written with {key} = {saved}, this run has {now}",
                    path.display()
                ))),
                _ => Ok(()),
            }
        };
        want("rnn.optimizer", format!("{:?}", config.optimizer))?;
        let n_val = (data.len() as f64 * config.validation_split as f64).floor() as usize;
        let n = data.len().saturating_sub(n_val);
        want("rnn.batch_size", config.batch_size.min(n).to_string())?;
        for key in ["rnn.schedule", "rnn.epochs"] {
            let now = if key == "rnn.schedule" {
                format!("{:?}", config.schedule)
            } else {
                config.epochs.to_string()
            };
            if meta.get(key).is_some_and(|saved| *saved != now) {
                log::warn!(
                    "resuming {} with {key} {now} instead of {}: the learning rates differ from \
                     the uninterrupted run's",
                    path.display(),
                    meta[key]
                );
            }
        }
        log::info!(
            "resuming {} after epoch {} (step {})",
            path.display(),
            state.epoch,
            state.optimizer.step
        );
        self.run_training(data, config, Some(state), &mut on_epoch)
    }
}
