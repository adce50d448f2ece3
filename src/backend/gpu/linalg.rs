//! GEMM: vendor BLAS where the device routes it there, thin products, tile kernels and
//! split-k with its partial-sum pass; on a cold start, the tier-0 stand-in (`tier0.rs`).

use super::launch::{self, Args, device_ptr};
use super::prefetch::PORTABLE_WORK;
use super::scratch::{GEMM_PARTS, STRIP_TICKETS};
use super::{GpuOps, gemm_thin};
use crate::backend::Device;
use crate::buffer::{DevicePtr, View};
use crate::dtype::DType;
use crate::error::Result;
use crate::ops::prelude::*;
use crate::ops::{Gemm, check, linalg};

/// `sgemm_tier0` (kernels-{cu,cl}/tier0.*): 64 x 64 tiles of 256 threads over the whole k.
const SGEMM_TIER0: (&str, (u32, u32, u32)) = ("sgemm_tier0", (64, 64, 256));

impl<D: Device> GpuOps<D> {
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
            .bufs(&[parts, out])?
            .u32(n as u32)
            .u32(splits)
            .f32(alpha)
            .f32(beta);
        self.run("sgemm_split_sum", launch::elementwise(n), args)
    }

    /// `g` (checked, `m, n > 0`) as one `sgemm_tier0` of the tier-0 `module`.
    fn tier0_gemm(&self, module: &D::Module, g: &Gemm, [a, b, c]: [&View<'_>; 3]) -> Result<()> {
        let (entry, tile) = SGEMM_TIER0;
        let config = launch::gemm(g.m, g.n, tile)?;
        let args = Args::new()
            .bufs(&[a, b, c])?
            .gemm(g)
            .f32(g.alpha)
            .f32(g.beta);
        self.device.launch(module, entry, &config, args.as_slice())
    }
}

impl<D: Device> LinalgOps for GpuOps<D> {
    fn gemm(&self, g: Gemm, a: View<'_>, b: View<'_>, c: View<'_>) -> Result<()> {
        let (t, _) = linalg::gemm_types(self.context, &a, &b, &c)?;
        if t != DType::F32 {
            return self.half_gemm(g, [&a, &b, &c], t);
        }
        check::gemm(&g, &a, &b, &c)?;
        for d in [g.m, g.n, g.k] {
            check::fits_u32("gemm", d)?;
        }
        if g.m == 0 || g.n == 0 {
            return Ok(());
        }
        let work = (2 * g.m as u64)
            .saturating_mul(g.n as u64)
            .saturating_mul(g.k as u64);
        let pointers = || -> Result<[(DevicePtr, usize); 3]> {
            let [pa, pb, pc] = [&a, &b, &c].map(|v| device_ptr(v).map(|p| (p, v.offset())));
            Ok([pa?, pb?, pc?])
        };
        if self.thin_gemm && gemm_thin::is_thin(&g) {
            let entry = gemm_thin::entry(&g);
            if self.vendor_stands_in(entry)? {
                let [pa, pb, pc] = pointers()?;
                if let Some(done) = self.device.vendor_gemm(&g, pa, pb, pc) {
                    self.count_recorded();
                    return done;
                }
            }
            if let Some(tier0) = self.tier0_for(entry, work)? {
                self.count_recorded();
                return self.tier0_gemm(&tier0, &g, [&a, &b, &c]);
            }
            return self.thin_gemm(g, a, b, c);
        }
        self.count_recorded();
        let [pa, pb, pc] = pointers()?;
        if !self.device.builtin_gemm_preferred(&g)
            && let Some(done) = self.device.vendor_gemm(&g, pa, pb, pc)
        {
            return done;
        }
        // Building or loading the chosen kernel's module tells an OpenCL device whether its
        // GEMM module has the warpgroup kernel, which the choice depends on: choose again once
        // it is built (every GEMM entry of that dialect is in the one module).
        let mut kernel = self.device.sgemm_kernel(g.m, g.n, g.k);
        // While a first-use tile family is not built, cuBLAS or a portable kernel carries its
        // products (`OpSet::carried`, gpu/prefetch.rs).
        let recording = || self.recording.lock().is_some();
        if self.device.has_vendor_gemm()
            && self.op_set.carried(kernel.entry, work, 0, recording)?
            && let Some(done) = self.device.vendor_gemm(&g, pa, pb, pc)
        {
            return done;
        }
        let portable = self.device.portable_sgemm_kernel(g.m, g.n, g.k);
        let carried = match portable {
            Some(p)
                if self
                    .op_set
                    .carried(kernel.entry, work, PORTABLE_WORK, recording)? =>
            {
                kernel = p;
                true
            }
            _ => false,
        };
        if let Some(tier0) = self.tier0_for(kernel.entry, work)? {
            // The vendor library, where there is one, outruns the stand-in on any product.
            if let Some(done) = self.device.vendor_gemm(&g, pa, pb, pc) {
                return done;
            }
            return self.tier0_gemm(&tier0, &g, [&a, &b, &c]);
        }
        let mut module = self.module_for(kernel.entry)?;
        let settled = self.device.sgemm_kernel(g.m, g.n, g.k);
        if !carried && settled != kernel {
            kernel = settled;
            module = self.module_for(kernel.entry)?;
        }
        let mut config = launch::gemm(g.m, g.n, kernel.tile)?;
        config.shared_bytes = kernel.shared_bytes;
        if !kernel.splits_k {
            let args = Args::new()
                .bufs(&[&a, &b, &c])?
                .gemm(&g)
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
            let args = args.gemm(&g).u32(k_chunk).f32(g.alpha).f32(g.beta);
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
}
