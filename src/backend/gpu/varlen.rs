//! Variable-length sequences on the GPU: the lengths' layout and row scaling as elementwise
//! kernels, the loss weights as one block (it counts the valid rows, then weighs them).

use super::GpuOps;
use super::launch::{self, Args, THREADS};
use crate::backend::Device;
use crate::buffer::View;
use crate::error::Result;
use crate::kernel::LaunchConfig;
use crate::ops::prelude::*;
use crate::ops::{LengthLayout, LossWeights, check_scale_rows};

impl<D: Device> SequenceMaskOps for GpuOps<D> {
    fn length_layout(&self, a: LengthLayout<'_>) -> Result<()> {
        let n = a.check(self.context)?;
        if n == 0 {
            return Ok(());
        }
        let args = Args::new()
            .buf_u32(&a.lengths)?
            .buf(&a.mask)?
            .buf_u32(&a.reversal)?
            .buf_u32(&a.last)?
            .dims(&[a.steps, a.lengths.len()]);
        self.run(LengthLayout::OP, launch::elementwise(n), args)
    }

    fn scale_rows(&self, x: View<'_>, weights: View<'_>, cols: usize) -> Result<()> {
        let n = check_scale_rows(self.context, &x, &weights, cols)?;
        if n == 0 {
            return Ok(());
        }
        let args = Args::new()
            .bufs(&[&x, &weights])?
            .dims(&[weights.len(), cols]);
        self.run("scale_rows", launch::elementwise(n), args)
    }

    fn loss_weights(&self, a: LossWeights<'_>) -> Result<()> {
        let rows = a.check(self.context)?;
        if rows == 0 {
            return Ok(());
        }
        // Absent f32 inputs are passed as `row_loss` (the totals as `weights`), which the
        // kernel does not touch: their flag bits are 0. The labels select the entry, so no u32
        // placeholder is needed.
        let args = Args::new()
            .buf(&a.row_loss)?
            .buf(&a.row_correct.unwrap_or(a.row_loss))?
            .buf(&a.mask.unwrap_or(a.row_loss))?
            .buf(&a.weights)?
            .buf(&a.totals.unwrap_or(a.weights))?;
        let (entry, args) = match a.labels {
            Some((labels, ignore)) => (
                "loss_weights_labels",
                args.buf_u32(&labels)?
                    .dims(&[rows])
                    .u32(a.flags())
                    .u32(ignore),
            ),
            None => (LossWeights::OP, args.dims(&[rows]).u32(a.flags())),
        };
        self.run(entry, LaunchConfig::linear(1, THREADS), args)
    }
}
