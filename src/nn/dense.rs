//! `Dense`: `y = act(x W^T + b)` with PyTorch's layout (`weight [out, in]`, `bias [out]`).

use crate::buffer::{Buffer, View};
use crate::dtype::DType;
use crate::error::Result;
use crate::ops::{Activated, BiasActBackward, BiasActBackwardProduct, BiasActGrads, MatShape};
use crate::ops::{Activation, Gemm, Ops};
use crate::ops::{DenseForward, DenseParamGrads, DenseParams, DenseShape};

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

/// The output gradient of a dense layer, given as the input gradient of the dense layer after
/// it and not yet formed: `g w` (`g` that layer's pre-activation gradient, `rows x k`; `w` its
/// weight, `k x outputs`). [`Dense::backward`] forms it inside its own pass
/// ([`crate::ops::ActivationOps::bias_act_backward_product`]), so it is never stored.
#[derive(Clone, Copy)]
pub(crate) struct PendingGrad<'a> {
    g: View<'a>,
    w: View<'a>,
    k: usize,
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
        self.workspace_as(ops, rows, DType::F32)
    }

    /// [`Dense::workspace`] with activations and their gradients of type `t` (f32, bf16, f16).
    pub fn workspace_as(&self, ops: &dyn Ops, rows: usize, t: DType) -> Result<DenseWs> {
        let n = size::mul(rows, self.outputs, "dense layer rows x outputs")?;
        let z = if self.act.derivative_from_output() {
            None
        } else {
            Some(ops.alloc_as(t, n)?)
        };
        Ok(DenseWs {
            rows,
            z,
            y: ops.alloc_as(t, n)?,
            dy: ops.alloc_as(t, n)?,
        })
    }

    /// The workspace of a linear (identity) last layer of a T network: its output in f32,
    /// straight from the product's f32 sums, for the loss to read without a cast (and without
    /// the rounding to T); its output gradient in T, as the products of its backward take it.
    pub fn workspace_f32_output(&self, ops: &dyn Ops, rows: usize, t: DType) -> Result<DenseWs> {
        debug_assert_eq!(self.act, Activation::Identity);
        let n = size::mul(rows, self.outputs, "dense layer rows x outputs")?;
        Ok(DenseWs {
            rows,
            z: None,
            y: ops.alloc(n)?,
            dy: ops.alloc_as(t, n)?,
        })
    }

    pub fn forward(&self, f: &Flat<'_>, ws: &DenseWs, x: View<'_>) -> Result<()> {
        let z = ws.z.as_ref().map_or(ws.y.view(), |z| z.view());
        let w = self.w.view(f.weights)?;
        if x.dtype() != DType::F32 && z.dtype() == DType::F32 {
            // A T input into an f32 output ([`Dense::workspace_f32_output`]): the product of
            // the T operands with f32 sums, then the f32 master bias in place.
            let shape = DenseShape::new(ws.rows, self.inputs, self.outputs);
            f.ops.gemm(shape.forward_gemm(), x, w, z)?;
            let f32_bias = self.b.view(f.params)?;
            let out = Activated::new(z, z, Activation::Identity);
            return f.ops.bias_act_forward(out, f32_bias, shape.output());
        }
        let b = self.b.view(f.weights)?;
        f.ops.dense_forward(DenseForward {
            x,
            params: DenseParams::new(w, b),
            z,
            y: ws.y.view(),
            act: self.act,
            shape: DenseShape::new(ws.rows, self.inputs, self.outputs),
        })
    }

    /// This layer's input gradient as a [`PendingGrad`] for the dense layer before it, in
    /// place of the `dx` of [`Dense::backward`], once this layer's backward has run.
    pub fn pending_input_grad<'a>(&self, f: &Flat<'a>, ws: &'a DenseWs) -> Result<PendingGrad<'a>> {
        Ok(PendingGrad {
            g: ws.dy.view(),
            w: self.w.view(f.weights)?,
            k: self.outputs,
        })
    }

    /// Reads the gradient in `ws.grad_output()` (consumed in place), or `upstream` where the
    /// layer after this one left it unformed; writes the parameter gradients (overwriting)
    /// and, when `dx` is given, the input gradient.
    pub fn backward(
        &self,
        f: &Flat<'_>,
        ws: &DenseWs,
        x: View<'_>,
        dx: Option<View<'_>>,
        upstream: Option<PendingGrad<'_>>,
    ) -> Result<()> {
        let dz = ws.dy.view();
        let z = ws.z.as_ref().map_or(ws.y.view(), |z| z.view());
        let (r, o, i) = (ws.rows, self.outputs, self.inputs);
        let (dw, db) = (self.w.view(f.grads)?, self.b.view(f.grads)?);
        if let Some(p) = upstream {
            let y = ws.y.view();
            f.ops.bias_act_backward_product(BiasActBackwardProduct {
                g: p.g,
                w: p.w,
                f: Activated::new(z, y, self.act),
                grads: BiasActGrads::new(dz, db),
                shape: MatShape::new(r, o),
                k: p.k,
            })?;
            f.ops.gemm(Gemm::new(o, i, r).ta(), dz, x, dw)?;
        } else if self.act == Activation::Identity {
            // dz is dy: the bias gradient can come with the weight gradient's product.
            f.ops.dense_param_grads(DenseParamGrads {
                dz,
                x,
                grads: DenseParams::new(dw, db),
                shape: DenseShape::new(r, i, o),
            })?;
        } else if dz.dtype() != DType::F32 {
            // The fused bias-gradient pass is f32 only: the activation's backward in T, then
            // both parameter gradients from the product.
            f.ops
                .act_backward(dz, Activated::new(z, ws.y.view(), self.act), dz)?;
            f.ops.dense_param_grads(DenseParamGrads {
                dz,
                x,
                grads: DenseParams::new(dw, db),
                shape: DenseShape::new(r, i, o),
            })?;
        } else {
            // The activation's backward and the bias gradient in one pass, in place.
            f.ops.bias_act_backward(BiasActBackward {
                dy: dz,
                f: Activated::new(z, ws.y.view(), self.act),
                grads: BiasActGrads::new(dz, db),
                shape: MatShape::new(r, o),
            })?;
            f.ops.gemm(Gemm::new(o, i, r).ta(), dz, x, dw)?;
        }
        if let Some(dx) = dx {
            f.ops
                .gemm(Gemm::new(r, i, o), dz, self.w.view(f.weights)?, dx)?;
        }
        Ok(())
    }
}
