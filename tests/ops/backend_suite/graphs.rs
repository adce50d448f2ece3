//! Recorded graphs: a training-step-shaped sequence of ops (GEMM, fused bias + activation,
//! softmax cross-entropy with device-side totals, column sums, an Adam step that advances its
//! device state), recorded once and replayed, leaves exactly what running it op by op leaves,
//! also after the learning rate changes between replays. Targets that record no graphs (OpenCL,
//! the CPU) say so with `capture_begin() == false`, and `capture_end` is then an error. Run also
//! with `vendor_blas` off, where on CUDA sm_80+ both GEMMs split k (the forward in 2 ranges, the
//! weight gradient in 4) through the context's partial-sum scratch.

use rnn::ops::SoftmaxCrossEntropy;
use rnn::ops::TypedMemory;
use rnn::ops::optimizer_state;
use rnn::ops::{Activated, LossOutputs, MatShape, OptimBuffers};
use rnn::{Activation, AdamStep, Buffer, Context, Error, Gemm};

use super::contexts;
use crate::support::{self, Target, rel_err};

const ROWS: usize = 1100;
const IN: usize = 600;
const OUT: usize = 10;

/// The buffers of one copy of the step.
struct Step {
    x: Buffer,
    labels: Buffer,
    w: Buffer,
    b: Buffer,
    logits: Buffer,
    dlogits: Buffer,
    row_loss: Buffer,
    row_correct: Buffer,
    totals: Buffer,
    grads: Buffer,
    m: Buffer,
    v: Buffer,
    state: Buffer,
}

fn values(n: usize, seed: u32) -> Vec<f32> {
    (0..n)
        .map(|i| {
            let h = (i as u32).wrapping_mul(2_654_435_761).wrapping_add(seed) >> 8;
            (h % 2000) as f32 / 1000.0 - 1.0
        })
        .collect()
}

fn setup(ctx: &Context) -> Step {
    let up = |v: &[f32]| {
        let b = ctx.alloc(v.len()).unwrap();
        ctx.ops().upload(b.view(), v).unwrap();
        b
    };
    let labels: Vec<u32> = (0..ROWS).map(|i| ((i * 7) % OUT) as u32).collect();
    Step {
        x: up(&values(ROWS * IN, 1)),
        labels: {
            let b = ctx.ops().alloc_as(rnn::DType::U32, ROWS).unwrap();
            ctx.ops().upload_as(b.view(), &labels).unwrap();
            b
        },
        w: up(&values(OUT * IN, 2)),
        b: up(&values(OUT, 3)),
        logits: up(&vec![f32::NAN; ROWS * OUT]),
        dlogits: up(&vec![f32::NAN; ROWS * OUT]),
        row_loss: up(&vec![f32::NAN; ROWS]),
        row_correct: up(&vec![f32::NAN; ROWS]),
        totals: up(&[0.0, 0.0]),
        // Weight gradient then bias gradient, one flat buffer as the networks keep it.
        grads: up(&vec![f32::NAN; OUT * IN + OUT]),
        m: up(&vec![0.0; OUT * IN + OUT]),
        v: up(&vec![0.0; OUT * IN + OUT]),
        state: optimizer_state(ctx.ops(), 0.05).unwrap(),
    }
}

/// One step over the flat parameters `params = [w | b]`: forward, loss with totals, the weight
/// and bias gradients into the flat `grads`, and Adam.
fn run(ctx: &Context, s: &Step, params: &Buffer) -> rnn::Result<()> {
    let o = ctx.ops();
    let (w, b) = (params.slice(0, OUT * IN)?, params.slice(OUT * IN, OUT)?);
    o.gemm(
        Gemm::new(ROWS, OUT, IN).tb(),
        s.x.view(),
        w,
        s.logits.view(),
    )?;
    o.bias_act_forward(
        Activated::new(s.logits.view(), s.logits.view(), Activation::Identity),
        b,
        MatShape::new(ROWS, OUT),
    )?;
    o.softmax_cross_entropy(SoftmaxCrossEntropy::new(
        s.logits.view(),
        s.labels.view(),
        LossOutputs::new(s.dlogits.view(), s.row_loss.view(), Some(s.totals.view())),
        s.row_correct.view(),
        MatShape::new(ROWS, OUT),
        1.0 / ROWS as f32,
    ))?;
    let (gw, gb) = (s.grads.slice(0, OUT * IN)?, s.grads.slice(OUT * IN, OUT)?);
    o.gemm(
        Gemm::new(OUT, IN, ROWS).ta(),
        s.dlogits.view(),
        s.x.view(),
        gw,
    )?;
    o.sum_rows(s.dlogits.view(), gb, MatShape::new(ROWS, OUT), 0.0)?;
    let adam = AdamStep {
        beta1: 0.9,
        beta2: 0.999,
        eps: 1e-8,
        weight_decay: 0.01,
        decoupled: true,
    };
    o.adam_step(
        OptimBuffers::new(params.view(), s.grads.view(), s.state.view()),
        s.m.view(),
        s.v.view(),
        adam,
    )
}

fn params(ctx: &Context, s: &Step) -> Buffer {
    let p = ctx.alloc(OUT * IN + OUT).unwrap();
    ctx.ops()
        .copy(s.w.view(), p.slice(0, OUT * IN).unwrap())
        .unwrap();
    ctx.ops()
        .copy(s.b.view(), p.slice(OUT * IN, OUT).unwrap())
        .unwrap();
    p
}

fn read(ctx: &Context, b: &Buffer) -> Vec<f32> {
    let mut v = vec![0.0; b.len()];
    ctx.ops().download(b.view(), &mut v).unwrap();
    v
}

pub fn graphs(t: Target) {
    let own_gemm = support::contexts_with(t, "gpu_graphs", |o| o.vendor_blas = false);
    for ctx in contexts(t, "gpu_graphs").into_iter().chain(own_gemm) {
        let ops = ctx.ops();
        let (eager, recorded) = (setup(&ctx), setup(&ctx));
        let (pe, pr) = (params(&ctx, &eager), params(&ctx, &recorded));
        // A first op-by-op step on the recorded copy too: it compiles the kernels and fills
        // the pool, as the training loop's first step does.
        for (s, p) in [(&eager, &pe), (&recorded, &pr)] {
            run(&ctx, s, p).unwrap();
        }
        let records = ctx.capture_begin().unwrap();
        // Every runtime this crate supports has stream capture: CUDA, and HIP (ROCm >= 5.0, or the
        // tests/hip-shim runtime over CUDA).
        let expect = matches!(t, Target::Cuda | Target::HipOnCuda | Target::Hip);
        assert_eq!(records, expect, "{}: capture_begin", ctx.id());
        if !records {
            assert!(ctx.capture_end().is_err(), "{}: capture_end", ctx.id());
            continue;
        }
        // While recording, what cannot be recorded is refused (and the recording survives).
        let refused = ops.upload(recorded.totals.view(), &[1.0, 2.0]);
        assert!(
            matches!(refused, Err(Error::Unsupported { .. })),
            "{refused:?}"
        );
        assert!(matches!(ops.synchronize(), Err(Error::Unsupported { .. })));
        let recording = run(&ctx, &recorded, &pr);
        let graph = ctx.capture_end();
        recording.unwrap();
        let graph = graph.unwrap();
        assert!(graph.kernels() >= 6, "{graph:?}");
        for replay in 0..4 {
            if replay == 2 {
                // A new learning rate, in device memory: the replay must see it.
                for s in [&eager, &recorded] {
                    ops.upload(s.state.slice(0, 1).unwrap(), &[0.01]).unwrap();
                }
            }
            run(&ctx, &eager, &pe).unwrap();
            ctx.graph_launch(&graph).unwrap();
        }
        for (what, a, b) in [
            ("params", &pr, &pe),
            ("totals", &recorded.totals, &eager.totals),
            ("adam m", &recorded.m, &eager.m),
            ("adam v", &recorded.v, &eager.v),
            ("optimizer state", &recorded.state, &eager.state),
            ("row losses", &recorded.row_loss, &eager.row_loss),
        ] {
            let (got, want) = (read(&ctx, a), read(&ctx, b));
            let err = rel_err(&got, &want);
            assert!(
                err <= 1e-6,
                "{}: {what} after replays: rel err {err:e}",
                ctx.id()
            );
        }
        // Five steps taken (one op by op, four replays), the last at the new rate.
        let state = read(&ctx, &recorded.state);
        assert_eq!(state[..2], [0.01, 5.0], "{}", ctx.id());
        // A graph belongs to its context.
        let other = Context::cpu();
        assert!(other.graph_launch(&graph).is_err());
    }
}

/// A recording survives another thread dropping a context of the same device meanwhile: the
/// drop frees device memory and unloads the op set, calls that synchronize the whole device
/// and would invalidate the recording, so they wait until it ends.
pub fn graphs_across_threads(t: Target) {
    let test = "gpu_graphs_across_threads";
    if !matches!(t, Target::Cuda | Target::HipOnCuda | Target::Hip) {
        // Nothing records there (`graphs` checks that capture_begin says so).
        return;
    }
    for ctx in contexts(t, test) {
        let ops = ctx.ops();
        let s = setup(&ctx);
        let p = params(&ctx, &s);
        run(&ctx, &s, &p).unwrap();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<()>();
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let (dropping_tx, dropping_rx) = std::sync::mpsc::channel::<()>();
        // The other thread's contexts are created and used (op set, cuBLAS, pool) before the
        // recording begins, and dropped while it runs.
        let other = std::thread::spawn(move || {
            let others = contexts(t, test);
            for c in &others {
                let s = setup(c);
                let p = params(c, &s);
                run(c, &s, &p).unwrap();
                c.ops().synchronize().unwrap();
            }
            ready_tx.send(()).unwrap();
            go_rx.recv().unwrap();
            dropping_tx.send(()).unwrap();
            drop(others);
        });
        ready_rx.recv().unwrap();
        assert!(ctx.capture_begin().unwrap(), "{}: capture_begin", ctx.id());
        go_tx.send(()).unwrap();
        dropping_rx.recv().unwrap();
        // Long enough that an ungated drop would run inside the recording.
        std::thread::sleep(std::time::Duration::from_millis(200));
        let recording = run(&ctx, &s, &p);
        let graph = ctx.capture_end();
        recording.unwrap();
        let graph = graph.unwrap_or_else(|e| panic!("{}: capture_end: {e}", ctx.id()));
        ctx.graph_launch(&graph).unwrap();
        ops.synchronize().unwrap();
        other.join().unwrap();
    }
}
