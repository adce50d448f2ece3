//! Whole-sequence LSTM and GRU ops as a loop over fused time steps, one pass per step and
//! direction that does the recurrent product and the gate math together: the GPU fallback where
//! the persistent kernels cannot run (one step kernel per step, docs/kernel-abi.md). The CPU
//! backend runs its own whole-sequence loop (src/backend/cpu/gated_seq.rs). Callers have
//! checked the sequence arguments (the argument structs' `check`), so every slice below exists.
//!
//! The backward steps hand one value per (row, unit) to the step before them through `carry`
//! (`batch x hidden`): the LSTM's `dc_t * f_t`, the GRU's `dh_t * z_t`. The last time step has
//! no successor: it reads neither `carry` nor a next gradient (`has_next` is 0), except that an
//! LSTM given `dc_state` finds the gradient reaching its last cell state in `carry` there
//! (`has_next` is 2). After the first time step `carry` holds the gradient for the initial cell
//! state (LSTM) or the direct part of that for the initial hidden state (GRU).

use crate::buffer::View;
use crate::error::Result;
use crate::ops::MemoryOps;
use crate::ops::SeqShape;
use crate::ops::rnn_seq::{for_each_step, next_block};
use crate::ops::{GruGateGrads, RecurrentWeights};
use crate::ops::{
    GruSequenceBackward, GruSequenceForward, LstmSequenceBackward, LstmSequenceForward,
};

/// One fused time step of a gated cell (geometry `S`, docs/kernel-abi.md): the step kernel
/// `entry` with its buffers in ABI order. A backward step (`has_next` set) has the gradient of
/// step `t + 1` in slot 1 of `bufs` (`has_next == Some(1)`), or at the last step `dh` there,
/// which the kernel then does not read (`Some(0)`, or `Some(2)` where it reads `carry`).
pub(crate) struct GatedStep<'v, 'a> {
    pub entry: &'static str,
    pub bufs: &'v [View<'a>],
    pub has_next: Option<u32>,
    pub batch: usize,
    pub hidden: usize,
}

/// The fused time steps of a backend (`batch * hidden > 0`).
pub(crate) trait GatedSteps: MemoryOps {
    fn gated_step(&self, s: &GatedStep<'_, '_>) -> Result<()>;
}

/// Block `t` of `v`, blocks of `len` elements.
fn block(v: View<'_>, t: usize, len: usize) -> Result<View<'_>> {
    v.slice(t * len, len)
}

/// Which way a loop of step kernels runs: forward in time, or from the last step down, with
/// `carry_in` where the last step reads `carry` (the LSTM given `dc_state`).
#[derive(Clone, Copy)]
enum Direction {
    Forward,
    Backward { carry_in: bool },
}

/// Runs the step kernel `entry` for every time step of `shape` with the buffers `bufs(t)` of
/// step `t`, in `direction`.
fn run_steps<'a, const N: usize>(
    ops: &(impl GatedSteps + ?Sized),
    entry: &'static str,
    shape: SeqShape,
    direction: Direction,
    bufs: impl Fn(usize) -> Result<[View<'a>; N]>,
) -> Result<()> {
    let backward = matches!(direction, Direction::Backward { .. });
    for_each_step(shape.steps, backward, |t| {
        let has_next = match direction {
            Direction::Forward => None,
            Direction::Backward { .. } if t + 1 < shape.steps => Some(1),
            Direction::Backward { carry_in } => Some(if carry_in { 2 } else { 0 }),
        };
        ops.gated_step(&GatedStep {
            entry,
            bufs: &bufs(t)?,
            has_next,
            batch: shape.batch,
            hidden: shape.hidden,
        })
    })
}

/// The gradient block of step `t + 1` of `grads` (blocks of `len`), or `dh` at the last step.
fn next_or<'a>(
    grads: View<'a>,
    t: usize,
    shape: SeqShape,
    len: usize,
    dh: View<'a>,
) -> Result<View<'a>> {
    Ok(next_block(grads, t, shape.steps, len)?.unwrap_or(dh))
}

/// `GatedSequenceOps::lstm_sequence_forward`, one step at a time.
pub(crate) fn lstm_forward_by_steps(
    ops: &(impl GatedSteps + ?Sized),
    a: LstmSequenceForward<'_>,
) -> Result<()> {
    let (gates, hs, cs) = (a.gates, a.hs, a.cs);
    let RecurrentWeights { w_hh, b_ih, b_hh } = a.weights;
    let n = a.shape.block();
    run_steps(ops, "lstm_step_forward", a.shape, Direction::Forward, |t| {
        let (h_prev, c_prev, gates_t) =
            (block(hs, t, n)?, block(cs, t, n)?, block(gates, t, 4 * n)?);
        let (c, h) = (block(cs, t + 1, n)?, block(hs, t + 1, n)?);
        Ok([gates_t, h_prev, c_prev, w_hh, b_ih, b_hh, c, h])
    })
}

/// `GatedSequenceOps::lstm_sequence_backward`, one step at a time, with `carry` (`batch x
/// hidden`: scratch, or `dc_state` itself when given).
pub(crate) fn lstm_backward_by_steps(
    ops: &(impl GatedSteps + ?Sized),
    s: &LstmSequenceBackward<'_>,
    carry: View<'_>,
) -> Result<()> {
    let (n, shape) = (s.shape.block(), s.shape);
    let direction = Direction::Backward {
        carry_in: s.dc_state.is_some(),
    };
    run_steps(ops, "lstm_step_backward", shape, direction, |t| {
        let (dh, c_prev, c) = (
            block(s.dh, t, n)?,
            block(s.cs, t, n)?,
            block(s.cs, t + 1, n)?,
        );
        let next = next_or(s.dgates, t, shape, 4 * n, dh)?;
        let (gates, dgates) = (block(s.gates, t, 4 * n)?, block(s.dgates, t, 4 * n)?);
        Ok([dh, next, s.w_hh, gates, c_prev, c, carry, dgates])
    })
}

/// `GatedSequenceOps::gru_sequence_forward`, one step at a time.
pub(crate) fn gru_forward_by_steps(
    ops: &(impl GatedSteps + ?Sized),
    a: GruSequenceForward<'_>,
) -> Result<()> {
    let (gx, hs, cache) = (a.gx, a.hs, a.cache);
    let RecurrentWeights { w_hh, b_ih, b_hh } = a.weights;
    let n = a.shape.block();
    run_steps(ops, "gru_step_forward", a.shape, Direction::Forward, |t| {
        let (gx_t, cache_t) = (block(gx, t, 3 * n)?, block(cache, t, 4 * n)?);
        let (h_prev, h) = (block(hs, t, n)?, block(hs, t + 1, n)?);
        Ok([gx_t, h_prev, w_hh, b_ih, b_hh, h, cache_t])
    })
}

/// `GatedSequenceOps::gru_sequence_backward`, one step at a time, with `carry` (`batch x
/// hidden`: scratch, or `dh_state` itself when given).
pub(crate) fn gru_backward_by_steps(
    ops: &(impl GatedSteps + ?Sized),
    s: &GruSequenceBackward<'_>,
    carry: View<'_>,
) -> Result<()> {
    let (n, shape, GruGateGrads { dgx, dgh }) = (s.shape.block(), s.shape, s.grads);
    let direction = Direction::Backward { carry_in: false };
    run_steps(ops, "gru_step_backward", shape, direction, |t| {
        let (dh, h_prev, cache) = (
            block(s.dh, t, n)?,
            block(s.hs, t, n)?,
            block(s.cache, t, 4 * n)?,
        );
        let next = next_or(dgh, t, shape, 3 * n, dh)?;
        let (dgx_t, dgh_t) = (block(dgx, t, 3 * n)?, block(dgh, t, 3 * n)?);
        Ok([dh, next, s.w_hh, cache, h_prev, carry, dgx_t, dgh_t])
    })
}
