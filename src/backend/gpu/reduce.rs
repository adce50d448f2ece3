//! The reductions on the GPU: column sums (one pass, split over strips), row sums, whole sums
//! and gradient-norm clipping, each in one launch through the grid-reduction scratch.

use super::GpuOps;
use super::launch::{self, Args, THREADS};
use super::scratch::{PARTIALS, STRIP_TICKETS};
use crate::backend::Device;
use crate::buffer::View;
use crate::error::{Error, Result};
use crate::kernel::LaunchConfig;
use crate::ops::prelude::*;
use crate::ops::{Activation, MatShape, SumAxis, check};

/// What a column-sum launch computes besides the sums (see `bias_act_backward` in
/// kernels-cu/reduce.cu).
#[derive(Clone, Copy)]
pub(super) struct ColumnSums {
    pub(super) act: Activation,
    pub(super) write_dz: bool,
    pub(super) beta: f32,
}

impl<D: Device> GpuOps<D> {
    /// One `bias_act_backward` launch (geometry C + L) over checked views `[dy, z, y, dz]`.
    pub(super) fn column_sums(
        &self,
        c: ColumnSums,
        [dy, z, y, dz]: [&View<'_>; 4],
        out: &View<'_>,
        rows: usize,
        cols: usize,
    ) -> Result<()> {
        if cols == 0 {
            return Ok(());
        }
        // float4 column groups when every row starts 16-byte aligned.
        let quad = cols % 4 == 0 && [dy, z, y, dz].iter().all(|v| v.offset() % 4 == 0);
        let width = if quad { 4 } else { 1 };
        let (config, chunk_rows) = launch::column_sums(
            rows,
            cols,
            width,
            self.info.compute_units,
            PARTIALS,
            STRIP_TICKETS,
        );
        self.with_scratch(|scratch| {
            let args = Args::new()
                .bufs(&[
                    dy,
                    z,
                    y,
                    dz,
                    out,
                    &scratch.partials()?,
                    &scratch.strip_tickets()?,
                ])?
                .dims(&[rows, cols])
                .u32(chunk_rows)
                .u32(c.act.code())
                .u32(c.write_dz as u32)
                .u32(quad as u32)
                .f32(c.act.param())
                .f32(c.beta);
            self.run("bias_act_backward", config, args)
        })
    }

    /// The checks of a column or row sum: both views on this device, their lengths, `out` apart
    /// from `x`, and a size the kernels index with 32 bits.
    fn check_sum(
        &self,
        axis: SumAxis,
        x: &View<'_>,
        out: &View<'_>,
        shape: MatShape,
    ) -> Result<()> {
        let op = axis.op();
        self.mine(op, &[x, out])?;
        let n = axis.check(x, out, shape)?;
        check::no_overlap(op, out, x, false)?;
        check::fits_u32(op, n)?;
        Ok(())
    }

    /// First pass of a whole-buffer reduction into a pooled scratch buffer of partials. The
    /// scratch goes back to the pool when dropped; the queue is in order, so a later user of
    /// the block runs after the second pass.
    fn partial_sums(&self, x: &View<'_>, square: bool) -> Result<(crate::buffer::Buffer, u32)> {
        let n = check::fits_u32("sum_partial", x.len())?;
        let g = launch::partials(x.len());
        let scratch = self.alloc(g)?;
        let args = Args::new()
            .bufs(&[x, &scratch.view()])?
            .u32(n)
            .u32(square as u32);
        self.run("sum_partial", LaunchConfig::linear(g as u32, THREADS), args)?;
        Ok((scratch, g as u32))
    }
}

impl<D: Device> ReduceOps for GpuOps<D> {
    fn sum_rows(&self, x: View<'_>, out: View<'_>, shape: MatShape, beta: f32) -> Result<()> {
        self.check_sum(SumAxis::Rows, &x, &out, shape)?;
        let plain = ColumnSums {
            act: Activation::Identity,
            write_dz: false,
            beta,
        };
        self.column_sums(plain, [&x, &x, &x, &x], &out, shape.rows, shape.cols)
    }

    fn sum_cols(&self, x: View<'_>, out: View<'_>, shape: MatShape, beta: f32) -> Result<()> {
        self.check_sum(SumAxis::Cols, &x, &out, shape)?;
        let MatShape { rows, cols } = shape;
        if rows == 0 {
            return Ok(());
        }
        let args = Args::new().bufs(&[&x, &out])?.dims(&[rows, cols]).f32(beta);
        self.run("sum_cols", launch::rows(rows), args)
    }

    fn sum_all(&self, x: View<'_>, out: View<'_>, beta: f32) -> Result<()> {
        let op = "sum_all";
        self.mine(op, &[&x, &out])?;
        check::len(op, "out", &out, 1)?;
        check::no_overlap(op, &out, &x, false)?;
        let (scratch, g) = self.partial_sums(&x, false)?;
        let args = Args::new().bufs(&[&scratch.view(), &out])?.u32(g).f32(beta);
        self.run("sum_final", LaunchConfig::linear(1, THREADS), args)
    }

    fn clip_grad_norm(&self, grads: View<'_>, max_norm: f32, norm_out: View<'_>) -> Result<()> {
        let op = "clip_grad_norm";
        self.mine(op, &[&grads, &norm_out])?;
        check::len(op, "norm_out", &norm_out, 1)?;
        check::no_overlap(op, &norm_out, &grads, false)?;
        if max_norm.is_nan() || max_norm <= 0.0 {
            return Err(Error::InvalidArgument(format!(
                "{op}: max_norm must be positive, got {max_norm}"
            )));
        }
        let (scratch, g) = self.partial_sums(&grads, true)?;
        let args = Args::new().buf(&scratch.view())?.buf(&norm_out)?.u32(g);
        self.run("clip_final", LaunchConfig::linear(1, THREADS), args)?;
        if grads.is_empty() {
            return Ok(());
        }
        let args = Args::new()
            .bufs(&[&grads, &norm_out])?
            .u32(grads.len() as u32)
            .f32(max_norm);
        self.run("clip_scale", launch::elementwise(grads.len()), args)
    }
}
