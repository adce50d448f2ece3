//! [`CharCorpus`]: a character vocabulary over a text, and next-character data sets for
//! recurrent models, as one-hot sequences or as id sequences for an embedding layer.

use crate::error::{Error, Result};

use super::data::{Dataset, Targets};
use super::rng::Rng;

/// A text and its sorted character vocabulary.
#[derive(Debug, Clone)]
pub struct CharCorpus {
    vocab: Vec<char>,
    encoded: Vec<u32>,
}

impl CharCorpus {
    /// Builds the vocabulary from every distinct character of `text` (at least two characters).
    pub fn new(text: &str) -> Result<Self> {
        let mut vocab: Vec<char> = text.chars().collect();
        vocab.sort_unstable();
        vocab.dedup();
        let encoded: Vec<u32> = text
            .chars()
            .map(|c| vocab.binary_search(&c).map(|i| i as u32).unwrap_or(0))
            .collect();
        if encoded.len() < 2 {
            return Err(Error::InvalidData(
                "a character corpus needs at least two characters".into(),
            ));
        }
        Ok(CharCorpus { vocab, encoded })
    }

    /// Number of distinct characters.
    pub fn vocab_size(&self) -> usize {
        self.vocab.len()
    }

    /// Length of the text in characters.
    pub fn len(&self) -> usize {
        self.encoded.len()
    }

    /// Never true (construction requires text).
    pub fn is_empty(&self) -> bool {
        self.encoded.is_empty()
    }

    /// The index of `c`, if it is in the vocabulary.
    pub fn index(&self, c: char) -> Option<usize> {
        self.vocab.binary_search(&c).ok()
    }

    /// The character of index `i`.
    pub fn char(&self, i: usize) -> Option<char> {
        self.vocab.get(i).copied()
    }

    /// One-hot encoding of `text` (`text.len() x vocab`); unknown characters are errors.
    pub fn one_hot(&self, text: &str) -> Result<Vec<f32>> {
        let v = self.vocab_size();
        let mut out = Vec::new();
        for (i, c) in text.chars().enumerate() {
            let k = self.index(c).ok_or_else(|| {
                Error::InvalidData(format!("character {c:?} at {i} is not in the vocabulary"))
            })?;
            let mut row = vec![0.0; v];
            row[k] = 1.0;
            out.extend(row);
        }
        Ok(out)
    }

    /// The ids of `text` as f32 (the input of an embedding layer, as
    /// [`crate::nn::Network::predict`] takes it); unknown characters are errors.
    pub fn ids(&self, text: &str) -> Result<Vec<f32>> {
        Ok(self.token_ids(text)?.iter().map(|&k| k as f32).collect())
    }

    /// The ids of `text` as u32 token ids ([`crate::nn::Network::predict_ids`] takes them);
    /// unknown characters are errors.
    pub fn token_ids(&self, text: &str) -> Result<Vec<u32>> {
        text.chars()
            .enumerate()
            .map(|(i, c)| {
                self.index(c).map(|k| k as u32).ok_or_else(|| {
                    Error::InvalidData(format!("character {c:?} at {i} is not in the vocabulary"))
                })
            })
            .collect()
    }

    /// [`CharCorpus::id_sequences`] as a data set of u32 token ids ([`Dataset::tokens`]).
    pub fn token_sequences(
        &self,
        steps: usize,
        stride: usize,
        max_samples: usize,
    ) -> Result<Dataset> {
        let data = self.id_sequences(steps, stride, max_samples)?;
        // Character ids are below the vocabulary size: exact in f32.
        let ids = data.features().iter().map(|&v| v as u32).collect();
        Dataset::tokens(ids, steps, data.targets().clone())
    }

    /// Next-character training data for a model that starts with an embedding: windows of
    /// `steps` character ids (features `steps`, each an id in `0..vocab_size()`) with the
    /// following character at every step as labels, exactly as [`CharCorpus::sequences`]
    /// makes them but without the one-hot expansion (`vocab` times smaller).
    ///
    /// ```
    /// use rnn::nn::CharCorpus;
    /// let corpus = CharCorpus::new("abcabcabd")?;
    /// let data = corpus.id_sequences(3, 2, 10)?;
    /// assert_eq!(data.width(), 3);
    /// assert_eq!(&data.features()[..3], &[0.0, 1.0, 2.0]); // "abc"
    /// # Ok::<(), rnn::Error>(())
    /// ```
    pub fn id_sequences(&self, steps: usize, stride: usize, max_samples: usize) -> Result<Dataset> {
        self.windows(steps, stride, max_samples, false)
    }

    /// Next-character training data: windows of `steps` one-hot characters (features
    /// `steps * vocab`) with the following character at every step as labels (`steps` per
    /// sample). Windows start every `stride` characters; `max_samples` caps their number.
    pub fn sequences(&self, steps: usize, stride: usize, max_samples: usize) -> Result<Dataset> {
        self.windows(steps, stride, max_samples, true)
    }

    fn windows(
        &self,
        steps: usize,
        stride: usize,
        max_samples: usize,
        one_hot: bool,
    ) -> Result<Dataset> {
        if steps == 0 || stride == 0 || max_samples == 0 {
            return Err(Error::InvalidArgument(
                "steps, stride and max_samples must be > 0".into(),
            ));
        }
        if self.encoded.len() <= steps {
            return Err(Error::InvalidData(format!(
                "text of {} characters is too short for sequences of {steps}",
                self.encoded.len()
            )));
        }
        let v = self.vocab_size();
        let mut features = Vec::new();
        let mut labels = Vec::new();
        let starts = (0..self.encoded.len() - steps)
            .step_by(stride)
            .take(max_samples);
        for s in starts {
            for t in 0..steps {
                let id = self.encoded[s + t];
                if one_hot {
                    let mut row = vec![0.0; v];
                    row[id as usize] = 1.0;
                    features.extend(row);
                } else {
                    features.push(id as f32);
                }
                labels.push(self.encoded[s + t + 1]);
            }
        }
        Dataset::new(
            features,
            if one_hot { steps * v } else { steps },
            Targets::Classes {
                labels,
                classes: v,
                per_sample: steps,
            },
        )
    }

    /// Draws a character index from softmax(`logits` / `temperature`); empty `logits` is an
    /// [`Error::InvalidArgument`].
    pub fn sample_index(logits: &[f32], temperature: f32, rng: &mut Rng) -> Result<usize> {
        if logits.is_empty() {
            return Err(Error::InvalidArgument(
                "sample_index needs at least one logit".into(),
            ));
        }
        let t = if temperature > 0.0 { temperature } else { 1.0 };
        let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let weights: Vec<f64> = logits
            .iter()
            .map(|&l| (((l - max) / t) as f64).exp())
            .collect();
        let total: f64 = weights.iter().sum();
        let mut u = rng.uniform() as f64 * total;
        for (i, w) in weights.iter().enumerate() {
            if u < *w {
                return Ok(i);
            }
            u -= w;
        }
        Ok(weights.len() - 1)
    }
}
