//! The whole-sequence LSTM and GRU ops recorded in a graph (as a training step records them)
//! leave exactly what running them op by op leaves, also when the initial state and the
//! incoming gradients change between replays: nothing in them may upload, download or
//! synchronize. One shape runs the persistent kernels on CUDA (one launch per op, which the
//! recorded launch count confirms), the other (W_hh slices beyond any block's shared memory) the
//! step loop. Targets that record no graphs skip.

use rnn::ops::GruGateGrads;
use rnn::ops::GruSequenceBackward;
use rnn::ops::GruSequenceForward;
use rnn::ops::LstmSequenceBackward;
use rnn::ops::LstmSequenceForward;
use rnn::ops::RecurrentWeights;
use rnn::ops::SeqShape;
use rnn::{Buffer, Context};

use super::{Values, contexts};
use crate::support::{Target, rel_err};

/// The buffers of one copy of an LSTM + GRU forward and backward over a sequence.
struct Seq {
    /// `x W_ih^T`, copied into `gates` before each forward (the forward overwrites `gates`).
    xg: Buffer,
    gates: Buffer,
    hs: Buffer,
    cs: Buffer,
    w4: Buffer,
    b4: Buffer,
    dh: Buffer,
    dgates: Buffer,
    gx: Buffer,
    ghs: Buffer,
    w3: Buffer,
    b3: Buffer,
    cache: Buffer,
    dgx: Buffer,
    dgh: Buffer,
}

fn up(ctx: &Context, v: &[f32]) -> Buffer {
    let b = ctx.alloc(v.len()).unwrap();
    ctx.ops().upload(b.view(), v).unwrap();
    b
}

fn setup(ctx: &Context, (steps, batch, hidden): (usize, usize, usize), seed: u64) -> Seq {
    let mut r = Values(seed);
    let n = batch * hidden;
    let bound = 1.0 / (hidden as f32).sqrt();
    let state = |r: &mut Values| {
        let mut s = r.vec(n, -1.0, 1.0);
        s.extend(vec![f32::NAN; steps * n]);
        s
    };
    Seq {
        xg: up(ctx, &r.vec(steps * 4 * n, -2.0, 2.0)),
        gates: up(ctx, &vec![f32::NAN; steps * 4 * n]),
        hs: up(ctx, &state(&mut r)),
        cs: up(ctx, &state(&mut r)),
        w4: up(ctx, &r.vec(4 * hidden * hidden, -bound, bound)),
        b4: up(ctx, &r.vec(4 * hidden, -1.0, 1.0)),
        dh: up(ctx, &r.vec(steps * n, -1.0, 1.0)),
        dgates: up(ctx, &vec![f32::NAN; steps * 4 * n]),
        gx: up(ctx, &r.vec(steps * 3 * n, -2.0, 2.0)),
        ghs: up(ctx, &state(&mut r)),
        w3: up(ctx, &r.vec(3 * hidden * hidden, -bound, bound)),
        b3: up(ctx, &r.vec(3 * hidden, -1.0, 1.0)),
        cache: up(ctx, &vec![f32::NAN; steps * 4 * n]),
        dgx: up(ctx, &vec![f32::NAN; steps * 3 * n]),
        dgh: up(ctx, &vec![f32::NAN; steps * 3 * n]),
    }
}

fn run(ctx: &Context, s: &Seq, (steps, batch, hidden): (usize, usize, usize)) -> rnn::Result<()> {
    let o = ctx.ops();
    o.copy(s.xg.view(), s.gates.view())?;
    o.lstm_sequence_forward(LstmSequenceForward::new(
        s.gates.view(),
        s.hs.view(),
        s.cs.view(),
        RecurrentWeights::new(s.w4.view(), s.b4.view(), s.b4.view()),
        SeqShape::new(steps, batch, hidden),
    ))?;
    o.lstm_sequence_backward(LstmSequenceBackward::new(
        s.dh.view(),
        s.gates.view(),
        s.cs.view(),
        s.w4.view(),
        s.dgates.view(),
        None,
        SeqShape::new(steps, batch, hidden),
    ))?;
    o.gru_sequence_forward(GruSequenceForward::new(
        s.gx.view(),
        s.ghs.view(),
        RecurrentWeights::new(s.w3.view(), s.b3.view(), s.b3.view()),
        s.cache.view(),
        SeqShape::new(steps, batch, hidden),
    ))?;
    o.gru_sequence_backward(GruSequenceBackward::new(
        s.dh.view(),
        s.ghs.view(),
        s.cache.view(),
        s.w3.view(),
        GruGateGrads::new(s.dgx.view(), s.dgh.view()),
        None,
        SeqShape::new(steps, batch, hidden),
    ))
}

fn read(ctx: &Context, b: &Buffer) -> Vec<f32> {
    let mut v = vec![0.0; b.len()];
    ctx.ops().download(b.view(), &mut v).unwrap();
    v
}

pub fn gated_sequence_graph(t: Target) {
    for ctx in contexts(t, "gpu_gated_sequence_graph") {
        let ops = ctx.ops();
        for shape in [(6, 19, 40), (2, 3, 1040)] {
            let (steps, batch, hidden) = shape;
            let (eager, recorded) = (setup(&ctx, shape, 7), setup(&ctx, shape, 7));
            // A first op-by-op run of the recorded copy too, as a training loop's first step:
            // it compiles the kernels, allocates the barrier and fills the pool.
            for s in [&eager, &recorded] {
                run(&ctx, s, shape).unwrap();
            }
            if !ctx.capture_begin().unwrap() {
                return;
            }
            let recording = run(&ctx, &recorded, shape);
            let graph = ctx.capture_end();
            recording.unwrap();
            let graph = graph.unwrap();
            // One launch per op where the persistent kernels run (CUDA, the small shape: a
            // handful of blocks fits any device); where no W_hh slice fits a block's shared
            // memory, the per-step GEMM path (hidden >= 384) launches a GEMM and a cell kernel
            // (and more) per op and step.
            if hidden > 1000 {
                assert!(
                    graph.kernels() >= 8 * steps,
                    "{}: {shape:?} {graph:?}",
                    ctx.id()
                );
            } else if t == Target::Cuda && algorithm_not_forced() {
                assert_eq!(graph.kernels(), 4, "{}: {shape:?} {graph:?}", ctx.id());
            }
            let n = batch * hidden;
            let mut r = Values(11);
            for replay in 0..3 {
                if replay == 1 {
                    // New initial states and incoming gradients, in place: replays must see them.
                    let (h0, c0, g0) = (
                        r.vec(n, -1.0, 1.0),
                        r.vec(n, -1.0, 1.0),
                        r.vec(n, -1.0, 1.0),
                    );
                    let dh = r.vec(steps * n, -1.0, 1.0);
                    for s in [&eager, &recorded] {
                        ops.upload(s.hs.slice(0, n).unwrap(), &h0).unwrap();
                        ops.upload(s.cs.slice(0, n).unwrap(), &c0).unwrap();
                        ops.upload(s.ghs.slice(0, n).unwrap(), &g0).unwrap();
                        ops.upload(s.dh.view(), &dh).unwrap();
                    }
                }
                run(&ctx, &eager, shape).unwrap();
                ctx.graph_launch(&graph).unwrap();
            }
            for (what, a, b) in [
                ("lstm hs", &recorded.hs, &eager.hs),
                ("lstm cs", &recorded.cs, &eager.cs),
                ("lstm gates", &recorded.gates, &eager.gates),
                ("lstm dgates", &recorded.dgates, &eager.dgates),
                ("gru hs", &recorded.ghs, &eager.ghs),
                ("gru cache", &recorded.cache, &eager.cache),
                ("gru dgx", &recorded.dgx, &eager.dgx),
                ("gru dgh", &recorded.dgh, &eager.dgh),
            ] {
                let (got, want) = (read(&ctx, a), read(&ctx, b));
                assert!(
                    got.iter().all(|v| v.is_finite()),
                    "{}: {what} {shape:?} not all written",
                    ctx.id()
                );
                let err = rel_err(&got, &want);
                assert!(
                    err <= 1e-6,
                    "{}: {what} {shape:?} after replays: rel err {err:e}",
                    ctx.id()
                );
            }
        }
    }
}

/// Whether the recurrent algorithm is the automatic choice: a forced one
/// (`RNN_RECURRENT_ALGO`, as the sanitizer run over the L1 kernels sets it) launches other
/// kernels per op (the L1 variant packs W_hh first), so the count above does not apply.
fn algorithm_not_forced() -> bool {
    std::env::var("RNN_RECURRENT_ALGO").map_or(true, |v| {
        v.trim().is_empty() || v.trim().eq_ignore_ascii_case("auto")
    })
}
