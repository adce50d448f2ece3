//! The flat parameter layout: every parameter of a network is a named range of ONE device
//! buffer (and its gradient the same range of another), so the optimizer and gradient clipping
//! are one launch each and a checkpoint is one download.

use crate::buffer::{Buffer, View};
use crate::error::Result;

use super::rng::Rng;

/// Where one parameter tensor lives in the flat buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ParamRef {
    pub offset: usize,
    pub len: usize,
}

impl ParamRef {
    /// This parameter's range of a flat buffer (parameters or gradients).
    pub fn view<'a>(&self, flat: &'a Buffer) -> Result<View<'a>> {
        flat.slice(self.offset, self.len)
    }
}

/// One named parameter tensor.
#[derive(Debug, Clone, PartialEq)]
pub struct ParamInfo {
    /// PyTorch-style name, e.g. `0.weight` or `1.weight_hh_l0`.
    pub name: String,
    /// Shape, PyTorch layout (`[out, in]` for a dense weight).
    pub shape: Vec<usize>,
    /// First element in the flat buffer.
    pub offset: usize,
    /// Initialized uniformly in `[-bound, bound]`.
    pub(crate) init_bound: f32,
}

impl ParamInfo {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    /// True for a tensor with no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The list of parameter tensors in flat-buffer order.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ParamLayout {
    pub tensors: Vec<ParamInfo>,
    pub total: usize,
}

impl ParamLayout {
    /// Appends a tensor and returns its range.
    pub fn add(&mut self, name: String, shape: Vec<usize>, init_bound: f32) -> ParamRef {
        let offset = self.total;
        let info = ParamInfo {
            name,
            shape,
            offset,
            init_bound,
        };
        let len = info.len();
        self.total += len;
        self.tensors.push(info);
        ParamRef { offset, len }
    }

    /// Host values for every parameter, drawn in layout order from one seeded stream (so a
    /// seed reproduces the same network on every backend).
    pub fn initial_values(&self, seed: u64) -> Vec<f32> {
        let mut rng = Rng::new(seed);
        let mut out = vec![0.0f32; self.total];
        for t in &self.tensors {
            let b = t.init_bound;
            for x in &mut out[t.offset..t.offset + t.len()] {
                *x = rng.uniform_range(-b, b);
            }
        }
        out
    }
}
