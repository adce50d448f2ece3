//! Thin GEMMs (geometry `H` of docs/kernel-abi.md): products with a side of at most
//! [`THIN_SIDE`], routed ahead of the vendor BLAS and the tile kernels. A classifier head
//! (4096 x 10 x 512 forward, 10 x 512 x 4096 weight gradient, 4096 x 512 x 10 input gradient)
//! moves megabytes and does almost no arithmetic; these kernels read each operand once.

use super::GpuOps;
use super::launch::{self, Args};
use super::scratch::GEMM_PARTS;
use crate::backend::Device;
use crate::buffer::View;
use crate::dtype::DType;
use crate::error::Result;
use crate::kernel::LaunchConfig;
use crate::ops::dense;
use crate::ops::prelude::*;
use crate::ops::{Activation, Gemm, check};
use crate::ops::{DenseForward, DenseParamGrads, DenseParams};

/// Widest short side the thin kernels take (`TH_SHORT` in the kernels).
pub(super) const THIN_SIDE: usize = 16;
/// Long-side entries of one `sgemm_thin` block, and its threads.
const THIN_X: usize = 32;
const THIN_THREADS: u32 = 256;
/// k values staged at once (`TH_PIECE`): k ranges of a split are multiples of it.
const THIN_PIECE: usize = 256;
/// `sgemm_thin_k`: threads per block, 4 columns each, and rows per block.
const THIN_K_THREADS: u32 = 128;
const THIN_K_ROWS: usize = 16;
/// Most k ranges of one thin product.
const MAX_THIN_SPLITS: usize = 16;

/// True when `g` goes to a thin kernel: `k <= 16` (`sgemm_thin_k`, a pass over C), or a short
/// m or n (`sgemm_thin`).
pub(super) fn is_thin(g: &Gemm) -> bool {
    g.k <= THIN_SIDE || g.n <= THIN_SIDE || g.m <= THIN_SIDE
}

/// The thin kernel [`is_thin`] `g` launches: `sgemm_thin_k` for a short k, else by the short
/// side ([`short_side`]) `sgemm_thin1` for 1 (a matrix-vector product, as a recurrent step at
/// batch 1) and `sgemm_thin` up to 16. Each thread keeps one accumulator per short-side column:
/// the 16-wide kernel spent 16 times the FMAs a vector needs, and at batch 1 a GRU step's
/// product (hidden 2048) took 37.7 us against 21.9 for cuBLAS's GEMV in PyTorch's step (H100,
/// 2026-12-07, Nsight Compute). A 4-wide entry would help batch 2 to 4 as well, at another
/// 0.8 s of NVRTC for the family (2-core host), which a cold start pays.
pub(super) fn entry(g: &Gemm) -> &'static str {
    if g.k <= THIN_SIDE {
        return "sgemm_thin_k";
    }
    if short_side(g) <= 1 {
        "sgemm_thin1"
    } else {
        "sgemm_thin"
    }
}

/// The short side of a thin product with `k > 16`: n where `n <= 16`, else m (the kernels
/// take n as the short side exactly where it is no wider than their width).
fn short_side(g: &Gemm) -> usize {
    if g.n <= THIN_SIDE { g.n } else { g.m }
}

/// `sgemm_thin` blocks to aim for per compute unit when k is split: two, so that one block's
/// loads are in flight while the other stages or sums (a block waits on memory at every
/// piece).
const THIN_BLOCKS_PER_UNIT: usize = 2;

/// Blocks and k ranges of `sgemm_thin` for a long side of `long_n` over `k`. Tiles for at least
/// half the compute units run unsplit (a split costs a second launch, `sgemm_split_sum`);
/// fewer split k into as many ranges (multiples of [`THIN_PIECE`], at most
/// [`MAX_THIN_SPLITS`], their partial sums within `space` floats) as it takes for the blocks
/// to number [`THIN_BLOCKS_PER_UNIT`] per compute unit. Returns `(tiles, splits, k_chunk)`.
fn thin_grid(long_n: usize, mn: usize, k: usize, units: u32, space: usize) -> (usize, u32, u32) {
    let units = units.max(1) as usize;
    let tiles = long_n.div_ceil(THIN_X).max(1);
    let pieces = k.div_ceil(THIN_PIECE).max(1);
    if tiles * 2 >= units {
        return (tiles, 1, (pieces * THIN_PIECE) as u32);
    }
    let wanted = (units * THIN_BLOCKS_PER_UNIT / tiles)
        .min(pieces)
        .min(MAX_THIN_SPLITS)
        .min(space / mn.max(1))
        .max(1);
    let chunk = pieces.div_ceil(wanted) * THIN_PIECE;
    (tiles, k.div_ceil(chunk).max(1) as u32, chunk as u32)
}

/// Most k pieces a dense forward's thin product runs unsplit to keep its bias and activation
/// epilogue, although [`thin_grid`] would split it. A split costs two launches more
/// (`sgemm_split_sum` and `bias_act_forward`), each a few microseconds of device time whatever
/// it moves and, on a host that enqueues slowly (NVIDIA's OpenCL), more
/// host time than that; an unsplit block only adds the staging of a few more pieces.
const FUSED_MAX_PIECES: usize = 4;

/// True when a dense forward of `rows x inputs -> outputs` runs as one `sgemm_thin` with the
/// bias and activation epilogue (unsplit): a short output side, and either a grid that fills
/// the device unsplit or a k of at most [`FUSED_MAX_PIECES`] pieces.
fn fuses_dense_forward(rows: usize, inputs: usize, outputs: usize, units: u32) -> bool {
    if outputs > THIN_SIDE || inputs <= THIN_SIDE || rows == 0 {
        return false;
    }
    inputs.div_ceil(THIN_PIECE) <= FUSED_MAX_PIECES
        || thin_grid(rows, rows * outputs, inputs, units, GEMM_PARTS).1 == 1
}

/// What `sgemm_thin` does besides the product (`TH_*` in the kernels).
#[derive(Clone, Copy)]
enum Epilogue<'v> {
    /// `C = alpha * product + beta * C`.
    Plain,
    /// A dense layer's forward, always unsplit: `z = product + bias[col]` into C (unless `y`
    /// is C) and `y = act(z)`.
    BiasAct {
        bias: &'v View<'v>,
        y: &'v View<'v>,
        act: Activation,
    },
    /// A dense layer's weight gradient (short m) and, from the same staged operand, its bias
    /// gradient `bias[row] = Σ_k op(A)[row][k]`.
    BiasGrad { bias: &'v View<'v> },
}

impl<D: Device> GpuOps<D> {
    /// Launches the thin kernel for `g` (checked by `gemm`, `m, n > 0`, [`is_thin`]).
    pub(super) fn thin_gemm(&self, g: Gemm, a: View<'_>, b: View<'_>, c: View<'_>) -> Result<()> {
        if entry(&g) == "sgemm_thin_k" {
            let blocks_x = g.n.div_ceil(4 * THIN_K_THREADS as usize);
            let blocks_y = g.m.div_ceil(THIN_K_ROWS).min(launch::MAX_GRID_Y);
            let config = LaunchConfig {
                grid: [blocks_x as u32, blocks_y as u32, 1],
                block: [THIN_K_THREADS, 1, 1],
                shared_bytes: 0,
            };
            let args = Args::new()
                .bufs(&[&a, &b, &c])?
                .gemm(&g)
                .f32(g.alpha)
                .f32(g.beta);
            return self.run("sgemm_thin_k", config, args);
        }
        self.sgemm_thin(g, [&a, &b, &c], Epilogue::Plain)
    }

    /// `sgemm_thin` (k > 16, a short m or n) with `epilogue`, split over k where the tiles
    /// leave compute units idle (never with [`Epilogue::BiasAct`]), the parts then added by
    /// `sgemm_split_sum`. The caller has checked the views; with [`Epilogue::BiasGrad`] and a
    /// split, the bias must directly follow C in its buffer (one `sgemm_split_sum` adds both).
    fn sgemm_thin(&self, g: Gemm, [a, b, c]: [&View<'_>; 3], epilogue: Epilogue<'_>) -> Result<()> {
        let long_n = if g.n <= THIN_SIDE { g.m } else { g.n };
        let name = entry(&g);
        let mn = g.m * g.n;
        let (code, bias, y, act) = match epilogue {
            Epilogue::Plain => (0, c, c, Activation::Identity),
            Epilogue::BiasAct { bias, y, act } => (1, bias, y, act),
            Epilogue::BiasGrad { bias } => (2, bias, c, Activation::Identity),
        };
        // Floats one split's parts take: C, and the bias gradient after it.
        let stride = if code == 2 { mn + g.m } else { mn };
        let (tiles, splits, k_chunk) = if code == 1 {
            let tiles = long_n.div_ceil(THIN_X).max(1);
            (
                tiles,
                1,
                (g.k.div_ceil(THIN_PIECE).max(1) * THIN_PIECE) as u32,
            )
        } else {
            thin_grid(long_n, stride, g.k, self.info.compute_units, GEMM_PARTS)
        };
        let config = LaunchConfig {
            grid: [tiles.min(launch::MAX_GRID_X) as u32, 1, splits],
            block: [THIN_THREADS, 1, 1],
            shared_bytes: 0,
        };
        let launch_thin = |part: &View<'_>| -> Result<()> {
            let args = Args::new().bufs(&[a, b, c, part, bias, y])?;
            let args = args
                .gemm(&g)
                .u32(k_chunk)
                .u32(stride as u32)
                .u32(code)
                .u32(act.code())
                .f32(g.alpha)
                .f32(g.beta)
                .f32(act.param());
            self.run(name, config, args)
        };
        if splits == 1 {
            // `part` is not touched without a split.
            return launch_thin(c);
        }
        // With the bias gradient, C and the bias are one span: the parts' stride.
        let out = c.buffer().slice(c.offset(), stride)?;
        self.with_gemm_parts(|parts| {
            let parts = parts.slice(0, splits as usize * stride)?;
            launch_thin(&parts)?;
            self.split_sum(&parts, &out, splits, g.alpha, g.beta)
        })
    }
}

impl<D: Device> GpuOps<D> {
    /// Whether a tier-0 stand-in or the vendor library takes thin products now (a cold start
    /// while the thin kernels build): a dense layer then takes its composed path, whose product
    /// goes there, rather than wait for the fused thin kernel.
    fn thin_stood_in(&self) -> Result<bool> {
        Ok(self.vendor_stands_in("sgemm_thin")? || self.tier0_for("sgemm_thin", 0)?.is_some())
    }
}

impl<D: Device> DenseOps for GpuOps<D> {
    /// [`DenseOps::dense_forward`] on the GPU: one `sgemm_thin` with the bias and activation
    /// epilogue where [`fuses_dense_forward`] says so, else the product and
    /// `bias_act_forward`.
    fn dense_forward(&self, a: DenseForward<'_>) -> Result<()> {
        let t = a.float_type(self.context)?;
        if t != DType::F32 {
            return self.half_dense_forward(a, t);
        }
        let DenseParams { w, bias } = a.params;
        let (x, z, y, act) = (a.x, a.z, a.y, a.act);
        let (rows, inputs, outputs) = (a.shape.rows, a.shape.inputs, a.shape.outputs);
        let g = a.shape.forward_gemm();
        // While tier 0 or the vendor library stands in for the thin kernels, the composed
        // path's product takes it (and counts the product's work: this look counts none).
        let fused = self.thin_gemm
            && fuses_dense_forward(rows, inputs, outputs, self.info.compute_units)
            && !self.thin_stood_in()?;
        let op = "dense_forward";
        // Every view before either path writes anything.
        self.mine(op, &[&x, &w, &bias, &z, &y])?;
        if !fused {
            return dense::composed_forward(self, a);
        }
        check::gemm(&g, &x, &w, &z)?;
        for d in [rows, inputs, outputs] {
            check::fits_u32(op, d)?;
        }
        check::len(op, "bias", &bias, outputs)?;
        check::len(op, "y", &y, rows * outputs)?;
        check::no_overlap(op, &y, &z, true)?;
        for input in [&x, &w, &bias] {
            check::no_overlap(op, &y, input, false)?;
        }
        check::no_overlap(op, &z, &bias, false)?;
        let epilogue = Epilogue::BiasAct {
            bias: &bias,
            y: &y,
            act,
        };
        self.sgemm_thin(g, [&x, &w, &z], epilogue)
    }

    /// [`DenseOps::dense_param_grads`] on the GPU: one `sgemm_thin` that also sums the bias
    /// gradient where the layer has at most 16 outputs (and, if k is split, its bias directly
    /// follows its weight in memory, as a network's flat gradient buffer has them), else the
    /// product and `sum_rows`.
    fn dense_param_grads(&self, a: DenseParamGrads<'_>) -> Result<()> {
        let t = a.float_type(self.context)?;
        if t != DType::F32 {
            return self.half_param_grads(a, t);
        }
        let DenseParams { w: dw, bias: dbias } = a.grads;
        let (dz, x) = (a.dz, a.x);
        let (rows, inputs, outputs) = (a.shape.rows, a.shape.inputs, a.shape.outputs);
        let g = a.shape.weight_grad_gemm();
        let stride = outputs * inputs + outputs;
        let adjacent = std::ptr::eq(dw.buffer(), dbias.buffer())
            && dbias.offset() == dw.offset() + outputs * inputs;
        let fused = self.thin_gemm
            && outputs <= THIN_SIDE
            && inputs > THIN_SIDE
            && rows > THIN_SIDE
            && (adjacent
                || thin_grid(inputs, stride, rows, self.info.compute_units, GEMM_PARTS).1 == 1)
            && !self.thin_stood_in()?;
        let op = "dense_param_grads";
        // Every view before either path writes anything.
        self.mine(op, &[&dz, &x, &dw, &dbias])?;
        if !fused {
            return dense::composed_param_grads(self, a);
        }
        check::gemm(&g, &dz, &x, &dw)?;
        for d in [rows, inputs, outputs] {
            check::fits_u32(op, d)?;
        }
        check::len(op, "dbias", &dbias, outputs)?;
        for other in [&dz, &x, &dw] {
            check::no_overlap(op, &dbias, other, false)?;
        }
        self.sgemm_thin(g, [&dz, &x, &dw], Epilogue::BiasGrad { bias: &dbias })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thin_products_are_the_ones_with_a_short_side() {
        assert!(is_thin(&Gemm::new(4096, 10, 512).tb()));
        assert!(is_thin(&Gemm::new(10, 512, 4096).ta()));
        assert!(is_thin(&Gemm::new(4096, 512, 10)));
        assert!(is_thin(&Gemm::new(17, 17, 0)));
        assert!(!is_thin(&Gemm::new(4096, 512, 784)));
        assert!(!is_thin(&Gemm::new(17, 17, 17)));
    }

    #[test]
    fn vectors_take_the_one_wide_thin_entry() {
        // A recurrent step's product at batch 1 (h W_hh^T) and its input gradient (dg W_hh).
        assert_eq!(entry(&Gemm::new(1, 6144, 2048).tb()), "sgemm_thin1");
        assert_eq!(entry(&Gemm::new(1, 2048, 6144)), "sgemm_thin1");
        // n is the short side wherever it is at most 16, whatever m is.
        assert_eq!(entry(&Gemm::new(1, 3, 700)), "sgemm_thin");
        assert_eq!(entry(&Gemm::new(5000, 1, 700)), "sgemm_thin1");
        assert_eq!(entry(&Gemm::new(2, 700, 300)), "sgemm_thin");
        assert_eq!(entry(&Gemm::new(4096, 10, 512).tb()), "sgemm_thin");
        assert_eq!(entry(&Gemm::new(4096, 16, 512)), "sgemm_thin");
        assert_eq!(entry(&Gemm::new(1, 700, 16)), "sgemm_thin_k");
    }

    #[test]
    fn short_dense_forwards_keep_their_epilogue() {
        // W1's head at batch 256 (8 tiles, k 512) would split in two; it runs fused unsplit.
        assert!(fuses_dense_forward(256, 512, 10, 132));
        assert!(fuses_dense_forward(4096, 512, 10, 132));
        // A long k splits, unless the tiles fill the device.
        assert!(!fuses_dense_forward(256, 4096, 10, 132));
        assert!(fuses_dense_forward(8192, 4096, 10, 132));
        assert!(!fuses_dense_forward(256, 512, 17, 132));
        assert!(!fuses_dense_forward(256, 16, 10, 132));
        assert!(!fuses_dense_forward(0, 512, 10, 132));
    }

    #[test]
    fn thin_grids_fill_the_device_in_whole_pieces() {
        let space = GEMM_PARTS;
        // W1 batch 4096: the forward head's 128 tiles run unsplit; the weight gradient (16
        // tiles of 512 columns, k 4096) splits into 16 ranges of one piece.
        assert_eq!(thin_grid(4096, 4096 * 10, 512, 132, space), (128, 1, 512));
        assert_eq!(thin_grid(512, 10 * 512, 4096, 132, space), (16, 16, 256));
        // Batch 256: 8 tiles over k 512, two ranges of one piece.
        assert_eq!(thin_grid(256, 2560, 512, 132, space), (8, 2, 256));
        assert_eq!(thin_grid(66 * 32, 66 * 32, 1000, 132, space), (66, 1, 1024));
        // A short k is one piece; a long one is capped at 16 ranges, the last one short.
        assert_eq!(thin_grid(40, 40 * 3, 17, 132, space), (2, 1, 256));
        assert_eq!(thin_grid(1, 1, 100_000, 132, space), (1, 16, 6400));
        // Bounded by the partial-sum space.
        assert_eq!(thin_grid(1, 1000, 5000, 132, 3500), (1, 3, 1792));
        for (long_n, k) in [(1, 257), (33, 5000), (7000, 300), (3, 70_001)] {
            let (_, splits, chunk) = thin_grid(long_n, long_n, k, 132, space);
            assert_eq!(chunk as usize % THIN_PIECE, 0);
            assert!((splits as usize - 1) * (chunk as usize) < k);
        }
    }
}
