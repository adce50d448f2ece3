//! The whole-sequence LSTM and GRU ops on every GPU target against the CPU backend: odd and
//! tile-sized shapes (batch not a multiple of the 8- or 16-row tiles, hidden not a multiple of
//! the 16- or 32-unit slices), 1 to 12 steps, a random initial state, outputs poisoned, views
//! aligned and not. `gpu_gated_sequence` runs the block-local kernels where W_hh fits a block
//! (every device, the smaller hidden sizes), else on CUDA the persistent cooperative kernels, on
//! OpenCL and HIP the fused step kernels; `gpu_gated_sequence_block_local` asks for the
//! block-local kernels up to their largest hidden size, and for the other paths at those sizes. `gpu_gated_sequence_fallback` takes hidden sizes whose
//! W slices exceed the shared memory a block can have (for the LSTM backward only, or for all
//! four kernels), so CUDA runs the step kernels there too. Each backward also runs with the
//! state gradient (`dc_state`, `dh_state`) on every path.

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use rnn::ops::GruGateGrads;
use rnn::ops::GruSequenceBackward;
use rnn::ops::GruSequenceForward;
use rnn::ops::LstmSequenceBackward;
use rnn::ops::LstmSequenceForward;
use rnn::ops::RecurrentWeights;
use rnn::ops::SeqShape;
use rnn::{Context, DType};

use super::{
    BlockLocalHidden, Values, block_local_sequences, compare_at, cpu_outputs, gemm_step_sequences,
    low_product_sequences, nan, prop,
};
use crate::support::{self, Target};

/// The tolerance of a sequence op against the CPU backend's f32 products: f32 (any order of
/// the sums), or operands rounded to bf16 (8 significant bits) or f16 (11) on the GEMM path,
/// whose error grows with the steps it passes through.
pub(super) fn product_tolerance(shape: SeqShape) -> f64 {
    match shape.product_type {
        Some(DType::Bf16) => 3e-2,
        Some(DType::F16) => 4e-3,
        _ => 1e-4,
    }
}

/// The initial block of a `(steps + 1)`-block state buffer, random, then poisoned blocks.
pub(super) fn states(r: &mut Values, steps: usize, n: usize) -> Vec<f32> {
    let mut s = r.vec(n, -1.0, 1.0);
    s.extend(nan(steps * n));
    s
}

/// Forward then backward of one random LSTM sequence on `ctx` against the CPU backend.
fn check_lstm(
    ctx: &Context,
    shape: SeqShape,
    pad: usize,
    r: &mut Values,
) -> Result<(), TestCaseError> {
    let SeqShape {
        steps,
        batch,
        hidden,
        ..
    } = shape;
    let n = batch * hidden;
    let tol = product_tolerance(shape);
    let w = r.recurrent_w(4, hidden);
    let fwd = [
        r.vec(steps * 4 * n, -2.0, 2.0),
        states(r, steps, n),
        states(r, steps, n),
        w.clone(),
        r.vec(4 * hidden, -1.0, 1.0),
        r.vec(4 * hidden, -1.0, 1.0),
    ];
    let size = format!(
        "{steps}x{batch}x{hidden} {:?} pad {pad}",
        shape.product_type
    );
    let f = |o: &dyn rnn::Ops, v: &[rnn::View<'_>]| {
        o.lstm_sequence_forward(LstmSequenceForward::new(
            v[0],
            v[1],
            v[2],
            RecurrentWeights::new(v[3], v[4], v[5]),
            shape,
        ))
    };
    let what = format!("lstm_sequence_forward {size}");
    compare_at(ctx, &what, &fwd, pad, &[0, 1, 2], tol, &f)?;
    // The gates and cell states as the CPU forward leaves them, so both sides differentiate
    // the same point.
    let done = cpu_outputs(&fwd, pad, &f)?;
    let bwd = [
        r.vec(steps * n, -1.0, 1.0),
        done[0].clone(),
        done[2].clone(),
        w,
        nan(steps * 4 * n),
    ];
    // `dc_state` is the sixth view where there is one.
    let b = |o: &dyn rnn::Ops, v: &[rnn::View<'_>]| {
        o.lstm_sequence_backward(LstmSequenceBackward::new(
            v[0],
            v[1],
            v[2],
            v[3],
            v[4],
            v.get(5).copied(),
            shape,
        ))
    };
    let what = format!("lstm_sequence_backward {size}");
    compare_at(ctx, &what, &bwd, pad, &[4], tol, &b)?;
    // With a gradient reaching c_n from outside (read at the last step), written back as the
    // one for c_0.
    let mut with_state = bwd.to_vec();
    with_state.push(r.vec(n, -1.0, 1.0));
    let what = format!("lstm_sequence_backward with dc_state {size}");
    compare_at(ctx, &what, &with_state, pad, &[4, 5], tol, &b)
}

/// Forward then backward of one random GRU sequence on `ctx` against the CPU backend.
fn check_gru(
    ctx: &Context,
    shape: SeqShape,
    pad: usize,
    r: &mut Values,
) -> Result<(), TestCaseError> {
    let SeqShape {
        steps,
        batch,
        hidden,
        ..
    } = shape;
    let n = batch * hidden;
    let tol = product_tolerance(shape);
    let w = r.recurrent_w(3, hidden);
    let fwd = [
        r.vec(steps * 3 * n, -2.0, 2.0),
        states(r, steps, n),
        w.clone(),
        r.vec(3 * hidden, -1.0, 1.0),
        r.vec(3 * hidden, -1.0, 1.0),
        nan(steps * 4 * n),
    ];
    let size = format!(
        "{steps}x{batch}x{hidden} {:?} pad {pad}",
        shape.product_type
    );
    let f = |o: &dyn rnn::Ops, v: &[rnn::View<'_>]| {
        o.gru_sequence_forward(GruSequenceForward::new(
            v[0],
            v[1],
            RecurrentWeights::new(v[2], v[3], v[4]),
            v[5],
            shape,
        ))
    };
    let what = format!("gru_sequence_forward {size}");
    compare_at(ctx, &what, &fwd, pad, &[1, 5], tol, &f)?;
    let done = cpu_outputs(&fwd, pad, &f)?;
    let bwd = [
        r.vec(steps * n, -1.0, 1.0),
        done[1].clone(),
        done[5].clone(),
        w,
        nan(steps * 3 * n),
        nan(steps * 3 * n),
    ];
    // `dh_state` is the seventh view where there is one.
    let b = |o: &dyn rnn::Ops, v: &[rnn::View<'_>]| {
        o.gru_sequence_backward(GruSequenceBackward::new(
            v[0],
            v[1],
            v[2],
            v[3],
            GruGateGrads::new(v[4], v[5]),
            v.get(6).copied(),
            shape,
        ))
    };
    let what = format!("gru_sequence_backward {size}");
    compare_at(ctx, &what, &bwd, pad, &[4, 5], tol, &b)?;
    // The direct part of the gradient for h_0, written into a poisoned block.
    let mut with_state = bwd.to_vec();
    with_state.push(nan(n));
    let what = format!("gru_sequence_backward with dh_state {size}");
    compare_at(ctx, &what, &with_state, pad, &[4, 5, 6], tol, &b)
}

pub fn gated_sequence(t: Target) {
    let s = (
        1..=12usize,
        prop_oneof![Just(1usize), 2..=19usize, 60..=70usize],
        prop_oneof![Just(1usize), 2..=40usize, 250..=260usize],
        prop_oneof![Just(0usize), Just(3usize)],
        any::<u64>(),
    );
    prop(
        t,
        "gpu_gated_sequence",
        8,
        s,
        |ctx, (steps, batch, hidden, pad, seed)| {
            let mut r = Values(seed);
            check_lstm(ctx, SeqShape::new(steps, batch, hidden), pad, &mut r)?;
            check_gru(ctx, SeqShape::new(steps, batch, hidden), pad, &mut r)
        },
    );
}

pub fn gated_sequence_fallback(t: Target) {
    // The persistent LSTM backward needs 384 bytes of shared memory per hidden unit, so 700
    // units (268,800 bytes) exceed any current GPU's opt-in limit (227 KB on H100) while its
    // forward still fits; from 1040 units no gated kernel fits (the smallest, the GRU forward,
    // needs 224 bytes per unit). What does not fit runs per step: as a GEMM and a cell kernel
    // (the default at these sizes), or with the fused step kernels; both are checked.
    for gemm_steps in [true, false] {
        let test = format!("gpu_gated_sequence_fallback (per-step GEMMs: {gemm_steps})");
        let ctxs = support::contexts_with(t, &test, |o| o.recurrent_gemm_steps = Some(gemm_steps));
        let s = (
            1..=3usize,
            // One row tile of the step kernels, or two with a ragged second.
            prop_oneof![1..=3usize, 17..=20usize],
            prop_oneof![700..=710usize, 1040..=1050usize],
            any::<u64>(),
        );
        prop(ctxs, &test, 3, s, |ctx, (steps, batch, hidden, seed)| {
            let mut r = Values(seed);
            check_lstm(ctx, SeqShape::new(steps, batch, hidden), 0, &mut r)?;
            check_gru(ctx, SeqShape::new(steps, batch, hidden), 0, &mut r)
        });
    }
}

pub fn gated_sequence_gemm_steps(t: Target) {
    gemm_step_sequences(
        t,
        "gpu_gated_sequence_gemm_steps",
        |ctx, (steps, batch, hidden, pad, seed)| {
            let mut r = Values(seed);
            check_lstm(ctx, SeqShape::new(steps, batch, hidden), pad, &mut r)?;
            check_gru(ctx, SeqShape::new(steps, batch, hidden), pad, &mut r)
        },
    );
}

pub fn gated_sequence_block_local(t: Target) {
    // Hidden sizes up to the largest whose LSTM fits a block (119 units on an H100, 52 under
    // OpenCL on NVIDIA), and up to the register variant's GRU limit (LSTM 72, GRU 85).
    let hidden = BlockLocalHidden {
        small: 2..=63,
        near_limit: 110..=119,
        near_regs_limit: 64..=86,
    };
    let shapes = (6, hidden);
    let test = "gpu_gated_sequence_block_local";
    block_local_sequences(t, test, shapes, |ctx, (steps, batch, hidden, pad, seed)| {
        let mut r = Values(seed);
        check_lstm(ctx, SeqShape::new(steps, batch, hidden), pad, &mut r)?;
        check_gru(ctx, SeqShape::new(steps, batch, hidden), pad, &mut r)
    });
}

pub fn gated_sequence_low_products(t: Target) {
    let test = "gpu_gated_sequence_low_products";
    low_product_sequences(t, test, |ctx, shape, pad, r| {
        check_lstm(ctx, shape, pad, r)?;
        check_gru(ctx, shape, pad, r)
    });
}
