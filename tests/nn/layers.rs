//! Dropout, LayerNorm and Embedding in networks: gradient checks, training-only behaviour,
//! seeding, checkpoints, every GPU target against the CPU.

use proptest::prelude::*;
use rnn::nn::{Dataset, LayerDesc, Loss, Network, RnnOutput, TrainingConfig};
use rnn::{Activation, Context, Error};

use crate::gradcheck::{check, classes, random};
use crate::support::rel_err;
use rnn::nn::Rng;

fn dropout_net(ctx: &Context, seed: u64, p: f32) -> Network {
    Network::builder(ctx)
        .seed(seed)
        .dense(3, 6, Activation::Tanh)
        .dropout(p)
        .dense(6, 2, Activation::Identity)
        .build(Loss::SoftmaxCrossEntropy)
        .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    /// In training mode the masks of one state are fixed, so the loss is differentiable in
    /// the parameters and finite differences must match the masked backward pass.
    #[test]
    fn cpu_dropout_gradients(seed in any::<u64>(), n in 2usize..8, p in 0.1f32..0.7) {
        let ctx = Context::cpu();
        let mut rng = Rng::new(seed);
        let mut net = dropout_net(&ctx, seed, p);
        let data = Dataset::classification(random(&mut rng, n * 3), 3, classes(&mut rng, n, 2), 2).unwrap();
        check(&mut net, &data, 1e-3, 3e-2, &format!("dropout {p}"));
    }
}

#[test]
fn cpu_dropout_is_training_only_and_seeded() {
    let ctx = Context::cpu();
    let mut rng = Rng::new(3);
    let n = 64;
    let data =
        Dataset::classification(random(&mut rng, n * 3), 3, classes(&mut rng, n, 2), 2).unwrap();
    // Prediction and evaluation ignore dropout: the same as the network without it.
    let mut with = dropout_net(&ctx, 5, 0.5);
    let mut without = Network::builder(&ctx)
        .seed(5)
        .dense(3, 6, Activation::Tanh)
        .dense(6, 2, Activation::Identity)
        .build(Loss::SoftmaxCrossEntropy)
        .unwrap();
    assert_eq!(with.parameters().unwrap(), without.parameters().unwrap());
    assert_eq!(
        with.predict(data.features()).unwrap(),
        without.predict(data.features()).unwrap()
    );
    assert_eq!(
        with.evaluate(&data).unwrap(),
        without.evaluate(&data).unwrap()
    );
    // Training applies it: the gradients differ from the plain network's...
    let lw = with.compute_gradients(&data).unwrap();
    let lo = without.compute_gradients(&data).unwrap();
    assert_ne!(lw, lo);
    // ...and p = 0 is the identity in training too.
    let mut zero = dropout_net(&ctx, 5, 0.0);
    assert_eq!(zero.compute_gradients(&data).unwrap(), lo);
    assert_eq!(zero.gradients().unwrap(), without.gradients().unwrap());

    // Same seed, same run; another training seed, other masks.
    let config = |seed| TrainingConfig {
        use_gpu: false,
        epochs: 3,
        batch_size: 16,
        seed,
        ..Default::default()
    };
    let run = |seed| {
        let mut net = dropout_net(&ctx, 5, 0.5);
        net.train(&data, &config(seed)).unwrap();
        net.parameters().unwrap()
    };
    assert_eq!(run(1), run(1));
    assert_ne!(run(1), run(2));
}

#[test]
fn dropout_arguments_are_checked() {
    let ctx = Context::cpu();
    for p in [-0.5, 1.5, f32::NAN] {
        let err = Network::builder(&ctx)
            .dense(2, 2, Activation::Tanh)
            .dropout(p)
            .build(Loss::Mse)
            .unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    }
    let err = Network::builder(&ctx)
        .dropout(0.5)
        .dense(2, 2, Activation::Tanh)
        .build(Loss::Mse)
        .unwrap_err();
    assert!(err.to_string().contains("cannot come first"), "{err}");
    // A dropout layer between recurrent layers keeps the sequence.
    let net = Network::builder(&ctx)
        .sequence_length(4)
        .lstm(3, 5, RnnOutput::Sequence)
        .dropout(0.25)
        .lstm(5, 4, RnnOutput::Last)
        .build(Loss::Mse)
        .unwrap();
    assert_eq!(
        net.layers()[1],
        LayerDesc::Dropout {
            features: 5,
            p: 0.25
        }
    );
}

/// Training with dropout on every GPU target follows the CPU: the masks are the same bits on
/// every backend, so the losses agree to rounding.
fn dropout_training_matches_cpu(target: crate::support::Target) {
    let test = "gpu_dropout_training_matches_cpu";
    for gpu in crate::support::contexts(target, test) {
        let mut rng = Rng::new(11);
        let (n, t) = (24, 5);
        let targets = rnn::nn::Targets::Classes {
            labels: classes(&mut rng, n * t, 3),
            classes: 3,
            per_sample: t,
        };
        let data = Dataset::new(random(&mut rng, n * t * 4), t * 4, targets).unwrap();
        let build = |ctx: &Context| {
            Network::builder(ctx)
                .seed(4)
                .sequence_length(t)
                .lstm(4, 8, RnnOutput::Sequence)
                .dropout(0.3)
                .dense(8, 3, Activation::Identity)
                .build(Loss::SoftmaxCrossEntropy)
                .unwrap()
        };
        let config = TrainingConfig {
            use_gpu: false,
            epochs: 3,
            batch_size: 8,
            seed: 9,
            ..Default::default()
        };
        let mut g = build(&gpu);
        let mut trainer = g.trainer(&data, &config).unwrap();
        let mut cpu2 = build(&Context::cpu());
        let mut trainer2 = cpu2.trainer(&data, &config).unwrap();
        for _ in 0..6 {
            trainer.step(&mut g).unwrap();
            trainer2.step(&mut cpu2).unwrap();
        }
        let (a, b) = (g.parameters().unwrap(), cpu2.parameters().unwrap());
        let e = rel_err(&a, &b);
        assert!(
            e < 1e-4,
            "{}: parameters after 6 dropout steps rel err {e}",
            gpu.id()
        );
        let (la, lb) = (
            trainer.take_mean_loss(&g).unwrap(),
            trainer2.take_mean_loss(&cpu2).unwrap(),
        );
        assert!(
            (la - lb).abs() <= 1e-4 * lb.abs(),
            "{}: loss {la} vs {lb}",
            gpu.id()
        );
    }
}

#[test]
fn opencl_dropout_training_follows_cpu() {
    dropout_training_matches_cpu(crate::support::Target::OpenCl)
}

#[test]
fn cuda_dropout_training_follows_cpu() {
    dropout_training_matches_cpu(crate::support::Target::Cuda)
}

#[test]
fn hip_dropout_training_follows_cpu() {
    dropout_training_matches_cpu(crate::support::Target::Hip)
}

#[test]
fn hip_on_cuda_dropout_training_follows_cpu() {
    dropout_training_matches_cpu(crate::support::Target::HipOnCuda)
}
