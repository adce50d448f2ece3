//! The LSTM and GRU cell ops on every GPU target against the CPU backend: batch and hidden
//! sizes from 1 to past a few hundred, outputs poisoned; the backward steps differentiate the
//! point the CPU forward produced.

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use rnn::Context;
use rnn::ops::GruCellBackward;
use rnn::ops::GruCellForward;
use rnn::ops::GruGateGrads;
use rnn::ops::LstmCellBackward;
use rnn::ops::LstmCellForward;
use rnn::ops::SeqShape;

use super::{Values, compare, nan, prop, run_on};
use crate::support::Target;

pub fn cells(t: Target) {
    let s = (
        prop_oneof![Just(1usize), 2..=33usize],
        prop_oneof![Just(1usize), 2..=70usize, 250..=300usize],
        any::<u64>(),
    );
    prop(t, "gpu_cells", 8, s, |ctx, (batch, hidden, seed)| {
        let mut r = Values(seed);
        let n = batch * hidden;
        let tol = 1e-5;
        let gates = r.vec(4 * n, -3.0, 3.0);
        let c_prev = r.vec(n, -1.0, 1.0);
        let fwd = [gates, c_prev.clone(), nan(n), nan(n)];
        let forward = |o: &dyn rnn::Ops, v: &[rnn::View<'_>]| {
            let shape = SeqShape::step(batch, hidden);
            o.lstm_cell_forward(LstmCellForward::new(v[0], v[1], v[2], v[3], shape))
        };
        compare(ctx, "lstm_cell_forward", &fwd, &[0, 2, 3], tol, &forward)?;
        let done = run_on(&Context::cpu(), &fwd, &forward)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        let bwd = [
            done[0].clone(),
            c_prev,
            done[2].clone(),
            r.vec(n, -1.0, 1.0),
            r.vec(n, -1.0, 1.0),
            nan(4 * n),
        ];
        compare(ctx, "lstm_cell_backward", &bwd, &[4, 5], 1e-4, &|o, v| {
            o.lstm_cell_backward(LstmCellBackward::new(
                v[0],
                v[1],
                v[2],
                v[3],
                v[4],
                v[5],
                SeqShape::step(batch, hidden),
            ))
        })?;
        let h_prev = r.vec(n, -1.0, 1.0);
        let fwd = [
            r.vec(3 * n, -2.0, 2.0),
            r.vec(3 * n, -2.0, 2.0),
            h_prev.clone(),
            nan(n),
            nan(4 * n),
        ];
        let forward = |o: &dyn rnn::Ops, v: &[rnn::View<'_>]| {
            let shape = SeqShape::step(batch, hidden);
            o.gru_cell_forward(GruCellForward::new(v[0], v[1], v[2], v[3], v[4], shape))
        };
        compare(ctx, "gru_cell_forward", &fwd, &[3, 4], tol, &forward)?;
        let done = run_on(&Context::cpu(), &fwd, &forward)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        let bwd = [
            done[4].clone(),
            h_prev,
            r.vec(n, -1.0, 1.0),
            nan(3 * n),
            nan(3 * n),
            nan(n),
        ];
        compare(ctx, "gru_cell_backward", &bwd, &[3, 4, 5], 1e-4, &|o, v| {
            o.gru_cell_backward(GruCellBackward::new(
                v[0],
                v[1],
                v[2],
                GruGateGrads::new(v[3], v[4]),
                v[5],
                SeqShape::step(batch, hidden),
            ))
        })
    });
}
