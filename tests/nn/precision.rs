//! Mixed precision (issue 28): `TrainingConfig::precision` and `Network::set_precision` in
//! bf16 and f16 against f32, on every backend, with the CPU backend's run in the same
//! precision as the reference.
//!
//! Tolerances come from the low type's unit roundoff `u` (bf16 2^-8, f16 2^-11): every
//! activation of a dense layer is rounded once to the low type (relative error `u`), and the
//! weights the forward reads are the parameters rounded once (`u`). Over the two or three
//! layers of these models the errors add up to a few `u` per value; the bounds below allow
//! `16 u` relative to the largest value compared (loss, gradient, output), which holds with
//! room on every backend and still fails when a layer computes in the wrong type or skips a
//! cast (those give errors of order 1).

use rnn::nn::{CharCorpus, Dataset, Loss, Network, Optimizer, Precision, RnnOutput};
use rnn::nn::{Progress, RecurrentCell, RecurrentOptions, TrainingConfig};
use rnn::{Activation, Context, DeviceId};

use crate::fixtures::{blobs, classifier, config_for};
use crate::loop_checks::temp_dir;
use crate::support::{Target, contexts};

static TEXT: &str = include_str!("../../examples/data/asyoulik.txt");

const LOW: [Precision; 2] = [Precision::Bf16, Precision::F16];

/// The unit roundoff of `p`'s storage type.
fn unit_roundoff(p: Precision) -> f32 {
    match p {
        Precision::Bf16 => 2f32.powi(-8),
        Precision::F16 => 2f32.powi(-11),
        _ => f32::EPSILON,
    }
}

fn max_abs(v: &[f32]) -> f32 {
    v.iter().fold(0.0f32, |m, x| m.max(x.abs()))
}

fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .fold(0.0f32, |m, (x, y)| m.max((x - y).abs()))
}

/// Training on `ctx` alone, quietly, with plain SGD at `lr`, data in order.
fn sgd_config(ctx: &Context, epochs: usize, batch: usize, lr: f32) -> TrainingConfig {
    TrainingConfig {
        optimizer: Optimizer::sgd(),
        shuffle: false,
        progress: Progress::Off,
        ..config_for(ctx, epochs, batch, lr)
    }
}

/// (a) One SGD step over the whole batch in bf16 and f16: the loss, the gradients and the
/// updated parameters stay within `16 u` (relative to the largest) of the f32 step's.
fn one_step_matches_f32(target: Target, test: &str) {
    let data = blobs(64, 11);
    let lr = 0.1;
    for ctx in contexts(target, test) {
        let build = || classifier(&ctx, 7, [8, 16, 3], Activation::Tanh);
        let mut reference = build();
        let g32 = {
            reference.compute_gradients(&data).unwrap();
            reference.gradients().unwrap()
        };
        let h32 = reference
            .train(&data, &sgd_config(&ctx, 1, 64, lr))
            .unwrap();
        let p32 = reference.parameters().unwrap();
        for p in LOW {
            let tol = 16.0 * unit_roundoff(p);
            let mut net = build();
            net.set_precision(p).unwrap();
            let loss = net.compute_gradients(&data).unwrap();
            let g = net.gradients().unwrap();
            let what = format!("{} {p}", ctx.id());
            // Rounded activations change the gradients (this is not the f32 pass)...
            assert_ne!(g, g32, "{what}: the gradients are the f32 ones");
            // ...by a few roundings at most.
            assert!(
                max_diff(&g, &g32) <= tol * max_abs(&g32),
                "{what}: gradients differ by {} (largest {})",
                max_diff(&g, &g32),
                max_abs(&g32)
            );
            let config = TrainingConfig {
                precision: p,
                ..sgd_config(&ctx, 1, 64, lr)
            };
            let h = net.train(&data, &config).unwrap();
            assert_eq!(net.precision(), p, "{what}: training leaves its precision");
            let (l, l32) = (h.epochs[0].loss, h32.epochs[0].loss);
            assert!(
                (l - l32).abs() <= tol * l32,
                "{what}: loss {l} vs f32 {l32}"
            );
            assert!(
                (loss - l32).abs() <= tol * l32,
                "{what}: loss {loss} vs {l32}"
            );
            // The step moves each parameter by lr * gradient: its error is lr times the
            // gradient's, plus the rounding of nothing else (the master weights are f32).
            let params = net.parameters().unwrap();
            let bound = lr * tol * max_abs(&g32) + 1e-6;
            assert!(
                max_diff(&params, &p32) <= bound,
                "{what}: parameters differ by {} (bound {bound})",
                max_diff(&params, &p32)
            );
            let scaled = p == Precision::F16;
            assert_eq!(h.epochs[0].loss_scale.is_some(), scaled, "{what}");
            if scaled {
                assert_eq!(h.epochs[0].skipped_steps, Some(0), "{what}");
                assert_eq!(h.epochs[0].loss_scale, Some(65536.0), "{what}");
            }
        }
        assert_eq!(h32.epochs[0].loss_scale, None);
        assert_eq!(h32.epochs[0].skipped_steps, None);
    }
}

target_tests!(one_step_matches_f32(named):
    cpu_one_step_matches_f32 => Cpu,
    opencl_one_step_matches_f32 => OpenCl,
    cuda_one_step_matches_f32 => Cuda,
    hip_one_step_matches_f32 => Hip,
    hip_on_cuda_one_step_matches_f32 => HipOnCuda,
);

/// Accuracy on held-out samples after training `precision` on `ctx`, and the epoch losses.
fn train_blobs(ctx: &Context, precision: Precision, graphs: bool) -> (f32, Vec<f32>) {
    let data = blobs(720, 3);
    let (train, test) = data.train_test_split(240, 5).unwrap();
    let mut net = classifier(ctx, 9, [8, 32, 3], Activation::Relu);
    let config = TrainingConfig {
        precision,
        graphs,
        progress: Progress::Off,
        ..config_for(ctx, 8, 32, 1e-2)
    };
    let h = net.train(&train, &config).unwrap();
    let acc = net.evaluate(&test).unwrap().accuracy.unwrap();
    (acc, h.losses())
}

/// (b), (d) A small MLP trains in bf16 and f16 (the CPU backend included) to a held-out
/// accuracy within 3 points of f32's; every GPU follows the CPU backend's losses in the same
/// precision within 2%.
fn mlp_trains_close_to_f32(target: Target, test: &str) {
    let cpu = Context::cpu();
    let (acc32, _) = train_blobs(&cpu, Precision::F32, true);
    assert!(acc32 > 0.8, "f32 reference accuracy {acc32}");
    let reference: Vec<_> = LOW.iter().map(|&p| train_blobs(&cpu, p, true)).collect();
    for ctx in contexts(target, test) {
        for (&p, (cpu_acc, cpu_losses)) in LOW.iter().zip(&reference) {
            let (acc, losses) = train_blobs(&ctx, p, true);
            let what = format!("{} {p}", ctx.id());
            assert!(
                acc >= acc32 - 0.03,
                "{what}: accuracy {acc} vs f32 {acc32} (CPU {p}: {cpu_acc})"
            );
            for (a, b) in losses.iter().zip(cpu_losses) {
                assert!(
                    (a - b).abs() <= 0.02 * b.abs() + 1e-3,
                    "{what}: losses {losses:?} vs CPU {cpu_losses:?}"
                );
            }
            // The recorded step (CUDA, HIP) gives what the op-by-op one gives.
            let (_, op_by_op) = train_blobs(&ctx, p, false);
            for (a, b) in losses.iter().zip(&op_by_op) {
                assert!(
                    (a - b).abs() <= 1e-3 * b.abs() + 1e-5,
                    "{what}: graphed losses {losses:?} vs op by op {op_by_op:?}"
                );
            }
        }
    }
}

/// The whole mixed-precision step (forward, scaled loss, backward, unscale, clipping, the
/// mixed optimizer step, the scale update) records as one graph where the device records
/// (CUDA, HIP) and replays; the replayed steps give the op-by-op steps' parameters.
fn mixed_step_records_and_replays(target: Target, test: &str) {
    let data = blobs(256, 12);
    for ctx in contexts(target, test) {
        for p in LOW {
            let run = |graphs: bool| {
                let mut net = classifier(&ctx, 3, [8, 32, 3], Activation::Relu);
                let config = TrainingConfig {
                    precision: p,
                    graphs,
                    shuffle: false,
                    clip_grad_norm: Some(1.0),
                    ..config_for(&ctx, 1, 64, 1e-2)
                };
                let mut trainer = net.trainer(&data, &config).unwrap();
                for _ in 0..8 {
                    trainer.step(&mut net).unwrap();
                }
                let loss = trainer.take_mean_loss(&net).unwrap();
                (trainer.graph_counts(), loss, net.parameters().unwrap())
            };
            let ((recorded, replayed), loss, params) = run(true);
            let (_, loss_op, params_op) = run(false);
            let what = format!("{} {p}", ctx.id());
            if crate::eval_graphs::records(target) {
                assert_eq!((recorded, replayed), (1, 6), "{what}: recordings");
            } else {
                assert_eq!((recorded, replayed), (0, 0), "{what}: recordings");
            }
            assert!(
                (loss - loss_op).abs() <= 1e-5 * loss_op.abs(),
                "{what}: loss {loss} vs {loss_op}"
            );
            assert!(
                max_diff(&params, &params_op) <= 1e-5 * max_abs(&params_op),
                "{what}: parameters differ by {}",
                max_diff(&params, &params_op)
            );
        }
    }
}

target_tests!(mixed_step_records_and_replays(named):
    cpu_mixed_step_records_and_replays => Cpu,
    opencl_mixed_step_records_and_replays => OpenCl,
    cuda_mixed_step_records_and_replays => Cuda,
    hip_mixed_step_records_and_replays => Hip,
    hip_on_cuda_mixed_step_records_and_replays => HipOnCuda,
);

target_tests!(mlp_trains_close_to_f32(named):
    cpu_mlp_trains_close_to_f32 => Cpu,
    opencl_mlp_trains_close_to_f32 => OpenCl,
    cuda_mlp_trains_close_to_f32 => Cuda,
    hip_mlp_trains_close_to_f32 => Hip,
    hip_on_cuda_mlp_trains_close_to_f32 => HipOnCuda,
);

/// A regression whose targets are large: at the initial loss scale (65536) the f16 loss
/// gradient overflows, so the first steps are skipped and the scale backs off.
fn large_targets(n: usize) -> Dataset {
    let mut rng = rnn::nn::Rng::new(21);
    let mut x = Vec::with_capacity(n * 4);
    let mut y = Vec::with_capacity(n);
    for _ in 0..n {
        let v: Vec<f32> = (0..4).map(|_| rng.normal()).collect();
        y.push(40.0 * (v[0] - 0.5 * v[1] + 0.25 * v[2]) + 60.0);
        x.extend(v);
    }
    Dataset::regression(x, 4, y, 1).unwrap()
}

/// (c) F16 overflow: steps with inf gradients are skipped and the scale backs off (both in
/// the history), then the model trains; the parameters never take a non-finite value.
fn f16_overflow_backs_off_and_trains(target: Target, test: &str) {
    let data = large_targets(256);
    for ctx in contexts(target, test) {
        let mut net = Network::builder(&ctx)
            .seed(2)
            .dense(4, 16, Activation::Tanh)
            .dense(16, 1, Activation::Identity)
            .build(Loss::Mse)
            .unwrap();
        let config = TrainingConfig {
            precision: Precision::F16,
            progress: Progress::Off,
            ..config_for(&ctx, 12, 16, 5e-2)
        };
        let h = net.train(&data, &config).unwrap();
        let what = ctx.id().to_string();
        let first = &h.epochs[0];
        let skipped = first.skipped_steps.unwrap();
        assert!(
            skipped >= 1,
            "{what}: no step skipped in epoch 1: {first:?}"
        );
        assert!(skipped < 16, "{what}: every step skipped: {first:?}");
        let scale = first.loss_scale.unwrap();
        assert!(
            scale < 65536.0,
            "{what}: the scale did not back off: {first:?}"
        );
        // 2 (pred - y) / 16 * scale must fit f16 for the steps that were taken.
        assert!(scale >= 1.0, "{what}: the scale fell to {scale}");
        let losses = h.losses();
        assert!(
            losses.iter().all(|l| l.is_finite()) && losses[11] < 0.5 * losses[0],
            "{what}: losses {losses:?}"
        );
        assert!(net.parameters().unwrap().iter().all(|p| p.is_finite()));
        // Later epochs skip (almost) nothing: the scale stays where it fits.
        let later: u64 = h.epochs[1..].iter().map(|e| e.skipped_steps.unwrap()).sum();
        assert!(later <= 2, "{what}: {later} steps skipped after epoch 1");
    }
}

target_tests!(f16_overflow_backs_off_and_trains(named):
    cpu_f16_overflow_backs_off_and_trains => Cpu,
    opencl_f16_overflow_backs_off_and_trains => OpenCl,
    cuda_f16_overflow_backs_off_and_trains => Cuda,
    hip_f16_overflow_backs_off_and_trains => Hip,
    hip_on_cuda_f16_overflow_backs_off_and_trains => HipOnCuda,
);

/// (e) Evaluation and prediction of an f32-trained network in every precision stay close to
/// f32's: outputs within `16 u` of the largest output, the loss within `16 u`.
fn predict_in_each_precision(target: Target, test: &str) {
    let data = blobs(300, 4);
    let cpu = Context::cpu();
    let mut trained = classifier(&cpu, 5, [8, 24, 3], Activation::Gelu);
    trained
        .train(&data, &config_for(&cpu, 3, 32, 1e-2))
        .unwrap();
    let values = trained.parameters().unwrap();
    for ctx in contexts(target, test) {
        let mut net = classifier(&ctx, 5, [8, 24, 3], Activation::Gelu);
        net.set_parameters(&values).unwrap();
        let out32 = net.predict(data.features()).unwrap();
        let e32 = net.evaluate(&data).unwrap();
        for p in [Precision::Tf32, Precision::Bf16, Precision::F16] {
            net.set_precision(p).unwrap();
            assert_eq!(net.precision(), p);
            let tol = 16.0 * unit_roundoff(p).max(2f32.powi(-10));
            let out = net.predict(data.features()).unwrap();
            let what = format!("{} {p}", ctx.id());
            assert!(
                max_diff(&out, &out32) <= tol * max_abs(&out32),
                "{what}: outputs differ by {}",
                max_diff(&out, &out32)
            );
            let e = net.evaluate(&data).unwrap();
            assert!(
                (e.loss - e32.loss).abs() <= tol * e32.loss.max(0.1),
                "{what}: loss {} vs {}",
                e.loss,
                e32.loss
            );
        }
        net.set_precision(Precision::F32).unwrap();
        assert_eq!(net.predict(data.features()).unwrap(), out32);
        tf32_follows_the_precision(&ctx, &mut net, target);
    }
}

/// The context's TF32 switch: on for the f32 products of a Tf32/Bf16/F16 network where the
/// device has a TF32 route (CUDA with cuBLAS: the GPU machine's CUDA contexts), back to the
/// context's default (off) for an F32 one.
fn tf32_follows_the_precision(ctx: &Context, net: &mut Network, target: Target) {
    let exec = ctx.execution();
    let route = {
        let before = exec.set_tf32(true);
        exec.set_tf32(before)
    };
    assert_eq!(route, target == Target::Cuda, "{}: TF32 route", ctx.id());
    for (p, on) in [
        (Precision::Bf16, route),
        (Precision::F32, false),
        (Precision::F16, route),
        (Precision::Tf32, route),
        (Precision::F32, false),
    ] {
        net.set_precision(p).unwrap();
        let now = exec.set_tf32(on);
        assert_eq!(now, on, "{} {p}: TF32 switch", ctx.id());
    }
}

target_tests!(predict_in_each_precision(named):
    cpu_predict_in_each_precision => Cpu,
    opencl_predict_in_each_precision => OpenCl,
    cuda_predict_in_each_precision => Cuda,
    hip_predict_in_each_precision => Hip,
    hip_on_cuda_predict_in_each_precision => HipOnCuda,
);

/// An embedding, a recurrent layer of `cell` (two stacked layers, dropout between them) and
/// a dense head: every f32-only layer kind behind the cast boundary.
fn char_model(ctx: &Context, cell: RecurrentCell, vocab: usize) -> Network {
    let opts = RecurrentOptions {
        num_layers: 2,
        dropout: 0.1,
        ..Default::default()
    };
    Network::builder(ctx)
        .seed(6)
        .sequence_length(12)
        .embedding(vocab, 16)
        .recurrent(cell, 16, 32, RnnOutput::Sequence, opts)
        .layer_norm(32)
        .dense(32, vocab, Activation::Identity)
        .build(Loss::SoftmaxCrossEntropy)
        .unwrap()
}

/// (f) An LSTM and a GRU model train in bf16 on every backend: the loss falls, and ends
/// within 5% of the f32 run's.
fn recurrent_trains_in_bf16(target: Target, test: &str) {
    let corpus = CharCorpus::new(&TEXT[..12_000]).unwrap();
    let data = corpus.id_sequences(12, 12, 320).unwrap();
    let v = corpus.vocab_size();
    for ctx in contexts(target, test) {
        for cell in [RecurrentCell::Lstm, RecurrentCell::Gru] {
            let run = |p: Precision| {
                let config = TrainingConfig {
                    precision: p,
                    progress: Progress::Off,
                    clip_grad_norm: Some(5.0),
                    ..config_for(&ctx, 4, 32, 1e-2)
                };
                char_model(&ctx, cell, v)
                    .train(&data, &config)
                    .unwrap()
                    .losses()
            };
            let (l32, l16) = (run(Precision::F32), run(Precision::Bf16));
            let what = format!("{} {cell:?}", ctx.id());
            assert!(l16[3] < 0.9 * l16[0], "{what}: bf16 losses {l16:?}");
            assert!(
                (l16[3] - l32[3]).abs() <= 0.05 * l32[3],
                "{what}: bf16 {l16:?} vs f32 {l32:?}"
            );
        }
    }
}

target_tests!(recurrent_trains_in_bf16(named):
    cpu_recurrent_trains_in_bf16 => Cpu,
    opencl_recurrent_trains_in_bf16 => OpenCl,
    cuda_recurrent_trains_in_bf16 => Cuda,
    hip_recurrent_trains_in_bf16 => Hip,
    hip_on_cuda_recurrent_trains_in_bf16 => HipOnCuda,
);

/// A recurrent layer of `cell` (hidden 12) over 5 steps of 7 inputs, then, with `head`, a
/// dense head of 6 classes with activation `act` (softmax cross-entropy), else nothing (the
/// layer's last state against 2 regression targets): the cast boundary's two ends.
fn boundary_model(ctx: &Context, cell: RecurrentCell, head: Option<Activation>) -> Network {
    let builder = Network::builder(ctx).seed(9).sequence_length(5);
    let opts = RecurrentOptions::default();
    match head {
        Some(act) => builder
            .recurrent(cell, 7, 12, RnnOutput::Sequence, opts)
            .dense(12, 6, act)
            .build(Loss::SoftmaxCrossEntropy),
        None => builder
            .recurrent(cell, 7, 2, RnnOutput::Last, opts)
            .build(Loss::Mse),
    }
    .unwrap()
}

/// (h) Where a recurrent layer meets the low type: the dense head writes the gradient straight
/// into the layer's f32 one, a linear last head its output in f32, and a recurrent last layer
/// takes the f32 loss gradient (scaled, in f16) without a cast. The gradients of one pass in
/// bf16 and f16 stay within `16 u` of f32's (a non-linear head, whose output stays in T,
/// included); without a T layer at all they are f32's, on the CPU bit for bit.
fn recurrent_boundary_matches_f32(target: Target, test: &str) {
    let mut rng = rnn::nn::Rng::new(17);
    let (seq, last) = crate::follow::sequence_and_last_data(&mut rng, (9, 5, 7, 6));
    for ctx in contexts(target, test) {
        for cell in [RecurrentCell::Lstm, RecurrentCell::Gru] {
            let heads = [Some(Activation::Identity), Some(Activation::Tanh), None];
            for head in heads {
                let data = if head.is_some() { &seq } else { &last };
                let mut reference = boundary_model(&ctx, cell, head);
                let l32 = reference.compute_gradients(data).unwrap();
                let g32 = reference.gradients().unwrap();
                for p in LOW {
                    let what = format!("{} {cell:?} {head:?} {p}", ctx.id());
                    let mut net = boundary_model(&ctx, cell, head);
                    net.set_precision(p).unwrap();
                    let loss = net.compute_gradients(data).unwrap();
                    let g = net.gradients().unwrap();
                    if head.is_none() && target == Target::Cpu {
                        assert_eq!(g, g32, "{what}: gradients");
                        assert_eq!(loss, l32, "{what}: loss");
                        continue;
                    }
                    let tol = 16.0 * unit_roundoff(p);
                    assert!(
                        max_diff(&g, &g32) <= tol * max_abs(&g32),
                        "{what}: gradients differ by {} (largest {})",
                        max_diff(&g, &g32),
                        max_abs(&g32)
                    );
                    assert!((loss - l32).abs() <= tol * l32, "{what}: {loss} vs {l32}");
                    let out = net.predict(data.features()).unwrap();
                    let out32 = reference.predict(data.features()).unwrap();
                    assert!(out.iter().all(|v| v.is_finite()), "{what}: outputs");
                    assert!(
                        max_diff(&out, &out32) <= tol * max_abs(&out32),
                        "{what}: outputs differ by {}",
                        max_diff(&out, &out32)
                    );
                }
            }
        }
    }
}

target_tests!(recurrent_boundary_matches_f32(named):
    cpu_recurrent_boundary_matches_f32 => Cpu,
    opencl_recurrent_boundary_matches_f32 => OpenCl,
    cuda_recurrent_boundary_matches_f32 => Cuda,
    hip_recurrent_boundary_matches_f32 => Hip,
    hip_on_cuda_recurrent_boundary_matches_f32 => HipOnCuda,
);

/// (g) A bf16 network saved and loaded into a fresh one predicts the same bits once that one
/// is set to bf16 too; the low copy follows the loaded parameters.
#[test]
fn set_precision_and_checkpoint_round_trip() {
    let ctx = Context::cpu();
    let data = blobs(90, 8);
    let mut net = classifier(&ctx, 1, [8, 12, 3], Activation::Tanh);
    let config = TrainingConfig {
        precision: Precision::Bf16,
        progress: Progress::Off,
        ..config_for(&ctx, 2, 30, 1e-2)
    };
    net.train(&data, &config).unwrap();
    assert_eq!(net.precision(), Precision::Bf16);
    let out = net.predict(data.features()).unwrap();
    let dir = temp_dir("precision", "round_trip");
    let path = dir.join("net.safetensors");
    net.save(&path).unwrap();
    let mut fresh = classifier(&ctx, 2, [8, 12, 3], Activation::Tanh);
    fresh.set_precision(Precision::Bf16).unwrap();
    // Loading after set_precision refreshes the low copy the forward reads.
    fresh.load(&path).unwrap();
    assert_eq!(fresh.predict(data.features()).unwrap(), out);
    // And setting parameters does too.
    let mut other = classifier(&ctx, 3, [8, 12, 3], Activation::Tanh);
    other.set_precision(Precision::Bf16).unwrap();
    other.set_parameters(&net.parameters().unwrap()).unwrap();
    assert_eq!(other.predict(data.features()).unwrap(), out);
    // Back in f32, the f32 master parameters predict.
    net.set_precision(Precision::F32).unwrap();
    let out32 = net.predict(data.features()).unwrap();
    assert_eq!(fresh.parameters().unwrap(), net.parameters().unwrap());
    assert!(max_diff(&out32, &out) <= 16.0 * 2f32.powi(-8) * max_abs(&out32));
    std::fs::remove_dir_all(dir).ok();
}

/// An f16 training checkpoint keeps the loss scaler: the resumed run continues from the
/// scale the interrupted one reached, and ends where the uninterrupted run ends.
#[test]
fn f16_resume_keeps_the_loss_scale() {
    let ctx = Context::cpu();
    let data = large_targets(128);
    let dir = temp_dir("precision", "resume");
    let build = || {
        Network::builder(&ctx)
            .seed(2)
            .dense(4, 16, Activation::Tanh)
            .dense(16, 1, Activation::Identity)
            .build(Loss::Mse)
            .unwrap()
    };
    let config = |epochs: usize| TrainingConfig {
        precision: Precision::F16,
        progress: Progress::Off,
        checkpoint_path: Some(dir.join("run.safetensors")),
        ..config_for(&ctx, epochs, 16, 5e-2)
    };
    let full = build().train(&data, &config(4)).unwrap();
    let mut first = build();
    first.train(&data, &config(2)).unwrap();
    let mut resumed = build();
    let rest = resumed
        .resume_training(dir.join("run.safetensors"), &data, &config(4))
        .unwrap();
    assert_eq!(rest.epochs.len(), 4);
    for (a, b) in rest.epochs.iter().zip(&full.epochs) {
        assert_eq!(a.loss_scale, b.loss_scale, "epoch {}", a.epoch);
        assert_eq!(a.skipped_steps, b.skipped_steps, "epoch {}", a.epoch);
        assert_eq!(a.loss, b.loss, "epoch {}", a.epoch);
    }
    std::fs::remove_dir_all(dir).ok();
}

/// CPU replicas train data-parallel in bf16 and f16: the gradients are f32 and averaged as
/// in f32, and the run follows the single-device run's losses.
#[test]
fn cpu_replicas_train_in_low_precision() {
    let ctx = Context::cpu();
    let data = blobs(256, 6);
    for p in LOW {
        let config = TrainingConfig {
            precision: p,
            progress: Progress::Off,
            shuffle: false,
            ..config_for(&ctx, 3, 64, 1e-2)
        };
        let single = classifier(&ctx, 4, [8, 16, 3], Activation::Tanh)
            .train(&data, &config)
            .unwrap();
        let replicated = classifier(&ctx, 4, [8, 16, 3], Activation::Tanh)
            .train(
                &data,
                &TrainingConfig {
                    devices: vec![DeviceId::Cpu, DeviceId::Cpu],
                    ..config.clone()
                },
            )
            .unwrap();
        for (a, b) in replicated.epochs.iter().zip(&single.epochs) {
            assert!(
                (a.loss - b.loss).abs() <= 16.0 * unit_roundoff(p) * b.loss,
                "{p}: replicated {:?} vs single {:?}",
                replicated.losses(),
                single.losses()
            );
            assert_eq!(a.loss_scale.is_some(), p == Precision::F16);
        }
    }
}

/// A bad `RNN_PRECISION`-style name is an error that names the choices.
#[test]
fn precision_names() {
    assert_eq!(Precision::parse("bf16").unwrap(), Precision::Bf16);
    let err = Precision::parse("int8").unwrap_err().to_string();
    assert!(err.contains("bf16") && err.contains("f16"), "{err}");
    assert_eq!(Precision::default(), Precision::F32);
    assert_eq!(TrainingConfig::default().precision, Precision::F32);
}
