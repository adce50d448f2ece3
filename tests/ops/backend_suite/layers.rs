//! The layer ops (dropout, the random state's advance) on every GPU target against the CPU
//! backend. Dropout masks must agree bit for bit: the hash is integer arithmetic and the kept
//! values one multiplication by the same host-computed scale.

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use rnn::ops::IndexedRows;
use rnn::ops::LayerNormBackward;
use rnn::ops::LayerNormForward;
use rnn::ops::rng_state_values;
use rnn::ops::{DropoutMask, LayerNormGrads, LayerNormParams, MatShape};
use rnn::{Ops, View};

use super::{Values, compare, compare_padded, compare_sums, compare_sums_ids, nan, prop};
use crate::support::Target;

pub fn dropout(t: Target) {
    let s = (
        prop_oneof![1..=300usize, 1000..=70_000usize],
        prop_oneof![Just(0.0f32), Just(1.0f32), 0.05f32..0.95],
        prop_oneof![Just(0u32), Just(0xffffu32), any::<u32>()],
        any::<u32>(),
        any::<u64>(),
    );
    prop(
        t,
        "gpu_dropout",
        10,
        s,
        |ctx, (n, p, counter, stream, seed)| {
            let mut r = Values(seed);
            let state = rng_state_values(seed, counter).to_vec();
            let x = r.vec(n, -3.0, 3.0);
            let pads = r.pads(3);
            let what = format!("dropout p {p} counter {counter} stream {stream}");
            compare_padded(
                ctx,
                &what,
                &[x.clone(), nan(n), state.clone()],
                &pads,
                &[1, 2],
                0.0,
                &|o, v| o.dropout(v[0], v[1], DropoutMask::new(v[2], stream, p)),
            )?;
            compare_padded(
                ctx,
                &format!("{what} in place"),
                &[x, state.clone()],
                &pads,
                &[0, 1],
                0.0,
                &|o, v| o.dropout(v[0], v[0], DropoutMask::new(v[1], stream, p)),
            )?;
            compare_padded(
                ctx,
                &format!("rng_advance from {counter}"),
                &[state],
                &pads,
                &[0],
                0.0,
                &|o, v| o.rng_advance(v[0]),
            )
        },
    );
}

pub fn layer_norm(t: Target) {
    let s = (
        prop_oneof![
            Just(1usize),
            2..=40usize,
            // Enough rows for several backward blocks and their partials.
            300..=2000usize
        ],
        prop_oneof![
            Just(1usize),
            2..=100usize,
            250..=600usize,
            Just(33_000usize)
        ],
        any::<u64>(),
    );
    prop(t, "gpu_layer_norm", 10, s, |ctx, (rows, cols, seed)| {
        let (rows, cols) = if cols > 1000 {
            (rows.min(3), cols)
        } else {
            (rows, cols)
        };
        let mut r = Values(seed);
        let n = rows * cols;
        let x: Vec<f32> = r.vec(n, -2.0, 2.0).iter().map(|v| v + 3.0).collect();
        let (w, b) = (r.vec(cols, 0.5, 1.5), r.vec(cols, -1.0, 1.0));
        let what = format!("layer_norm {rows}x{cols}");
        let fwd = [x.clone(), w.clone(), b, nan(n), nan(2 * rows)];
        let forward = |o: &dyn Ops, v: &[View<'_>]| {
            let params = LayerNormParams::new(v[1], v[2]);
            o.layer_norm_forward(LayerNormForward::new(
                v[0],
                params,
                v[3],
                v[4],
                MatShape::new(rows, cols),
                1e-5,
            ))
        };
        compare(
            ctx,
            &format!("{what} forward"),
            &fwd,
            &[3, 4],
            1e-5,
            &forward,
        )?;
        let stats = super::run_on(&rnn::Context::cpu(), &fwd, &forward)
            .map_err(|e| TestCaseError::fail(e.to_string()))?[4]
            .clone();
        let dy = r.vec(n, -1.0, 1.0);
        // dweight and dbias are column sums over the rows (of dy xhat and dy): held to the sums
        // of the terms' magnitudes, as they cancel at random.
        let (mut dw_scale, mut db_scale) = (vec![0.0f32; cols], vec![0.0f32; cols]);
        for (i, g) in dy.iter().enumerate() {
            let (row, col) = (i / cols, i % cols);
            let xhat = (x[i] - stats[2 * row]) * stats[2 * row + 1];
            dw_scale[col] += (g * xhat).abs();
            db_scale[col] += g.abs();
        }
        let bwd = [dy, x, w, stats, nan(n), nan(cols), nan(cols)];
        // With one column dx is exactly 0 in exact arithmetic (x - mean = 0, and dy w - mean(dy w)
        // = 0); a GPU that contracts dy * w - m into a fused multiply-add leaves rounding noise
        // there, which a relative bound against zero cannot accept.
        let check: &[usize] = if cols == 1 { &[] } else { &[4] };
        compare_sums(
            ctx,
            &format!("{what} backward"),
            &bwd,
            check,
            &[(5, dw_scale), (6, db_scale)],
            1e-4,
            &|o, v| {
                o.layer_norm_backward(LayerNormBackward::new(
                    v[0],
                    v[1],
                    v[2],
                    v[3],
                    LayerNormGrads::new(v[4], v[5], v[6]),
                    MatShape::new(rows, cols),
                ))
            },
        )
    });
}

pub fn scatter_add_rows(t: Target) {
    let s = (
        prop_oneof![1..=40usize, 500..=3000usize],
        prop_oneof![Just(1usize), 2..=20usize, 200..=400usize],
        prop_oneof![Just(1usize), 2..=70usize, 100..=300usize],
        any::<u64>(),
    );
    prop(
        t,
        "gpu_scatter_add_rows",
        10,
        s,
        |ctx, (n, table, cols, seed)| {
            let mut r = Values(seed);
            // Few table rows against many source rows: ids repeat, and atomic adds collide.
            let idx = r.ints(n, table);
            let (src, dst) = (r.vec(n * cols, -1.0, 1.0), r.vec(table * cols, -1.0, 1.0));
            let mut scale: Vec<f32> = dst.iter().map(|v| v.abs()).collect();
            for (row, &id) in idx.iter().enumerate() {
                let (to, from) = (id as usize * cols, row * cols);
                for c in 0..cols {
                    scale[to + c] += src[from + c].abs();
                }
            }
            // The GPU adds in no fixed order: a bound on rounding against the terms' magnitudes
            // (thousands of colliding terms may nearly cancel), not bits.
            compare_sums_ids(
                ctx,
                &format!("scatter_add_rows {n} ids into {table}x{cols}"),
                (&[src, idx, dst], &[1]),
                (&[], &[(2, scale)]),
                1e-5,
                &|o, v| o.scatter_add_rows(IndexedRows::new(v[0], v[1], v[2], cols)),
            )
        },
    );
}
