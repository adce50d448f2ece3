//! Whole-sequence Elman ops as a loop over the fused step ops, one launch per time step: the
//! CPU backend's implementation, and the GPU fallback where no cooperative launch is available.
//! Callers have checked the arguments (`check::rnn_sequence_*`); `n` is `batch * hidden`.

use crate::buffer::View;
use crate::error::Result;
use crate::ops::RecurrentWeights;
use crate::ops::SeqShape;
use crate::ops::{Activation, ElmanOps};

/// `hs[t + 1] = act(pre[t] + hs[t] W_hh^T + b_ih + b_hh)` for `t = 0 .. steps`.
pub(crate) fn forward_by_steps(
    ops: &(impl ElmanOps + ?Sized),
    pre: View<'_>,
    hs: View<'_>,
    weights: RecurrentWeights<'_>,
    act: Activation,
    shape: SeqShape,
) -> Result<()> {
    let SeqShape {
        steps,
        batch,
        hidden,
    } = shape;
    let n = batch * hidden;
    for t in 0..steps {
        ops.rnn_step_forward(
            pre.slice(t * n, n)?,
            hs.slice(t * n, n)?,
            weights,
            hs.slice((t + 1) * n, n)?,
            act,
            SeqShape::step(batch, hidden),
        )?;
    }
    Ok(())
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
    dh: View<'_>,
    hs: View<'_>,
    w_hh: View<'_>,
    dpre: View<'_>,
    act: Activation,
    shape: SeqShape,
) -> Result<()> {
    let SeqShape {
        steps,
        batch,
        hidden,
    } = shape;
    let n = batch * hidden;
    for t in (0..steps).rev() {
        ops.rnn_step_backward(
            dh.slice(t * n, n)?,
            next_block(dpre, t, steps, n)?,
            w_hh,
            hs.slice((t + 1) * n, n)?,
            dpre.slice(t * n, n)?,
            act,
            SeqShape::step(batch, hidden),
        )?;
    }
    Ok(())
}
