//! A one-direction recurrent cell over padded sequences: its outputs past each sample's length
//! are zeroed after the forward pass (with `Last`, the last valid step is moved to where the
//! output is read), and the gradient coming back is masked (moved back) before the backward
//! pass. The cell itself runs every step of every sample; why that is exact:
//!
//! - A valid step `t < len` depends only on steps before it, all valid, so every valid output
//!   is the cell's output on the unpadded sample.
//! - The gradient reaching a padded step from above is zero (masked), and the recurrent
//!   gradient flowing into the last padded step is zero; by induction every padded step passes
//!   back zero, so its gate gradients are zero and it adds nothing to the weight gradients,
//!   the input gradients or the valid steps. The zeroed states (which the backward pass may
//!   read as a padded step's previous state) only ever meet those zero gradients.
//! - With `Last`, the output row of sample `b` is overwritten by its row at step `len - 1`; the
//!   step it overwrites is the last, padded for that sample unless `len == steps`, where the
//!   two rows are the same.

use crate::buffer::View;
use crate::error::Result;
use crate::ops::{IndexedRows, Ops};

use super::padding::LengthViews;
use super::recurrent::RnnOutput;

/// A cell's time-major views: every output state (`steps * batch x hidden`, block `t` is
/// `h_t`) and the gradient reaching each of them from above.
pub(crate) struct CellSeq<'a> {
    pub states: View<'a>,
    pub grads: View<'a>,
    pub hidden: usize,
    pub output: RnnOutput,
}

impl CellSeq<'_> {
    /// The block of the last step, where a `Last` output is read and its gradient written.
    fn last_block<'v>(&self, v: View<'v>, batch: usize) -> Result<View<'v>> {
        let block = batch * self.hidden;
        v.slice(v.len() - block, block)
    }
}

/// After the cell's forward pass: zeroes the outputs past each length, or with `Last` puts
/// each sample's last valid state where the output is read.
pub(crate) fn mask_outputs(ops: &dyn Ops, lv: &LengthViews<'_>, c: &CellSeq<'_>) -> Result<()> {
    match c.output {
        RnnOutput::Sequence => ops.scale_rows(c.states, lv.mask, c.hidden),
        RnnOutput::Last => {
            let batch = lv.last.len();
            let park = lv.scratch.slice(0, batch * c.hidden)?;
            ops.gather_rows(IndexedRows::new(c.states, lv.last, park, c.hidden))?;
            ops.copy(park, c.last_block(c.states, batch)?)
        }
    }
}

/// Before the cell's backward pass: zeroes the gradient reaching padded outputs, or with
/// `Last` moves the output's gradient to each sample's last valid step (the other steps get
/// none from above).
pub(crate) fn mask_grads(ops: &dyn Ops, lv: &LengthViews<'_>, c: &CellSeq<'_>) -> Result<()> {
    match c.output {
        RnnOutput::Sequence => ops.scale_rows(c.grads, lv.mask, c.hidden),
        RnnOutput::Last => {
            let batch = lv.last.len();
            let park = lv.scratch.slice(0, batch * c.hidden)?;
            ops.copy(c.last_block(c.grads, batch)?, park)?;
            ops.fill(c.grads, 0.0)?;
            ops.scatter_add_rows(IndexedRows::new(park, lv.last, c.grads, c.hidden))
        }
    }
}
