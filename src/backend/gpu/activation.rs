//! The activation family on the GPU: fused bias + activation forward, elementwise activations,
//! their backward passes, and the bias gradient fused into the backward column sums.

use super::launch::{self, Args};
use super::mixed::typed_entry;
use super::reduce::ColumnSums;
use super::scratch::{PARTIALS, STRIP_TICKETS};
use super::{GpuOps, gemm_thin};
use crate::backend::Device;
use crate::buffer::View;
use crate::error::Result;
use crate::ops::activation;
use crate::ops::prelude::*;
use crate::ops::{Activated, BiasActBackward, BiasActBackwardProduct, BiasActGrads, MatShape};
use crate::ops::{Activation, check};

impl<D: Device> ActivationOps for GpuOps<D> {
    fn bias_act_forward(&self, f: Activated<'_>, bias: View<'_>, shape: MatShape) -> Result<()> {
        let Activated { z, y, act } = f;
        let MatShape { rows, cols } = shape;
        let op = "bias_act_forward";
        let t = [("z", &z), ("bias", &bias), ("y", &y)];
        let t = check::float_t(op, self.context, &t, &[])?;
        let n = check::area(op, rows, cols)?;
        check::len(op, "z", &z, n)?;
        check::len(op, "bias", &bias, cols)?;
        check::len(op, "y", &y, n)?;
        check::no_overlap(op, &y, &z, true)?;
        check::no_overlap(op, &z, &bias, false)?;
        check::no_overlap(op, &y, &bias, false)?;
        check::fits_u32(op, n)?;
        if n == 0 {
            return Ok(());
        }
        let args = Self::typed_args(t, &[&z, &bias, &y])?
            .dims(&[rows, cols])
            .u32(act.code())
            .f32(act.param());
        let entry = [op, "bias_act_forward_bf16", "bias_act_forward_f16"];
        self.run(typed_entry(t, entry), self.typed_geometry(t, n), args)
    }

    fn activation(&self, x: View<'_>, y: View<'_>, act: Activation) -> Result<()> {
        let op = "activation";
        let t = check::float_t(op, self.context, &[("x", &x), ("y", &y)], &[])?;
        check::len(op, "y", &y, x.len())?;
        check::no_overlap(op, &y, &x, true)?;
        let n = check::fits_u32(op, x.len())?;
        if n == 0 {
            return Ok(());
        }
        let args = Self::typed_args(t, &[&x, &y])?
            .u32(n)
            .u32(act.code())
            .f32(act.param());
        let entry = [op, "activation_bf16", "activation_f16"];
        self.run(typed_entry(t, entry), self.typed_geometry(t, x.len()), args)
    }

    fn act_backward(&self, dy: View<'_>, f: Activated<'_>, dz: View<'_>) -> Result<()> {
        let Activated { z, y, act } = f;
        let op = "act_backward";
        let t = [("dy", &dy), ("z", &z), ("y", &y), ("dz", &dz)];
        let t = check::float_t(op, self.context, &t, &[])?;
        let n = dy.len();
        check::len(op, "z", &z, n)?;
        check::len(op, "y", &y, n)?;
        check::len(op, "dz", &dz, n)?;
        check::no_overlap(op, &dz, &dy, true)?;
        check::no_overlap(op, &dz, &y, false)?;
        if !act.derivative_from_output() {
            check::no_overlap(op, &dz, &z, false)?;
        }
        let n32 = check::fits_u32(op, n)?;
        if n == 0 {
            return Ok(());
        }
        let args = Self::typed_args(t, &[&dy, &z, &y, &dz])?
            .u32(n32)
            .u32(act.code())
            .f32(act.param());
        let entry = [op, "act_backward_bf16", "act_backward_f16"];
        self.run(typed_entry(t, entry), self.typed_geometry(t, n), args)
    }

    fn bias_act_backward(&self, a: BiasActBackward<'_>) -> Result<()> {
        let (dy, Activated { z, y, act }, BiasActGrads { dz, dbias }) = (a.dy, a.f, a.grads);
        let MatShape { rows, cols } = a.shape;
        let op = "bias_act_backward";
        self.mine(op, &[&dy, &z, &y, &dz, &dbias])?;
        let n = check::area(op, rows, cols)?;
        for (name, v) in [("dy", &dy), ("z", &z), ("y", &y), ("dz", &dz)] {
            check::len(op, name, v, n)?;
            check::no_overlap(op, &dbias, v, false)?;
        }
        check::len(op, "dbias", &dbias, cols)?;
        check::no_overlap(op, &dz, &dy, true)?;
        check::no_overlap(op, &dz, &y, false)?;
        if !act.derivative_from_output() {
            check::no_overlap(op, &dz, &z, false)?;
        }
        check::fits_u32(op, n)?;
        let fused = ColumnSums {
            act,
            // The identity's gradient in place is already there.
            write_dz: !(act == Activation::Identity && dz.same_as(&dy)),
            beta: 0.0,
        };
        self.column_sums(fused, [&dy, &z, &y, &dz], &dbias, rows, cols)
    }

    /// [`crate::ops::Ops::bias_act_backward_product`]: one `bias_act_backward_product` launch
    /// where `k <= 16` (the thin GEMMs' short side), else the product and
    /// `bias_act_backward` in place.
    fn bias_act_backward_product(&self, a: BiasActBackwardProduct<'_>) -> Result<()> {
        let t = a.float_type(self.context)?;
        if t != crate::dtype::DType::F32 {
            return self.half_product_backward(a, t);
        }
        let (g, w, k, Activated { z, y, act }) = (a.g, a.w, a.k, a.f);
        let MatShape { rows, cols } = a.shape;
        let BiasActGrads { dz, dbias } = a.grads;
        let op = BiasActBackwardProduct::OP;
        self.mine(op, &[&g, &w, &z, &y, &dz, &dbias])?;
        for len in a.check()? {
            check::fits_u32(op, len)?;
        }
        if k == 0 || k > gemm_thin::THIN_SIDE {
            return activation::composed_product_backward(self, a);
        }
        if cols == 0 {
            return Ok(());
        }
        // The derivative reads z for GELU and leaky ReLU, y otherwise (as bias_act_backward).
        let a = if act.derivative_from_output() { &y } else { &z };
        let quad = cols % 4 == 0 && [&w, a, &dz].iter().all(|v| v.offset() % 4 == 0);
        let (config, chunk_rows) = launch::column_sums(
            rows,
            cols,
            if quad { 4 } else { 1 },
            self.info.compute_units,
            PARTIALS,
            STRIP_TICKETS,
        );
        self.with_scratch(|scratch| {
            let args = Args::new()
                .bufs(&[
                    &g,
                    &w,
                    a,
                    &dz,
                    &dbias,
                    &scratch.partials()?,
                    &scratch.strip_tickets()?,
                ])?
                .dims(&[rows, cols, k])
                .u32(chunk_rows)
                .u32(act.code())
                .u32(quad as u32)
                .f32(act.param());
            self.run(op, config, args)
        })
    }
}
