//! Padded data: per-sample sequence lengths and an ignored class label, as a network runs them.
//!
//! The lengths travel with the data: uploaded once with the samples, gathered with each batch
//! (outside any recorded graph) and turned on the device into the batch's row mask, per-sample
//! time reversal and last-step rows ([`crate::ops::SequenceMaskOps::length_layout`]), which the
//! recorded step reads at fixed addresses. The recurrent layers zero their outputs past each
//! length and mask the gradients coming back (`varlen_cell.rs`); the loss weighs its rows so
//! that it is the mean over the valid rows ([`crate::ops::SequenceMaskOps::loss_weights`]).
//!
//! Whether a network runs with lengths, and which label it ignores, is part of what its
//! workspaces and their recorded graphs were built for; [`Network::adopt_padding`] rebuilds
//! them when a data set asks for something else.
//!
//! An all-ignored batch (every label ignored, or no valid position) has loss 0 and zero
//! gradients, where PyTorch's mean reduction gives NaN (0 / 0): a batch of padding then leaves
//! the parameters alone instead of poisoning them.

use crate::buffer::{Buffer, View};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::ops::{IndexedRows, LengthLayout, LossWeights, Ops, TypedMemory};

use super::config::TrainingConfig;
use super::data::Dataset;
use super::layer::Layer;
use super::loss::Loss;
use super::network::Network;
use super::rng::Rng;
use super::size;
use super::source::TrainData;
use super::workspace::{DeviceData, Rows, Workspace};

/// What a network's padded data asks of its passes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Padding {
    /// Batches carry per-sample lengths.
    pub lengths: bool,
    /// The class label the loss skips.
    pub ignore_index: Option<u32>,
}

impl Padding {
    /// What `data` asks for.
    pub fn of(data: &Dataset) -> Self {
        Padding {
            lengths: data.lengths().is_some(),
            ignore_index: data.ignore_index(),
        }
    }
}

/// A batch's lengths and what the device makes of them, `steps * batch` time-major rows.
pub(crate) struct LengthWs {
    /// u32, `batch`: the batch's lengths.
    lens: Buffer,
    /// f32, `steps * batch`: 1 for a valid row, 0 for padding.
    mask: Buffer,
    /// u32, `steps * batch`: the per-sample time reversal.
    reversal: Buffer,
    /// u32, `batch`: each sample's last valid row.
    last: Buffer,
    /// `batch * widest recurrent cell`: where a cell parks one step's rows.
    scratch: Buffer,
}

/// The views of a batch's [`LengthWs`] that the layers read.
#[derive(Clone, Copy)]
pub(crate) struct LengthViews<'a> {
    pub mask: View<'a>,
    pub reversal: View<'a>,
    pub last: View<'a>,
    pub scratch: View<'a>,
}

impl LengthWs {
    pub fn new(ops: &dyn Ops, batch: usize, steps: usize, widest: usize) -> Result<Self> {
        let rows = size::mul(batch, steps, "batch x sequence length")?;
        size::check_indexed_rows(rows, "batch x sequence length")?;
        Ok(LengthWs {
            lens: ops.alloc_as(DType::U32, batch)?,
            mask: ops.alloc(rows)?,
            reversal: ops.alloc_as(DType::U32, rows)?,
            last: ops.alloc_as(DType::U32, batch)?,
            scratch: ops.alloc(size::mul(batch, widest.max(1), "batch x hidden")?)?,
        })
    }

    pub fn views(&self) -> LengthViews<'_> {
        LengthViews {
            mask: self.mask.view(),
            reversal: self.reversal.view(),
            last: self.last.view(),
            scratch: self.scratch.view(),
        }
    }

    /// The row mask the loss reads for per-step outputs.
    pub fn mask(&self) -> View<'_> {
        self.mask.view()
    }
}

/// Batches pooled by length: [`super::TrainingConfig::bucket_by_length`].
pub(crate) struct Buckets {
    lengths: Vec<u32>,
    batch: usize,
}

/// Batches per pool that is sorted by length.
const POOL_BATCHES: usize = 50;

impl Buckets {
    /// The buckets `config` asks for over `data` in global batches of `batch`; `None` when it
    /// asks for none. Bucketing data without lengths is an error.
    pub fn of(data: &Dataset, config: &TrainingConfig, batch: usize) -> Result<Option<Self>> {
        if !config.bucket_by_length {
            return Ok(None);
        }
        let lengths = data.lengths().ok_or_else(|| {
            Error::InvalidArgument(
                "bucket_by_length needs a data set with lengths (Dataset::with_lengths)".into(),
            )
        })?;
        Ok(Some(Buckets {
            lengths: lengths.to_vec(),
            batch: batch.max(1),
        }))
    }

    /// Reorders a shuffled `order`: each pool of [`POOL_BATCHES`] batches sorted by length,
    /// longest first (ties keep the shuffled order), then its whole batches shuffled by `rng`
    /// (a pool's trailing partial batch stays last).
    pub fn apply(&self, order: &mut [u32], rng: &mut Rng) {
        let b = self.batch;
        for pool in order.chunks_mut(b * POOL_BATCHES) {
            pool.sort_by_key(|&i| std::cmp::Reverse(self.lengths[i as usize]));
            let mut batches: Vec<usize> = (0..pool.len() / b).collect();
            rng.shuffle(&mut batches);
            let sorted = pool.to_vec();
            for (k, &j) in batches.iter().enumerate() {
                pool[k * b..(k + 1) * b].copy_from_slice(&sorted[j * b..(j + 1) * b]);
            }
        }
    }
}

/// The widest recurrent cell of `layers` (hidden units of one direction), 0 without any.
pub(crate) fn widest_cell(layers: &[Layer]) -> usize {
    layers
        .iter()
        .map(|l| match l {
            Layer::Rnn(r) => r.hidden,
            Layer::Lstm(c) => c.hidden,
            Layer::Gru(g) => g.hidden,
            Layer::Stack(s) => s.hidden,
            _ => 0,
        })
        .max()
        .unwrap_or(0)
}

impl Network {
    /// Makes this network run `data`'s padding: when it differs from what the workspaces were
    /// built for, they (and their recorded graphs) are dropped and rebuilt on demand. Checks
    /// the lengths against the network's steps.
    pub(crate) fn adopt_padding(&mut self, data: &Dataset) -> Result<()> {
        if let Some(lengths) = data.lengths() {
            if self.in_steps <= 1 {
                return Err(Error::InvalidData(
                    "the data has sequence lengths but the network takes no sequence".into(),
                ));
            }
            let steps = self.in_steps;
            if let Some(i) = lengths.iter().position(|&l| l == 0 || l as usize > steps) {
                return Err(Error::InvalidData(format!(
                    "sample {i}: length {} outside 1..={steps} (the network's steps)",
                    lengths[i]
                )));
            }
        }
        if data.ignore_index().is_some() && self.loss != Loss::SoftmaxCrossEntropy {
            return Err(Error::InvalidData(
                "an ignore_index needs the cross-entropy loss".into(),
            ));
        }
        self.use_padding(Padding::of(data));
        Ok(())
    }

    /// Builds the workspaces for `padding` from now on (dropping them when it changes).
    pub(crate) fn use_padding(&mut self, padding: Padding) {
        if padding != self.padding {
            self.padding = padding;
            self.workspaces.clear();
        }
    }

    /// [`Network::adopt_padding`] for training data. A stream's batches carry no lengths and
    /// no ignored label (its shards have neither).
    pub(crate) fn adopt_train_padding(&mut self, data: TrainData<'_>) -> Result<()> {
        match data {
            TrainData::Memory(d) => self.adopt_padding(d),
            TrainData::Stream(s) => {
                if s.validation
                    .as_ref()
                    .is_some_and(|v| Padding::of(v) != Padding::default())
                {
                    return Err(Error::InvalidData(
                        "a data stream carries no sequence lengths or ignore_index, so its \
                         validation samples may not either"
                            .into(),
                    ));
                }
                self.use_padding(Padding::default());
                Ok(())
            }
        }
    }

    /// Uploads `data`'s lengths (when the network runs with lengths), as [`DeviceData::lens`].
    pub(crate) fn upload_lengths(&self, data: &Dataset) -> Result<Option<Buffer>> {
        match (self.padding.lengths, data.lengths()) {
            (true, Some(l)) => {
                let ops = self.ctx.ops();
                let b = ops.alloc_as(DType::U32, l.len())?;
                ops.upload_as(b.view(), l)?;
                Ok(Some(b))
            }
            (true, None) => Err(Error::InvalidData(
                "the network runs with sequence lengths but the data has none".into(),
            )),
            (false, _) => Ok(None),
        }
    }

    /// Puts the lengths of the batch `rows` of `dd` into `ws` and lays them out (a no-op for a
    /// network without lengths). Queued before the step, outside its recording.
    pub(crate) fn load_lengths(
        &self,
        ws: &Workspace,
        dd: &DeviceData,
        rows: &Rows<'_>,
    ) -> Result<()> {
        let (Some(lw), Some(lens)) = (&ws.lengths, &dd.lens) else {
            return Ok(());
        };
        let ops = self.ctx.ops();
        let b = ws.batch;
        let batch_lens = match rows {
            Rows::Gather(idx) => {
                ops.gather_rows(IndexedRows::new(lens.view(), *idx, lw.lens.view(), 1))?;
                lw.lens.view()
            }
            Rows::Range(start) => lens.slice(*start, b)?,
        };
        ops.length_layout(LengthLayout::new(
            batch_lens,
            lw.mask.view(),
            lw.reversal.view(),
            lw.last.view(),
            self.in_steps,
        ))
    }

    /// True when the loss needs weights: per-step outputs with lengths, or an ignored label.
    pub(crate) fn weighs_loss(&self) -> bool {
        self.padding.ignore_index.is_some() || self.masks_loss_rows()
    }

    /// True when the loss rows are the time-major rows the lengths mask.
    fn masks_loss_rows(&self) -> bool {
        self.padding.lengths && self.out_steps > 1 && self.out_steps == self.in_steps
    }

    /// After an unweighted loss op that left its row losses (and correct flags) in `row_loss`
    /// (`row_correct`) and its gradient, scaled by `1 / rows`, in `grad`: weighs every row so
    /// that the loss is the mean over the valid rows, adding the weighted sums to `acc`.
    pub(crate) fn weigh_loss(
        &self,
        ws: &Workspace,
        targets: View<'_>,
        (grad, row_loss, row_correct): (View<'_>, View<'_>, Option<View<'_>>),
        acc: Option<View<'_>>,
    ) -> Result<()> {
        let ops = self.ctx.ops();
        let weights = ws.loss_weights.as_ref().ok_or_else(|| {
            Error::InvalidArgument("a weighted loss on a workspace built without weights".into())
        })?;
        let mask = match (&ws.lengths, self.masks_loss_rows()) {
            (Some(lw), true) => Some(lw.mask()),
            _ => None,
        };
        let labels = self.padding.ignore_index.map(|ig| (targets, ig));
        ops.loss_weights(LossWeights::new(
            row_loss,
            row_correct,
            labels,
            mask,
            weights.view(),
            acc,
        ))?;
        ops.scale_rows(grad, weights.view(), self.output_features())
    }
}
