//! `LayerNorm`: PyTorch's `nn.LayerNorm(features)` over each row (every step of every
//! sample), with `weight` (initialized to 1) and `bias` (0), forward and backward one fused
//! op each ([`crate::ops::NormOps::layer_norm_forward`], [`crate::ops::NormOps::layer_norm_backward`]).

use crate::buffer::{Buffer, View};
use crate::error::Result;
use crate::ops::Ops;
use crate::ops::{LayerNormBackward, LayerNormForward, LayerNormGrads, LayerNormParams, MatShape};

use super::layer::{Flat, LayerInput};
use super::params::{Init, ParamLayout, ParamRef};
use super::size;

/// PyTorch's default epsilon.
pub(crate) const DEFAULT_EPS: f32 = 1e-5;

/// Layer normalization over the last dimension.
#[derive(Debug, Clone)]
pub(crate) struct LayerNorm {
    pub features: usize,
    pub eps: f32,
    /// First layer of the network: no layer takes its input gradient.
    pub first: bool,
    w: ParamRef,
    b: ParamRef,
}

/// Per-batch-size buffers of one layer-norm layer.
pub(crate) struct LayerNormWs {
    rows: usize,
    y: Buffer,
    dy: Buffer,
    /// Mean and `1 / std` of every row, for the backward pass.
    stats: Buffer,
    /// Where the input gradient goes when nothing consumes it (a first layer).
    dx_scratch: Option<Buffer>,
}

impl LayerNormWs {
    pub fn output(&self) -> View<'_> {
        self.y.view()
    }
    pub fn grad_output(&self) -> View<'_> {
        self.dy.view()
    }
}

impl LayerNorm {
    /// Registers `{name}.weight [features]` (ones) and `{name}.bias [features]` (zeros).
    pub fn new(
        layout: &mut ParamLayout,
        name: &str,
        features: usize,
        eps: f32,
        first: bool,
    ) -> Self {
        let w = layout.add_init(
            format!("{name}.weight"),
            vec![features],
            Init::Constant(1.0),
        );
        let b = layout.add_init(format!("{name}.bias"), vec![features], Init::Constant(0.0));
        LayerNorm {
            features,
            eps,
            first,
            w,
            b,
        }
    }

    pub fn workspace(&self, ops: &dyn Ops, rows: usize) -> Result<LayerNormWs> {
        let n = size::mul(rows, self.features, "layer norm rows x features")?;
        Ok(LayerNormWs {
            rows,
            y: ops.alloc(n)?,
            dy: ops.alloc(n)?,
            stats: ops.alloc(size::mul(rows, 2, "layer norm rows")?)?,
            dx_scratch: if self.first {
                Some(ops.alloc(n)?)
            } else {
                None
            },
        })
    }

    pub fn forward(&self, f: &Flat<'_>, ws: &LayerNormWs, x: View<'_>) -> Result<()> {
        f.ops.layer_norm_forward(LayerNormForward {
            x,
            params: LayerNormParams::new(self.w.view(f.params)?, self.b.view(f.params)?),
            y: ws.y.view(),
            stats: ws.stats.view(),
            shape: MatShape::new(ws.rows, self.features),
            eps: self.eps,
        })
    }

    /// Writes the weight and bias gradients (overwriting) and, when `dx` is given, the input
    /// gradient. The fused op always computes an input gradient: a first layer (no `dx`)
    /// writes it to a scratch buffer of its workspace.
    pub fn backward(&self, f: &Flat<'_>, ws: &LayerNormWs, input: LayerInput<'_>) -> Result<()> {
        let LayerInput { x, dx } = input;
        let dx = match (dx, &ws.dx_scratch) {
            (Some(dx), _) => dx,
            (None, Some(s)) => s.view(),
            (None, None) => unreachable!("a first layer's workspace has the scratch"),
        };
        f.ops.layer_norm_backward(LayerNormBackward {
            dy: ws.dy.view(),
            x,
            weight: self.w.view(f.params)?,
            stats: ws.stats.view(),
            grads: LayerNormGrads::new(dx, self.w.view(f.grads)?, self.b.view(f.grads)?),
            shape: MatShape::new(ws.rows, self.features),
        })
    }
}
