//! The whole-sequence Elman ops: the fused steps of [`super::rnn_step`], one per time step, on
//! views of the sequence buffers.

use super::rnn_step;
use crate::buffer::View;
use crate::error::Result;
use crate::ops::{Activation, check};

#[allow(clippy::too_many_arguments)]
pub(super) fn rnn_sequence_forward(
    ctx: u64,
    pre: View<'_>,
    hs: View<'_>,
    w_hh: View<'_>,
    b_ih: View<'_>,
    b_hh: View<'_>,
    act: Activation,
    steps: usize,
    batch: usize,
    hidden: usize,
) -> Result<()> {
    let op = "rnn_sequence_forward";
    check::same_context(op, ctx, &[&pre, &hs, &w_hh, &b_ih, &b_hh])?;
    let n = check::rnn_sequence_forward(pre, hs, w_hh, b_ih, b_hh, act, steps, batch, hidden)?;
    if n == 0 {
        return Ok(());
    }
    for t in 0..steps {
        rnn_step::rnn_step_forward(
            ctx,
            pre.slice(t * n, n)?,
            hs.slice(t * n, n)?,
            w_hh,
            b_ih,
            b_hh,
            hs.slice((t + 1) * n, n)?,
            act,
            batch,
            hidden,
        )?;
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
pub(super) fn rnn_sequence_backward(
    ctx: u64,
    dh: View<'_>,
    hs: View<'_>,
    w_hh: View<'_>,
    dpre: View<'_>,
    act: Activation,
    steps: usize,
    batch: usize,
    hidden: usize,
) -> Result<()> {
    let op = "rnn_sequence_backward";
    check::same_context(op, ctx, &[&dh, &hs, &w_hh, &dpre])?;
    let n = check::rnn_sequence_backward(dh, hs, w_hh, dpre, act, steps, batch, hidden)?;
    if n == 0 {
        return Ok(());
    }
    for t in (0..steps).rev() {
        let next = if t + 1 < steps {
            Some(dpre.slice((t + 1) * n, n)?)
        } else {
            None
        };
        rnn_step::rnn_step_backward(
            ctx,
            dh.slice(t * n, n)?,
            next,
            w_hh,
            hs.slice((t + 1) * n, n)?,
            dpre.slice(t * n, n)?,
            act,
            batch,
            hidden,
        )?;
    }
    Ok(())
}
