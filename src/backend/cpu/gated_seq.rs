//! The whole-sequence LSTM and GRU ops of the CPU backend (`Ops::{lstm,gru}_sequence_*`): each
//! row group of the batch (`row_groups`) runs all time steps on its own, a step being the
//! recurrent product of its rows (the packed GEMM; the epilogue folds in `b_hh` or `dh` while a
//! block is in cache) followed by the row pass of `cells`. Callers have checked the arguments
//! (the argument structs' `check`: `batch * hidden > 0`, `steps > 0`).
//!
//! `W_hh` is packed once per sequence into panels of the product's columns (`packed`), which
//! every step of every group then reads in place: the GEMM crate otherwise walks a wide operand
//! unpacked at a row's stride for a group's few rows, or repacks it on every call (for the
//! forward's transposed `W_hh`, which costs as much as the step's product; docs/performance.md,
//! CPU). The sums are those of the per-step ops, in the same order (the products' own
//! blocking aside).

use super::CpuOps;
use super::access::lock;
use super::cells;
use super::gemm::{self, Epilogue};
use super::packed::Packed;
use super::par::Split;
use super::row_groups::Groups;
use crate::error::Result;
use crate::ops::Gemm;
use crate::ops::GruGateGrads;
use crate::ops::RecurrentWeights;
use crate::ops::SeqShape;
use crate::ops::prelude::*;
use crate::ops::{
    GruSequenceBackward, GruSequenceForward, LstmSequenceBackward, LstmSequenceForward,
};

/// Rows of the whole sequence (steps x batch) from which the backward's `W_hh` is packed rather
/// than read in place by every step (the copy costs about as much as a product of 8 rows). The
/// forward's, read transposed, is always packed: the crate would repack it on every call.
const PACK_MIN_ROWS: usize = 16;

/// The recurrent product of a sequence's steps, `h W_hh^T` (forward) or `d W_hh` (backward).
enum Recurrent<'a> {
    Packed(Packed),
    /// `W_hh` as stored, already op(W_hh).
    Plain(&'a [f32]),
}

impl<'a> Recurrent<'a> {
    /// op(W_hh) `k x n` from `w` stored `k x n`, or `n x k` when `trans`.
    fn new(w: &'a [f32], k: usize, n: usize, trans: bool, seq_rows: usize) -> Self {
        if trans || seq_rows >= PACK_MIN_ROWS {
            Recurrent::Packed(Packed::new(w, k, n, trans))
        } else {
            Recurrent::Plain(w)
        }
    }

    /// `c = alpha a op(W_hh) + beta c` for `g` (untransposed), then `epi` as in `gemm::run`.
    fn run(&self, g: Gemm, a: &[f32], c: &mut [f32], epi: Option<&Epilogue<'_>>, split: Split) {
        match self {
            Recurrent::Packed(p) => p.run(&g, a, c, epi, split),
            Recurrent::Plain(w) => gemm::run_split(&g, a, w, c, epi, split),
        }
    }
}

/// The LSTM forward over a whole sequence on locked slices.
fn lstm_forward_seq([w, bi, bh]: [&[f32]; 3], [gates, hs, cs]: [&mut [f32]; 3], shape: SeqShape) {
    let (steps, batch, hidden) = (shape.steps, shape.batch, shape.hidden);
    let groups = Groups::new(batch);
    let split = groups.split();
    let rec = Recurrent::new(w, hidden, 4 * hidden, true, steps * batch);
    let work = groups.cut(gates, 4 * hidden).into_iter();
    let work = work.zip(groups.cut(hs, hidden)).zip(groups.cut(cs, hidden));
    groups.run(work.collect(), |p, ((mut gates, mut hs), mut cs)| {
        // gates = x W_ih^T + h_prev W_hh^T, then the biases and the cell in the row pass.
        let g = Gemm::new(groups.rows(p).len(), 4 * hidden, hidden).scaled(1.0, 1.0);
        for t in 0..steps {
            let (hp, h) = hs.split_at_mut(t + 1);
            let (cp, c) = cs.split_at_mut(t + 1);
            let gt = &mut *gates[t];
            rec.run(g, hp[t], gt, None, split);
            let bias = Some((bi, bh));
            cells::lstm_forward_rows(gt, bias, cp[t], c[0], h[0], hidden, split);
        }
    });
}

/// Each row group's part of a `batch x hidden` state (one block), or none for every group.
fn state_parts<'a>(
    groups: &Groups,
    state: Option<&'a mut [f32]>,
    hidden: usize,
) -> Vec<Option<&'a mut [f32]>> {
    match state {
        Some(s) => groups
            .cut(s, hidden)
            .into_iter()
            .map(|mut b| b.pop())
            .collect(),
        None => (0..groups.count()).map(|_| None).collect(),
    }
}

/// The LSTM backward through a whole sequence on locked slices; `dc_state` as
/// [`LstmSequenceBackward::dc_state`].
fn lstm_backward_seq(
    [dh, gates, cs, w]: [&[f32]; 4],
    dgates: &mut [f32],
    dc_state: Option<&mut [f32]>,
    shape: SeqShape,
) {
    let (steps, batch, hidden) = (shape.steps, shape.batch, shape.hidden);
    let groups = Groups::new(batch);
    let split = groups.split();
    let rec = Recurrent::new(w, 4 * hidden, hidden, false, steps * batch);
    let work = groups.cut(dgates, 4 * hidden).into_iter();
    let work = work.zip(state_parts(&groups, dc_state, hidden));
    groups.run(work.collect(), |p, (mut dgates, mut state)| {
        let rows = groups.rows(p).len();
        let g = Gemm::new(rows, hidden, 4 * hidden);
        let mut dh_t = vec![0.0f32; rows * hidden];
        // dc_{t+1} f_{t+1}; at the last step, what reaches the last cell state from outside.
        let mut carry = match &state {
            Some(s) => s.to_vec(),
            None => vec![0.0f32; rows * hidden],
        };
        for t in (0..steps).rev() {
            let d = groups.rows_of(dh, hidden, t, p);
            let (dg, next) = dgates.split_at_mut(t + 1);
            if let Some(next) = next.first() {
                // dh_t = next W_hh + dh, the sum formed right after each block's product.
                let add_dh = |i: usize, j0: usize, seg: &mut [f32]| {
                    let d = &d[i * hidden + j0..i * hidden + j0 + seg.len()];
                    seg.iter_mut().zip(d).for_each(|(v, d)| *v += d);
                };
                rec.run(g, next, &mut dh_t, Some(&add_dh), split);
            } else {
                dh_t.copy_from_slice(d);
            }
            cells::lstm_backward_rows(
                groups.rows_of(gates, 4 * hidden, t, p),
                groups.rows_of(cs, hidden, t, p),
                groups.rows_of(cs, hidden, t + 1, p),
                &dh_t,
                &mut carry,
                dg[t],
                hidden,
                split,
            );
        }
        if let Some(s) = state.as_deref_mut() {
            s.copy_from_slice(&carry);
        }
    });
}

/// The GRU forward over a whole sequence on locked slices.
fn gru_forward_seq([gx, w, bi, bh]: [&[f32]; 4], [hs, cache]: [&mut [f32]; 2], shape: SeqShape) {
    let (steps, batch, hidden) = (shape.steps, shape.batch, shape.hidden);
    let groups = Groups::new(batch);
    let split = groups.split();
    let rec = Recurrent::new(w, hidden, 3 * hidden, true, steps * batch);
    let work = groups.cut(hs, hidden).into_iter();
    let work = work.zip(groups.cut(cache, 4 * hidden));
    groups.run(work.collect(), |p, (mut hs, mut cache)| {
        let rows = groups.rows(p).len();
        let g = Gemm::new(rows, 3 * hidden, hidden);
        // gh = h_prev W_hh^T + b_hh: `r` multiplies it apart from the input side.
        let mut gh = vec![0.0f32; rows * 3 * hidden];
        let add_bias = |_: usize, j0: usize, seg: &mut [f32]| {
            let b = &bh[j0..j0 + seg.len()];
            seg.iter_mut().zip(b).for_each(|(v, b)| *v += b);
        };
        for t in 0..steps {
            let (hp, h) = hs.split_at_mut(t + 1);
            rec.run(g, hp[t], &mut gh, Some(&add_bias), split);
            cells::gru_forward_rows(
                groups.rows_of(gx, 3 * hidden, t, p),
                Some(bi),
                &gh,
                hp[t],
                h[0],
                cache[t],
                hidden,
                split,
            );
        }
    });
}

/// The GRU backward through a whole sequence on locked slices; `dh_state` as
/// [`GruSequenceBackward::dh_state`].
fn gru_backward_seq(
    [dh, hs, cache, w]: [&[f32]; 4],
    [dgx, dgh]: [&mut [f32]; 2],
    dh_state: Option<&mut [f32]>,
    shape: SeqShape,
) {
    let (steps, batch, hidden) = (shape.steps, shape.batch, shape.hidden);
    let groups = Groups::new(batch);
    let split = groups.split();
    let rec = Recurrent::new(w, 3 * hidden, hidden, false, steps * batch);
    let work = groups.cut(dgx, 3 * hidden).into_iter();
    let work = work.zip(groups.cut(dgh, 3 * hidden));
    let work = work.zip(state_parts(&groups, dh_state, hidden));
    groups.run(work.collect(), |p, ((mut dgx, mut dgh), state)| {
        let rows = groups.rows(p).len();
        let g = Gemm::new(rows, hidden, 3 * hidden);
        let mut dh_t = vec![0.0f32; rows * hidden];
        // dh_{t+1} z_{t+1}, read only when there is a next step.
        let mut carry = vec![0.0f32; rows * hidden];
        for t in (0..steps).rev() {
            let d = groups.rows_of(dh, hidden, t, p);
            let (dgh_t, next) = dgh.split_at_mut(t + 1);
            if let Some(next) = next.first() {
                // dh_t = (next W_hh + dh) + carry.
                let carried = &carry;
                let add = |i: usize, j0: usize, seg: &mut [f32]| {
                    let at = i * hidden + j0..i * hidden + j0 + seg.len();
                    let (d, k) = (&d[at.clone()], &carried[at]);
                    seg.iter_mut()
                        .zip(d)
                        .zip(k)
                        .for_each(|((v, d), k)| *v = (*v + d) + k);
                };
                rec.run(g, next, &mut dh_t, Some(&add), split);
            } else {
                dh_t.copy_from_slice(d);
            }
            cells::gru_backward_rows(
                groups.rows_of(cache, 4 * hidden, t, p),
                groups.rows_of(hs, hidden, t, p),
                &dh_t,
                dgx[t],
                dgh_t[t],
                &mut carry,
                hidden,
                split,
            );
        }
        if let Some(s) = state {
            s.copy_from_slice(&carry);
        }
    });
}

impl GatedSequenceOps for CpuOps {
    fn lstm_sequence_forward(&self, a: LstmSequenceForward<'_>) -> Result<()> {
        if a.check(self.context)? == 0 {
            return Ok(());
        }
        let RecurrentWeights { w_hh, b_ih, b_hh } = a.weights;
        let (ins, outs) = ([w_hh, b_ih, b_hh], [a.gates, a.hs, a.cs]);
        lock(LstmSequenceForward::OP, self.context, ins, outs, |i, o| {
            lstm_forward_seq(i, o, a.shape)
        })
    }

    fn lstm_sequence_backward(&self, a: LstmSequenceBackward<'_>) -> Result<()> {
        if a.check(self.context)? == 0 {
            return Ok(());
        }
        let (op, ins) = (LstmSequenceBackward::OP, [a.dh, a.gates, a.cs, a.w_hh]);
        match a.dc_state {
            Some(d) => lock(op, self.context, ins, [a.dgates, d], |i, [o, d]| {
                lstm_backward_seq(i, o, Some(d), a.shape)
            }),
            None => lock(op, self.context, ins, [a.dgates], |i, [o]| {
                lstm_backward_seq(i, o, None, a.shape)
            }),
        }
    }

    fn gru_sequence_forward(&self, a: GruSequenceForward<'_>) -> Result<()> {
        if a.check(self.context)? == 0 {
            return Ok(());
        }
        let RecurrentWeights { w_hh, b_ih, b_hh } = a.weights;
        let (ins, outs) = ([a.gx, w_hh, b_ih, b_hh], [a.hs, a.cache]);
        lock(GruSequenceForward::OP, self.context, ins, outs, |i, o| {
            gru_forward_seq(i, o, a.shape)
        })
    }

    fn gru_sequence_backward(&self, a: GruSequenceBackward<'_>) -> Result<()> {
        if a.check(self.context)? == 0 {
            return Ok(());
        }
        let GruGateGrads { dgx, dgh } = a.grads;
        let (op, ins) = (GruSequenceBackward::OP, [a.dh, a.hs, a.cache, a.w_hh]);
        match a.dh_state {
            Some(d) => lock(op, self.context, ins, [dgx, dgh, d], |i, [x, h, d]| {
                gru_backward_seq(i, [x, h], Some(d), a.shape)
            }),
            None => lock(op, self.context, ins, [dgx, dgh], |i, o| {
                gru_backward_seq(i, o, None, a.shape)
            }),
        }
    }
}

/// The CPU runs the two ops of a pair one after the other: each already spreads its rows over
/// every core.
impl crate::ops::SequencePairOps for CpuOps {}
