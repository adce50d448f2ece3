//! Padded sequences with per-sample lengths and an ignored label: a padded batch against each
//! sample run alone at its own length (loss and every gradient), finite-difference checks with
//! lengths, `ignore_index` against a hand computation, training, and bad input.

use rnn::nn::{
    Dataset, Loss, Network, RecurrentCell, RecurrentOptions, Rng, RnnOutput, Targets,
    TrainingConfig,
};
use rnn::{Activation, Context, RecurrentAlgorithm};

use crate::gradcheck::{check, classes, random};
use crate::support::{self, Target, rel_err};

const CELLS: [RecurrentCell; 3] = [
    RecurrentCell::Rnn(Activation::Tanh),
    RecurrentCell::Lstm,
    RecurrentCell::Gru,
];

fn options() -> [RecurrentOptions; 3] {
    [
        RecurrentOptions::new(),
        RecurrentOptions::new().layers(2),
        RecurrentOptions::new().layers(2).bidirectional(true),
    ]
}

/// A recurrent layer of `cell` and `opts` over `steps` steps of `i` features, `h` units a
/// direction, then a dense head of `c` outputs: at every step with cross-entropy, or on the
/// last state with MSE.
fn net(
    ctx: &Context,
    (cell, opts): (RecurrentCell, RecurrentOptions),
    steps: usize,
    (i, h, c): (usize, usize, usize),
    output: RnnOutput,
) -> Network {
    let loss = match output {
        RnnOutput::Sequence => Loss::SoftmaxCrossEntropy,
        RnnOutput::Last => Loss::Mse,
    };
    Network::builder(ctx)
        .seed(11)
        .sequence_length(steps)
        .recurrent(cell, i, h, output, opts)
        .dense(h * opts.directions(), c, Activation::Identity)
        .build(loss)
        .unwrap()
}

/// Sample `s` of `x` (`t` steps of `i` features each, sample-major) cut to its first `len`
/// steps.
fn cut(x: &[f32], s: usize, (t, i): (usize, usize), len: usize) -> Vec<f32> {
    x[s * t * i..s * t * i + len * i].to_vec()
}

/// The strongest check of the packed-sequence meaning: the loss and every parameter gradient of
/// a padded batch equal those of each sample run alone, unpadded, at its own length, weighted as
/// the batch's mean over valid positions weighs it. Padding holds large values, so a padded
/// step that leaked into a valid output, a gradient or the reverse direction would show.
fn padded_batch_equals_each_sample_alone(ctx: &Context) {
    let (t, i, h, c) = (5, 3, 4, 3);
    let lengths = [3usize, 5, 1, 4];
    let n = lengths.len();
    let mut rng = Rng::new(3);
    let mut x = random(&mut rng, n * t * i);
    for (s, &len) in lengths.iter().enumerate() {
        for v in &mut x[s * t * i + len * i..(s + 1) * t * i] {
            *v = 7.5;
        }
    }
    for cell in CELLS {
        for opts in options() {
            for output in [RnnOutput::Sequence, RnnOutput::Last] {
                let what = format!("{} {cell:?} {opts:?} {output:?}", ctx.id());
                let mut batch_net = net(ctx, (cell, opts), t, (i, h, c), output);
                let params = batch_net.parameters().unwrap();
                let (data, pieces) = match output {
                    RnnOutput::Sequence => {
                        let labels = classes(&mut rng, n * t, c);
                        let targets = Targets::Classes {
                            labels: labels.clone(),
                            classes: c,
                            per_sample: t,
                        };
                        let data = Dataset::new(x.clone(), t * i, targets).unwrap();
                        let pieces: Vec<Dataset> = (0..n)
                            .map(|s| {
                                let len = lengths[s];
                                let targets = Targets::Classes {
                                    labels: labels[s * t..s * t + len].to_vec(),
                                    classes: c,
                                    per_sample: len,
                                };
                                Dataset::new(cut(&x, s, (t, i), len), len * i, targets).unwrap()
                            })
                            .collect();
                        (data, pieces)
                    }
                    RnnOutput::Last => {
                        let y = random(&mut rng, n * c);
                        let data = Dataset::regression(x.clone(), t * i, y.clone(), c).unwrap();
                        let pieces: Vec<Dataset> = (0..n)
                            .map(|s| {
                                let len = lengths[s];
                                let xs = cut(&x, s, (t, i), len);
                                let ys = y[s * c..(s + 1) * c].to_vec();
                                Dataset::regression(xs, len * i, ys, c).unwrap()
                            })
                            .collect();
                        (data, pieces)
                    }
                };
                let data = data.with_lengths(&lengths).unwrap();
                let loss = batch_net.compute_gradients(&data).unwrap();
                let grads = batch_net.gradients().unwrap();

                // Each sample's share of the batch mean: its valid positions over all of them
                // (per-step cross-entropy), or 1 / n (one output per sample).
                let valid: usize = lengths.iter().sum();
                let (mut want_loss, mut want_grads) = (0.0f64, vec![0.0f32; grads.len()]);
                for (s, piece) in pieces.iter().enumerate() {
                    let weight = match output {
                        RnnOutput::Sequence => lengths[s] as f32 / valid as f32,
                        RnnOutput::Last => 1.0 / n as f32,
                    };
                    let mut alone = net(ctx, (cell, opts), lengths[s], (i, h, c), output);
                    alone.set_parameters(&params).unwrap();
                    want_loss += (weight * alone.compute_gradients(piece).unwrap()) as f64;
                    for (w, g) in want_grads.iter_mut().zip(alone.gradients().unwrap()) {
                        *w += weight * g;
                    }
                }
                let loss_err = (loss as f64 - want_loss).abs() / want_loss.abs().max(1e-6);
                assert!(loss_err < 1e-4, "{what}: loss {loss} vs {want_loss}");
                let e = rel_err(&grads, &want_grads);
                assert!(e < 1e-4, "{what}: gradient rel err {e}");
            }
        }
    }
}

#[test]
fn cpu_padded_batch_equals_each_sample_alone() {
    padded_batch_equals_each_sample_alone(&Context::cpu());
}

/// Runs `check` on every GPU context (OpenCL, CUDA, HIP) there is.
fn on_every_gpu(test: &str, check: fn(&Context)) {
    for target in [Target::OpenCl, Target::Cuda, Target::Hip] {
        for ctx in support::contexts(target, test) {
            check(&ctx);
        }
    }
}

#[test]
fn gpu_padded_batch_equals_each_sample_alone() {
    on_every_gpu(
        "gpu_padded_batch_equals_each_sample_alone",
        padded_batch_equals_each_sample_alone,
    );
}

#[test]
fn cpu_gradients_with_lengths() {
    gradients_with_lengths(&Context::cpu());
}

/// Contexts of every OpenCL device forced to the block-local kernels that read W_hh through
/// the L1 cache (`RecurrentAlgorithm::BlockLocalL1`; PoCL in CI).
fn l1_contexts(test: &str) -> Vec<Context> {
    support::contexts_with(Target::OpenCl, test, |o| {
        o.recurrent_algorithm = Some(RecurrentAlgorithm::BlockLocalL1)
    })
}

#[test]
fn opencl_l1_padded_batch_equals_each_sample_alone() {
    for ctx in l1_contexts("opencl_l1_padded_batch_equals_each_sample_alone") {
        padded_batch_equals_each_sample_alone(&ctx);
    }
}

#[test]
fn opencl_l1_gradients_with_lengths() {
    for ctx in l1_contexts("opencl_l1_gradients_with_lengths") {
        gradients_with_lengths(&ctx);
    }
}

/// Finite-difference checks of every cell and layout with per-sample lengths on `ctx`.
fn gradients_with_lengths(ctx: &Context) {
    let (t, i, h, c) = (4, 2, 3, 3);
    let lengths = [2usize, 4, 1];
    let n = lengths.len();
    let mut rng = Rng::new(8);
    for cell in CELLS {
        for opts in options() {
            for output in [RnnOutput::Sequence, RnnOutput::Last] {
                let mut network = net(ctx, (cell, opts), t, (i, h, c), output);
                let x = random(&mut rng, n * t * i);
                let data = match output {
                    RnnOutput::Sequence => {
                        let targets = Targets::Classes {
                            labels: classes(&mut rng, n * t, c),
                            classes: c,
                            per_sample: t,
                        };
                        Dataset::new(x, t * i, targets).unwrap()
                    }
                    RnnOutput::Last => {
                        Dataset::regression(x, t * i, random(&mut rng, n * c), c).unwrap()
                    }
                };
                let data = data.with_lengths(&lengths).unwrap();
                check(
                    &mut network,
                    &data,
                    1e-3,
                    3e-2,
                    &format!("{cell:?} {opts:?} {output:?} with lengths"),
                );
            }
        }
    }
}

/// Softmax cross-entropy of one row by hand.
fn xent(row: &[f32], label: usize) -> f64 {
    let m = row.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b)) as f64;
    let s: f64 = row.iter().map(|&v| (v as f64 - m).exp()).sum();
    m + s.ln() - row[label] as f64
}

fn ignore_index_matches_a_hand_computation(ctx: &Context) {
    let (n, i, c) = (9, 4, 5);
    let ignore = u32::MAX;
    let mut rng = Rng::new(4);
    let mut net = Network::builder(ctx)
        .seed(2)
        .dense(i, 6, Activation::Tanh)
        .dense(6, c, Activation::Identity)
        .build(Loss::SoftmaxCrossEntropy)
        .unwrap();
    let x = random(&mut rng, n * i);
    let mut labels = classes(&mut rng, n, c);
    for s in [0, 3, 4, 8] {
        labels[s] = ignore;
    }
    let targets = Targets::Classes {
        labels: labels.clone(),
        classes: c,
        per_sample: 1,
    };
    let data = Dataset::new_ignoring(x.clone(), i, targets, ignore).unwrap();
    let logits = net.predict(&x).unwrap();
    let kept: Vec<usize> = (0..n).filter(|&s| labels[s] != ignore).collect();
    let want: f64 = kept
        .iter()
        .map(|&s| xent(&logits[s * c..(s + 1) * c], labels[s] as usize))
        .sum::<f64>()
        / kept.len() as f64;
    let got = net.evaluate(&data).unwrap();
    assert!(
        (got.loss as f64 - want).abs() < 1e-5 * want.max(1.0),
        "{}: loss {} vs {want}",
        ctx.id(),
        got.loss
    );
    let loss = net.compute_gradients(&data).unwrap();
    assert!((loss as f64 - want).abs() < 1e-5 * want.max(1.0));

    // The gradients are those of the kept rows alone.
    let only = Dataset::classification(
        kept.iter()
            .flat_map(|&s| x[s * i..(s + 1) * i].to_vec())
            .collect(),
        i,
        kept.iter().map(|&s| labels[s]).collect(),
        c,
    )
    .unwrap();
    let grads = net.gradients().unwrap();
    net.compute_gradients(&only).unwrap();
    let e = rel_err(&grads, &net.gradients().unwrap());
    assert!(e < 1e-5, "{}: gradient rel err {e}", ctx.id());

    // Every label ignored: loss 0 and zero gradients (PyTorch's mean gives NaN).
    let targets = Targets::Classes {
        labels: vec![ignore; n],
        classes: c,
        per_sample: 1,
    };
    let none = Dataset::new_ignoring(x, i, targets, ignore).unwrap();
    assert_eq!(net.compute_gradients(&none).unwrap(), 0.0);
    assert!(net.gradients().unwrap().iter().all(|&g| g == 0.0));
    assert_eq!(net.evaluate(&none).unwrap().loss, 0.0);
}

#[test]
fn cpu_ignore_index_matches_a_hand_computation() {
    ignore_index_matches_a_hand_computation(&Context::cpu());
}

#[test]
fn gpu_ignore_index_matches_a_hand_computation() {
    on_every_gpu(
        "gpu_ignore_index_matches_a_hand_computation",
        ignore_index_matches_a_hand_computation,
    );
}

/// A per-step classifier over token ids with padding (both lengths and an ignored pad label)
/// trains: the loss falls, and padded and unpadded runs of the same network interleave on one
/// workspace size (the padding mode switches the workspaces).
#[test]
fn cpu_padded_tokens_train() {
    let ctx = Context::cpu();
    let (n, t, vocab) = (64, 6, 5);
    let mut rng = Rng::new(1);
    let mut ids = Vec::new();
    let mut labels = Vec::new();
    let mut lengths = Vec::new();
    for _ in 0..n {
        let len = 1 + rng.below(t);
        lengths.push(len);
        for s in 0..t {
            let id = if s < len { rng.below(vocab) as u32 } else { 0 };
            ids.push(id);
            // Predict the current token; the padding's label is ignored.
            labels.push(if s < len { id } else { u32::MAX });
        }
    }
    let targets = Targets::Classes {
        labels,
        classes: vocab,
        per_sample: t,
    };
    let data = Dataset::tokens_ignoring(ids.clone(), t, targets, u32::MAX)
        .unwrap()
        .with_lengths(&lengths)
        .unwrap();
    let mut net = Network::builder(&ctx)
        .seed(3)
        .sequence_length(t)
        .embedding(vocab, 4)
        .recurrent(
            RecurrentCell::Gru,
            4,
            8,
            RnnOutput::Sequence,
            RecurrentOptions::new().bidirectional(true),
        )
        .dense(16, vocab, Activation::Identity)
        .build(Loss::SoftmaxCrossEntropy)
        .unwrap();
    let config = TrainingConfig {
        epochs: 30,
        batch_size: 16,
        learning_rate: 0.05,
        ..TrainingConfig::default()
    };
    let before = net.evaluate(&data).unwrap().loss;
    let history = net.train(&data, &config).unwrap();
    let after = net.evaluate(&data).unwrap().loss;
    assert!(
        after < 0.5 * before,
        "loss {before} -> {after} ({:?})",
        history.epochs.last()
    );
    // An unpadded evaluation of the same network at the same batch size still runs.
    let plain = Targets::Classes {
        labels: ids.clone(),
        classes: vocab,
        per_sample: t,
    };
    let plain = Dataset::tokens(ids.clone(), t, plain).unwrap();
    assert!(net.evaluate(&plain).unwrap().loss.is_finite());
    // Prediction takes whole sequences, whatever the network last ran.
    net.evaluate(&data).unwrap();
    let out = net.predict_ids(&ids).unwrap();
    assert!(out.len() == n * t * vocab && out.iter().all(|v| v.is_finite()));
    assert!(net.evaluate(&data).unwrap().loss <= after * 1.0001);
}

#[test]
fn bad_lengths_and_ignore_index_are_clear_errors() {
    let ctx = Context::cpu();
    let targets = || Targets::Classes {
        labels: vec![0, 1],
        classes: 2,
        per_sample: 1,
    };
    let data = Dataset::tokens(vec![0, 1, 1, 0, 1, 1], 3, targets()).unwrap();
    let msg = |r: rnn::Result<Dataset>| r.unwrap_err().to_string();
    assert!(msg(data.clone().with_lengths(&[1])).contains("1 lengths for 2 samples"));
    assert!(msg(data.clone().with_lengths(&[0, 2])).contains("length 0 outside 1..=3"));
    assert!(msg(data.clone().with_lengths(&[4, 2])).contains("length 4 outside 1..=3"));
    // A label outside the classes is still an error unless it is the ignored one.
    let bad = Targets::Classes {
        labels: vec![0, 7],
        classes: 2,
        per_sample: 1,
    };
    let e = msg(Dataset::tokens_ignoring(vec![0, 1], 1, bad, 9));
    assert!(e.contains("label 7 outside 0..2"), "{e}");
    let values = Targets::Values {
        values: vec![0.0, 1.0],
        width: 1,
    };
    let e = msg(Dataset::new_ignoring(vec![0.0, 1.0], 1, values, 9));
    assert!(e.contains("class targets"), "{e}");

    // Lengths beyond the network's steps (feature data, 2 features a step), and lengths on a
    // network without a sequence.
    let mut seq = Network::builder(&ctx)
        .sequence_length(2)
        .lstm(2, 3, RnnOutput::Last)
        .dense(3, 2, Activation::Identity)
        .build(Loss::SoftmaxCrossEntropy)
        .unwrap();
    let d = Dataset::classification(vec![0.5; 8], 4, vec![0, 1], 2)
        .unwrap()
        .with_lengths(&[3, 1])
        .unwrap();
    let e = seq.evaluate(&d).unwrap_err().to_string();
    assert!(e.contains("length 3 outside 1..=2"), "{e}");
    let mut flat = Network::builder(&ctx)
        .dense(4, 2, Activation::Identity)
        .build(Loss::SoftmaxCrossEntropy)
        .unwrap();
    let d = Dataset::classification(vec![0.5; 8], 4, vec![0, 1], 2)
        .unwrap()
        .with_lengths(&[1, 1])
        .unwrap();
    let e = flat.evaluate(&d).unwrap_err().to_string();
    assert!(e.contains("takes no sequence"), "{e}");
}

/// Bucketing by length trains the same way (deterministic by seed), and needs lengths.
#[test]
fn cpu_bucket_by_length() {
    let ctx = Context::cpu();
    let (n, t, i) = (40, 5, 2);
    let mut rng = Rng::new(6);
    let x = random(&mut rng, n * t * i);
    let y = random(&mut rng, n);
    let lengths: Vec<usize> = (0..n).map(|_| 1 + rng.below(t)).collect();
    let data = Dataset::regression(x, t * i, y, 1).unwrap();
    let padded = data.clone().with_lengths(&lengths).unwrap();
    let config = TrainingConfig {
        epochs: 3,
        batch_size: 4,
        learning_rate: 0.01,
        bucket_by_length: true,
        ..TrainingConfig::default()
    };
    let build = || {
        Network::builder(&ctx)
            .seed(1)
            .sequence_length(t)
            .lstm(i, 3, RnnOutput::Last)
            .dense(3, 1, Activation::Identity)
            .build(Loss::Mse)
            .unwrap()
    };
    let (mut a, mut b) = (build(), build());
    let ha = a.train(&padded, &config).unwrap();
    let hb = b.train(&padded, &config).unwrap();
    assert_eq!(a.parameters().unwrap(), b.parameters().unwrap());
    assert!(ha.epochs.iter().all(|e| e.loss.is_finite()));
    assert_eq!(ha.epochs.len(), hb.epochs.len());
    let e = build().train(&data, &config).unwrap_err().to_string();
    assert!(
        e.contains("bucket_by_length needs a data set with lengths"),
        "{e}"
    );
}
