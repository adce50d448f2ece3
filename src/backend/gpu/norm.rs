//! Layer normalization (kernels-cu/norm.cu, kernels-cl/norm.cl): one fused launch forward (a
//! warp per row) and one backward (a warp per row for `dx`, a thread per column for the
//! weight and bias sums over the block's rows, and the last-arriving block adding the blocks'
//! partial sums in order).

use super::GpuOps;
use super::launch::{self, Args, THREADS};
use super::scratch::{PARTIALS, Ticket};
use crate::backend::Device;
use crate::error::Result;
use crate::kernel::LaunchConfig;
use crate::ops::prelude::*;
use crate::ops::{LayerNormBackward, LayerNormForward, MatShape};

/// Rows a backward block covers at least before another block (and its partials) pays off.
const MIN_CHUNK_ROWS: usize = 16;
/// Backward blocks per compute unit to aim for.
const BLOCKS_PER_CU: usize = 4;

/// Geometry `N` of the layer-norm backward: blocks of 256 over chunks of `chunk_rows` rows;
/// several blocks only when their partials (`2 * cols` each) fit the scratch.
pub(super) fn backward_geometry(
    rows: usize,
    cols: usize,
    compute_units: u32,
    partials: usize,
) -> (LaunchConfig, u32) {
    let blocks = rows
        .div_ceil(MIN_CHUNK_ROWS)
        .min(compute_units.max(1) as usize * BLOCKS_PER_CU)
        .min(partials / (2 * cols.max(1)))
        .clamp(1, 65_535);
    let chunk = rows.div_ceil(blocks).max(1);
    let blocks = rows.div_ceil(chunk).max(1);
    (
        LaunchConfig::linear(blocks as u32, THREADS),
        chunk.min(u32::MAX as usize) as u32,
    )
}

impl<D: Device> NormOps for GpuOps<D> {
    fn layer_norm_forward(&self, a: LayerNormForward<'_>) -> Result<()> {
        if a.check(self.context)? == 0 {
            return Ok(());
        }
        let MatShape { rows, cols } = a.shape;
        let args = Args::new()
            .bufs(&a.views().each_ref())?
            .dims(&[rows, cols])
            .f32(a.eps);
        self.run(LayerNormForward::OP, launch::warp_rows(rows, 1024), args)
    }

    fn layer_norm_backward(&self, a: LayerNormBackward<'_>) -> Result<()> {
        a.check(self.context)?;
        let MatShape { rows, cols } = a.shape;
        if cols == 0 {
            return Ok(());
        }
        if rows == 0 {
            // No rows: the sums are zero (the kernel would have no block to write them).
            self.fill(a.grads.dweight, 0.0)?;
            return self.fill(a.grads.dbias, 0.0);
        }
        let (config, chunk_rows) = backward_geometry(rows, cols, self.info.compute_units, PARTIALS);
        self.with_scratch(|scratch| {
            let args = Args::new()
                .bufs(&a.views().each_ref())?
                .bufs(&[&scratch.partials()?, &scratch.ticket(Ticket::LayerNorm)?])?
                .dims(&[rows, cols])
                .u32(chunk_rows);
            self.run(LayerNormBackward::OP, config, args)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backward_chunks_cover_every_row_and_fit_the_scratch() {
        for rows in [1usize, 7, 16, 17, 4096, 100_000] {
            for cols in [1usize, 64, 300, 4096, 40_000] {
                let (c, chunk) = backward_geometry(rows, cols, 132, PARTIALS);
                let blocks = c.grid[0] as usize;
                assert!(blocks * chunk as usize >= rows, "{rows}x{cols}");
                assert!((blocks - 1) * (chunk as usize) < rows, "{rows}x{cols}");
                assert!(
                    blocks == 1 || blocks * 2 * cols <= PARTIALS,
                    "{rows}x{cols}"
                );
            }
        }
    }
}
