//! The one place where a layer whose ops are f32 only (embedding, dropout, layer norm, the
//! recurrent cells and their stacks) meets the bf16/f16 activations of a mixed-precision
//! network: its T input is cast to an f32 scratch, the layer runs as in f32 training (on the
//! f32 master weights), and its output is cast back to T; backward, the T output gradient is
//! cast to the layer's f32 one and the f32 input gradient back to T. When a layer kind gains
//! T-typed ops, it leaves this wrapper and the casts go with it.

use crate::buffer::{Buffer, View};
use crate::dtype::DType;
use crate::error::Result;
use crate::ops::Ops;

use super::layer::{Flat, Layer, LayerWs};

/// An f32-only layer's workspace inside a T network: the layer's own workspace and the T
/// buffers the layers around it read and write.
pub(crate) struct CastWs {
    pub inner: LayerWs,
    /// The f32 copy of a T input and the f32 input gradient (`None` where the input is not a
    /// T activation: an embedding's ids, or the network's f32 input features).
    x32: Option<Buffer>,
    dx32: Option<Buffer>,
    /// The layer's output and output gradient in T.
    y: Buffer,
    dy: Buffer,
}

impl CastWs {
    /// Wraps `inner`, the workspace of `layer` over `rows` input rows, for activations of type
    /// `low`. `cast_input` says whether the layer's input is a T activation (not the first
    /// layer).
    pub fn new(
        ops: &dyn Ops,
        (layer, inner): (&Layer, LayerWs),
        rows: usize,
        low: DType,
        cast_input: bool,
    ) -> Result<Self> {
        let out_len = layer.output(&inner)?.len();
        let in_len = super::size::mul(rows, layer.inputs(), "rows x input features")?;
        let f32_input = || -> Result<Option<Buffer>> {
            Ok(if cast_input {
                Some(ops.alloc(in_len)?)
            } else {
                None
            })
        };
        Ok(CastWs {
            x32: f32_input()?,
            dx32: f32_input()?,
            y: ops.alloc_as(low, out_len)?,
            dy: ops.alloc_as(low, out_len)?,
            inner,
        })
    }

    pub fn output(&self) -> View<'_> {
        self.y.view()
    }

    pub fn grad_output(&self) -> View<'_> {
        self.dy.view()
    }

    /// The input the wrapped layer reads: the f32 copy of a T input, else the input itself.
    fn input<'a>(&'a self, x: View<'a>) -> View<'a> {
        match &self.x32 {
            Some(b) if x.dtype() != DType::F32 => b.view(),
            _ => x,
        }
    }

    /// Casts `x` to f32 (when it is T), runs `layer`'s forward, casts its output to T.
    pub fn forward(&self, layer: &Layer, f: &Flat<'_>, x: View<'_>) -> Result<()> {
        let input = self.input(x);
        if !input.same_as(&x) {
            f.ops.cast(x, input)?;
        }
        layer.forward(f, &self.inner, input)?;
        f.ops.cast(layer.output(&self.inner)?, self.y.view())
    }

    /// Casts the T output gradient to the layer's f32 one, runs `layer`'s backward (on the f32
    /// input the forward read) and casts its f32 input gradient into `dx`.
    pub fn backward(
        &self,
        layer: &Layer,
        f: &Flat<'_>,
        x: View<'_>,
        dx: Option<View<'_>>,
    ) -> Result<()> {
        f.ops
            .cast(self.dy.view(), layer.grad_output(&self.inner)?)?;
        let input = self.input(x);
        let dx32 = match (dx, &self.dx32) {
            (Some(d), Some(b)) if d.dtype() != DType::F32 => Some(b.view()),
            (d, _) => d,
        };
        layer.backward(f, &self.inner, input, dx32)?;
        if let (Some(d), Some(d32)) = (dx, dx32)
            && !d.same_as(&d32)
        {
            f.ops.cast(d32, d)?;
        }
        Ok(())
    }
}
