//! GEMM, reductions (column/row sums, two-pass whole-buffer sums, gradient clipping) and row
//! gathers.

use super::launch::{self, Args, THREADS, device_ptr};
use super::scratch::{GEMM_PARTS, PARTIALS, STRIP_TICKETS};
use super::{GpuOps, gemm_thin};
use crate::backend::Device;
use crate::buffer::View;
use crate::error::{Error, Result};
use crate::kernel::LaunchConfig;
use crate::ops::{Activation, Gemm, check};

/// What a column-sum launch computes besides the sums (see `bias_act_backward` in
/// kernels-cu/reduce.cu).
#[derive(Clone, Copy)]
struct ColumnSums {
    act: Activation,
    write_dz: bool,
    beta: f32,
}

impl<D: Device> GpuOps<D> {
    pub(super) fn gemm_impl(&self, g: Gemm, a: View<'_>, b: View<'_>, c: View<'_>) -> Result<()> {
        self.mine("gemm", &[&a, &b, &c])?;
        check::gemm(&g, &a, &b, &c)?;
        for d in [g.m, g.n, g.k] {
            check::fits_u32("gemm", d)?;
        }
        if g.m == 0 || g.n == 0 {
            return Ok(());
        }
        if self.thin_gemm && gemm_thin::is_thin(&g) {
            return self.thin_gemm(g, a, b, c);
        }
        self.count_recorded();
        if let Some(done) = self.device.vendor_gemm(
            &g,
            (device_ptr(&a)?, a.offset()),
            (device_ptr(&b)?, b.offset()),
            (device_ptr(&c)?, c.offset()),
        ) {
            return done;
        }
        // The op set first: building or loading it tells an OpenCL device whether it has the
        // warpgroup kernel, which the choice of kernel depends on.
        let module = self.op_set()?;
        let kernel = self.device.sgemm_kernel(g.m, g.n, g.k);
        let mut config = launch::gemm(g.m, g.n, kernel.tile)?;
        config.shared_bytes = kernel.shared_bytes;
        if !kernel.splits_k {
            let args = Args::new()
                .buf(&a)?
                .buf(&b)?
                .buf(&c)?
                .u32(g.m as u32)
                .u32(g.n as u32)
                .u32(g.k as u32)
                .u32(g.trans_a as u32)
                .u32(g.trans_b as u32)
                .f32(g.alpha)
                .f32(g.beta);
            return self
                .device
                .launch(&module, kernel.entry, &config, args.as_slice());
        }
        let tiles = config.grid[0] as usize * config.grid[1] as usize;
        let mn = g.m * g.n;
        let (splits, k_chunk) = launch::k_splits(
            tiles,
            mn,
            g.k,
            self.info
                .compute_units
                .saturating_mul(kernel.blocks_per_sm.max(1)),
            GEMM_PARTS,
            kernel.one_block_per_sm,
        );
        config.grid[2] = splits;
        // The strip tickets (zero between launches) of an entry that adds its splits itself.
        let launch_tc = |part: View<'_>, tickets: Option<View<'_>>| -> Result<()> {
            let mut args = Args::new().buf(&a)?.buf(&b)?.buf(&c)?.buf(&part)?;
            if let Some(t) = &tickets {
                args = args.buf(t)?;
            }
            let args = args
                .u32(g.m as u32)
                .u32(g.n as u32)
                .u32(g.k as u32)
                .u32(g.trans_a as u32)
                .u32(g.trans_b as u32)
                .u32(k_chunk)
                .f32(g.alpha)
                .f32(g.beta);
            self.device
                .launch(&module, kernel.entry, &config, args.as_slice())
        };
        if kernel.sums_splits {
            // A grid splits only with fewer tiles than compute units times `blocks_per_sm` (a
            // few hundred), so each tile has a ticket. The scratch lock is taken before the
            // parts' (no path takes them the other way round).
            debug_assert!(splits == 1 || tiles <= STRIP_TICKETS);
            return self.with_scratch(|scratch| {
                let tickets = scratch.strip_tickets()?;
                if splits == 1 {
                    return launch_tc(c, Some(tickets));
                }
                self.with_gemm_parts(|parts| {
                    launch_tc(parts.slice(0, splits as usize * mn)?, Some(tickets))
                })
            });
        }
        if splits == 1 {
            // `part` is not touched without a split.
            return launch_tc(c, None);
        }
        self.with_gemm_parts(|parts| {
            let parts = parts.slice(0, splits as usize * mn)?;
            launch_tc(parts, None)?;
            self.split_sum(&parts, &c, splits, g.alpha, g.beta)
        })
    }

    /// `sgemm_split_sum`: `out = alpha * Σ_z parts[z] + beta * out` over `splits` parts of
    /// `out.len()` floats each, added in z order.
    pub(super) fn split_sum(
        &self,
        parts: &View<'_>,
        out: &View<'_>,
        splits: u32,
        alpha: f32,
        beta: f32,
    ) -> Result<()> {
        let n = out.len();
        let args = Args::new()
            .buf(parts)?
            .buf(out)?
            .u32(n as u32)
            .u32(splits)
            .f32(alpha)
            .f32(beta);
        self.run("sgemm_split_sum", launch::elementwise(n), args)
    }

    pub(super) fn sum_rows_impl(
        &self,
        x: View<'_>,
        out: View<'_>,
        rows: usize,
        cols: usize,
        beta: f32,
    ) -> Result<()> {
        let op = "sum_rows";
        self.mine(op, &[&x, &out])?;
        let n = check::area(op, rows, cols)?;
        check::len(op, "x", &x, n)?;
        check::len(op, "out", &out, cols)?;
        check::no_overlap(op, &out, &x, false)?;
        check::fits_u32(op, n)?;
        let plain = ColumnSums {
            act: Activation::Identity,
            write_dz: false,
            beta,
        };
        self.column_sums(plain, [&x, &x, &x, &x], &out, rows, cols)
    }

    pub(super) fn bias_act_backward_impl(
        &self,
        [dy, z, y, dz]: [View<'_>; 4],
        dbias: View<'_>,
        act: Activation,
        rows: usize,
        cols: usize,
    ) -> Result<()> {
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
    #[allow(clippy::too_many_arguments)]
    pub(super) fn bias_act_backward_product_impl(
        &self,
        [g, w, z, y, dz]: [View<'_>; 5],
        dbias: View<'_>,
        act: Activation,
        rows: usize,
        k: usize,
        cols: usize,
    ) -> Result<()> {
        let op = "bias_act_backward_product";
        let views = [&g, &w, &z, &y, &dz, &dbias];
        self.mine(op, &views)?;
        let areas = check::bias_act_product(op, views, act, rows, k, cols)?;
        for len in areas {
            check::fits_u32(op, len)?;
        }
        if k == 0 || k > gemm_thin::THIN_SIDE {
            self.gemm_impl(Gemm::new(rows, cols, k), g, w, dz)?;
            return self.bias_act_backward_impl([dz, z, y, dz], dbias, act, rows, cols);
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
                .buf(&g)?
                .buf(&w)?
                .buf(a)?
                .buf(&dz)?
                .buf(&dbias)?
                .buf(&scratch.partials()?)?
                .buf(&scratch.strip_tickets()?)?
                .u32(rows as u32)
                .u32(cols as u32)
                .u32(k as u32)
                .u32(chunk_rows)
                .u32(act.code())
                .u32(quad as u32)
                .f32(act.param());
            self.run(op, config, args)
        })
    }

    /// One `bias_act_backward` launch (geometry C + L) over checked views `[dy, z, y, dz]`.
    fn column_sums(
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
                .buf(dy)?
                .buf(z)?
                .buf(y)?
                .buf(dz)?
                .buf(out)?
                .buf(&scratch.partials()?)?
                .buf(&scratch.strip_tickets()?)?
                .u32(rows as u32)
                .u32(cols as u32)
                .u32(chunk_rows)
                .u32(c.act.code())
                .u32(c.write_dz as u32)
                .u32(quad as u32)
                .f32(c.act.param())
                .f32(c.beta);
            self.run("bias_act_backward", config, args)
        })
    }

    pub(super) fn sum_cols_impl(
        &self,
        x: View<'_>,
        out: View<'_>,
        rows: usize,
        cols: usize,
        beta: f32,
    ) -> Result<()> {
        let op = "sum_cols";
        self.mine(op, &[&x, &out])?;
        let n = check::area(op, rows, cols)?;
        check::len(op, "x", &x, n)?;
        check::len(op, "out", &out, rows)?;
        check::no_overlap(op, &out, &x, false)?;
        check::fits_u32(op, n)?;
        if rows == 0 {
            return Ok(());
        }
        let args = Args::new()
            .buf(&x)?
            .buf(&out)?
            .u32(rows as u32)
            .u32(cols as u32)
            .f32(beta);
        self.run(op, launch::rows(rows), args)
    }

    /// First pass of a whole-buffer reduction into a pooled scratch buffer of partials. The
    /// scratch goes back to the pool when dropped; the queue is in order, so a later user of
    /// the block runs after the second pass.
    fn partial_sums(&self, x: &View<'_>, square: bool) -> Result<(crate::buffer::Buffer, u32)> {
        let n = check::fits_u32("sum_partial", x.len())?;
        let g = launch::partials(x.len());
        let scratch = self.alloc_buffer(g)?;
        let args = Args::new()
            .buf(x)?
            .buf(&scratch.view())?
            .u32(n)
            .u32(square as u32);
        self.run("sum_partial", LaunchConfig::linear(g as u32, THREADS), args)?;
        Ok((scratch, g as u32))
    }

    pub(super) fn sum_all_impl(&self, x: View<'_>, out: View<'_>, beta: f32) -> Result<()> {
        let op = "sum_all";
        self.mine(op, &[&x, &out])?;
        check::len(op, "out", &out, 1)?;
        check::no_overlap(op, &out, &x, false)?;
        let (scratch, g) = self.partial_sums(&x, false)?;
        let args = Args::new()
            .buf(&scratch.view())?
            .buf(&out)?
            .u32(g)
            .f32(beta);
        self.run("sum_final", LaunchConfig::linear(1, THREADS), args)
    }

    pub(super) fn clip_grad_norm_impl(
        &self,
        grads: View<'_>,
        max_norm: f32,
        norm_out: View<'_>,
    ) -> Result<()> {
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
            .buf(&grads)?
            .buf(&norm_out)?
            .u32(grads.len() as u32)
            .f32(max_norm);
        self.run("clip_scale", launch::elementwise(grads.len()), args)
    }

    pub(super) fn gather_rows_impl(
        &self,
        src: View<'_>,
        indices: View<'_>,
        dst: View<'_>,
        cols: usize,
    ) -> Result<()> {
        let op = "gather_rows";
        self.mine(op, &[&src, &indices, &dst])?;
        let nrows = indices.len();
        let n = check::area(op, nrows, cols)?;
        check::len(op, "dst", &dst, n)?;
        if cols == 0 || src.len() % cols != 0 {
            if n == 0 {
                return Ok(());
            }
            return Err(Error::shape(
                op,
                format!("src of {} elements is not rows of {cols}", src.len()),
            ));
        }
        check::no_overlap(op, &dst, &src, false)?;
        check::no_overlap(op, &dst, &indices, false)?;
        check::fits_u32(op, n)?;
        check::fits_u32(op, src.len())?;
        if n == 0 {
            return Ok(());
        }
        // The kernel checks every index against `src_rows` (a NaN row for an invalid one), so
        // no index can make it read outside `src`.
        let src_rows = src.len() / cols;
        let args = Args::new()
            .buf(&src)?
            .buf(&indices)?
            .buf(&dst)?
            .u32(nrows as u32)
            .u32(cols as u32)
            .u32(src_rows as u32);
        self.run(op, launch::elementwise(n), args)
    }

    pub(super) fn one_hot_impl(
        &self,
        indices: View<'_>,
        out: View<'_>,
        classes: usize,
    ) -> Result<()> {
        let op = "one_hot";
        self.mine(op, &[&indices, &out])?;
        let n = check::area(op, indices.len(), classes)?;
        check::len(op, "out", &out, n)?;
        check::no_overlap(op, &out, &indices, false)?;
        check::fits_u32(op, n)?;
        if n == 0 {
            return Ok(());
        }
        let args = Args::new()
            .buf(&indices)?
            .buf(&out)?
            .u32(indices.len() as u32)
            .u32(classes as u32);
        self.run(op, launch::elementwise(n), args)
    }
}
