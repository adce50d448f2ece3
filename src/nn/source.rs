//! Data read in shards or generated: the [`DataSource`] trait, what its samples look like
//! ([`SampleSpec`]), a source that calls a function per shard ([`GeneratedShards`]), and the
//! [`DataStream`] that [`super::Network::train`] takes besides an in-memory [`Dataset`]
//! ([`TrainData`]).
//!
//! A stream's training loop keeps on the device either two shuffle windows (batches gathered
//! there, [`StreamGather::Device`]) or only the batches in flight (two batch slots,
//! [`StreamGather::Host`]), and on the host two shuffle windows of shards (the one being
//! trained on and the next, read ahead) plus, gathering on the host, a bounded queue of
//! prepared batches; background threads read and prepare them while the device trains. See
//! `src/nn/stream_plan.rs` for the shuffle's guarantees.

use std::sync::Arc;

use crate::error::{Error, Result};

use super::data::{Dataset, Targets};

/// What a source's targets are, per sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TargetSpec {
    /// `per_sample` class labels in `0..classes` (u32).
    Classes {
        /// Number of classes.
        classes: usize,
        /// Labels per sample.
        per_sample: usize,
    },
    /// `width` real values (f32).
    Values {
        /// Values per sample.
        width: usize,
    },
}

/// What every sample of a source looks like: `width` inputs (f32 features, or u32 token ids
/// when `token_ids`) and its targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SampleSpec {
    /// Inputs per sample.
    pub width: usize,
    /// The inputs are token ids ([`Dataset::tokens`]) rather than features.
    pub token_ids: bool,
    /// The targets.
    pub targets: TargetSpec,
}

impl SampleSpec {
    /// The spec of `data`'s samples.
    pub fn of(data: &Dataset) -> Self {
        let targets = match data.targets() {
            Targets::Classes {
                classes,
                per_sample,
                ..
            } => TargetSpec::Classes {
                classes: *classes,
                per_sample: *per_sample,
            },
            Targets::Values { width, .. } => TargetSpec::Values { width: *width },
        };
        SampleSpec {
            width: data.width(),
            token_ids: data.token_ids().is_some(),
            targets,
        }
    }

    /// [`Error::InvalidData`] naming `what` unless `data`'s samples are of this spec and
    /// there are `rows` of them.
    pub(crate) fn check(&self, data: &Dataset, rows: usize, what: &str) -> Result<()> {
        let got = SampleSpec::of(data);
        if got != *self {
            return Err(Error::InvalidData(format!(
                "{what}: samples of {got:?}, the source declares {self:?}"
            )));
        }
        if data.len() != rows {
            return Err(Error::InvalidData(format!(
                "{what}: {} samples, the source declares {rows}",
                data.len()
            )));
        }
        Ok(())
    }

    /// One sample of this spec, all zeros, for checking the spec against a network.
    pub(crate) fn probe(&self) -> Result<Dataset> {
        let targets = match self.targets {
            TargetSpec::Classes {
                classes,
                per_sample,
            } => Targets::Classes {
                labels: vec![0; per_sample],
                classes,
                per_sample,
            },
            TargetSpec::Values { width } => Targets::Values {
                values: vec![0.0; width],
                width,
            },
        };
        match self.token_ids {
            true => Dataset::tokens(vec![0; self.width], self.width, targets),
            false => Dataset::new(vec![0.0; self.width], self.width, targets),
        }
    }
}

/// Training data read in shards (from disk, or generated): each shard is a [`Dataset`] of
/// samples of one [`SampleSpec`]. Shards are read by index, in any order, possibly from a
/// background thread, and each may be read once per epoch.
pub trait DataSource: Send + Sync {
    /// What every sample looks like.
    fn spec(&self) -> SampleSpec;

    /// Samples per shard; the number of shards is its length.
    fn shard_lens(&self) -> &[usize];

    /// Shard `index` (`< shard_lens().len()`), with `shard_lens()[index]` samples.
    fn read_shard(&self, index: usize) -> Result<Dataset>;

    /// How errors name shard `index` (a file path, say).
    fn shard_name(&self, index: usize) -> String {
        format!("shard {index}")
    }

    /// Writes shard `index`'s samples straight into `inputs` and `targets`, each sized for
    /// its `shard_lens()[index]` samples of [`DataSource::spec`]: what a stream's reading
    /// threads call, into buffers reused from window to window. The stream checks the values
    /// afterwards as [`Dataset::new`] does (finite features and values, labels below the
    /// classes). By default [`DataSource::read_shard`], checked against the spec and copied;
    /// a source that can fill the buffers without a [`Dataset`] in between (as
    /// [`super::ShardFiles`] does) saves that allocation and copy.
    fn read_shard_into(
        &self,
        index: usize,
        inputs: InputsMut<'_>,
        targets: TargetsMut<'_>,
    ) -> Result<()> {
        let data = self.read_shard(index)?;
        let len = self.shard_lens().get(index).copied().unwrap_or(0);
        self.spec().check(&data, len, &self.shard_name(index))?;
        copy_into(&data, inputs, targets)
    }
}

/// Where [`DataSource::read_shard_into`] writes a shard's inputs: `len * width` values,
/// sample-major.
#[derive(Debug)]
#[non_exhaustive]
pub enum InputsMut<'a> {
    /// f32 features ([`SampleSpec::token_ids`] false).
    Features(&'a mut [f32]),
    /// u32 token ids ([`SampleSpec::token_ids`] true).
    Ids(&'a mut [u32]),
}

/// Where [`DataSource::read_shard_into`] writes a shard's targets: `len` samples' worth,
/// sample-major.
#[derive(Debug)]
#[non_exhaustive]
pub enum TargetsMut<'a> {
    /// u32 class labels ([`TargetSpec::Classes`]).
    Labels(&'a mut [u32]),
    /// f32 values ([`TargetSpec::Values`]).
    Values(&'a mut [f32]),
}

impl InputsMut<'_> {
    /// The values the buffer holds.
    pub fn len(&self) -> usize {
        match self {
            InputsMut::Features(x) => x.len(),
            InputsMut::Ids(x) => x.len(),
        }
    }

    /// True for a buffer of no values.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl TargetsMut<'_> {
    /// The values the buffer holds.
    pub fn len(&self) -> usize {
        match self {
            TargetsMut::Labels(y) => y.len(),
            TargetsMut::Values(y) => y.len(),
        }
    }

    /// True for a buffer of no values.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Copies `data` (checked against the source's spec and length) into the buffers.
fn copy_into(data: &Dataset, inputs: InputsMut<'_>, targets: TargetsMut<'_>) -> Result<()> {
    let mismatch = || {
        Error::InvalidData(format!(
            "a shard of {:?} does not fit the buffers it is read into",
            SampleSpec::of(data)
        ))
    };
    fn fill<T: Copy>(out: &mut [T], from: &[T]) -> bool {
        let fits = out.len() == from.len();
        if fits {
            out.copy_from_slice(from);
        }
        fits
    }
    let inputs_fit = match (inputs, data.token_ids()) {
        (InputsMut::Ids(out), Some(ids)) => fill(out, ids),
        (InputsMut::Features(out), None) => fill(out, data.features()),
        _ => false,
    };
    let targets_fit = match (targets, data.targets()) {
        (TargetsMut::Labels(out), Targets::Classes { labels, .. }) => fill(out, labels),
        (TargetsMut::Values(out), Targets::Values { values, .. }) => fill(out, values),
        _ => false,
    };
    match inputs_fit && targets_fit {
        true => Ok(()),
        false => Err(mismatch()),
    }
}

/// A function's data sets as shards: shard `i` is `make(i)`, which must have
/// `shard_lens[i]` samples of `spec` (else an error names the shard). For generated data, or
/// for data kept in another store; `make` must give the same shard for the same index every
/// time for a run to be reproducible.
pub struct GeneratedShards<F> {
    spec: SampleSpec,
    lens: Vec<usize>,
    make: F,
}

impl<F: Fn(usize) -> Result<Dataset> + Send + Sync> GeneratedShards<F> {
    /// Shards of `shard_lens` samples of `spec` each, made by `make`.
    pub fn new(spec: SampleSpec, shard_lens: Vec<usize>, make: F) -> Self {
        GeneratedShards {
            spec,
            lens: shard_lens,
            make,
        }
    }
}

impl<F: Fn(usize) -> Result<Dataset> + Send + Sync> DataSource for GeneratedShards<F> {
    fn spec(&self) -> SampleSpec {
        self.spec
    }

    fn shard_lens(&self) -> &[usize] {
        &self.lens
    }

    fn read_shard(&self, index: usize) -> Result<Dataset> {
        (self.make)(index)
    }
}

/// Where a [`DataStream`]'s batches are gathered from their windows
/// ([`DataStream::gather`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StreamGather {
    /// On the device where it has a copy stream and measured faster so (OpenCL; on CUDA the
    /// host batches stayed ahead), a batch is no larger than any window, and two windows take
    /// at most a quarter of the device's memory (or of the context's
    /// [`crate::Context::set_memory_limit`] cap); on the host otherwise.
    #[default]
    Auto,
    /// On the device: each window is copied whole (two on the device at once) and every
    /// batch gathered there. An error at the start of training when a batch can be larger
    /// than a window. Where the device has no copy stream (the CPU, HIP) the copies are
    /// not overlapped with the steps.
    Device,
    /// On the host: each batch is gathered into a host block and copied on its own; device
    /// memory holds two batches.
    Host,
}

/// A [`DataSource`] with how training reads it: [`Network::train`](super::Network::train)
/// takes it as it takes a [`Dataset`].
///
/// Each epoch the shards are taken in a seeded random order, `shuffle_window` shards at a
/// time: their samples are shuffled together and trained on, then the next window's (see
/// `src/nn/stream_plan.rs`). Background threads read the windows while the device trains;
/// each batch is gathered from its window on the device or on the host
/// ([`StreamGather`]).
#[derive(Clone)]
pub struct DataStream {
    pub(crate) source: Arc<dyn DataSource>,
    pub(crate) shuffle_window: usize,
    pub(crate) prefetch: usize,
    pub(crate) validation: Option<Dataset>,
    pub(crate) gather: StreamGather,
}

impl std::fmt::Debug for DataStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "DataStream({} shards of {:?}, window {}, prefetch {}, gather {:?})",
            self.source.shard_lens().len(),
            self.source.spec(),
            self.shuffle_window,
            self.prefetch,
            self.gather
        )
    }
}

impl DataStream {
    /// A stream over `source` with a shuffle window of 4 shards, 4 batches prefetched and no
    /// validation data.
    pub fn new(source: impl DataSource + 'static) -> Self {
        DataStream {
            source: Arc::new(source),
            shuffle_window: 4,
            prefetch: 4,
            validation: None,
            gather: StreamGather::Auto,
        }
    }

    /// Shuffles the samples of `shards` shards together (at least 1): more mixes better and
    /// holds more samples on the host at once (two windows: the next is read ahead), and on
    /// the device too where batches are gathered there ([`StreamGather::Device`]).
    pub fn shuffle_window(mut self, shards: usize) -> Self {
        self.shuffle_window = shards.max(1);
        self
    }

    /// Prepares at most `batches` batches ahead of the device (at least 1) when batches are
    /// gathered on the host. Each is gathered into a host block the device copies from;
    /// `batches + 4` blocks are allocated once per run (`batches` queued, one being copied,
    /// up to three being gathered; pinned memory on CUDA, so keep this small for large
    /// batches). Device windows read one window ahead instead, into two window-sized blocks.
    pub fn prefetch(mut self, batches: usize) -> Self {
        self.prefetch = batches.max(1);
        self
    }

    /// Where batches are gathered from their windows: [`StreamGather::Auto`] (the default)
    /// chooses by the device and the sizes.
    pub fn gather(mut self, gather: StreamGather) -> Self {
        self.gather = gather;
        self
    }

    /// Samples evaluated after every epoch (held in memory and on the device), as
    /// `validation_split` holds out part of a [`Dataset`]; a stream takes no
    /// `validation_split`.
    pub fn validation(mut self, data: Dataset) -> Self {
        self.validation = Some(data);
        self
    }

    /// The source.
    pub fn source(&self) -> &dyn DataSource {
        &*self.source
    }

    /// Total samples over all shards.
    pub fn len(&self) -> usize {
        self.source.shard_lens().iter().sum()
    }

    /// True when the source has no samples (training on it is an error).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What [`Network::train`](super::Network::train) trains on: a data set in memory (uploaded
/// once) or a [`DataStream`] (read in shards while training). Both convert from a reference.
#[derive(Debug, Clone, Copy)]
pub enum TrainData<'a> {
    /// Every sample in memory.
    Memory(&'a Dataset),
    /// Shards read while training.
    Stream(&'a DataStream),
}

impl TrainData<'_> {
    /// Samples (all of a stream's shards).
    pub fn len(&self) -> usize {
        match self {
            TrainData::Memory(d) => d.len(),
            TrainData::Stream(s) => s.len(),
        }
    }

    /// True when there are no samples (never for a [`Dataset`]).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<'a> From<&'a Dataset> for TrainData<'a> {
    fn from(d: &'a Dataset) -> Self {
        TrainData::Memory(d)
    }
}

impl<'a> From<&'a DataStream> for TrainData<'a> {
    fn from(s: &'a DataStream) -> Self {
        TrainData::Stream(s)
    }
}
