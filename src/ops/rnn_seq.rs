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
        let next = if t + 1 < steps {
            Some(dpre.slice((t + 1) * n, n)?)
        } else {
            None
        };
        ops.rnn_step_backward(
            dh.slice(t * n, n)?,
            next,
            w_hh,
            hs.slice((t + 1) * n, n)?,
            dpre.slice(t * n, n)?,
            act,
            SeqShape::step(batch, hidden),
        )?;
    }
    Ok(())
}
