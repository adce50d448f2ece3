//! Checkpoints as safetensors with PyTorch tensor names (`0.weight`, `1.weight_ih_l0`, ...),
//! written atomically (a uniquely named temp file in the same directory, synced, then renamed)
//! and loadable on any backend. Parameters are stored in f32, bf16 or f16 (published weights
//! mostly come in the half types); loading converts whichever of the three a file holds.

use std::collections::HashMap;
use std::path::Path;

use safetensors::{Dtype, SafeTensors, tensor::TensorView};

use crate::dtype::DType;
use crate::error::{Error, Result};

use super::network::Network;

/// Marker in the names of temp files a checkpoint is written through.
const TEMP_MARKER: &str = ".ckpt-tmp-";

/// Serializes `views` with the metadata `meta` and writes them to `path` atomically, through a
/// temp file whose name holds `temp_marker`.
pub(super) fn write_safetensors<'a>(
    path: &Path,
    views: Vec<(String, TensorView<'a>)>,
    meta: HashMap<String, String>,
    temp_marker: &str,
) -> Result<()> {
    let encoded = safetensors::serialize(views, Some(meta)).map_err(|e| Error::Format {
        path: path.display().to_string(),
        reason: e.to_string(),
    })?;
    crate::fsutil::write_atomic(
        path,
        &encoded,
        temp_marker,
        crate::fsutil::FileMode::Default,
    )
    .map_err(|e| Error::io(path, e))
}

impl Network {
    /// Saves every parameter to `path` (safetensors, f32, little-endian).
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        self.save_as(path, DType::F32)
    }

    /// Saves every parameter to `path` in `dtype`: [`DType::F32`] (what [`Network::save`]
    /// writes), or [`DType::Bf16`] / [`DType::F16`] (each value rounded to nearest even; half
    /// the file, as published half-precision weights come). PyTorch loads each with
    /// `load_state_dict(strict=True)` into a model of that dtype. An f16 file holds values up
    /// to 65504 in magnitude: a larger parameter is an error rather than an infinity.
    pub fn save_as(&self, path: impl AsRef<Path>, dtype: DType) -> Result<()> {
        let path = path.as_ref();
        let values = self.parameters()?;
        let (st_dtype, bytes) = encode(&values, dtype).map_err(|reason| Error::Format {
            path: path.display().to_string(),
            reason,
        })?;
        let size = dtype.size();
        let mut views = Vec::new();
        for t in &self.layout.tensors {
            let data = &bytes[t.offset * size..(t.offset + t.len()) * size];
            let view =
                TensorView::new(st_dtype, t.shape.clone(), data).map_err(|e| Error::Format {
                    path: path.display().to_string(),
                    reason: format!("tensor {}: {e}", t.name),
                })?;
            views.push((t.name.clone(), view));
        }
        let mut meta = HashMap::new();
        meta.insert("format".to_string(), "pt".to_string());
        write_safetensors(path, views, meta, TEMP_MARKER)
    }

    /// Loads parameters saved by [`Network::save`] / [`Network::save_as`] (or by PyTorch with
    /// the same names and shapes) into this network. Every tensor must be present with the same
    /// shape, in f32, bf16 or f16 (converted to the network's f32 parameters exactly: both half
    /// types are subsets of f32); extra tensors are errors too, except the `rnn.`-prefixed run
    /// state of a training checkpoint (whose weights this loads).
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
            decode(
                view.dtype(),
                view.data(),
                &mut values[t.offset..t.offset + t.len()],
            )
            .map_err(|reason| fmt(format!("tensor {}: {reason}", t.name)))?;
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

/// `values` as little-endian bytes of `dtype`, with the matching safetensors type.
fn encode(values: &[f32], dtype: DType) -> std::result::Result<(Dtype, Vec<u8>), String> {
    match dtype {
        DType::F32 => Ok((
            Dtype::F32,
            values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        )),
        DType::Bf16 => Ok((
            Dtype::BF16,
            values
                .iter()
                .flat_map(|&v| half::bf16::from_f32(v).to_le_bytes())
                .collect(),
        )),
        DType::F16 => {
            if let Some(v) = values.iter().find(|v| v.is_finite() && v.abs() > 65504.0) {
                return Err(format!(
                    "parameter {v} does not fit f16 (largest 65504): save in bf16 or f32"
                ));
            }
            Ok((
                Dtype::F16,
                values
                    .iter()
                    .flat_map(|&v| half::f16::from_f32(v).to_le_bytes())
                    .collect(),
            ))
        }
        other => Err(format!(
            "parameters are saved as f32, bf16 or f16, not {other}"
        )),
    }
}

/// Converts one tensor's little-endian `data` of type `dtype` into `out` (its element count).
fn decode(dtype: Dtype, data: &[u8], out: &mut [f32]) -> std::result::Result<(), String> {
    let (width, read): (usize, fn(&[u8]) -> f32) = match dtype {
        Dtype::F32 => (4, |c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])),
        Dtype::BF16 => (2, |c| half::bf16::from_le_bytes([c[0], c[1]]).to_f32()),
        Dtype::F16 => (2, |c| half::f16::from_le_bytes([c[0], c[1]]).to_f32()),
        other => return Err(format!("{other:?}; parameters load from F32, BF16 or F16")),
    };
    for (o, c) in out.iter_mut().zip(data.chunks_exact(width)) {
        *o = read(c);
    }
    Ok(())
}
