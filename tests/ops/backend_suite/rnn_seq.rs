//! The whole-sequence Elman ops on every GPU target against the CPU backend: odd and tile-sized
//! shapes, 1 to 20 steps, both activations, a random initial state, outputs poisoned, views
//! aligned and not. This runs the block-local kernels where W_hh fits a block (every device, the
//! smaller hidden sizes), else on CUDA the persistent cooperative kernels, on OpenCL and HIP the
//! step-kernel loop; `gpu_rnn_sequence_block_local` asks for the block-local kernels up to their
//! largest hidden size, and for the other paths at those sizes. `gpu_rnn_sequence_cooperative`
//! takes hidden sizes past 512 (33 or more 16-unit slices per block row, W slices in shared
//! memory), then batches of about 1000 rows (more row tiles than block rows);
//! `gpu_rnn_sequence_fallback` a hidden size whose W slice exceeds any shared memory a block can
//! have, so CUDA loops the step kernels too.

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use rnn::ops::RecurrentWeights;
use rnn::ops::RnnSequenceBackward;
use rnn::ops::RnnSequenceForward;
use rnn::ops::SeqShape;
use rnn::{Activation, Context};

use super::gated_seq::product_tolerance;
use super::{
    BlockLocalHidden, Values, block_local_sequences, compare_at, cpu_outputs, gemm_step_sequences,
    low_product_sequences, nan, prop,
};
use crate::support::{self, Target};

/// Forward then backward of one random sequence on `ctx` against the CPU backend.
fn check_sequence(
    ctx: &Context,
    shape: SeqShape,
    pad: usize,
    act: Activation,
    r: &mut Values,
) -> Result<(), TestCaseError> {
    let SeqShape {
        steps,
        batch,
        hidden,
        ..
    } = shape;
    let n = batch * hidden;
    let w = r.recurrent_w(1, hidden);
    let mut hs = r.vec(n, -1.0, 1.0);
    hs.extend(nan(steps * n));
    let fwd = [
        r.vec(steps * n, -2.0, 2.0),
        hs,
        w.clone(),
        r.vec(hidden, -1.0, 1.0),
        r.vec(hidden, -1.0, 1.0),
    ];
    let tol = product_tolerance(shape);
    let size = format!(
        "{steps}x{batch}x{hidden} {:?} pad {pad}",
        shape.product_type
    );
    let what = format!("rnn_sequence_forward {act:?} {size}");
    let forward = |o: &dyn rnn::Ops, v: &[rnn::View<'_>]| {
        let weights = RecurrentWeights::new(v[2], v[3], v[4]);
        o.rnn_sequence_forward(RnnSequenceForward::new(v[0], v[1], weights, act, shape))
    };
    compare_at(ctx, &what, &fwd, pad, &[1], tol, &forward)?;
    // The states as the CPU forward leaves them, so both sides differentiate the same point.
    let hs = cpu_outputs(&fwd, pad, &forward)?.remove(1);
    let bwd = [r.vec(steps * n, -1.0, 1.0), hs, w, nan(steps * n)];
    let what = format!("rnn_sequence_backward {act:?} {size}");
    compare_at(ctx, &what, &bwd, pad, &[3], tol, &|o, v| {
        o.rnn_sequence_backward(RnnSequenceBackward::new(v[0], v[1], v[2], v[3], act, shape))
    })
}

pub fn rnn_sequence(t: Target) {
    let s = (
        1..=20usize,
        prop_oneof![Just(1usize), 2..=19usize, 60..=70usize],
        prop_oneof![Just(1usize), 2..=40usize, 250..=260usize],
        prop_oneof![Just(0usize), Just(3usize)],
        any::<u64>(),
    );
    prop(
        t,
        "gpu_rnn_sequence",
        10,
        s,
        |ctx, (steps, batch, hidden, pad, seed)| {
            let mut r = Values(seed);
            for act in [Activation::Tanh, Activation::Relu] {
                check_sequence(ctx, SeqShape::new(steps, batch, hidden), pad, act, &mut r)?;
            }
            Ok(())
        },
    );
}

/// Tanh sequences of `(steps, batch, hidden, seed)` drawn from `s`, views padded by `pad`.
fn tanh_sequences<S>(t: Target, test: &str, cases: u32, pad: usize, s: S)
where
    S: Strategy<Value = (usize, usize, usize, u64)>,
{
    prop(t, test, cases, s, |ctx, (steps, batch, hidden, seed)| {
        let mut r = Values(seed);
        check_sequence(
            ctx,
            SeqShape::new(steps, batch, hidden),
            pad,
            Activation::Tanh,
            &mut r,
        )
    });
}

pub fn rnn_sequence_cooperative(t: Target) {
    let s = (
        1..=6usize,
        prop_oneof![Just(1usize), 9..=19usize],
        513..=530usize,
        any::<u64>(),
    );
    tanh_sequences(t, "gpu_rnn_sequence_cooperative", 3, 3, s);
    // More row tiles than the grid has block rows (blocks stride over them); the two cases
    // share a context, so the second reads exchange words the first left behind. The persistent
    // kernels are asked for: from 2^18 product outputs the GEMM path would take the sequence.
    let test = "gpu_rnn_sequence_cooperative (strided)";
    let ctxs = support::contexts_with(t, test, |o| o.recurrent_gemm_steps = Some(false));
    let s = (2..=4usize, 900..=1100usize, 200..=256usize, any::<u64>());
    prop(ctxs, test, 2, s, |ctx, (steps, batch, hidden, seed)| {
        let mut r = Values(seed);
        check_sequence(
            ctx,
            SeqShape::new(steps, batch, hidden),
            0,
            Activation::Tanh,
            &mut r,
        )
    });
}

pub fn rnn_sequence_fallback(t: Target) {
    // 32 floats of shared memory per hidden unit (W slice and two staging areas): 2600 units
    // need 332,800 bytes, more than any current GPU lets one block opt in to (227 KB on H100).
    // Such a sequence runs per step, as a GEMM and an activation (the default at this size) or
    // with the fused step kernels; both are checked.
    for gemm_steps in [true, false] {
        let test = format!("gpu_rnn_sequence_fallback (per-step GEMMs: {gemm_steps})");
        let ctxs = support::contexts_with(t, &test, |o| o.recurrent_gemm_steps = Some(gemm_steps));
        let s = (1..=3usize, 1..=3usize, 2600..=2610usize, any::<u64>());
        prop(ctxs, &test, 2, s, |ctx, (steps, batch, hidden, seed)| {
            let mut r = Values(seed);
            check_sequence(
                ctx,
                SeqShape::new(steps, batch, hidden),
                0,
                Activation::Tanh,
                &mut r,
            )
        });
    }
}

pub fn rnn_sequence_gemm_steps(t: Target) {
    gemm_step_sequences(
        t,
        "gpu_rnn_sequence_gemm_steps",
        |ctx, (steps, batch, hidden, pad, seed)| {
            let mut r = Values(seed);
            for act in [Activation::Tanh, Activation::Relu] {
                check_sequence(ctx, SeqShape::new(steps, batch, hidden), pad, act, &mut r)?;
            }
            Ok(())
        },
    );
}

pub fn rnn_sequence_block_local(t: Target) {
    // Hidden sizes up to the largest whose W_hh fits a block (240 units on an H100, 108 under
    // OpenCL on NVIDIA), and up to the register variant's limit (146).
    let hidden = BlockLocalHidden {
        small: 2..=109,
        near_limit: 230..=240,
        near_regs_limit: 120..=147,
    };
    let shapes = (8, hidden);
    let test = "gpu_rnn_sequence_block_local";
    block_local_sequences(t, test, shapes, |ctx, (steps, batch, hidden, pad, seed)| {
        let mut r = Values(seed);
        for act in [Activation::Tanh, Activation::Relu] {
            check_sequence(ctx, SeqShape::new(steps, batch, hidden), pad, act, &mut r)?;
        }
        Ok(())
    });
}

pub fn rnn_sequence_low_products(t: Target) {
    let test = "gpu_rnn_sequence_low_products";
    low_product_sequences(t, test, |ctx, shape, pad, r| {
        for act in [Activation::Tanh, Activation::Relu] {
            check_sequence(ctx, shape, pad, act, r)?;
        }
        Ok(())
    });
}
