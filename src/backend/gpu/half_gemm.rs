//! The GEMM and dense-layer ops on bf16/f16 views (docs/architecture.md, "Typed storage"):
//! the `hgemm_*` kernels of kernels-cu/hgemm.cu and kernels-cl/hgemm.cl (every device), and on
//! CUDA sm_80+ the tensor-core ones of kernels-cu/hgemm_tc.cu where both operands are aligned
//! to 8 elements. Products are summed in f32; an f32 output (a weight gradient) may split k
//! as the f32 GEMM does, a T output is rounded once in the kernel's epilogue, which also adds
//! the bias and activation of a dense forward or multiplies in the activation's derivative.
//!
//! Where the device has a vendor library for these products (cuBLAS's `cublasGemmEx` on CUDA,
//! `ContextOptions::vendor_blas`), it takes every product but the small ones with an epilogue
//! ([`vendor_takes`]): an f32 or plain T output directly, an epilogue's product as an f32 sum
//! in the split-k scratch that `hgemm_epilogue_*` then rounds as the fused kernels do.

use super::GpuOps;
use super::launch::{self, Args, device_ptr};
use super::scratch::{GEMM_PARTS, PARTIALS, STRIP_TICKETS};
use crate::backend::{Device, DevicePtr};
use crate::buffer::View;
use crate::dtype::DType;
use crate::error::Result;
use crate::ops::{
    Activated, Activation, BiasActBackwardProduct, BiasActGrads, DenseForward, DenseParamGrads,
    DenseParams, Gemm, MatShape, check,
};

/// The `epilogue` codes of `hgemm_lo_*` (`HG_EPI_*` in the kernels).
const EPI_PLAIN: u32 = 0;
const EPI_DENSE: u32 = 1;
const EPI_ACT_GRAD: u32 = 2;

/// Block tile of the portable kernels (`HG_TILE`, `HG_THREADS`).
const PORTABLE_TILE: (u32, u32, u32) = (64, 64, 256);
/// The tensor-core tiles: 128 x 128 of 8 warps, 64 x 64 of 4.
const TC128_TILE: (u32, u32, u32) = (128, 128, 256);
const TC64_TILE: (u32, u32, u32) = (64, 64, 128);

/// The kernel family a product runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HalfKernel {
    Portable,
    Tc64,
    Tc128,
}

impl HalfKernel {
    fn tile(self) -> (u32, u32, u32) {
        match self {
            HalfKernel::Portable => PORTABLE_TILE,
            HalfKernel::Tc64 => TC64_TILE,
            HalfKernel::Tc128 => TC128_TILE,
        }
    }

    /// The entry with an f32 C (`hgemm_*`) or a T one (`hgemm_lo_*`), for T `t`.
    fn entry(self, low_output: bool, t: DType) -> &'static str {
        let bf16 = t == DType::Bf16;
        match (self, low_output, bf16) {
            (HalfKernel::Portable, false, true) => "hgemm_bf16",
            (HalfKernel::Portable, false, false) => "hgemm_f16",
            (HalfKernel::Portable, true, true) => "hgemm_lo_bf16",
            (HalfKernel::Portable, true, false) => "hgemm_lo_f16",
            (HalfKernel::Tc64, false, true) => "hgemm_tc64_bf16",
            (HalfKernel::Tc64, false, false) => "hgemm_tc64_f16",
            (HalfKernel::Tc64, true, true) => "hgemm_lo_tc64_bf16",
            (HalfKernel::Tc64, true, false) => "hgemm_lo_tc64_f16",
            (HalfKernel::Tc128, false, true) => "hgemm_tc128_bf16",
            (HalfKernel::Tc128, false, false) => "hgemm_tc128_f16",
            (HalfKernel::Tc128, true, true) => "hgemm_lo_tc128_bf16",
            (HalfKernel::Tc128, true, false) => "hgemm_lo_tc128_f16",
        }
    }
}

/// Blocks of `kernel` one SM keeps resident: the fewest its registers, threads and shared
/// memory allow. ptxas (NVRTC 12, sm_90, 2026-11-26): tc128 128 registers a thread, 256 threads,
/// 40 KiB of shared memory; tc64 80, 128 and 20 KiB; the portable kernel 64, 256 and 8.5 KiB.
/// An SM of sm_80 and later has 64 Ki registers, at least 1536 threads and 100 KiB of shared
/// memory for blocks (sm_86/89, the smallest).
fn blocks_per_sm(kernel: HalfKernel) -> usize {
    let (threads, registers, shared) = match kernel {
        HalfKernel::Tc128 => (256, 128, 40 << 10),
        HalfKernel::Tc64 => (128, 80, 20 << 10),
        HalfKernel::Portable => (256, 64, 8704),
    };
    let by_registers = (64 << 10) / (threads * registers);
    let by_threads = 1536 / threads;
    let by_shared = (100 << 10) / shared;
    by_registers.min(by_threads).min(by_shared).max(1)
}

/// The kernel for `g` over A and B at the element offsets `a_off` and `b_off`: the tensor
/// cores where the device has them and both operands' offsets and leading dimensions are
/// multiples of 8 elements (their 16-byte copies), with 128-wide tiles while those fill three
/// quarters of the blocks the `sms` SMs keep resident, else 64-wide ones (which keep several
/// blocks an SM busy where 128-wide tiles would leave one an SM, latency bound); the portable
/// kernel otherwise.
fn choose(tensor_cores: bool, sms: u32, g: &Gemm, a_off: usize, b_off: usize) -> HalfKernel {
    let lda = if g.trans_a { g.m } else { g.k };
    let ldb = if g.trans_b { g.k } else { g.n };
    let aligned = [a_off, b_off, lda, ldb].iter().all(|x| x % 8 == 0);
    if !tensor_cores || !aligned {
        return HalfKernel::Portable;
    }
    let tiles = g.m.div_ceil(128).saturating_mul(g.n.div_ceil(128));
    let resident = sms as usize * blocks_per_sm(HalfKernel::Tc128);
    if tiles.saturating_mul(4) >= resident * 3 {
        HalfKernel::Tc128
    } else {
        HalfKernel::Tc64
    }
}

/// A product with an epilogue of fewer multiply-adds than this stays on the fused kernel where
/// a vendor library could take it: at that size both are bound by their launch, and the
/// library's product needs a second launch for the epilogue.
const VENDOR_EPILOGUE_MACS: usize = 1 << 22;

/// Whether the vendor library (where the device has one) takes `g`: every product without an
/// epilogue (the library writes an f32 or plain T output itself), and those with one from
/// [`VENDOR_EPILOGUE_MACS`] on.
fn vendor_takes(g: &Gemm, epilogue: u32) -> bool {
    epilogue == EPI_PLAIN || g.m.saturating_mul(g.n).saturating_mul(g.k) >= VENDOR_EPILOGUE_MACS
}

/// What a device offers the bf16/f16 products, for [`half_gemm_route`].
#[derive(Debug, Clone, Copy)]
pub struct HalfGemmDevice {
    /// A vendor library takes these products (cuBLAS on CUDA with `vendor_blas`).
    pub vendor: bool,
    /// The op set has the tensor-core kernels (CUDA sm_80+).
    pub tensor_cores: bool,
    /// Compute units (SMs).
    pub sms: u32,
}

/// Where a bf16/f16 product `g` over aligned operands runs on `device`: `cublas`,
/// `cublas+hgemm_epilogue` or the kernel's family (`tc128`, `tc64`, `portable`). With
/// `epilogue`, a T output with a dense-layer epilogue, else a plain product. For benchmarks that
/// print the route next to the time (`benches/workloads.rs --hgemm-grid`).
#[doc(hidden)]
pub fn half_gemm_route(device: HalfGemmDevice, g: &Gemm, epilogue: bool) -> &'static str {
    let code = if epilogue { EPI_DENSE } else { EPI_PLAIN };
    if device.vendor && vendor_takes(g, code) {
        return if epilogue {
            "cublas+hgemm_epilogue"
        } else {
            "cublas"
        };
    }
    match choose(device.tensor_cores, device.sms, g, 0, 0) {
        HalfKernel::Tc128 => "tc128",
        HalfKernel::Tc64 => "tc64",
        HalfKernel::Portable => "portable",
    }
}

/// A matrix as the vendor library takes it: its buffer's device address and its element offset.
fn operand(v: &View<'_>) -> Result<(DevicePtr, usize)> {
    Ok((device_ptr(v)?, v.offset()))
}

/// A T-output launch: C, the epilogue's input (`aux`: the bias or z) and `y`, the epilogue and
/// its activation.
struct LowOut<'v, 'a> {
    c: &'v View<'a>,
    aux: &'v View<'a>,
    y: &'v View<'a>,
    epilogue: u32,
    act: Activation,
    keep_z: bool,
}

impl LowOut<'_, '_> {
    /// The arguments after the sizes of `hgemm_lo_*` and `hgemm_epilogue_*`: `epilogue, act,
    /// keep_z; alpha, beta, act_param`.
    fn codes_and_scalars(&self, args: Args, g: &Gemm) -> Args {
        args.u32(self.epilogue)
            .u32(self.act.code())
            .u32(self.keep_z as u32)
            .f32(g.alpha)
            .f32(g.beta)
            .f32(self.act.param())
    }
}

impl<D: Device> GpuOps<D> {
    fn half_kernel(&self, g: &Gemm, a: &View<'_>, b: &View<'_>) -> HalfKernel {
        let sms = self.info.compute_units;
        choose(
            self.device.half_tensor_cores(),
            sms,
            g,
            a.offset(),
            b.offset(),
        )
    }

    /// [`crate::ops::LinalgOps::gemm`] of T (bf16/f16) operands into an f32 or T `c`, whose
    /// types the caller has checked.
    pub(super) fn half_gemm(&self, g: Gemm, [a, b, c]: [&View<'_>; 3], t: DType) -> Result<()> {
        check::gemm(&g, a, b, c)?;
        for d in [g.m, g.n, g.k] {
            check::fits_u32("gemm", d)?;
        }
        if g.m == 0 || g.n == 0 {
            return Ok(());
        }
        if c.dtype() == DType::F32 {
            return self.half_gemm_f32(&g, [a, b, c], t);
        }
        let out = LowOut {
            c,
            aux: c,
            y: c,
            epilogue: EPI_PLAIN,
            act: Activation::Identity,
            keep_z: true,
        };
        self.half_gemm_low(&g, a, b, out, t)
    }

    /// An f32 C: on the vendor library where the device has one, else `hgemm_*`, k split over
    /// the grid (`sgemm_split_sum` adding the parts) where the output's tiles leave compute
    /// units idle, as the f32 GEMM splits it.
    fn half_gemm_f32(&self, g: &Gemm, [a, b, c]: [&View<'_>; 3], t: DType) -> Result<()> {
        if self.device.has_vendor_half_gemm() {
            let operands = [operand(a)?, operand(b)?, operand(c)?];
            self.count_recorded();
            if let Some(done) = self.device.vendor_half_gemm(g, operands, [t, DType::F32]) {
                return done;
            }
        }
        let kernel = self.half_kernel(g, a, b);
        let entry = kernel.entry(false, t);
        let mut config = launch::gemm(g.m, g.n, kernel.tile())?;
        let tiles = config.grid[0] as usize * config.grid[1] as usize;
        let mn = g.m * g.n;
        let units = self.info.compute_units;
        let (splits, k_chunk) = launch::k_splits(tiles, mn, g.k, units, GEMM_PARTS, false);
        config.grid[2] = splits;
        let launch_into = |part: &View<'_>| -> Result<()> {
            let args = Args::new()
                .buf_as(a, t)?
                .buf_as(b, t)?
                .buf(c)?
                .buf(part)?
                .gemm(g)
                .u32(k_chunk)
                .f32(g.alpha)
                .f32(g.beta);
            self.run(entry, config, args)
        };
        if splits == 1 {
            // `part` is not touched without a split.
            return launch_into(c);
        }
        self.with_gemm_parts(|parts| {
            let parts = parts.slice(0, splits as usize * mn)?;
            launch_into(&parts)?;
            self.split_sum(&parts, c, splits, g.alpha, g.beta)
        })
    }

    /// A T output with its epilogue: on the vendor library where the device has one and
    /// [`vendor_takes`] the product, else one `hgemm_lo_*` launch, k not split.
    fn half_gemm_low(
        &self,
        g: &Gemm,
        a: &View<'_>,
        b: &View<'_>,
        out: LowOut<'_, '_>,
        t: DType,
    ) -> Result<()> {
        if self.device.has_vendor_half_gemm()
            && vendor_takes(g, out.epilogue)
            && self.vendor_gemm_low(g, a, b, &out, t)?
        {
            return Ok(());
        }
        let kernel = self.half_kernel(g, a, b);
        let config = launch::gemm(g.m, g.n, kernel.tile())?;
        let args = Args::new()
            .buf_as(a, t)?
            .buf_as(b, t)?
            .buf_as(out.c, t)?
            .buf_as(out.aux, t)?
            .buf_as(out.y, t)?
            .gemm(g);
        self.run(
            kernel.entry(true, t),
            config,
            out.codes_and_scalars(args, g),
        )
    }

    /// `hgemm_lo_*`'s work on the vendor library: a plain output straight into C, else the f32
    /// sum into the split-k scratch, as many rows at a time as it holds, each block of rows
    /// then rounded by `hgemm_epilogue_*`. False where the library did not take the product (or
    /// the output does not fit the scratch in blocks of rows); nothing has run then.
    fn vendor_gemm_low<'b>(
        &self,
        g: &Gemm,
        a: &View<'_>,
        b: &View<'_>,
        out: &LowOut<'_, 'b>,
        t: DType,
    ) -> Result<bool> {
        let (pa, pb) = (operand(a)?, operand(b)?);
        if out.epilogue == EPI_PLAIN {
            self.count_recorded();
            let done = self
                .device
                .vendor_half_gemm(g, [pa, pb, operand(out.c)?], [t, t]);
            return done.map_or(Ok(false), |r| r.map(|()| true));
        }
        let n = g.n;
        let chunk_rows = GEMM_PARTS / n;
        // A block of rows of a transposed A would need A's own leading dimension, which the
        // library's product of `rows` rows does not take; the dense ops never transpose A.
        if chunk_rows == 0 || (g.trans_a && g.m > chunk_rows) {
            return Ok(false);
        }
        let entry = if t == DType::Bf16 {
            "hgemm_epilogue_bf16"
        } else {
            "hgemm_epilogue_f16"
        };
        self.with_gemm_parts(|scratch| {
            let mut row0 = 0;
            while row0 < g.m {
                let rows = chunk_rows.min(g.m - row0);
                let sum = scratch.slice(0, rows * n)?;
                // Rows row0.. of a plain A (a transposed one comes in one block, row0 = 0).
                let a_rows = (pa.0, pa.1 + row0 * g.k);
                let part = Gemm {
                    m: rows,
                    alpha: 1.0,
                    beta: 0.0,
                    ..*g
                };
                self.count_recorded();
                match self.device.vendor_half_gemm(
                    &part,
                    [a_rows, pb, operand(&sum)?],
                    [t, DType::F32],
                ) {
                    Some(done) => done?,
                    // Only the first block can find no library (the device does not change).
                    None => return Ok(false),
                }
                let block = |v: &View<'b>| v.slice(row0 * n, rows * n);
                let (c, y) = (block(out.c)?, block(out.y)?);
                // The bias (epilogue 1) is indexed by column, z (epilogue 2) by element.
                let z_block;
                let aux = if out.epilogue == EPI_DENSE {
                    out.aux
                } else {
                    z_block = block(out.aux)?;
                    &z_block
                };
                let args = Args::new()
                    .buf(&sum)?
                    .buf_as(&c, t)?
                    .buf_as(aux, t)?
                    .buf_as(&y, t)?
                    .u32(rows as u32)
                    .u32(n as u32);
                let args = out.codes_and_scalars(args, g);
                // rows * n <= GEMM_PARTS: the kernel's 32-bit index math holds.
                self.run(entry, self.streaming(rows * n), args)?;
                row0 += rows;
            }
            Ok(true)
        })
    }

    /// `out[c] = Σ_r x[r][c]` over a `rows x cols` T matrix into f32 (`hcol_sum_*`).
    fn half_column_sums(
        &self,
        x: &View<'_>,
        out: &View<'_>,
        shape: MatShape,
        t: DType,
    ) -> Result<()> {
        let MatShape { rows, cols } = shape;
        let entry = if t == DType::Bf16 {
            "hcol_sum_bf16"
        } else {
            "hcol_sum_f16"
        };
        if cols == 0 {
            return Ok(());
        }
        let (config, chunk_rows) = launch::column_sums(
            rows,
            cols,
            1,
            self.info.compute_units,
            PARTIALS,
            STRIP_TICKETS,
        );
        self.with_scratch(|scratch| {
            let args = Args::new()
                .buf_as(x, t)?
                .bufs(&[out, &scratch.partials()?, &scratch.strip_tickets()?])?
                .dims(&[rows, cols])
                .u32(chunk_rows)
                .f32(0.0);
            self.run(entry, config, args)
        })
    }

    /// [`crate::ops::DenseOps::dense_forward`] of T views: one `hgemm_lo_*` launch with the
    /// bias + activation epilogue.
    pub(super) fn half_dense_forward(&self, a: DenseForward<'_>, t: DType) -> Result<()> {
        let op = "dense_forward";
        let DenseParams { w, bias } = a.params;
        let (x, z, y) = (a.x, a.z, a.y);
        let g = a.shape.forward_gemm();
        check::gemm(&g, &x, &w, &z)?;
        for d in [a.shape.rows, a.shape.inputs, a.shape.outputs] {
            check::fits_u32(op, d)?;
        }
        check::len(op, "bias", &bias, a.shape.outputs)?;
        check::len(op, "y", &y, z.len())?;
        check::no_overlap(op, &y, &z, true)?;
        for input in [&x, &w, &bias] {
            check::no_overlap(op, &y, input, false)?;
        }
        check::no_overlap(op, &z, &bias, false)?;
        if g.m == 0 || g.n == 0 {
            return Ok(());
        }
        let out = LowOut {
            c: &z,
            aux: &bias,
            y: &y,
            epilogue: EPI_DENSE,
            act: a.act,
            keep_z: !y.same_as(&z),
        };
        self.half_gemm_low(&g, &x, &w, out, t)
    }

    /// [`crate::ops::DenseOps::dense_param_grads`] of T views: `hgemm_*` into the f32 `dw`,
    /// then `hcol_sum_*` into the f32 `dbias`.
    pub(super) fn half_param_grads(&self, a: DenseParamGrads<'_>, t: DType) -> Result<()> {
        let op = "dense_param_grads";
        let DenseParams { w: dw, bias: dbias } = a.grads;
        let g = a.shape.weight_grad_gemm();
        check::gemm(&g, &a.dz, &a.x, &dw)?;
        check::len(op, "dbias", &dbias, a.shape.outputs)?;
        for other in [&a.dz, &a.x, &dw] {
            check::no_overlap(op, &dbias, other, false)?;
        }
        self.half_gemm(g, [&a.dz, &a.x, &dw], t)?;
        if a.shape.outputs == 0 {
            return Ok(());
        }
        self.half_column_sums(&a.dz, &dbias, a.shape.output(), t)
    }

    /// [`crate::ops::ActivationOps::bias_act_backward_product`] of T views: one `hgemm_lo_*`
    /// launch that multiplies the product by the activation's derivative, then `hcol_sum_*`
    /// over the rounded `dz` into the f32 `dbias`.
    pub(super) fn half_product_backward(
        &self,
        a: BiasActBackwardProduct<'_>,
        t: DType,
    ) -> Result<()> {
        let op = BiasActBackwardProduct::OP;
        for len in a.check()? {
            check::fits_u32(op, len)?;
        }
        let Activated { z, y, act } = a.f;
        let BiasActGrads { dz, dbias } = a.grads;
        let g = a.product_gemm();
        if g.m == 0 || g.n == 0 {
            return Ok(());
        }
        let out = LowOut {
            c: &dz,
            aux: &z,
            y: &y,
            epilogue: EPI_ACT_GRAD,
            act,
            keep_z: false,
        };
        self.half_gemm_low(&g, &a.g, &a.w, out, t)?;
        self.half_column_sums(&dz, &dbias, a.shape, t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tensor_cores_take_aligned_operands_only() {
        let g = Gemm::new(4096, 4096, 784).tb();
        assert_eq!(choose(true, 132, &g, 0, 8), HalfKernel::Tc128);
        assert_eq!(choose(false, 132, &g, 0, 8), HalfKernel::Portable);
        assert_eq!(choose(true, 132, &g, 3, 0), HalfKernel::Portable);
        // k = 100 is A's leading dimension: not a multiple of 8.
        let odd = Gemm::new(4096, 512, 100).tb();
        assert_eq!(choose(true, 132, &odd, 0, 0), HalfKernel::Portable);
        // dW = dz^T x of W1 at batch 4096: 28 tiles of 128 leave an H100's SMs idle.
        let dw = Gemm::new(512, 784, 4096).ta();
        assert_eq!(choose(true, 132, &dw, 0, 0), HalfKernel::Tc64);
    }

    #[test]
    fn tiles_follow_the_blocks_an_sm_keeps() {
        assert_eq!(blocks_per_sm(HalfKernel::Tc128), 2);
        assert_eq!(blocks_per_sm(HalfKernel::Tc64), 5);
        // W1's forward at batch 4096: 128 tiles of 128 would be one block an SM of 132.
        let w1 = Gemm::new(4096, 512, 784).tb();
        assert_eq!(choose(true, 132, &w1, 0, 0), HalfKernel::Tc64);
        // 256 tiles of 128 fill most of the 264 resident blocks.
        let wide = Gemm::new(4096, 1024, 512).tb();
        assert_eq!(choose(true, 132, &wide, 0, 0), HalfKernel::Tc128);
        assert_eq!(choose(true, 200, &wide, 0, 0), HalfKernel::Tc64);
    }

    #[test]
    fn the_vendor_library_leaves_small_epilogues_to_the_fused_kernels() {
        let small = Gemm::new(256, 64, 64).tb();
        let large = Gemm::new(4096, 512, 784).tb();
        for g in [&small, &large] {
            assert!(vendor_takes(g, EPI_PLAIN));
        }
        for epilogue in [EPI_DENSE, EPI_ACT_GRAD] {
            assert!(!vendor_takes(&small, epilogue));
            assert!(vendor_takes(&large, epilogue));
        }
        let cuda = |vendor| HalfGemmDevice {
            vendor,
            tensor_cores: true,
            sms: 132,
        };
        assert_eq!(
            half_gemm_route(cuda(true), &large, true),
            "cublas+hgemm_epilogue"
        );
        assert_eq!(half_gemm_route(cuda(true), &small, true), "tc64");
        assert_eq!(half_gemm_route(cuda(false), &large, false), "tc64");
        // The 10-wide head: B's leading dimension 10 is not a multiple of 8.
        let head = Gemm::new(4096, 10, 512);
        assert_eq!(half_gemm_route(cuda(false), &head, true), "portable");
        assert_eq!(half_gemm_route(cuda(true), &head, false), "cublas");
    }

    #[test]
    fn every_kernel_has_an_entry_per_type_and_output() {
        let mut names = std::collections::BTreeSet::new();
        for k in [HalfKernel::Portable, HalfKernel::Tc64, HalfKernel::Tc128] {
            for low in [false, true] {
                for t in [DType::Bf16, DType::F16] {
                    let e = k.entry(low, t);
                    assert!(e.ends_with(if t == DType::Bf16 { "_bf16" } else { "_f16" }));
                    names.insert(e);
                }
            }
        }
        assert_eq!(names.len(), 12);
    }
}
