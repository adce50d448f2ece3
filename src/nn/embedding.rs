//! `Embedding`: PyTorch's `nn.Embedding(num_embeddings, dim)` as a first layer. Each input
//! value is a token id (u32 on the device: a data set of ids, or f32 features holding exact
//! integers, converted when they are uploaded); the layer
//! looks its row up in `weight [num_embeddings, dim]` ([`crate::ops::IndexOps::gather_rows`]) and its
//! backward pass scatter-adds the output gradient into the weight gradient
//! ([`crate::ops::IndexOps::scatter_add_rows`]). Ids are validated on the host before any kernel runs
//! (see [`super::Network::check_data`]), so an id outside the table is an error, never a NaN.

use crate::buffer::{Buffer, View};
use crate::error::{Error, Result};
use crate::ops::IndexedRows;
use crate::ops::Ops;

use super::layer::Flat;
use super::params::{Init, ParamLayout, ParamRef};
use super::size;

/// A lookup table of `num` vectors of `dim` values.
#[derive(Debug, Clone)]
pub(crate) struct Embedding {
    pub num: usize,
    pub dim: usize,
    w: ParamRef,
}

/// Per-batch-size buffers of one embedding layer.
pub(crate) struct EmbeddingWs {
    y: Buffer,
    dy: Buffer,
}

impl EmbeddingWs {
    pub fn output(&self) -> View<'_> {
        self.y.view()
    }
    pub fn grad_output(&self) -> View<'_> {
        self.dy.view()
    }
}

impl Embedding {
    /// Registers `{name}.weight [num, dim]`, standard normal as PyTorch initializes it.
    pub fn new(layout: &mut ParamLayout, name: &str, num: usize, dim: usize) -> Self {
        let w = layout.add_init(format!("{name}.weight"), vec![num, dim], Init::Normal);
        Embedding { num, dim, w }
    }

    pub fn workspace(&self, ops: &dyn Ops, rows: usize) -> Result<EmbeddingWs> {
        let n = size::mul(rows, self.dim, "embedding rows x dim")?;
        Ok(EmbeddingWs {
            y: ops.alloc(n)?,
            dy: ops.alloc(n)?,
        })
    }

    /// [`Error::InvalidData`] unless every value of `ids` is a valid id (an integer in
    /// `0..num`).
    pub fn check_ids(&self, ids: &[f32], width: usize) -> Result<()> {
        // Compared in f64, which holds every id below 2^32 exactly (f32 does not above 2^24).
        let num = self.num as f64;
        let bad = |v: f32| !(v >= 0.0 && (v as f64) < num && v.fract() == 0.0);
        match ids.iter().position(|&v| bad(v)) {
            Some(i) => Err(self.bad_id(ids[i], i, width)),
            None => Ok(()),
        }
    }

    /// [`Error::InvalidData`] unless every id is in `0..num`.
    pub fn check_u32_ids(&self, ids: &[u32], width: usize) -> Result<()> {
        match ids.iter().position(|&v| v as usize >= self.num) {
            Some(i) => Err(self.bad_id(ids[i], i, width)),
            None => Ok(()),
        }
    }

    /// f32 features holding token ids, checked ([`Embedding::check_ids`]) and converted to
    /// the u32 ids the device takes.
    pub fn ids_of(&self, values: &[f32], width: usize) -> Result<Vec<u32>> {
        self.check_ids(values, width)?;
        // Checked: each value is an integer in 0..num, and num fits u32 (the builder's limit).
        Ok(values.iter().map(|&v| v as u32).collect())
    }

    fn bad_id(&self, id: impl std::fmt::Display, i: usize, width: usize) -> Error {
        Error::InvalidData(format!(
            "row {}: token id {id} at step {} is not an integer in 0..{} (the embedding's \
             num_embeddings)",
            i / width.max(1),
            i % width.max(1),
            self.num
        ))
    }

    pub fn forward(&self, f: &Flat<'_>, ws: &EmbeddingWs, ids: View<'_>) -> Result<()> {
        f.ops.gather_rows(IndexedRows::new(
            self.w.view(f.params)?,
            ids,
            ws.y.view(),
            self.dim,
        ))
    }

    /// Overwrites the weight gradient: zero, then every row's output gradient added at its
    /// id (repeated ids accumulate).
    pub fn backward(&self, f: &Flat<'_>, ws: &EmbeddingWs, ids: View<'_>) -> Result<()> {
        let dw = self.w.view(f.grads)?;
        f.ops.fill(dw, 0.0)?;
        f.ops
            .scatter_add_rows(IndexedRows::new(ws.dy.view(), ids, dw, self.dim))
    }
}
