//! [`TrainingHistory`]: what `Network::train` measured, epoch by epoch.

use crate::device::DeviceId;

/// Metrics of one epoch.
#[derive(Debug, Clone, PartialEq)]
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
}

/// Everything `train` measured, and where it ran.
#[derive(Debug, Clone, PartialEq)]
pub struct TrainingHistory {
    /// One entry per epoch.
    pub epochs: Vec<EpochStats>,
    /// The device trained on.
    pub device: DeviceId,
    /// Its name.
    pub device_name: String,
    /// Wall time of the whole call, uploads included.
    pub total_seconds: f64,
}

impl TrainingHistory {
    /// The last epoch's statistics.
    pub fn last(&self) -> Option<&EpochStats> {
        self.epochs.last()
    }

    /// Training loss per epoch.
    pub fn losses(&self) -> Vec<f32> {
        self.epochs.iter().map(|e| e.loss).collect()
    }
}

/// Loss (and accuracy for classification) of a model on a data set.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Evaluation {
    /// Mean loss over every predicted row.
    pub loss: f32,
    /// Fraction of rows whose arg-max equals the label (classification only).
    pub accuracy: Option<f32>,
}
