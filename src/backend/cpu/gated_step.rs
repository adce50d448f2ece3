//! The fused LSTM/GRU time steps of the CPU backend (`ops::gated_seq` loops them over a
//! sequence): the recurrent product through the packed GEMM, then the row pass of `cells`,
//! all under one lock of the step's views. The gate math needs every gate of a unit, which the
//! GEMM's per-block epilogue (a column range of one row) does not see, so the row pass follows
//! the product instead; the GEMM epilogue still folds in the bias or `dh` while the block is in
//! cache.

use super::access::lock;
use super::cells;
use super::gemm;
use crate::error::Result;
use crate::ops::Gemm;
use crate::ops::gated_seq::{GruBackwardStep, GruForwardStep, LstmBackwardStep, LstmForwardStep};

pub(super) fn lstm_forward(ctx: u64, s: &LstmForwardStep<'_>) -> Result<()> {
    let (batch, hidden) = (s.batch, s.hidden);
    // gates = x W_ih^T + h_prev W_hh^T, then the biases and the cell in the row pass.
    let g = Gemm::new(batch, 4 * hidden, hidden).tb().scaled(1.0, 1.0);
    let ins = [s.h_prev, s.c_prev, s.w_hh, s.b_ih, s.b_hh];
    let outs = [s.gates, s.c, s.h];
    lock(
        "lstm_sequence_forward",
        ctx,
        ins,
        outs,
        |[hp, cp, w, bi, bh], [gates, c, h]| {
            gemm::run(&g, hp, w, gates, None);
            cells::lstm_forward_rows(gates, Some((bi, bh)), cp, c, h, hidden);
        },
    )
}

pub(super) fn lstm_backward(ctx: u64, s: &LstmBackwardStep<'_>) -> Result<()> {
    let (batch, hidden) = (s.batch, s.hidden);
    // Without a next step, `dh` fills the unused slot (inputs may share elements).
    let next = s.next.unwrap_or(s.dh);
    let has_next = s.next.is_some();
    let g = Gemm::new(batch, hidden, 4 * hidden);
    let ins = [s.dh, next, s.w_hh, s.gates, s.c_prev, s.c];
    lock(
        "lstm_sequence_backward",
        ctx,
        ins,
        [s.carry, s.dgates],
        |[dh, next, w, gates, cp, c], [carry, dgates]| {
            let mut dh_t = vec![0.0f32; batch * hidden];
            if has_next {
                // dh_t = next W_hh + dh, the sum formed right after each block's product.
                let add_dh = |i: usize, j0: usize, seg: &mut [f32]| {
                    let d = &dh[i * hidden + j0..i * hidden + j0 + seg.len()];
                    seg.iter_mut().zip(d).for_each(|(v, d)| *v += d);
                };
                gemm::run(&g, next, w, &mut dh_t, Some(&add_dh));
            } else {
                dh_t.copy_from_slice(dh);
                // Nothing reaches the last cell state from beyond the sequence.
                carry.fill(0.0);
            }
            cells::lstm_backward_rows(gates, cp, c, &dh_t, carry, dgates, hidden);
        },
    )
}

pub(super) fn gru_forward(ctx: u64, s: &GruForwardStep<'_>) -> Result<()> {
    let (batch, hidden) = (s.batch, s.hidden);
    let g = Gemm::new(batch, 3 * hidden, hidden).tb();
    let ins = [s.gx, s.h_prev, s.w_hh, s.b_ih, s.b_hh];
    lock(
        "gru_sequence_forward",
        ctx,
        ins,
        [s.h, s.cache],
        |[gx, hp, w, bi, bh], [h, cache]| {
            // gh = h_prev W_hh^T + b_hh: `r` multiplies it apart from the input side.
            let mut gh = vec![0.0f32; batch * 3 * hidden];
            let add_bias = |_: usize, j0: usize, seg: &mut [f32]| {
                let b = &bh[j0..j0 + seg.len()];
                seg.iter_mut().zip(b).for_each(|(v, b)| *v += b);
            };
            gemm::run(&g, hp, w, &mut gh, Some(&add_bias));
            cells::gru_forward_rows(gx, Some(bi), &gh, hp, h, cache, hidden);
        },
    )
}

pub(super) fn gru_backward(ctx: u64, s: &GruBackwardStep<'_>) -> Result<()> {
    let (batch, hidden) = (s.batch, s.hidden);
    let next = s.next.unwrap_or(s.dh);
    let has_next = s.next.is_some();
    let g = Gemm::new(batch, hidden, 3 * hidden);
    let ins = [s.dh, next, s.w_hh, s.cache, s.h_prev];
    lock(
        "gru_sequence_backward",
        ctx,
        ins,
        [s.carry, s.dgx, s.dgh],
        |[dh, next, w, cache, hp], [carry, dgx, dgh]| {
            let mut dh_t = vec![0.0f32; batch * hidden];
            if has_next {
                // dh_t = (next W_hh + dh) + carry, where carry = dh_{t+1} z_{t+1}.
                let carried: &[f32] = &*carry;
                let add = |i: usize, j0: usize, seg: &mut [f32]| {
                    let at = i * hidden + j0..i * hidden + j0 + seg.len();
                    let (d, k) = (&dh[at.clone()], &carried[at]);
                    seg.iter_mut()
                        .zip(d)
                        .zip(k)
                        .for_each(|((v, d), k)| *v = (*v + d) + k);
                };
                gemm::run(&g, next, w, &mut dh_t, Some(&add));
            } else {
                dh_t.copy_from_slice(dh);
            }
            cells::gru_backward_rows(cache, hp, &dh_t, dgx, dgh, carry, hidden);
        },
    )
}
