//! [`TrainingHistory`]: what `Network::train` measured, epoch by epoch, saved as CSV or JSON
//! (curves: `plot.rs`).

use std::path::Path;

use serde_json::{Value, json};

use crate::device::DeviceId;
use crate::error::{Error, Result};

/// Metrics of one epoch.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct EpochStats {
    /// 1-based epoch number.
    pub epoch: usize,
    /// Mean training loss over every predicted row of the epoch.
    pub loss: f32,
    /// Training accuracy (classification only).
    pub accuracy: Option<f32>,
    /// Validation loss, when a validation split was held out.
    pub val_loss: Option<f32>,
    /// Validation accuracy (classification with a validation split).
    pub val_accuracy: Option<f32>,
    /// Wall time of the epoch in seconds (training and validation).
    pub seconds: f64,
    /// Training samples per second.
    pub samples_per_sec: f64,
    /// The learning rate of the epoch's last step.
    pub learning_rate: f32,
    /// Peak device memory used by this process during the epoch, in bytes, where the device's
    /// management library reports it (NVML on NVIDIA, ROCm SMI on AMD; the process's resident
    /// memory for the CPU backend); `None` elsewhere. Where the library cannot attribute memory
    /// to this process (NVML inside a container whose PIDs it does not see), this is the
    /// device's memory in use by all processes.
    pub peak_memory_bytes: Option<u64>,
    /// Mean device utilization during the epoch in percent, sampled by the management library
    /// (NVML, ROCm SMI); `None` without one.
    pub utilization: Option<f32>,
    /// [`super::Precision::F16`] runs: the loss scale at the end of the epoch; `None` for runs
    /// without loss scaling.
    pub loss_scale: Option<f32>,
    /// [`super::Precision::F16`] runs: the optimizer steps of the epoch skipped because their
    /// gradients held inf or NaN (the scale then backed off); `None` without loss scaling.
    pub skipped_steps: Option<u64>,
}

/// Why training ended before its last epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum StopReason {
    /// Early stopping: the validation loss stopped improving.
    EarlyStopping,
    /// The per-epoch callback asked to stop.
    Callback,
}

/// Everything `train` measured, and where it ran.
#[derive(Debug, Clone, PartialEq)]
pub struct TrainingHistory {
    /// One entry per epoch (from the first epoch of the run, when it was resumed).
    pub epochs: Vec<EpochStats>,
    /// The device trained on.
    pub device: DeviceId,
    /// Its name.
    pub device_name: String,
    /// Wall time of the whole call, uploads included.
    pub total_seconds: f64,
    /// Set when training ended before `epochs`.
    pub stopped: Option<StopReason>,
    /// With early stopping: the epoch with the best validation loss (whose parameters were put
    /// back when `restore_best` is set).
    pub best_epoch: Option<usize>,
}

/// The CSV columns, in order.
const COLUMNS: [&str; 13] = [
    "epoch",
    "loss",
    "accuracy",
    "val_loss",
    "val_accuracy",
    "seconds",
    "samples_per_sec",
    "learning_rate",
    "peak_memory_bytes",
    "utilization",
    "loss_scale",
    "skipped_steps",
    "device",
];

impl TrainingHistory {
    /// The last epoch's statistics.
    pub fn last(&self) -> Option<&EpochStats> {
        self.epochs.last()
    }

    /// Training loss per epoch.
    pub fn losses(&self) -> Vec<f32> {
        self.epochs.iter().map(|e| e.loss).collect()
    }

    /// One row per epoch, with a header; unknown values are empty fields.
    pub fn to_csv(&self) -> String {
        let opt = |v: Option<f32>| v.map(|x| x.to_string()).unwrap_or_default();
        let mut out = COLUMNS.join(",") + "\n";
        for e in &self.epochs {
            let row = [
                e.epoch.to_string(),
                e.loss.to_string(),
                opt(e.accuracy),
                opt(e.val_loss),
                opt(e.val_accuracy),
                e.seconds.to_string(),
                e.samples_per_sec.to_string(),
                e.learning_rate.to_string(),
                e.peak_memory_bytes
                    .map(|b| b.to_string())
                    .unwrap_or_default(),
                opt(e.utilization),
                opt(e.loss_scale),
                e.skipped_steps.map(|k| k.to_string()).unwrap_or_default(),
                self.device.to_string(),
            ];
            out += &row.join(",");
            out.push('\n');
        }
        out
    }

    /// The whole history as JSON: `{"device", "device_name", "total_seconds", "stopped",
    /// "best_epoch", "epochs": [{"epoch", "loss", ...}]}` (unknown values are `null`).
    pub fn to_json(&self) -> String {
        let epochs: Vec<Value> = self.epochs.iter().map(epoch_json).collect();
        let v = json!({
            "device": self.device.to_string(),
            "device_name": self.device_name,
            "total_seconds": self.total_seconds,
            "stopped": self.stopped.map(|s| format!("{s:?}")),
            "best_epoch": self.best_epoch,
            "epochs": epochs,
        });
        serde_json::to_string_pretty(&v).unwrap_or_default()
    }

    /// Writes [`TrainingHistory::to_csv`] to `path`.
    pub fn save_csv(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        std::fs::write(path, self.to_csv()).map_err(|e| Error::io(path, e))
    }

    /// Writes [`TrainingHistory::to_json`] to `path`.
    pub fn save_json(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        std::fs::write(path, self.to_json()).map_err(|e| Error::io(path, e))
    }
}

/// One epoch as a JSON object (also how training checkpoints keep the history so far).
pub(crate) fn epoch_json(e: &EpochStats) -> Value {
    json!({
        "epoch": e.epoch,
        "loss": e.loss,
        "accuracy": e.accuracy,
        "val_loss": e.val_loss,
        "val_accuracy": e.val_accuracy,
        "seconds": e.seconds,
        "samples_per_sec": e.samples_per_sec,
        "learning_rate": e.learning_rate,
        "peak_memory_bytes": e.peak_memory_bytes,
        "utilization": e.utilization,
        "loss_scale": e.loss_scale,
        "skipped_steps": e.skipped_steps,
    })
}

/// The inverse of [`epoch_json`]; `None` when a required field is missing or mistyped.
pub(crate) fn epoch_from_json(v: &Value) -> Option<EpochStats> {
    let f32_of = |k: &str| v.get(k).and_then(Value::as_f64).map(|x| x as f32);
    Some(EpochStats {
        epoch: v.get("epoch")?.as_u64()? as usize,
        loss: f32_of("loss")?,
        accuracy: f32_of("accuracy"),
        val_loss: f32_of("val_loss"),
        val_accuracy: f32_of("val_accuracy"),
        seconds: v.get("seconds")?.as_f64()?,
        samples_per_sec: v.get("samples_per_sec")?.as_f64()?,
        learning_rate: f32_of("learning_rate")?,
        peak_memory_bytes: v.get("peak_memory_bytes").and_then(Value::as_u64),
        utilization: f32_of("utilization"),
        loss_scale: f32_of("loss_scale"),
        skipped_steps: v.get("skipped_steps").and_then(Value::as_u64),
    })
}

/// Loss (and accuracy for classification) of a model on a data set.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Evaluation {
    /// Mean loss over every predicted row.
    pub loss: f32,
    /// Fraction of rows whose arg-max equals the label (classification only).
    pub accuracy: Option<f32>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn history() -> TrainingHistory {
        let e = |epoch: usize, loss: f32| EpochStats {
            epoch,
            loss,
            accuracy: Some(0.5),
            val_loss: None,
            val_accuracy: None,
            seconds: 0.25,
            samples_per_sec: 1000.0,
            learning_rate: 1e-3,
            peak_memory_bytes: Some(1 << 20),
            loss_scale: None,
            skipped_steps: None,
            utilization: None,
        };
        TrainingHistory {
            epochs: vec![e(1, 0.7), e(2, 0.1 + 0.2)],
            device: DeviceId::Cpu,
            device_name: "cpu".into(),
            total_seconds: 0.5,
            stopped: Some(StopReason::Callback),
            best_epoch: None,
        }
    }

    #[test]
    fn csv_has_a_header_and_a_row_per_epoch() {
        let csv = history().to_csv();
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[0].starts_with("epoch,loss,accuracy,val_loss"));
        let fields: Vec<&str> = lines[2].split(',').collect();
        assert_eq!(fields.len(), COLUMNS.len());
        assert_eq!(fields[0], "2");
        assert_eq!(fields[1].parse::<f32>().unwrap(), 0.1f32 + 0.2);
        assert_eq!(fields[3], "", "unknown values are empty");
        assert_eq!(fields[8], "1048576");
    }

    #[test]
    fn json_round_trips_every_epoch_exactly() {
        let h = history();
        let v: Value = serde_json::from_str(&h.to_json()).unwrap();
        assert_eq!(v["stopped"], "Callback");
        let back: Vec<EpochStats> = v["epochs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| epoch_from_json(e).unwrap())
            .collect();
        assert_eq!(back, h.epochs);
    }
}
