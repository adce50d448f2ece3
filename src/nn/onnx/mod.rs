//! ONNX export: [`Network::export_onnx`] writes the network's inference graph (what
//! [`Network::forward`] computes) as an ONNX model that ONNX Runtime runs, with a dynamic batch
//! dimension and the parameters as initializers. See `docs/onnx.md` for the op mapping.
//!
//! The graph input is named `input`: `[batch, features]` (f32) for a network without a time
//! axis, `[batch, steps, features]` (f32) for a sequence model, `[batch, steps]` (int64 token
//! ids) when the first layer is an embedding. The output, `output`, has the shape
//! [`Network::forward`] returns: `[batch, steps, outputs]` when the network predicts at every
//! step, else `[batch, outputs]`.

mod graph;
mod layers;
mod model;
mod proto;
#[cfg(test)]
mod tests;

use std::path::Path;

use crate::error::Result;

use super::network::Network;

/// Options of [`Network::export_onnx_with`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct OnnxOptions {
    /// Append a `Softmax` over the output features (class probabilities instead of logits).
    /// Off by default: the output is then exactly what [`Network::forward`] returns.
    pub softmax: bool,
    /// The ONNX opset to declare, 17 (the default; it brings `LayerNormalization`) to 23.
    pub opset: i64,
}

impl Default for OnnxOptions {
    fn default() -> Self {
        OnnxOptions {
            softmax: false,
            opset: 17,
        }
    }
}

impl OnnxOptions {
    /// The defaults: logits, opset 17.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets [`OnnxOptions::softmax`].
    pub fn softmax(mut self, on: bool) -> Self {
        self.softmax = on;
        self
    }

    /// Sets [`OnnxOptions::opset`].
    pub fn opset(mut self, opset: i64) -> Self {
        self.opset = opset;
        self
    }
}

impl Network {
    /// Writes the network as an ONNX model (opset 17, logits out) to `path`, atomically.
    /// The parameters are read back from the network's device, so a model trained on any
    /// backend exports the same way. Dropout is the identity (inference), and the loss is not
    /// part of the graph.
    ///
    /// ```
    /// use rnn::nn::{Loss, Network, RnnOutput};
    /// use rnn::Activation;
    /// let ctx = rnn::Context::cpu();
    /// let net = Network::builder(&ctx)
    ///     .sequence_length(5)
    ///     .lstm(3, 8, RnnOutput::Last)
    ///     .dense(8, 2, Activation::Identity)
    ///     .build(Loss::SoftmaxCrossEntropy)?;
    /// let path = std::env::temp_dir().join(format!("rnn-doc-{}.onnx", std::process::id()));
    /// net.export_onnx(&path)?;
    /// assert!(std::fs::metadata(&path)?.len() > 0);
    /// # std::fs::remove_file(&path)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn export_onnx(&self, path: impl AsRef<Path>) -> Result<()> {
        self.export_onnx_with(path, &OnnxOptions::default())
    }

    /// [`Network::export_onnx`] with options: a softmax head, another opset. An opset outside
    /// 17..=23 is an [`crate::Error::InvalidArgument`].
    pub fn export_onnx_with(&self, path: impl AsRef<Path>, options: &OnnxOptions) -> Result<()> {
        let bytes = self.to_onnx_bytes(options)?;
        model::write(path.as_ref(), &bytes)
    }

    /// The ONNX model [`Network::export_onnx_with`] writes, as bytes.
    pub fn to_onnx_bytes(&self, options: &OnnxOptions) -> Result<Vec<u8>> {
        model::to_bytes(self, options)
    }
}
