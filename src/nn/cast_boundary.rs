//! The one place where a layer whose ops are f32 only (embedding, dropout, layer norm, the
//! recurrent cells and their stacks) meets the bf16/f16 activations of a mixed-precision
//! network: its T input is cast to an f32 scratch, the layer runs as in f32 training (on the
//! f32 master weights), and its output is cast back to T (unless the loss reads it: the last
//! layer's stays f32); backward, the layer after it writes the output gradient straight into
//! the layer's own f32 one (a dense layer's input-gradient product takes an f32 C, an f32-only
//! layer's input gradient is f32 already: no cast, no T copy), and the f32 input gradient is
//! cast back to T. When a layer kind gains T-typed ops, it leaves this wrapper and the casts go
//! with it.

use crate::buffer::{Buffer, View};
use crate::dtype::DType;
use crate::error::Result;
use crate::ops::Ops;

use super::layer::{Flat, Layer, LayerWs};

/// An f32-only layer's workspace inside a T network: the layer's own workspace and the T
/// buffers the layers around it read and write (its output gradient is the inner layer's f32
/// one: [`super::layer::Layer::grad_output`]).
pub(crate) struct CastWs {
    pub inner: LayerWs,
    /// The f32 copy of a T input and the f32 input gradient (`None` where the input is not a
    /// T activation: an embedding's ids, or the network's f32 input features).
    x32: Option<Buffer>,
    dx32: Option<Buffer>,
    /// The layer's output in T; `None` for the last layer, whose f32 output the loss reads.
    y: Option<Buffer>,
}

impl CastWs {
    /// Wraps `inner`, the workspace of `layer` over `rows` input rows, for activations of type
    /// `low`. `cast_input` says whether the layer's input is a T activation (not the first
    /// layer), `last` whether the loss reads the layer's output (then kept in f32).
    pub fn new(
        ops: &dyn Ops,
        (layer, inner): (&Layer, LayerWs),
        rows: usize,
        low: DType,
        (cast_input, last): (bool, bool),
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
            y: (!last).then(|| ops.alloc_as(low, out_len)).transpose()?,
            inner,
        })
    }

    /// The T output the next layer reads; `None` where the layer's own f32 one is the output.
    pub fn output(&self) -> Option<View<'_>> {
        self.y.as_ref().map(Buffer::view)
    }

    /// The input the wrapped layer reads: the f32 copy of a T input, else the input itself.
    fn input<'a>(&'a self, x: View<'a>) -> View<'a> {
        match &self.x32 {
            Some(b) if x.dtype() != DType::F32 => b.view(),
            _ => x,
        }
    }

    /// Casts `x` to f32 (when it is T), runs `layer`'s forward, casts its output to T (unless
    /// the layer is the last, or the layer's pass wrote the T copy itself).
    pub fn forward(&self, layer: &Layer, f: &Flat<'_>, x: View<'_>) -> Result<()> {
        let input = self.input(x);
        if !input.same_as(&x) {
            f.ops.cast(x, input)?;
        }
        let Some(y) = &self.y else {
            return layer.forward(f, &self.inner, input);
        };
        // The persistent recurrent kernels store the T copy as they go.
        if layer.forward_low(f, &self.inner, input, y.view())? {
            return Ok(());
        }
        f.ops.cast(layer.output(&self.inner)?, y.view())
    }

    /// Runs `layer`'s backward from the f32 output gradient the layer after it wrote (on the
    /// f32 input the forward read) and casts its f32 input gradient into `dx` where `dx` is T.
    pub fn backward(
        &self,
        layer: &Layer,
        f: &Flat<'_>,
        x: View<'_>,
        dx: Option<View<'_>>,
    ) -> Result<()> {
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
