//! Training converges on real data, runs are reproducible, and GPU backends follow the CPU.

use rnn::nn::{CharCorpus, Dataset, Loss, Network, RnnOutput, TrainingConfig};
use rnn::{Activation, Context};

use crate::fixtures::{classifier, config_for};
use crate::support::{Target, contexts};

static MNIST: &[u8] = include_bytes!("../../examples/data/mnist_5k.csv.gz");
static TEXT: &str = include_str!("../../examples/data/asyoulik.txt");

fn mlp(ctx: &Context) -> Network {
    classifier(ctx, 3, [784, 128, 10], Activation::Relu)
}

#[test]
fn cpu_mlp_reaches_90_percent_on_mnist() {
    let ctx = Context::cpu();
    let data = Dataset::from_mnist_csv(MNIST).unwrap();
    assert_eq!((data.len(), data.width()), (5000, 784));
    let (train, test) = data.train_test_split(1000, 7).unwrap();
    let mut net = mlp(&ctx);
    let mut config = config_for(&ctx, 6, 64, 1e-3);
    config.validation_split = 0.1;
    let history = net.train(&train, &config).unwrap();
    assert_eq!(history.epochs.len(), 6);
    assert_eq!(history.device, rnn::DeviceId::Cpu);
    let first = &history.epochs[0];
    let last = history.last().unwrap();
    assert!(last.loss < first.loss, "{:?}", history.losses());
    assert!(last.val_accuracy.is_some() && last.val_loss.is_some());
    assert!(last.samples_per_sec > 0.0);
    let eval = net.evaluate(&test).unwrap();
    let acc = eval.accuracy.unwrap();
    assert!(acc >= 0.90, "test accuracy {acc}");
    // predict_classes agrees with evaluate's accuracy.
    let classes = net.predict_classes(test.features()).unwrap();
    let rnn::nn::Targets::Classes { labels, .. } = test.targets() else {
        unreachable!()
    };
    let hits = classes
        .iter()
        .zip(labels)
        .filter(|(c, l)| **c == **l as usize)
        .count();
    assert!((hits as f32 / test.len() as f32 - acc).abs() < 1e-3);
}

#[test]
fn cpu_same_seed_same_result() {
    let ctx = Context::cpu();
    let data = Dataset::from_mnist_csv(MNIST).unwrap();
    let small = data.train_test_split(300, 2).unwrap().1;
    let run = || {
        let mut net = mlp(&ctx);
        let h = net.train(&small, &config_for(&ctx, 2, 50, 1e-3)).unwrap();
        (h.losses(), net.parameters().unwrap())
    };
    assert_eq!(run(), run());
}

fn char_rnn(ctx: &Context, corpus: &CharCorpus, steps: usize) -> Network {
    let v = corpus.vocab_size();
    Network::builder(ctx)
        .seed(4)
        .sequence_length(steps)
        .rnn(v, 48, Activation::Tanh, RnnOutput::Sequence)
        .dense(48, v, Activation::Identity)
        .build(Loss::SoftmaxCrossEntropy)
        .unwrap()
}

#[test]
fn cpu_char_rnn_loss_falls() {
    let ctx = Context::cpu();
    let corpus = CharCorpus::new(&TEXT[..20_000]).unwrap();
    let data = corpus.sequences(16, 16, 400).unwrap();
    let mut net = char_rnn(&ctx, &corpus, 16);
    let mut config = config_for(&ctx, 5, 32, 5e-3);
    config.clip_grad_norm = Some(5.0);
    let h = net.train(&data, &config).unwrap();
    let l = h.losses();
    assert!(l.iter().all(|x| x.is_finite()), "{l:?}");
    assert!(
        l[4] < l[0] * 0.9,
        "loss should fall by more than 10% over 5 epochs: {l:?}"
    );
    // A forward pass gives one row of logits per step.
    let out = net.predict(&data.features()[..data.width()]).unwrap();
    assert_eq!(out.len(), 16 * corpus.vocab_size());
}

/// A short training run on every device of `target` follows the CPU run's losses.
fn follows_cpu(target: Target, test: &str) {
    let data = Dataset::from_mnist_csv(MNIST).unwrap();
    let small = data.train_test_split(512, 2).unwrap().1;
    let corpus = CharCorpus::new(&TEXT[..8_000]).unwrap();
    let seqs = corpus.sequences(12, 12, 96).unwrap();
    let cpu = Context::cpu();
    let ref_mlp = mlp(&cpu)
        .train(&small, &config_for(&cpu, 3, 64, 1e-3))
        .unwrap()
        .losses();
    let ref_rnn = char_rnn(&cpu, &corpus, 12)
        .train(&seqs, &config_for(&cpu, 3, 32, 3e-3))
        .unwrap()
        .losses();
    for ctx in contexts(target, test) {
        let got = mlp(&ctx)
            .train(&small, &config_for(&ctx, 3, 64, 1e-3))
            .unwrap();
        assert_eq!(got.device, ctx.id());
        let got_rnn = char_rnn(&ctx, &corpus, 12)
            .train(&seqs, &config_for(&ctx, 3, 32, 3e-3))
            .unwrap()
            .losses();
        for (a, b) in got
            .losses()
            .iter()
            .zip(&ref_mlp)
            .chain(got_rnn.iter().zip(&ref_rnn))
        {
            assert!(
                (a - b).abs() <= 0.02 * b.abs() + 1e-3,
                "{}: losses {:?} / {got_rnn:?} vs CPU {ref_mlp:?} / {ref_rnn:?}",
                ctx.id(),
                got.losses()
            );
        }
    }
}

target_tests!(follows_cpu(named):
    opencl_training_follows_cpu => OpenCl,
    cuda_training_follows_cpu => Cuda,
    hip_training_follows_cpu => Hip,
    hip_on_cuda_training_follows_cpu => HipOnCuda,
);

/// 500 MNIST digits, and 70 character sequences of 10 steps with their vocabulary size.
fn mnist_and_sequences() -> (Dataset, Dataset, usize) {
    let data = Dataset::from_mnist_csv(MNIST).unwrap();
    let small = data.train_test_split(500, 2).unwrap().1;
    let corpus = CharCorpus::new(&TEXT[..6_000]).unwrap();
    let seqs = corpus.sequences(10, 10, 70).unwrap();
    (small, seqs, corpus.vocab_size())
}

/// An LSTM character model over 10 steps of `vocab` one-hot inputs.
fn char_lstm(ctx: &Context, vocab: usize) -> Network {
    Network::builder(ctx)
        .seed(4)
        .sequence_length(10)
        .lstm(vocab, 24, RnnOutput::Sequence)
        .dense(24, vocab, Activation::Identity)
        .build(Loss::SoftmaxCrossEntropy)
        .unwrap()
}

/// Training with whole-step graphs (recorded on CUDA and HIP, op by op elsewhere) ends with the same
/// parameters and losses as training op by op: shuffled batches, a smaller last batch (its own
/// graph), an MLP with clipping and an LSTM character model.
fn graphs_match_op_by_op(target: Target, test: &str) {
    let (small, seqs, vocab) = mnist_and_sequences();
    for ctx in contexts(target, test) {
        let cfg = |graphs: bool, batch: usize| TrainingConfig {
            graphs,
            clip_grad_norm: Some(5.0),
            ..config_for(&ctx, 2, batch, 1e-3)
        };
        let lstm = || char_lstm(&ctx, vocab);
        let mut runs = Vec::new();
        for graphs in [false, true] {
            let mut a = mlp(&ctx);
            let ha = a.train(&small, &cfg(graphs, 64)).unwrap();
            let mut b = lstm();
            let hb = b.train(&seqs, &cfg(graphs, 32)).unwrap();
            runs.push((
                a.parameters().unwrap(),
                b.parameters().unwrap(),
                ha.losses(),
                hb.losses(),
            ));
        }
        let (off, on) = (&runs[0], &runs[1]);
        for (what, got, want) in [("mlp", &on.0, &off.0), ("lstm", &on.1, &off.1)] {
            let err = crate::support::rel_err(got, want);
            assert!(
                err <= 1e-5,
                "{}: {what} parameters differ by {err:e}",
                ctx.id()
            );
        }
        assert_eq!(on.2.len(), off.2.len());
        for (a, b) in on.2.iter().chain(&on.3).zip(off.2.iter().chain(&off.3)) {
            assert!(
                (a - b).abs() <= 1e-5 * b.abs(),
                "{}: losses {on:?} vs {off:?}",
                ctx.id()
            );
        }
    }
}

target_tests!(graphs_match_op_by_op(named):
    cpu_graphs_match_op_by_op => Cpu,
    opencl_graphs_match_op_by_op => OpenCl,
    cuda_graphs_match_op_by_op => Cuda,
    hip_graphs_match_op_by_op => Hip,
    hip_on_cuda_graphs_match_op_by_op => HipOnCuda,
);

/// `Trainer::step` reads its contiguous batches in place where the step runs op by op (and
/// copies them where a recorded graph needs fixed addresses); `Network::train` gathers them
/// through its permutation. Without shuffling both see the same batches, so both end with the
/// same parameters: an MLP, and an LSTM whose batches are reordered time-major from the rows.
fn trainer_matches_train(target: Target, test: &str) {
    let (small, seqs, vocab) = mnist_and_sequences();
    for ctx in contexts(target, test) {
        let lstm = || char_lstm(&ctx, vocab);
        let cases: [(&str, &dyn Fn() -> Network, &Dataset, usize); 2] = [
            ("mlp", &|| mlp(&ctx), &small, 50),
            ("lstm", &lstm, &seqs, 14),
        ];
        for (what, build, data, batch) in cases {
            let config = TrainingConfig {
                shuffle: false,
                validation_split: 0.0,
                ..config_for(&ctx, 2, batch, 1e-3)
            };
            let mut trained = build();
            let history = trained.train(data, &config).unwrap();
            let mut stepped = build();
            let mut trainer = stepped.trainer(data, &config).unwrap();
            let steps_per_epoch = data.len() / batch;
            let mut losses = Vec::new();
            for _ in 0..config.epochs {
                for _ in 0..steps_per_epoch {
                    trainer.step(&mut stepped).unwrap();
                }
                losses.push(trainer.take_mean_loss(&stepped).unwrap());
            }
            let err = crate::support::rel_err(
                &stepped.parameters().unwrap(),
                &trained.parameters().unwrap(),
            );
            assert!(
                err <= 1e-6,
                "{}: {what} parameters differ by {err:e}",
                ctx.id()
            );
            for (got, want) in losses.iter().zip(history.losses()) {
                assert!(
                    (got - want).abs() <= 1e-5 * want.abs(),
                    "{}: {what} epoch losses {losses:?} stepped, {:?} trained",
                    ctx.id(),
                    history.losses()
                );
            }
        }
    }
}

target_tests!(trainer_matches_train(named):
    cpu_trainer_matches_train => Cpu,
    opencl_trainer_matches_train => OpenCl,
    cuda_trainer_matches_train => Cuda,
    hip_trainer_matches_train => Hip,
    hip_on_cuda_trainer_matches_train => HipOnCuda,
);
