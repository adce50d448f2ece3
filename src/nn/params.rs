//! The flat parameter layout: every parameter of a network is a named range of ONE device
//! buffer (and its gradient the same range of another), so the optimizer and gradient clipping
//! are one launch each and a checkpoint is one download.

use crate::buffer::{Buffer, View};
use crate::error::{Error, Result};

use super::rng::Rng;
use super::size;

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
    /// Initialized uniformly in `[-bound, bound]` (when `init` is [`Init::Uniform`]).
    pub(crate) init_bound: f32,
    /// How the tensor is initialized.
    pub(crate) init: Init,
}

/// How a parameter tensor is initialized (PyTorch's defaults per layer kind).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Init {
    /// Uniform in `[-bound, bound]` (dense and recurrent layers).
    Uniform(f32),
    /// Every element this value (LayerNorm: weight 1, bias 0); draws nothing from the stream.
    Constant(f32),
    /// Standard normal (Embedding).
    Normal,
}

impl ParamInfo {
    /// Number of elements. (A layout whose sizes overflow is rejected when the network is
    /// built, so this saturates only on a description that never became a network.)
    pub fn len(&self) -> usize {
        size::product(&self.shape).unwrap_or(usize::MAX)
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
    /// The first tensor whose size (or the running total) overflowed; see [`Self::check`].
    overflow: Option<String>,
}

impl ParamLayout {
    /// Appends a tensor and returns its range. Layers call this while they are described;
    /// a size that overflows is recorded (the tensor then counts as empty) and reported by
    /// [`Self::check`], which the builder calls before allocating anything.
    pub fn add(&mut self, name: String, shape: Vec<usize>, init_bound: f32) -> ParamRef {
        self.add_init(name, shape, Init::Uniform(init_bound))
    }

    /// [`Self::add`] with another initialization.
    pub fn add_init(&mut self, name: String, shape: Vec<usize>, init: Init) -> ParamRef {
        let init_bound = match init {
            Init::Uniform(b) => b,
            _ => 0.0,
        };
        let offset = self.total;
        let len = match size::product(&shape).and_then(|n| offset.checked_add(n).map(|_| n)) {
            Some(n) => n,
            None => {
                if self.overflow.is_none() {
                    self.overflow = Some(format!(
                        "parameter {name} of shape {shape:?} after {offset} others overflows \
                         the address space"
                    ));
                }
                0
            }
        };
        let info = ParamInfo {
            name,
            shape,
            offset,
            init_bound,
            init,
        };
        self.total += len;
        self.tensors.push(info);
        ParamRef { offset, len }
    }

    /// [`Error::InvalidArgument`] when any tensor's size or the total overflowed.
    pub fn check(&self) -> Result<()> {
        match &self.overflow {
            Some(m) => Err(Error::InvalidArgument(m.clone())),
            None => Ok(()),
        }
    }

    /// Host values for every parameter, drawn in layout order from one seeded stream (so a
    /// seed reproduces the same network on every backend).
    pub fn initial_values(&self, seed: u64) -> Vec<f32> {
        let mut rng = Rng::new(seed);
        let mut out = vec![0.0f32; self.total];
        for t in &self.tensors {
            let values = &mut out[t.offset..t.offset + t.len()];
            match t.init {
                Init::Uniform(b) => values
                    .iter_mut()
                    .for_each(|x| *x = rng.uniform_range(-b, b)),
                Init::Constant(c) => values.fill(c),
                Init::Normal => values.iter_mut().for_each(|x| *x = rng.normal()),
            }
        }
        out
    }
}
