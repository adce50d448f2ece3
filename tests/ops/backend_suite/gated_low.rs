//! `lstm_sequence_forward_low` and `gru_sequence_forward_low` on every GPU target, in bf16 and
//! f16, on contexts asked for the persistent kernels and on automatic ones, at hidden sizes past
//! the block-local kernels' (odd batch, hidden not a multiple of the unit slices, views at an
//! odd offset): where the op takes the T copy (it returns true: the persistent kernels), the
//! states match the CPU backend's and `low` holds exactly those states rounded to T, with the
//! elements around it untouched; where it does not (false), nothing ran: the states and `low`
//! still hold their poison. On CUDA, the context asked for the persistent kernels must take it.

use rnn::ops::{GruSequenceForward, LstmSequenceForward, RecurrentWeights, SeqShape};
use rnn::{Context, DType, Ops, RecurrentAlgorithm};

use super::mixed::{POISON16, bytes_of, download, download_bits, round_bits, values};
use crate::support::{self, Target, rel_err};

/// Leading elements before every view (the kernels index from the view's offset).
const PAD: usize = 3;

/// The inputs of one sequence: `gates`/`gx` (`steps * G * n`), the initial state, `w_hh`
/// (`G*H x H`), `b_ih` and `b_hh`.
struct Inputs {
    pre: Vec<f32>,
    h0: Vec<f32>,
    c0: Vec<f32>,
    w: Vec<f32>,
    b_ih: Vec<f32>,
    b_hh: Vec<f32>,
}

impl Inputs {
    fn new(gates: usize, (steps, batch, hidden): (usize, usize, usize), seed: u32) -> Self {
        let n = batch * hidden;
        let bound = 1.0 / (hidden as f32).sqrt();
        Inputs {
            pre: values(steps * gates * n, seed, -2.0, 2.0),
            h0: values(n, seed + 1, -1.0, 1.0),
            c0: values(n, seed + 2, -1.0, 1.0),
            w: values(gates * hidden * hidden, seed + 3, -bound, bound),
            b_ih: values(gates * hidden, seed + 4, -1.0, 1.0),
            b_hh: values(gates * hidden, seed + 5, -1.0, 1.0),
        }
    }
}

/// A buffer of `PAD` NaNs, then `data`, then a NaN guard, on `ops`.
fn padded(ops: &dyn Ops, data: &[f32]) -> rnn::Buffer {
    let mut all = vec![f32::NAN; PAD];
    all.extend_from_slice(data);
    all.push(f32::NAN);
    let b = ops.alloc(all.len()).unwrap();
    ops.upload(b.view(), &all).unwrap();
    b
}

/// The state buffer of a sequence: the initial state, then `steps` blocks of NaN.
fn states(ops: &dyn Ops, first: &[f32], steps: usize) -> rnn::Buffer {
    let mut s = first.to_vec();
    s.extend(vec![f32::NAN; steps * first.len()]);
    padded(ops, &s)
}

fn inner(b: &rnn::Buffer, len: usize) -> rnn::View<'_> {
    b.slice(PAD, len).unwrap()
}

/// Runs the LSTM (`gates` 4) or the GRU (3) forward with `low` (bf16 or f16, poisoned, `PAD`
/// elements of poison before it and one after) on `ops`: whether the op took the T copy, the
/// states it left (`(steps + 1) * n`, NaN where not written) and every bit of `low`'s buffer.
fn run(
    ops: &dyn Ops,
    gates: usize,
    x: &Inputs,
    shape: SeqShape,
    low: Option<DType>,
) -> (bool, Vec<f32>, Vec<u16>) {
    let SeqShape {
        steps,
        batch,
        hidden,
        ..
    } = shape;
    let n = batch * hidden;
    let pre = padded(ops, &x.pre);
    let hs = states(ops, &x.h0, steps);
    let cs = states(ops, &x.c0, steps);
    let (w, b_ih, b_hh) = (
        padded(ops, &x.w),
        padded(ops, &x.b_ih),
        padded(ops, &x.b_hh),
    );
    let cache = padded(ops, &vec![f32::NAN; steps * 4 * n]);
    let weights = RecurrentWeights::new(
        inner(&w, x.w.len()),
        inner(&b_ih, x.b_ih.len()),
        inner(&b_hh, x.b_hh.len()),
    );
    let low_buf = low.map(|t| {
        let b = ops.alloc_as(t, PAD + steps * n + 1).unwrap();
        ops.upload_bytes(b.view(), &bytes_of(&vec![POISON16; b.len()]))
            .unwrap();
        b
    });
    let (pre_v, hs_v) = (inner(&pre, x.pre.len()), inner(&hs, (steps + 1) * n));
    let low_v = low_buf.as_ref().map(|b| b.slice(PAD, steps * n).unwrap());
    let fused = if gates == 4 {
        let a = LstmSequenceForward::new(pre_v, hs_v, inner(&cs, (steps + 1) * n), weights, shape);
        match low_v {
            Some(l) => ops.lstm_sequence_forward_low(a, l).unwrap(),
            None => ops.lstm_sequence_forward(a).map(|()| false).unwrap(),
        }
    } else {
        let a = GruSequenceForward::new(pre_v, hs_v, weights, inner(&cache, steps * 4 * n), shape);
        match low_v {
            Some(l) => ops.gru_sequence_forward_low(a, l).unwrap(),
            None => ops.gru_sequence_forward(a).map(|()| false).unwrap(),
        }
    };
    let bits = low_buf.map_or(Vec::new(), |b| download_bits(ops, b.view()));
    (fused, download(ops, hs_v), bits)
}

/// One case on `ctx`; returns whether the op took the T copy.
fn check(ctx: &Context, gates: usize, dims: (usize, usize, usize), t: DType) -> bool {
    let (steps, batch, hidden) = dims;
    let shape = SeqShape::new(steps, batch, hidden);
    let x = Inputs::new(gates, dims, (steps * 131 + batch * 7 + hidden) as u32);
    let (_, expected, _) = run(Context::cpu().ops(), gates, &x, shape, None);
    let (fused, hs, bits) = run(ctx.ops(), gates, &x, shape, Some(t));
    let what = format!("{} gates {gates} {t} {steps}x{batch}x{hidden}", ctx.id());
    let n = batch * hidden;
    let (head, tail) = (&bits[..PAD], bits[PAD + steps * n]);
    assert!(head.iter().all(|&b| b == POISON16), "{what}: before low");
    assert_eq!(tail, POISON16, "{what}: after low");
    let low = &bits[PAD..PAD + steps * n];
    if !fused {
        assert!(
            hs[n..].iter().all(|v| v.is_nan()),
            "{what}: ran though false"
        );
        assert!(low.iter().all(|&b| b == POISON16), "{what}: low written");
        return false;
    }
    let err = rel_err(&hs[n..], &expected[n..]);
    assert!(err <= 1e-4, "{what}: states differ from the CPU's by {err}");
    for (i, (&b, &h)) in low.iter().zip(&hs[n..]).enumerate() {
        assert_eq!(
            b,
            round_bits(t, h),
            "{what}: low[{i}] is not the state {h} rounded"
        );
    }
    true
}

pub fn gated_sequence_low(t: Target) {
    let test = "gpu_gated_sequence_low";
    let forced = support::contexts_with(t, test, |o| {
        o.recurrent_algorithm = Some(RecurrentAlgorithm::Persistent);
    });
    let automatic = support::contexts(t, test);
    for (asked, ctxs) in [(true, forced), (false, automatic)] {
        for ctx in &ctxs {
            for dims in [(3, 9, 136), (2, 17, 250)] {
                for dtype in [DType::Bf16, DType::F16] {
                    for gates in [4, 3] {
                        let fused = check(ctx, gates, dims, dtype);
                        if asked && t == Target::Cuda {
                            assert!(fused, "{}: persistent asked, not taken", ctx.id());
                        }
                    }
                }
            }
        }
    }
}
