//! `Dropout`: inverted dropout (PyTorch's `nn.Dropout(p)`), active only while training. The
//! mask comes from [`crate::ops::RandomOps::dropout`]'s counter-based hash of the network's device-side
//! random state, so a step needs no upload, the same seed gives the same masks on a backend
//! (and on every backend), and the backward pass regenerates the mask instead of storing it.

use crate::buffer::{Buffer, View};
use crate::error::Result;
use crate::ops::{DropoutMask, Ops};

use super::layer::Flat;
use super::size;

/// Drops each feature with probability `p` in training and scales the rest by `1 / (1 - p)`;
/// the identity in evaluation and prediction. No parameters.
#[derive(Debug, Clone)]
pub(crate) struct Dropout {
    pub features: usize,
    pub p: f32,
    /// Tells this layer's masks apart from other dropout sites of the same step:
    /// `layer index << 8` (the low 8 bits are left for sites inside a layer).
    pub stream: u32,
}

/// Per-batch-size buffers of one dropout layer.
pub(crate) struct DropoutWs {
    y: Buffer,
    dy: Buffer,
}

impl DropoutWs {
    pub fn output(&self) -> View<'_> {
        self.y.view()
    }
    pub fn grad_output(&self) -> View<'_> {
        self.dy.view()
    }
}

impl Dropout {
    /// A dropout layer at position `index` of the network.
    pub fn new(features: usize, p: f32, index: usize) -> Self {
        Dropout {
            features,
            p,
            stream: (index as u32) << 8,
        }
    }

    pub fn workspace(&self, ops: &dyn Ops, rows: usize) -> Result<DropoutWs> {
        let n = size::mul(rows, self.features, "dropout rows x features")?;
        Ok(DropoutWs {
            y: ops.alloc(n)?,
            dy: ops.alloc(n)?,
        })
    }

    /// Training (`f.rng` set, `p > 0`): the masked, rescaled input; otherwise a copy.
    pub fn forward(&self, f: &Flat<'_>, ws: &DropoutWs, x: View<'_>) -> Result<()> {
        match f.rng {
            Some(state) if self.p > 0.0 => {
                f.ops
                    .dropout(x, ws.y.view(), DropoutMask::new(state, self.stream, self.p))
            }
            _ => f.ops.copy(x, ws.y.view()),
        }
    }

    /// The same mask applied to the gradient (the derivative of `x * m` is `m`).
    pub fn backward(&self, f: &Flat<'_>, ws: &DropoutWs, dx: Option<View<'_>>) -> Result<()> {
        let Some(dx) = dx else { return Ok(()) };
        match f.rng {
            Some(state) if self.p > 0.0 => f.ops.dropout(
                ws.dy.view(),
                dx,
                DropoutMask::new(state, self.stream, self.p),
            ),
            _ => f.ops.copy(ws.dy.view(), dx),
        }
    }
}
