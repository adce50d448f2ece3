//! In-memory data sets: features `[n, d]` plus class labels or real targets, with validation
//! that names the offending row, and loaders for MNIST (CSV, optionally gzipped, and IDX).

use std::io::Read;
use std::path::Path;

use crate::error::{Error, Result};

use super::rng::Rng;
use super::size;

/// What each sample is trained against.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Targets {
    /// Class indices: `per_sample` labels per sample (1, or the sequence length when a model
    /// predicts at every step), each in `0..classes`.
    Classes {
        /// `n * per_sample` labels, sample-major.
        labels: Vec<u32>,
        /// Number of classes.
        classes: usize,
        /// Labels per sample.
        per_sample: usize,
    },
    /// Real-valued targets, `width` per sample.
    Values {
        /// `n * width` values, sample-major.
        values: Vec<f32>,
        /// Values per sample.
        width: usize,
    },
}

impl Targets {
    /// Target elements per sample.
    pub fn width(&self) -> usize {
        match self {
            Targets::Classes { per_sample, .. } => *per_sample,
            Targets::Values { width, .. } => *width,
        }
    }

    fn select(&self, rows: &[usize]) -> Targets {
        let w = self.width();
        match self {
            Targets::Classes {
                labels,
                classes,
                per_sample,
            } => Targets::Classes {
                labels: rows
                    .iter()
                    .flat_map(|&r| labels[r * w..(r + 1) * w].iter().copied())
                    .collect(),
                classes: *classes,
                per_sample: *per_sample,
            },
            Targets::Values { values, width } => Targets::Values {
                values: rows
                    .iter()
                    .flat_map(|&r| values[r * w..(r + 1) * w].iter().copied())
                    .collect(),
                width: *width,
            },
        }
    }
}

/// A data set's inputs, `width` per sample, sample-major.
#[derive(Debug, Clone, PartialEq)]
enum Inputs {
    /// Real-valued features.
    Values(Vec<f32>),
    /// Token ids, the input of a first embedding layer: u32 on the host and on the device.
    Ids(Vec<u32>),
}

impl Inputs {
    fn len(&self) -> usize {
        match self {
            Inputs::Values(v) => v.len(),
            Inputs::Ids(v) => v.len(),
        }
    }

    /// Rows `rows` (of `w` values each), in that order.
    fn select(&self, rows: &[usize], w: usize) -> Inputs {
        fn pick<T: Copy>(v: &[T], rows: &[usize], w: usize) -> Vec<T> {
            rows.iter()
                .flat_map(|&r| v[r * w..(r + 1) * w].iter().copied())
                .collect()
        }
        match self {
            Inputs::Values(v) => Inputs::Values(pick(v, rows, w)),
            Inputs::Ids(v) => Inputs::Ids(pick(v, rows, w)),
        }
    }
}

/// Samples with `width` inputs each (real features, or token ids for a model whose first
/// layer is an embedding: [`Dataset::tokens`]), and their targets.
#[derive(Debug, Clone, PartialEq)]
pub struct Dataset {
    inputs: Inputs,
    width: usize,
    targets: Targets,
    /// Per-sample sequence lengths ([`Dataset::with_lengths`]); `None`: every sample is whole.
    lengths: Option<Vec<u32>>,
    /// The class label the loss skips ([`Dataset::new_ignoring`]).
    ignore_index: Option<u32>,
}

fn check_finite(values: &[f32], width: usize, what: &str) -> Result<()> {
    if let Some(i) = values.iter().position(|v| !v.is_finite()) {
        return Err(Error::InvalidData(format!(
            "row {}: {what} column {} is {} (values must be finite)",
            i / width,
            i % width,
            values[i]
        )));
    }
    Ok(())
}

impl Dataset {
    /// A validated data set. Rejects: no samples, zero width, a feature count that is not a
    /// multiple of `width`, targets for a different number of samples, NaN or infinite values,
    /// labels outside `0..classes`.
    pub fn new(features: Vec<f32>, width: usize, targets: Targets) -> Result<Self> {
        if width > 0 {
            check_finite(&features, width, "feature")?;
        }
        Self::validated(Inputs::Values(features), width, targets)
    }

    /// A data set of token ids, the input of a model whose first layer is an embedding
    /// ([`crate::nn::NetworkBuilder::embedding`]): `steps` ids per sample, sample-major, kept
    /// as u32 on the host and on the device (so any id below the table size is exact, however
    /// large the vocabulary). Rejects what [`Dataset::new`] rejects; ids outside the
    /// embedding's table are rejected when a network checks the data
    /// ([`crate::nn::Network::check_data`]).
    ///
    /// ```
    /// use rnn::nn::{Dataset, Targets};
    /// // Two samples of three ids, each labelled with its next id.
    /// let targets = Targets::Classes { labels: vec![3, 4], classes: 5, per_sample: 1 };
    /// let data = Dataset::tokens(vec![0, 1, 2, 1, 2, 3], 3, targets).unwrap();
    /// assert_eq!(data.len(), 2);
    /// assert_eq!(data.token_ids(), Some(&[0, 1, 2, 1, 2, 3][..]));
    /// assert!(data.features().is_empty());
    /// ```
    pub fn tokens(ids: Vec<u32>, steps: usize, targets: Targets) -> Result<Self> {
        Self::validated(Inputs::Ids(ids), steps, targets)
    }

    /// [`Dataset::new`] with class targets where the label `ignore_index` marks a position the
    /// loss skips, as PyTorch's `CrossEntropyLoss(ignore_index=...)`: that label is allowed
    /// whatever the class count (e.g. `u32::MAX`, or a padding class), and the loss is the mean
    /// over the other labels only. Rejects real-valued targets.
    pub fn new_ignoring(
        features: Vec<f32>,
        width: usize,
        targets: Targets,
        ignore_index: u32,
    ) -> Result<Self> {
        if width > 0 {
            check_finite(&features, width, "feature")?;
        }
        Self::ignoring(Inputs::Values(features), width, targets, ignore_index)
    }

    /// [`Dataset::tokens`] with an ignored label, as [`Dataset::new_ignoring`].
    pub fn tokens_ignoring(
        ids: Vec<u32>,
        steps: usize,
        targets: Targets,
        ignore_index: u32,
    ) -> Result<Self> {
        Self::ignoring(Inputs::Ids(ids), steps, targets, ignore_index)
    }

    fn ignoring(inputs: Inputs, width: usize, targets: Targets, ignore: u32) -> Result<Self> {
        if !matches!(targets, Targets::Classes { .. }) {
            return Err(Error::InvalidData(
                "an ignore_index needs class targets, the data has real values".into(),
            ));
        }
        Self::validated_ignoring(inputs, width, targets, Some(ignore))
    }

    /// The same samples with per-sample sequence lengths: sample `i` is valid for its first
    /// `lengths[i]` steps and padded after them, with PyTorch's packed-sequence meaning
    /// (`pack_padded_sequence`): recurrent outputs past a sample's length are zero and get no
    /// gradient, the reverse direction of a bidirectional layer starts at the sample's last
    /// valid step, `RnnOutput::Last` is the last valid step, and a per-step loss averages over
    /// the valid (sample, step) pairs only. Each length must be in `1..=steps`; this checks
    /// `1..=width` (`width` is the steps of token data), and a network checks its own steps
    /// when it runs the data. Training, evaluation and
    /// [`crate::nn::Network::compute_gradients`] use the lengths; `predict` and `forward` take
    /// whole sequences.
    pub fn with_lengths(mut self, lengths: &[usize]) -> Result<Self> {
        if lengths.len() != self.len() {
            return Err(Error::InvalidData(format!(
                "{} lengths for {} samples",
                lengths.len(),
                self.len()
            )));
        }
        if let Some(i) = lengths.iter().position(|&l| l == 0 || l > self.width) {
            return Err(Error::InvalidData(format!(
                "sample {i}: length {} outside 1..={}",
                lengths[i], self.width
            )));
        }
        self.lengths = Some(lengths.iter().map(|&l| l as u32).collect());
        Ok(self)
    }

    /// The per-sample lengths of [`Dataset::with_lengths`], if any.
    pub fn lengths(&self) -> Option<&[u32]> {
        self.lengths.as_deref()
    }

    /// The label the loss skips ([`Dataset::new_ignoring`]), if any.
    pub fn ignore_index(&self) -> Option<u32> {
        self.ignore_index
    }

    /// The checks of [`Dataset::new`] but the features' finiteness.
    fn validated(inputs: Inputs, width: usize, targets: Targets) -> Result<Self> {
        Self::validated_ignoring(inputs, width, targets, None)
    }

    /// [`Dataset::validated`], where a label equal to `ignore` is allowed (and skipped by the
    /// loss) whatever the class count.
    fn validated_ignoring(
        inputs: Inputs,
        width: usize,
        targets: Targets,
        ignore: Option<u32>,
    ) -> Result<Self> {
        if width == 0 {
            return Err(Error::InvalidData("feature width must be > 0".into()));
        }
        if inputs.len() == 0 {
            return Err(Error::InvalidData("the data set is empty".into()));
        }
        if inputs.len() % width != 0 {
            return Err(Error::InvalidData(format!(
                "{} feature values do not form rows of {width}",
                inputs.len()
            )));
        }
        let n = inputs.len() / width;
        let tw = targets.width();
        let tlen = match &targets {
            Targets::Classes { labels, .. } => labels.len(),
            Targets::Values { values, .. } => values.len(),
        };
        if tw == 0 || tlen != n * tw {
            return Err(Error::InvalidData(format!(
                "{n} samples need {} target values ({tw} each), got {tlen}",
                n * tw
            )));
        }
        match &targets {
            Targets::Classes {
                labels, classes, ..
            } => {
                if *classes == 0 {
                    return Err(Error::InvalidData("classes must be > 0".into()));
                }
                let bad = |l: u32| l as usize >= *classes && Some(l) != ignore;
                if let Some(i) = labels.iter().position(|&l| bad(l)) {
                    return Err(Error::InvalidData(format!(
                        "row {}: label {} outside 0..{classes}",
                        i / tw,
                        labels[i]
                    )));
                }
            }
            Targets::Values { values, width } => check_finite(values, *width, "target")?,
        }
        Ok(Dataset {
            inputs,
            width,
            targets,
            lengths: None,
            ignore_index: ignore,
        })
    }

    /// Classification with one label per sample.
    pub fn classification(
        features: Vec<f32>,
        width: usize,
        labels: Vec<u32>,
        classes: usize,
    ) -> Result<Self> {
        Self::new(
            features,
            width,
            Targets::Classes {
                labels,
                classes,
                per_sample: 1,
            },
        )
    }

    /// Regression with `target_width` values per sample.
    pub fn regression(
        features: Vec<f32>,
        width: usize,
        targets: Vec<f32>,
        target_width: usize,
    ) -> Result<Self> {
        Self::new(
            features,
            width,
            Targets::Values {
                values: targets,
                width: target_width,
            },
        )
    }

    /// Number of samples.
    pub fn len(&self) -> usize {
        self.inputs.len() / self.width
    }

    /// Never true for a validated data set; present for API symmetry.
    pub fn is_empty(&self) -> bool {
        self.inputs.len() == 0
    }

    /// Values per sample.
    pub fn width(&self) -> usize {
        self.width
    }

    /// All features, sample-major; empty for a data set of token ids ([`Dataset::tokens`],
    /// whose inputs [`Dataset::token_ids`] gives).
    pub fn features(&self) -> &[f32] {
        match &self.inputs {
            Inputs::Values(v) => v,
            Inputs::Ids(_) => &[],
        }
    }

    /// The token ids of a data set made by [`Dataset::tokens`], sample-major; `None` for one
    /// of real features.
    pub fn token_ids(&self) -> Option<&[u32]> {
        match &self.inputs {
            Inputs::Values(_) => None,
            Inputs::Ids(v) => Some(v),
        }
    }

    /// The targets.
    pub fn targets(&self) -> &Targets {
        &self.targets
    }

    /// The samples at `rows`, in that order.
    pub fn select(&self, rows: &[usize]) -> Result<Dataset> {
        if let Some(&r) = rows.iter().find(|&&r| r >= self.len()) {
            return Err(Error::InvalidArgument(format!(
                "row {r} outside a data set of {}",
                self.len()
            )));
        }
        let w = self.width;
        let inputs = self.inputs.select(rows, w);
        let mut out =
            Dataset::validated_ignoring(inputs, w, self.targets.select(rows), self.ignore_index)?;
        out.lengths = self
            .lengths
            .as_ref()
            .map(|l| rows.iter().map(|&r| l[r]).collect());
        Ok(out)
    }

    /// The first `n` samples and the rest (both non-empty).
    pub fn split_at(&self, n: usize) -> Result<(Dataset, Dataset)> {
        if n == 0 || n >= self.len() {
            return Err(Error::InvalidArgument(format!(
                "split at {n} leaves an empty part of a data set of {}",
                self.len()
            )));
        }
        let first: Vec<usize> = (0..n).collect();
        let rest: Vec<usize> = (n..self.len()).collect();
        Ok((self.select(&first)?, self.select(&rest)?))
    }

    /// A seeded random split: `(train, test)` with `test_len` test samples.
    pub fn train_test_split(&self, test_len: usize, seed: u64) -> Result<(Dataset, Dataset)> {
        if test_len == 0 || test_len >= self.len() {
            return Err(Error::InvalidArgument(format!(
                "test size {test_len} must be in 1..{}",
                self.len()
            )));
        }
        let mut order: Vec<usize> = (0..self.len()).collect();
        Rng::new(seed).shuffle(&mut order);
        let (test, train) = order.split_at(test_len);
        Ok((self.select(train)?, self.select(test)?))
    }

    /// MNIST in CSV form: per line 784 pixel values (0–255) then the label; pixels are scaled
    /// to `[0, 1]`. Gzipped input is detected by its magic bytes. A header line is skipped.
    pub fn from_mnist_csv(bytes: &[u8]) -> Result<Self> {
        let text =
            String::from_utf8(maybe_gunzip(bytes, "MNIST CSV")?).map_err(|e| Error::Format {
                path: "MNIST CSV".into(),
                reason: format!("not UTF-8: {e}"),
            })?;
        let mut features = Vec::new();
        let mut labels = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            let fields: Vec<&str> = line.split(',').collect();
            if i == 0 && fields[0].trim().parse::<f32>().is_err() {
                continue;
            }
            if fields.len() != 785 {
                return Err(Error::InvalidData(format!(
                    "MNIST CSV line {}: {} values, expected 785 (784 pixels and a label)",
                    i + 1,
                    fields.len()
                )));
            }
            for (c, f) in fields.iter().enumerate() {
                let v: f32 = f.trim().parse().map_err(|_| {
                    Error::InvalidData(format!(
                        "MNIST CSV line {}, column {}: '{f}' is not a number",
                        i + 1,
                        c + 1
                    ))
                })?;
                if c < 784 {
                    features.push(v / 255.0);
                } else if v.fract() != 0.0 || !(0.0..10.0).contains(&v) {
                    return Err(Error::InvalidData(format!(
                        "MNIST CSV line {}: label {v} is not a digit 0..9",
                        i + 1
                    )));
                } else {
                    labels.push(v as u32);
                }
            }
        }
        Dataset::classification(features, 784, labels, 10)
    }

    /// Reads an MNIST CSV file (plain or `.gz`).
    pub fn load_mnist_csv(path: impl AsRef<Path>) -> Result<Self> {
        let bytes = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
        Self::from_mnist_csv(&bytes)
    }

    /// MNIST IDX images (`0x00000803`) and labels (`0x00000801`), each plain or gzipped.
    pub fn from_mnist_idx(images: &[u8], labels: &[u8]) -> Result<Self> {
        Self::from_idx_named(images, labels, "MNIST IDX images", "MNIST IDX labels")
    }

    /// [`Dataset::from_mnist_idx`] with the names format errors report (file paths when read
    /// from disk).
    fn from_idx_named(images: &[u8], labels: &[u8], iname: &str, lname: &str) -> Result<Self> {
        let images = maybe_gunzip(images, iname)?;
        let labels = maybe_gunzip(labels, lname)?;
        let (dims, pixels) = parse_idx(&images, 3, iname)?;
        let (ldims, lbytes) = parse_idx(&labels, 1, lname)?;
        if dims[0] != ldims[0] {
            return Err(Error::InvalidData(format!(
                "{} images but {} labels",
                dims[0], ldims[0]
            )));
        }
        // With zero images the total is 0 whatever the row and column counts, so their
        // product is checked on its own.
        let width = dims[1].checked_mul(dims[2]).ok_or_else(|| Error::Format {
            path: iname.into(),
            reason: format!("image size {} x {} overflows", dims[1], dims[2]),
        })?;
        let features = pixels.iter().map(|&p| p as f32 / 255.0).collect();
        let labels = lbytes.iter().map(|&l| l as u32).collect();
        Dataset::classification(features, width, labels, 10)
    }

    /// Reads MNIST IDX files (e.g. `train-images-idx3-ubyte.gz`, `train-labels-idx1-ubyte.gz`).
    pub fn load_mnist_idx(images: impl AsRef<Path>, labels: impl AsRef<Path>) -> Result<Self> {
        let (images, labels) = (images.as_ref(), labels.as_ref());
        let i = std::fs::read(images).map_err(|e| Error::io(images, e))?;
        let l = std::fs::read(labels).map_err(|e| Error::io(labels, e))?;
        let (iname, lname) = (images.display().to_string(), labels.display().to_string());
        Self::from_idx_named(&i, &l, &iname, &lname)
    }
}

fn maybe_gunzip(bytes: &[u8], what: &str) -> Result<Vec<u8>> {
    if bytes.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(bytes)
            .read_to_end(&mut out)
            .map_err(|e| Error::Format {
                path: what.into(),
                reason: format!("bad gzip stream: {e}"),
            })?;
        Ok(out)
    } else {
        Ok(bytes.to_vec())
    }
}

/// An unsigned-byte IDX file of `rank` dimensions: its dimensions and payload.
fn parse_idx<'a>(bytes: &'a [u8], rank: usize, what: &str) -> Result<(Vec<usize>, &'a [u8])> {
    let bad = |reason: String| Error::Format {
        path: what.into(),
        reason,
    };
    let header = 4 + 4 * rank;
    if bytes.len() < header {
        return Err(bad(format!(
            "{} bytes is shorter than the header",
            bytes.len()
        )));
    }
    if bytes[0] != 0 || bytes[1] != 0 || bytes[2] != 0x08 || bytes[3] as usize != rank {
        return Err(bad(format!(
            "magic {:02x}{:02x}{:02x}{:02x}, expected 000008{rank:02x} (unsigned bytes, rank {rank})",
            bytes[0], bytes[1], bytes[2], bytes[3]
        )));
    }
    let dims: Vec<usize> = (0..rank)
        .map(|i| {
            let b = &bytes[4 + 4 * i..8 + 4 * i];
            u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize
        })
        .collect();
    let count = size::product(&dims).ok_or_else(|| {
        bad(format!(
            "dimensions {dims:?} overflow (file has {} payload bytes)",
            bytes.len() - header
        ))
    })?;
    let payload = &bytes[header..];
    if payload.len() != count {
        return Err(bad(format!(
            "dimensions {dims:?} need {count} bytes, file has {}",
            payload.len()
        )));
    }
    Ok((dims, payload))
}
