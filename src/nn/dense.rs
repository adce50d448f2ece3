//! `Dense`: `y = act(x W^T + b)` with PyTorch's layout (`weight [out, in]`, `bias [out]`).

use crate::buffer::{Buffer, View};
use crate::error::Result;
use crate::ops::{Activation, Gemm, Ops};

use super::layer::Flat;
use super::params::{ParamLayout, ParamRef};
use super::size;

/// A fully connected layer.
#[derive(Debug, Clone)]
pub(crate) struct Dense {
    pub inputs: usize,
    pub outputs: usize,
    pub act: Activation,
    w: ParamRef,
    b: ParamRef,
}

/// Per-batch-size buffers of one dense layer (allocated once, reused every step).
pub(crate) struct DenseWs {
    rows: usize,
    /// Pre-activation, kept only when the derivative needs it (GELU, leaky ReLU).
    z: Option<Buffer>,
    y: Buffer,
    dy: Buffer,
}

impl DenseWs {
    pub fn output(&self) -> View<'_> {
        self.y.view()
    }
    pub fn grad_output(&self) -> View<'_> {
        self.dy.view()
    }
}

impl Dense {
    /// Registers `{name}.weight` and `{name}.bias`; PyTorch's default init bounds both by
    /// `1 / sqrt(inputs)` (kaiming-uniform with a = sqrt 5).
    pub fn new(
        layout: &mut ParamLayout,
        name: &str,
        inputs: usize,
        outputs: usize,
        act: Activation,
    ) -> Self {
        let bound = 1.0 / (inputs as f32).sqrt();
        let w = layout.add(format!("{name}.weight"), vec![outputs, inputs], bound);
        let b = layout.add(format!("{name}.bias"), vec![outputs], bound);
        Dense {
            inputs,
            outputs,
            act,
            w,
            b,
        }
    }

    pub fn workspace(&self, ops: &dyn Ops, rows: usize) -> Result<DenseWs> {
        let n = size::mul(rows, self.outputs, "dense layer rows x outputs")?;
        let z = if self.act.derivative_from_output() {
            None
        } else {
            Some(ops.alloc(n)?)
        };
        Ok(DenseWs {
            rows,
            z,
            y: ops.alloc(n)?,
            dy: ops.alloc(n)?,
        })
    }

    pub fn forward(&self, f: &Flat<'_>, ws: &DenseWs, x: View<'_>) -> Result<()> {
        let z = ws.z.as_ref().map_or(ws.y.view(), |z| z.view());
        let w = self.w.view(f.params)?;
        let b = self.b.view(f.params)?;
        f.ops.dense_forward(
            x,
            w,
            b,
            z,
            ws.y.view(),
            self.act,
            ws.rows,
            self.inputs,
            self.outputs,
        )
    }

    /// Reads the gradient in `ws.grad_output()` (consumed in place), writes the parameter
    /// gradients (overwriting) and, when `dx` is given, the input gradient.
    pub fn backward(
        &self,
        f: &Flat<'_>,
        ws: &DenseWs,
        x: View<'_>,
        dx: Option<View<'_>>,
    ) -> Result<()> {
        let dz = ws.dy.view();
        let z = ws.z.as_ref().map_or(ws.y.view(), |z| z.view());
        let (r, o, i) = (ws.rows, self.outputs, self.inputs);
        let (dw, db) = (self.w.view(f.grads)?, self.b.view(f.grads)?);
        if self.act == Activation::Identity {
            // dz is dy: the bias gradient can come with the weight gradient's product.
            f.ops.dense_param_grads(dz, x, dw, db, r, i, o)?;
        } else {
            // The activation's backward and the bias gradient in one pass, in place.
            f.ops
                .bias_act_backward(dz, z, ws.y.view(), dz, db, self.act, r, o)?;
            f.ops.gemm(Gemm::new(o, i, r).ta(), dz, x, dw)?;
        }
        if let Some(dx) = dx {
            f.ops
                .gemm(Gemm::new(r, i, o), dz, self.w.view(f.params)?, dx)?;
        }
        Ok(())
    }
}
