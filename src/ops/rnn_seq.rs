//! Whole-sequence Elman ops as a loop over the fused step ops, one launch per time step: the
//! CPU backend's implementation, and the GPU fallback where no cooperative launch is available.
//! Callers have checked the arguments (`check::rnn_sequence_*`); `n` is `batch * hidden`.

use crate::buffer::View;
use crate::error::Result;
use crate::ops::RecurrentWeights;
use crate::ops::SeqShape;
use crate::ops::{Activation, ElmanOps};

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
    [pre, hs]: [View<'_>; 2],
    weights: RecurrentWeights<'_>,
    act: Activation,
    shape: SeqShape,
) -> Result<()> {
    let (n, step) = (shape.block(), SeqShape::step(shape.batch, shape.hidden));
    for_each_step(shape.steps, false, |t| {
        let (pre_t, h_prev) = (pre.slice(t * n, n)?, hs.slice(t * n, n)?);
        ops.rnn_step_forward(pre_t, h_prev, weights, hs.slice((t + 1) * n, n)?, act, step)
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
    [dh, hs, w_hh, dpre]: [View<'_>; 4],
    act: Activation,
    shape: SeqShape,
) -> Result<()> {
    let (n, step) = (shape.block(), SeqShape::step(shape.batch, shape.hidden));
    for_each_step(shape.steps, true, |t| {
        let (dh_t, next) = (dh.slice(t * n, n)?, next_block(dpre, t, shape.steps, n)?);
        let (h, dpre_t) = (hs.slice((t + 1) * n, n)?, dpre.slice(t * n, n)?);
        ops.rnn_step_backward(dh_t, next, w_hh, h, dpre_t, act, step)
    })
}
