//! Kernel argument packing (views become base pointer + element offset) and the launch
//! geometries of docs/kernel-abi.md.

use crate::backend::RawArg;
use crate::buffer::{Storage, View};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::kernel::LaunchConfig;
use crate::ops::{Gemm, check};

/// Threads per block of the elementwise, row and two-pass kernels.
pub(crate) const THREADS: u32 = 256;
/// The grid limit every dialect accepts in x.
const MAX_GRID: usize = 65_535;
/// Most partials of a two-pass reduction.
const MAX_PARTIALS: usize = 1024;

/// Arguments a launch keeps on the stack (every built-in kernel has fewer).
const INLINE_ARGS: usize = 32;

/// The kernel arguments of one launch, in ABI order. Built on the stack: a training step makes
/// many small launches, so packing them must not allocate (only lists longer than
/// `INLINE_ARGS`, from user kernels, spill to the heap).
pub(crate) struct Args {
    inline: [RawArg; INLINE_ARGS],
    len: usize,
    spill: Vec<RawArg>,
}

impl Args {
    pub(crate) fn new() -> Self {
        Args {
            inline: [RawArg::U32(0); INLINE_ARGS],
            len: 0,
            spill: Vec::new(),
        }
    }

    fn push(&mut self, a: RawArg) {
        if self.len < INLINE_ARGS && self.spill.is_empty() {
            self.inline[self.len] = a;
            self.len += 1;
        } else {
            if self.spill.is_empty() {
                self.spill.extend_from_slice(&self.inline[..self.len]);
            }
            self.spill.push(a);
        }
    }

    /// The arguments, in order.
    pub(crate) fn as_slice(&self) -> &[RawArg] {
        if self.spill.is_empty() {
            &self.inline[..self.len]
        } else {
            &self.spill
        }
    }

    /// A buffer view of f32: its base handle, then its offset in elements.
    pub(crate) fn buf(self, v: &View<'_>) -> Result<Self> {
        self.buf_of(v, DType::F32)
    }

    /// A buffer view of u32 (labels, class targets, token ids, row indices), packed as
    /// [`Args::buf`] packs an f32 one.
    pub(crate) fn buf_u32(self, v: &View<'_>) -> Result<Self> {
        self.buf_of(v, DType::U32)
    }

    /// A view of an op's float type T (f32, bf16 or f16; docs/architecture.md, "Typed
    /// storage"), packed as [`Args::buf`] packs an f32 one: the kernel variant of `dtype` reads
    /// it through a `float` pointer (f32) or a `ushort` one (the bits of bf16 and f16). A view
    /// of another type, or a `dtype` that is not a float type, is an error.
    pub(crate) fn buf_as(self, v: &View<'_>, dtype: DType) -> Result<Self> {
        if !dtype.is_float() {
            return Err(Error::InvalidArgument(format!(
                "launch: {dtype} is not a float type for a T view"
            )));
        }
        self.buf_of(v, dtype)
    }

    /// A buffer view whose kernel parameter points to `dtype` elements: f32 for [`Args::buf`],
    /// u32 for [`Args::buf_u32`], T for [`Args::buf_as`].
    pub(crate) fn buf_of(mut self, v: &View<'_>, dtype: DType) -> Result<Self> {
        // The ops' boundary checks reject views of another type first; this keeps any that
        // slipped through from a kernel whose parameter points to `dtype`.
        check::dtype("launch", "buffer", v, dtype)?;
        let ptr = device_ptr(v)?;
        #[cfg(all(test, feature = "cuda", feature = "opencl", feature = "hip"))]
        crate::backend::recording::pointer_types::note(ptr, dtype);
        self.push(RawArg::Ptr(ptr));
        self.push(RawArg::U64(v.offset() as u64));
        Ok(self)
    }

    /// Buffer views in order, each packed as [`Args::buf`] packs it.
    pub(crate) fn bufs(mut self, views: &[&View<'_>]) -> Result<Self> {
        for v in views {
            self = self.buf(v)?;
        }
        Ok(self)
    }

    /// Sizes in order, each packed as a `u32` (callers have checked that they fit).
    pub(crate) fn dims(mut self, dims: &[usize]) -> Self {
        for &d in dims {
            self = self.u32(d as u32);
        }
        self
    }

    /// A product's sizes and transposes as the GEMM kernels take them: `m, n, k, trans_a,
    /// trans_b`.
    pub(crate) fn gemm(self, g: &Gemm) -> Self {
        self.dims(&[g.m, g.n, g.k])
            .u32(g.trans_a as u32)
            .u32(g.trans_b as u32)
    }

    pub(crate) fn u32(mut self, x: u32) -> Self {
        self.push(RawArg::U32(x));
        self
    }

    pub(crate) fn f32(mut self, x: f32) -> Self {
        self.push(RawArg::F32(x));
        self
    }

    pub(crate) fn i32(mut self, x: i32) -> Self {
        self.push(RawArg::I32(x));
        self
    }

    pub(crate) fn u64(mut self, x: u64) -> Self {
        self.push(RawArg::U64(x));
        self
    }
}

/// The device handle behind a view.
pub(crate) fn device_ptr(v: &View<'_>) -> Result<u64> {
    match v.buffer().storage() {
        Storage::Device(mem) => Ok(mem.ptr),
        Storage::Host(_) | Storage::HostBytes(_) => Err(Error::ForeignBuffer(
            "a host (CPU backend) buffer was passed to a GPU op".into(),
        )),
    }
}

/// `E`: 256 threads, `min(ceil(n / 256), 65535)` blocks (kernels loop grid-stride).
pub(crate) fn elementwise(n: usize) -> LaunchConfig {
    let blocks = n.div_ceil(THREADS as usize).clamp(1, MAX_GRID);
    LaunchConfig::linear(blocks as u32, THREADS)
}

/// Elements one thread of a `V` launch covers when the grid is not capped: four float4 loads in
/// flight, as the vector loops of the streaming kernels issue them.
const STREAM_ITEMS: usize = 16;
/// At most this many `V` blocks per compute unit: enough waves that the last, partial one is a
/// small share of the time (a grid of exactly one wave would leave most units idle for a whole
/// wave whenever fewer blocks fit per unit than planned), while bounding the grid for huge `n`.
const STREAM_BLOCKS_PER_CU: usize = 128;

/// `V`: 256 threads, `ceil(n / (256 * 16))` blocks, at most 128 per compute unit (kernels loop
/// grid-stride over float4s, so any grid is correct). No 65535 cap: every dialect accepts
/// larger 1-D grids, and a capped grid would stretch big arrays into many serial rounds.
pub(crate) fn streaming(n: usize, compute_units: u32) -> LaunchConfig {
    let cap = (compute_units.max(1) as usize).saturating_mul(STREAM_BLOCKS_PER_CU);
    let blocks = n
        .div_ceil(THREADS as usize * STREAM_ITEMS)
        .clamp(1, cap.clamp(1, u32::MAX as usize));
    LaunchConfig::linear(blocks as u32, THREADS)
}

/// `R`: one block of 256 threads per row; the grid is capped at 65535 and the kernels stride
/// over the rows beyond it, so no row count exceeds a grid limit.
pub(crate) fn rows(rows: usize) -> LaunchConfig {
    LaunchConfig::linear(rows.clamp(1, MAX_GRID) as u32, THREADS)
}

/// Rows a column-sum block reads at least before splitting a strip into more chunks pays for
/// the extra partials.
const MIN_CHUNK_ROWS: usize = 64;
/// Column-sum blocks per compute unit to aim for: enough in flight to hide memory latency.
const COLUMN_BLOCKS_PER_CU: usize = 4;

/// `C`: blocks of (32, 8) over strips of 32 column groups of `width` columns (1, or 4 moved as
/// float4s) (grid.x) and chunks of rows (grid.y), and the rows of a chunk. Enough chunks that the
/// grid fills the device, as long as each chunk has [`MIN_CHUNK_ROWS`] rows, the strip count fits
/// `strip_tickets` and the partials (`chunks * cols`) fit `partials`; otherwise one chunk (no
/// partials).
pub(crate) fn column_sums(
    rows: usize,
    cols: usize,
    width: usize,
    compute_units: u32,
    partials: usize,
    strip_tickets: usize,
) -> (LaunchConfig, u32) {
    let strips = cols.div_ceil(32 * width.max(1)).max(1);
    let target = (compute_units.max(1) as usize) * COLUMN_BLOCKS_PER_CU;
    let mut chunks = target
        .div_ceil(strips)
        .min(rows.div_ceil(MIN_CHUNK_ROWS))
        .min(partials / cols.max(1))
        .clamp(1, MAX_GRID);
    if strips > strip_tickets {
        chunks = 1;
    }
    let chunk_rows = rows.div_ceil(chunks).max(1);
    // Re-derive the count so that no chunk is empty.
    let chunks = rows.div_ceil(chunk_rows).max(1);
    let config = LaunchConfig {
        // Every dialect takes 2^31 - 1 blocks in x; `cols` fits 32 bits (checked by the op).
        grid: [strips as u32, chunks as u32, 1],
        block: [32, 8, 1],
        shared_bytes: 0,
    };
    (config, chunk_rows.min(u32::MAX as usize) as u32)
}

/// `W`: rows of a row-per-warp kernel (a warp, or a 32-item segment in OpenCL, per row; 8 rows
/// per block of 256), at most `max_blocks` blocks (the kernels stride over further rows).
pub(crate) fn warp_rows(rows: usize, max_blocks: usize) -> LaunchConfig {
    let blocks = rows.div_ceil(THREADS as usize / 32).clamp(1, max_blocks);
    LaunchConfig::linear(blocks as u32, THREADS)
}

/// `P`: the number of partials (blocks of the first pass) for `n` elements.
pub(crate) fn partials(n: usize) -> usize {
    n.div_ceil(THREADS as usize).clamp(1, MAX_PARTIALS)
}

/// Most blocks in y (and z) any dialect's driver accepts.
pub(crate) const MAX_GRID_Y: usize = 65_535;
/// Most blocks in x a CUDA/HIP driver accepts (2^31 - 1).
pub(crate) const MAX_GRID_X: usize = i32::MAX as usize;

/// `G`: `(ceil(n / tile_n), ceil(m / tile_m))` blocks of `threads`. The `sgemm` kernels map
/// one block to one tile and do not stride, so a grid beyond the driver's limits is a
/// [`Error::Shape`] here rather than a launch failure.
pub(crate) fn gemm(m: usize, n: usize, tile: (u32, u32, u32)) -> Result<LaunchConfig> {
    let (tm, tn, threads) = tile;
    let gx = n.div_ceil(tn.max(1) as usize).max(1);
    let gy = m.div_ceil(tm.max(1) as usize).max(1);
    if gy > MAX_GRID_Y || gx > MAX_GRID_X {
        return Err(Error::shape(
            "gemm",
            format!(
                "{m} x {n} output needs a grid of {gx} x {gy} tiles of {tm} x {tn}; \
                 at most {MAX_GRID_X} x {MAX_GRID_Y} can be launched"
            ),
        ));
    }
    Ok(LaunchConfig {
        grid: [gx as u32, gy as u32, 1],
        block: [threads, 1, 1],
        shared_bytes: 0,
    })
}

/// Fewest k values one split of a split-k GEMM sums: shallower splits cost more in partial
/// sums written and read than their blocks add.
const MIN_SPLIT_K: usize = 256;
/// Most k splits of one GEMM.
const MAX_K_SPLITS: usize = 16;
/// k step of the `splits_k` kernels (`TC_BK`): split boundaries fall on it.
const SPLIT_K_STEP: usize = 16;

/// `T`: how many ranges of k a `splits_k` GEMM kernel sums separately (grid z) and how deep each
/// is, for an `mn`-element output of `tiles` blocks on `compute_units` SMs: enough splits that the
/// grid covers every SM once, each at least [`MIN_SPLIT_K`] deep, all `splits * mn` partial sums
/// within `space` floats. `(1, k)` when the tiles already fill the device, when k is too shallow
/// to split, or when two splits do not fit. With `one_block_per_sm` (a kernel of which only one
/// block fits an SM) the grid stays within one block per SM instead: a second, partial wave
/// would take as long as the first.
pub(crate) fn k_splits(
    tiles: usize,
    mn: usize,
    k: usize,
    compute_units: u32,
    space: usize,
    one_block_per_sm: bool,
) -> (u32, u32) {
    let whole = (1, k.max(SPLIT_K_STEP) as u32);
    let units = compute_units.max(1) as usize;
    if tiles == 0 || tiles >= units || mn == 0 {
        return whole;
    }
    let per_tile = if one_block_per_sm {
        units / tiles
    } else {
        units.div_ceil(tiles)
    };
    let wanted = per_tile
        .min(k / MIN_SPLIT_K)
        .min(MAX_K_SPLITS)
        .min(space / mn);
    if wanted <= 1 {
        return whole;
    }
    let chunk = k.div_ceil(wanted).div_ceil(SPLIT_K_STEP) * SPLIT_K_STEP;
    (k.div_ceil(chunk) as u32, chunk as u32)
}

/// Tile of the fused Elman step kernels (`RS_BM` batch rows x `RS_BN` hidden columns, with
/// `RS_THREADS` threads in kernels-cu/rnn.cu and kernels-cl/rnn.cl).
const RNN_STEP_TILE: (usize, usize, u32) = (16, 32, 128);

/// `S`: grid `(ceil(hidden / 32), min(ceil(batch / 16), 65535))` of 128 threads (row tiles
/// beyond the grid are strided by the kernels).
pub(crate) fn rnn_step(batch: usize, hidden: usize) -> LaunchConfig {
    let (bm, bn, threads) = RNN_STEP_TILE;
    LaunchConfig {
        grid: [
            hidden.div_ceil(bn).clamp(1, MAX_GRID) as u32,
            batch.div_ceil(bm).clamp(1, MAX_GRID) as u32,
            1,
        ],
        block: [threads, 1, 1],
        shared_bytes: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn k_splits_fill_the_device_in_whole_steps() {
        // 784 x 512 weight gradient over 4096 rows: 104 tiles of 64 on 132 SMs.
        let space = 4 << 20;
        assert_eq!(k_splits(104, 784 * 512, 4096, 132, space, false), (2, 2048));
        // Few tiles, deep k: capped at 16 splits of at least 256.
        assert_eq!(k_splits(1, 64 * 64, 100_000, 132, space, false), (16, 6256));
        assert_eq!(k_splits(4, 100 * 70, 2000, 132, space, false), (7, 288));
        // Bounded by the space for partial sums.
        assert_eq!(
            k_splits(4, 100 * 70, 2000, 132, 3 * 100 * 70 + 5, false),
            (3, 672)
        );
        assert_eq!(k_splits(4, 100 * 70, 2000, 132, 100 * 70, false), (1, 2000));
        // Full devices, shallow k and empty k are not split.
        assert_eq!(k_splits(132, 1 << 20, 4096, 132, space, false), (1, 4096));
        assert_eq!(k_splits(4, 4096, 300, 132, space, false), (1, 300));
        assert_eq!(k_splits(4, 4096, 0, 132, space, false), (1, 16));
        // One block per SM: the weight gradients of W1 at batch 4096 in 128-tiles (28 and 16
        // tiles) split into one wave of 112 and 128 blocks, where rounding up would start 140.
        assert_eq!(k_splits(28, 512 * 784, 4096, 132, space, true), (4, 1024));
        assert_eq!(k_splits(16, 512 * 512, 4096, 132, space, true), (8, 512));
        assert_eq!(k_splits(28, 512 * 784, 4096, 132, space, false), (5, 832));
        assert_eq!(k_splits(100, 4096, 4096, 132, space, true), (1, 4096));
        for (tiles, k) in [(1, 257), (3, 5000), (50, 4096), (7, 100_003)] {
            let (s, chunk) = k_splits(tiles, 1000, k, 132, space, false);
            assert!(s == 1 || chunk % 16 == 0);
            assert!((s as usize - 1) * (chunk as usize) < k && s as usize * chunk as usize >= k);
        }
    }

    #[test]
    fn gemm_grids_beyond_the_limits_are_shape_errors() {
        let tile = (64, 64, 256);
        let ok = gemm(64 * 65_535, 1, tile).unwrap();
        assert_eq!(ok.grid, [1, 65_535, 1]);
        assert!(matches!(
            gemm(64 * 65_535 + 1, 1, tile),
            Err(Error::Shape { .. })
        ));
        assert!(matches!(
            gemm(1, usize::MAX, tile),
            Err(Error::Shape { .. })
        ));
        assert_eq!(gemm(0, 0, tile).unwrap().grid, [1, 1, 1]);
    }

    #[test]
    fn strided_geometries_stay_within_the_limits() {
        for n in [0usize, 1, 65_535, 65_536, u32::MAX as usize] {
            assert!(rows(n).grid[0] as usize <= MAX_GRID_Y);
            assert!(elementwise(n).grid[0] as usize <= MAX_GRID_Y);
            let s = rnn_step(n, n);
            assert!(s.grid[0] as usize <= MAX_GRID_Y && s.grid[1] as usize <= MAX_GRID_Y);
        }
    }

    #[test]
    fn column_sum_chunks_cover_every_row_and_fit_the_scratch() {
        let (partials, tickets) = (65_536, 4096);
        for rows in [0usize, 1, 7, 64, 65, 4096, 100_000, u32::MAX as usize] {
            for cols in [1usize, 10, 31, 33, 96, 512, 4096, 70_000, 200_000] {
                if rows.saturating_mul(cols) > u32::MAX as usize {
                    continue;
                }
                for width in [1, 4] {
                    let (c, chunk) = column_sums(rows, cols, width, 132, partials, tickets);
                    let (strips, chunks) = (c.grid[0] as usize, c.grid[1] as usize);
                    assert_eq!(strips, cols.div_ceil(32 * width), "{rows}x{cols}");
                    assert!((1..=MAX_GRID_Y).contains(&chunks), "{rows}x{cols}");
                    // Every row in some chunk, no chunk empty.
                    assert!(chunks * chunk as usize >= rows, "{rows}x{cols}");
                    assert!(
                        (chunks - 1) * (chunk as usize) < rows.max(1),
                        "{rows}x{cols}"
                    );
                    if chunks > 1 {
                        assert!(
                            chunks * cols <= partials && strips <= tickets,
                            "{rows}x{cols}"
                        );
                    }
                }
            }
        }
        // W1 b4096's bias gradient: the strips get enough chunks to fill 132 SMs.
        for width in [1, 4] {
            let (c, _) = column_sums(4096, 512, width, 132, partials, tickets);
            assert!(c.grid[0] * c.grid[1] >= 132, "{:?}", c.grid);
        }
    }

    #[test]
    fn args_spill_past_the_inline_capacity_in_order() {
        let mut a = Args::new();
        for i in 0..(INLINE_ARGS as u32 + 5) {
            a = a.u32(i);
        }
        let got: Vec<RawArg> = a.as_slice().to_vec();
        let want: Vec<RawArg> = (0..(INLINE_ARGS as u32 + 5)).map(RawArg::U32).collect();
        assert_eq!(got, want);
        assert_eq!(Args::new().f32(1.0).i32(-1).u64(9).as_slice().len(), 3);
    }
}
