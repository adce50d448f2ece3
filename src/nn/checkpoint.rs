//! Checkpoints as safetensors with PyTorch tensor names (`0.weight`, `1.weight_ih_l0`, ...),
//! written atomically (a uniquely named temp file in the same directory, synced, then renamed)
//! and loadable on any backend.

use std::collections::HashMap;
use std::path::Path;

use safetensors::{Dtype, SafeTensors, tensor::TensorView};

use crate::error::{Error, Result};

use super::network::Network;

/// Marker in the names of temp files a checkpoint is written through.
const TEMP_MARKER: &str = ".ckpt-tmp-";

impl Network {
    /// Saves every parameter to `path` (safetensors, f32, little-endian).
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        let values = self.parameters()?;
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let mut views = Vec::new();
        for t in &self.layout.tensors {
            let data = &bytes[t.offset * 4..(t.offset + t.len()) * 4];
            let view =
                TensorView::new(Dtype::F32, t.shape.clone(), data).map_err(|e| Error::Format {
                    path: path.display().to_string(),
                    reason: format!("tensor {}: {e}", t.name),
                })?;
            views.push((t.name.clone(), view));
        }
        let mut meta = HashMap::new();
        meta.insert("format".to_string(), "pt".to_string());
        let encoded = safetensors::serialize(views, Some(meta)).map_err(|e| Error::Format {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
        crate::fsutil::write_atomic(
            path,
            &encoded,
            TEMP_MARKER,
            crate::fsutil::FileMode::Default,
        )
        .map_err(|e| Error::io(path, e))
    }

    /// Loads parameters saved by [`Network::save`] (or by PyTorch with the same names and
    /// shapes) into this network. Every tensor must be present with the same shape and dtype
    /// f32; extra tensors are errors too, except the `rnn.`-prefixed run state of a training
    /// checkpoint (whose weights this loads).
    pub fn load(&mut self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
        let fmt = |reason: String| Error::Format {
            path: path.display().to_string(),
            reason,
        };
        let st = SafeTensors::deserialize(&bytes).map_err(|e| fmt(e.to_string()))?;
        let mut values = vec![0.0f32; self.layout.total];
        for t in &self.layout.tensors {
            let view = st
                .tensor(&t.name)
                .map_err(|_| fmt(format!("tensor {} is missing", t.name)))?;
            if view.dtype() != Dtype::F32 {
                return Err(fmt(format!(
                    "tensor {} is {:?}, expected F32",
                    t.name,
                    view.dtype()
                )));
            }
            if view.shape() != t.shape.as_slice() {
                return Err(Error::shape(
                    "checkpoint",
                    format!(
                        "tensor {} has shape {:?} in {}, the network expects {:?}",
                        t.name,
                        view.shape(),
                        path.display(),
                        t.shape
                    ),
                ));
            }
            for (dst, chunk) in values[t.offset..t.offset + t.len()]
                .iter_mut()
                .zip(view.data().chunks_exact(4))
            {
                *dst = f32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
            }
        }
        // A training checkpoint also holds `rnn.`-prefixed optimizer and run state.
        let own = st.names().iter().filter(|n| !n.starts_with("rnn.")).count();
        if own != self.layout.tensors.len() {
            let known: Vec<&str> = self
                .layout
                .tensors
                .iter()
                .map(|t| t.name.as_str())
                .collect();
            let extra: Vec<String> = st
                .names()
                .into_iter()
                .filter(|n| !known.contains(n) && !n.starts_with("rnn."))
                .map(String::from)
                .collect();
            return Err(fmt(format!("unexpected tensors {extra:?}")));
        }
        self.set_parameters(&values)
    }
}
