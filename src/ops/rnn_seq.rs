//! Whole-sequence Elman ops as a loop over the fused step ops, one launch per time step: the
//! CPU backend's implementation, and the GPU fallback where no cooperative launch is available.
//! Callers have checked the arguments (the argument structs' `check`); `n` is `batch * hidden`.

use crate::buffer::View;
use crate::error::Result;
use crate::ops::{
    ElmanOps, RnnSequenceBackward, RnnSequenceForward, RnnStepBackward, RnnStepForward,
};

/// Runs `step(t)` for `t = 0 .. steps`, or from `steps - 1` down to 0 when `backward`.
pub(crate) fn for_each_step(
    steps: usize,
    backward: bool,
    mut step: impl FnMut(usize) -> Result<()>,
) -> Result<()> {
    for i in 0..steps {
        step(if backward { steps - 1 - i } else { i })?;
    }
    Ok(())
}

/// `hs[t + 1] = act(pre[t] + hs[t] W_hh^T + b_ih + b_hh)` for `t = 0 .. steps`.
pub(crate) fn forward_by_steps(
    ops: &(impl ElmanOps + ?Sized),
    a: RnnSequenceForward<'_>,
) -> Result<()> {
    let (n, hs) = (a.shape.block(), a.hs);
    for_each_step(a.shape.steps, false, |t| {
        ops.rnn_step_forward(RnnStepForward {
            pre: a.pre.slice(t * n, n)?,
            h_prev: hs.slice(t * n, n)?,
            weights: a.weights,
            h: hs.slice((t + 1) * n, n)?,
            act: a.act,
            shape: a.shape.one_step(),
        })
    })
}

/// The block of time step `t + 1` of `v` (`steps` blocks of `len` elements): what a backward
/// step receives from the step after it, `None` at the last step, which has no successor.
pub(crate) fn next_block<'a>(
    v: View<'a>,
    t: usize,
    steps: usize,
    len: usize,
) -> Result<Option<View<'a>>> {
    if t + 1 < steps {
        Ok(Some(v.slice((t + 1) * len, len)?))
    } else {
        Ok(None)
    }
}

/// `dpre[t] = act'(hs[t + 1]) * (dh[t] + dpre[t + 1] W_hh)` for `t = steps - 1 .. 0`.
pub(crate) fn backward_by_steps(
    ops: &(impl ElmanOps + ?Sized),
    a: RnnSequenceBackward<'_>,
) -> Result<()> {
    let (n, steps, dpre) = (a.shape.block(), a.shape.steps, a.dpre);
    for_each_step(steps, true, |t| {
        ops.rnn_step_backward(RnnStepBackward {
            dh: a.dh.slice(t * n, n)?,
            dpre_next: next_block(dpre, t, steps, n)?,
            w_hh: a.w_hh,
            h: a.hs.slice((t + 1) * n, n)?,
            dpre: dpre.slice(t * n, n)?,
            act: a.act,
            shape: a.shape.one_step(),
        })
    })
}
