//! Whole-sequence LSTM and GRU ops as a loop over fused time steps, one pass per step and
//! direction that does the recurrent product and the gate math together: the GPU fallback where
//! the persistent kernels cannot run (one step kernel per step, docs/kernel-abi.md). The CPU
//! backend runs its own whole-sequence loop (src/backend/cpu/gated_seq.rs). Callers have
//! checked the sequence arguments (`check::{lstm,gru}_sequence_*`), so every slice below exists.
//!
//! The backward steps hand one value per (row, unit) to the step before them through `carry`
//! (`batch x hidden`): the LSTM's `dc_t * f_t`, the GRU's `dh_t * z_t`. The last time step has
//! no successor: it reads neither `carry` nor a next gradient (`next` is `None`).

use crate::buffer::View;
use crate::error::Result;
use crate::ops::MemoryOps;
use crate::ops::SeqShape;
use crate::ops::rnn_seq::next_block;
use crate::ops::{GruGateGrads, RecurrentWeights};

/// One LSTM forward step: `gates` (`batch x 4H`, `x_t W_ih^T` on entry) becomes the activated
/// gates of `gates + b_ih + b_hh + h_prev W_hh^T`; writes `c` and `h`.
pub(crate) struct LstmForwardStep<'a> {
    pub gates: View<'a>,
    pub h_prev: View<'a>,
    pub c_prev: View<'a>,
    pub w_hh: View<'a>,
    pub b_ih: View<'a>,
    pub b_hh: View<'a>,
    pub c: View<'a>,
    pub h: View<'a>,
    pub batch: usize,
    pub hidden: usize,
}

/// One LSTM backward step: `dh_t = dh + next W_hh` (`next`: the gate gradient of step `t + 1`),
/// `dc_t = carry + dh_t o (1 - tanh² c)` (`carry` read only with `next`), writes `dgates` and
/// `carry = dc_t f`.
pub(crate) struct LstmBackwardStep<'a> {
    pub dh: View<'a>,
    pub next: Option<View<'a>>,
    pub w_hh: View<'a>,
    pub gates: View<'a>,
    pub c_prev: View<'a>,
    pub c: View<'a>,
    pub carry: View<'a>,
    pub dgates: View<'a>,
    pub batch: usize,
    pub hidden: usize,
}

/// One GRU forward step: from `gx` (`x_t W_ih^T`), `h_prev W_hh^T` and the biases, writes `h`
/// and `cache = [r, z, n, gh_n]`.
pub(crate) struct GruForwardStep<'a> {
    pub gx: View<'a>,
    pub h_prev: View<'a>,
    pub w_hh: View<'a>,
    pub b_ih: View<'a>,
    pub b_hh: View<'a>,
    pub h: View<'a>,
    pub cache: View<'a>,
    pub batch: usize,
    pub hidden: usize,
}

/// One GRU backward step: `dh_t = dh + next W_hh + carry` (`next`: `dgh` of step `t + 1`;
/// product and carry only with `next`), writes `dgx`, `dgh` and `carry = dh_t z`.
pub(crate) struct GruBackwardStep<'a> {
    pub dh: View<'a>,
    pub next: Option<View<'a>>,
    pub w_hh: View<'a>,
    pub cache: View<'a>,
    pub h_prev: View<'a>,
    pub carry: View<'a>,
    pub dgx: View<'a>,
    pub dgh: View<'a>,
    pub batch: usize,
    pub hidden: usize,
}

/// The fused time steps of a backend (`batch * hidden > 0`).
pub(crate) trait GatedSteps: MemoryOps {
    fn lstm_step_forward(&self, s: &LstmForwardStep<'_>) -> Result<()>;
    fn lstm_step_backward(&self, s: &LstmBackwardStep<'_>) -> Result<()>;
    fn gru_step_forward(&self, s: &GruForwardStep<'_>) -> Result<()>;
    fn gru_step_backward(&self, s: &GruBackwardStep<'_>) -> Result<()>;
}

/// `GatedSequenceOps::lstm_sequence_forward`, one step at a time.
pub(crate) fn lstm_forward_by_steps(
    ops: &(impl GatedSteps + ?Sized),
    gates: View<'_>,
    hs: View<'_>,
    cs: View<'_>,
    weights: RecurrentWeights<'_>,
    shape: SeqShape,
) -> Result<()> {
    let RecurrentWeights { w_hh, b_ih, b_hh } = weights;
    let SeqShape {
        steps,
        batch,
        hidden,
    } = shape;
    let n = batch * hidden;
    for t in 0..steps {
        ops.lstm_step_forward(&LstmForwardStep {
            gates: gates.slice(t * 4 * n, 4 * n)?,
            h_prev: hs.slice(t * n, n)?,
            c_prev: cs.slice(t * n, n)?,
            w_hh,
            b_ih,
            b_hh,
            c: cs.slice((t + 1) * n, n)?,
            h: hs.slice((t + 1) * n, n)?,
            batch,
            hidden,
        })?;
    }
    Ok(())
}

/// `GatedSequenceOps::lstm_sequence_backward`'s checked arguments for the step loop, with
/// `carry` (`batch x hidden` scratch).
pub(crate) struct LstmBackwardSeq<'a> {
    pub dh: View<'a>,
    pub gates: View<'a>,
    pub cs: View<'a>,
    pub w_hh: View<'a>,
    pub dgates: View<'a>,
    pub carry: View<'a>,
    pub shape: SeqShape,
}

/// `GatedSequenceOps::lstm_sequence_backward`, one step at a time.
pub(crate) fn lstm_backward_by_steps(
    ops: &(impl GatedSteps + ?Sized),
    s: &LstmBackwardSeq<'_>,
) -> Result<()> {
    let LstmBackwardSeq {
        dh,
        gates,
        cs,
        w_hh,
        dgates,
        carry,
        shape,
    } = *s;
    let SeqShape {
        steps,
        batch,
        hidden,
    } = shape;
    let n = batch * hidden;
    for t in (0..steps).rev() {
        ops.lstm_step_backward(&LstmBackwardStep {
            dh: dh.slice(t * n, n)?,
            next: next_block(dgates, t, steps, 4 * n)?,
            w_hh,
            gates: gates.slice(t * 4 * n, 4 * n)?,
            c_prev: cs.slice(t * n, n)?,
            c: cs.slice((t + 1) * n, n)?,
            carry,
            dgates: dgates.slice(t * 4 * n, 4 * n)?,
            batch,
            hidden,
        })?;
    }
    Ok(())
}

/// `GatedSequenceOps::gru_sequence_forward`, one step at a time.
pub(crate) fn gru_forward_by_steps(
    ops: &(impl GatedSteps + ?Sized),
    gx: View<'_>,
    hs: View<'_>,
    weights: RecurrentWeights<'_>,
    cache: View<'_>,
    shape: SeqShape,
) -> Result<()> {
    let RecurrentWeights { w_hh, b_ih, b_hh } = weights;
    let SeqShape {
        steps,
        batch,
        hidden,
    } = shape;
    let n = batch * hidden;
    for t in 0..steps {
        ops.gru_step_forward(&GruForwardStep {
            gx: gx.slice(t * 3 * n, 3 * n)?,
            h_prev: hs.slice(t * n, n)?,
            w_hh,
            b_ih,
            b_hh,
            h: hs.slice((t + 1) * n, n)?,
            cache: cache.slice(t * 4 * n, 4 * n)?,
            batch,
            hidden,
        })?;
    }
    Ok(())
}

/// `GatedSequenceOps::gru_sequence_backward`'s checked arguments for the step loop, with
/// `carry` (`batch x hidden` scratch).
pub(crate) struct GruBackwardSeq<'a> {
    pub dh: View<'a>,
    pub hs: View<'a>,
    pub cache: View<'a>,
    pub w_hh: View<'a>,
    pub grads: GruGateGrads<'a>,
    pub carry: View<'a>,
    pub shape: SeqShape,
}

/// `GatedSequenceOps::gru_sequence_backward`, one step at a time.
pub(crate) fn gru_backward_by_steps(
    ops: &(impl GatedSteps + ?Sized),
    s: &GruBackwardSeq<'_>,
) -> Result<()> {
    let GruBackwardSeq {
        dh,
        hs,
        cache,
        w_hh,
        grads: GruGateGrads { dgx, dgh },
        carry,
        shape,
    } = *s;
    let SeqShape {
        steps,
        batch,
        hidden,
    } = shape;
    let n = batch * hidden;
    for t in (0..steps).rev() {
        ops.gru_step_backward(&GruBackwardStep {
            dh: dh.slice(t * n, n)?,
            next: next_block(dgh, t, steps, 3 * n)?,
            w_hh,
            cache: cache.slice(t * 4 * n, 4 * n)?,
            h_prev: hs.slice(t * n, n)?,
            carry,
            dgx: dgx.slice(t * 3 * n, 3 * n)?,
            dgh: dgh.slice(t * 3 * n, 3 * n)?,
            batch,
            hidden,
        })?;
    }
    Ok(())
}
