//! Dropout, LayerNorm and Embedding in networks: gradient checks, training-only behaviour,
//! seeding, checkpoints, every GPU target against the CPU.

use proptest::prelude::*;
use rnn::nn::{Dataset, LayerDesc, Loss, Network, RnnOutput, TrainingConfig};
use rnn::{Activation, Context, Error};

use crate::fixtures::classifier;
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
    let mut without = classifier(&ctx, 5, [3, 6, 2], Activation::Tanh);
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

target_tests!(dropout_training_matches_cpu:
    opencl_dropout_training_follows_cpu => OpenCl,
    cuda_dropout_training_follows_cpu => Cuda,
    hip_dropout_training_follows_cpu => Hip,
    hip_on_cuda_dropout_training_follows_cpu => HipOnCuda,
);

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    /// LayerNorm first (its input gradient goes nowhere) and between layers, per step of a
    /// sequence, with trained-looking weight and bias (not the 1 / 0 init).
    #[test]
    fn cpu_layer_norm_gradients(seed in any::<u64>(), n in 1usize..4, t in 1usize..4, f in 2usize..6) {
        let ctx = Context::cpu();
        let mut rng = Rng::new(seed);
        let mut net = Network::builder(&ctx)
            .seed(seed)
            .sequence_length(t)
            .layer_norm(f)
            .rnn(f, 4, Activation::Tanh, RnnOutput::Sequence)
            .layer_norm(4)
            .dense(4, 3, Activation::Identity)
            .build(Loss::SoftmaxCrossEntropy)
            .unwrap();
        let p: Vec<f32> = net.parameters().unwrap().iter().map(|v| v + rng.uniform_range(-0.3, 0.3)).collect();
        net.set_parameters(&p).unwrap();
        let targets = rnn::nn::Targets::Classes { labels: classes(&mut rng, n * t, 3), classes: 3, per_sample: t };
        let data = Dataset::new(random(&mut rng, n * t * f), t * f, targets).unwrap();
        check(&mut net, &data, 1e-3, 3e-2, "layer norm");
    }
}

#[test]
fn layer_norm_names_init_and_checkpoint_round_trip() {
    let ctx = Context::cpu();
    let build = |seed| {
        Network::builder(&ctx)
            .seed(seed)
            .dense(3, 5, Activation::Relu)
            .layer_norm(5)
            .dropout(0.2)
            .dense(5, 2, Activation::Identity)
            .build(Loss::Mse)
            .unwrap()
    };
    let a = build(1);
    let names: Vec<(&str, Vec<usize>)> = a
        .param_info()
        .iter()
        .map(|p| (p.name.as_str(), p.shape.clone()))
        .collect();
    assert_eq!(
        names,
        [
            ("0.weight", vec![5, 3]),
            ("0.bias", vec![5]),
            ("1.weight", vec![5]),
            ("1.bias", vec![5]),
            ("3.weight", vec![2, 5]),
            ("3.bias", vec![2]),
        ]
    );
    let p = a.parameters().unwrap();
    assert_eq!(&p[20..25], &[1.0; 5]);
    assert_eq!(&p[25..30], &[0.0; 5]);
    let dir = std::env::temp_dir().join(format!("rnn-layers-ckpt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("ln.safetensors");
    let mut a = a;
    let trained: Vec<f32> = p
        .iter()
        .enumerate()
        .map(|(i, v)| v + i as f32 * 0.01)
        .collect();
    a.set_parameters(&trained).unwrap();
    a.save(&path).unwrap();
    let mut b = build(2);
    b.load(&path).unwrap();
    assert_eq!(b.parameters().unwrap(), trained);
    let x = [0.3, -0.1, 0.7, 1.0, 0.0, -2.0];
    assert_eq!(a.predict(&x).unwrap(), b.predict(&x).unwrap());
    std::fs::remove_dir_all(&dir).unwrap();
    let err = Network::builder(&ctx)
        .dense(2, 2, Activation::Tanh)
        .layer_norm_eps(2, 0.0)
        .build(Loss::Mse)
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
}

fn embedding_lstm(ctx: &Context, seed: u64, vocab: usize, t: usize) -> Network {
    Network::builder(ctx)
        .seed(seed)
        .sequence_length(t)
        .embedding(vocab, 3)
        .lstm(3, 4, RnnOutput::Sequence)
        .dense(4, vocab, Activation::Identity)
        .build(Loss::SoftmaxCrossEntropy)
        .unwrap()
}

fn id_data(rng: &mut Rng, n: usize, t: usize, vocab: usize) -> Dataset {
    let ids: Vec<f32> = (0..n * t).map(|_| rng.below(vocab) as f32).collect();
    let targets = rnn::nn::Targets::Classes {
        labels: classes(rng, n * t, vocab),
        classes: vocab,
        per_sample: t,
    };
    Dataset::new(ids, t, targets).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    /// Few ids over many positions: every used row of the table collects several gradients.
    #[test]
    fn cpu_embedding_gradients(seed in any::<u64>(), n in 1usize..4, t in 1usize..5, vocab in 2usize..5) {
        let ctx = Context::cpu();
        let mut rng = Rng::new(seed);
        let mut net = embedding_lstm(&ctx, seed, vocab, t);
        let data = id_data(&mut rng, n, t, vocab);
        // The loss is f32: at eps 1e-3 its rounding alone moves a central difference by about
        // 3e-5, as much as this model's smaller gradients (a draw failed at 6% relative error on
        // noise alone). Its LSTM has no kinks, so a larger step costs nothing.
        check(&mut net, &data, 1e-2, 3e-2, "embedding");
    }
}

#[test]
fn embedding_ids_are_checked_before_anything_runs() {
    let ctx = Context::cpu();
    let mut net = embedding_lstm(&ctx, 1, 5, 3);
    assert_eq!(
        net.layers()[0],
        LayerDesc::Embedding {
            num_embeddings: 5,
            dim: 3
        }
    );
    let grads_before = net.gradients().unwrap();
    for bad in [5.0, -1.0, 1.5, 1e9] {
        let ids = vec![0.0, 4.0, bad];
        let targets = rnn::nn::Targets::Classes {
            labels: vec![0, 1, 2],
            classes: 5,
            per_sample: 3,
        };
        let data = Dataset::new(ids.clone(), 3, targets).unwrap();
        let is_bad_data =
            |e: Error| matches!(e, Error::InvalidData(ref m) if m.contains("token id"));
        assert!(is_bad_data(net.compute_gradients(&data).unwrap_err()));
        assert!(is_bad_data(net.evaluate(&data).unwrap_err()));
        let config = TrainingConfig {
            use_gpu: false,
            epochs: 1,
            ..Default::default()
        };
        assert!(is_bad_data(net.train(&data, &config).unwrap_err()));
        assert!(is_bad_data(net.predict(&ids).unwrap_err()));
        let x = ctx.tensor(&[1, 3], &ids).unwrap();
        assert!(is_bad_data(net.forward(&x).unwrap_err()));
    }
    assert_eq!(net.gradients().unwrap(), grads_before);
    let err = Network::builder(&ctx)
        .sequence_length(2)
        .dense(1, 3, Activation::Tanh)
        .embedding(4, 3)
        .build(Loss::Mse)
        .unwrap_err();
    assert!(err.to_string().contains("first layer"), "{err}");
}

#[test]
fn embedding_checkpoint_round_trip_and_corpus_ids() {
    let ctx = Context::cpu();
    let corpus = rnn::nn::CharCorpus::new("to be or not to be").unwrap();
    let v = corpus.vocab_size();
    let data = corpus.id_sequences(4, 3, 100).unwrap();
    let tokens = corpus.token_sequences(4, 3, 100).unwrap();
    let tokens_f32: Vec<f32> = tokens
        .token_ids()
        .unwrap()
        .iter()
        .map(|&k| k as f32)
        .collect();
    assert_eq!(
        (&tokens_f32[..], tokens.targets()),
        (data.features(), data.targets())
    );
    let one_hot = corpus.sequences(4, 3, 100).unwrap();
    assert_eq!(data.len(), one_hot.len());
    assert_eq!(data.targets(), one_hot.targets());
    for (ids, rows) in data
        .features()
        .chunks(4)
        .zip(one_hot.features().chunks(4 * v))
    {
        for (id, row) in ids.iter().zip(rows.chunks(v)) {
            assert_eq!(row[*id as usize], 1.0);
        }
    }
    let mut a = embedding_lstm(&ctx, 3, v, 4);
    assert_eq!(a.param_info()[0].name, "0.weight");
    assert_eq!(a.param_info()[0].shape, [v, 3]);
    let config = TrainingConfig {
        use_gpu: false,
        epochs: 2,
        batch_size: 2,
        ..Default::default()
    };
    a.train(&data, &config).unwrap();
    let dir = std::env::temp_dir().join(format!("rnn-emb-ckpt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("emb.safetensors");
    a.save(&path).unwrap();
    let mut b = embedding_lstm(&ctx, 4, v, 4);
    b.load(&path).unwrap();
    assert_eq!(a.parameters().unwrap(), b.parameters().unwrap());
    let x = corpus.ids("to b").unwrap();
    assert_eq!(a.predict(&x).unwrap(), b.predict(&x).unwrap());
    let ids = corpus.token_ids("to b").unwrap();
    assert_eq!(a.predict(&x).unwrap(), a.predict_ids(&ids).unwrap());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Embedding + LayerNorm + dropout training on every GPU target follows the CPU.
fn layers_follow_cpu(target: crate::support::Target) {
    for gpu in crate::support::contexts(target, "gpu_layers_follow_cpu") {
        let mut rng = Rng::new(21);
        let (vocab, t) = (7, 6);
        let data = id_data(&mut rng, 32, t, vocab);
        let build = |ctx: &Context| {
            Network::builder(ctx)
                .seed(8)
                .sequence_length(t)
                .embedding(vocab, 5)
                .layer_norm(5)
                .gru(5, 8, RnnOutput::Sequence)
                .dropout(0.2)
                .layer_norm(8)
                .dense(8, vocab, Activation::Identity)
                .build(Loss::SoftmaxCrossEntropy)
                .unwrap()
        };
        let config = TrainingConfig {
            use_gpu: false,
            batch_size: 8,
            seed: 2,
            ..Default::default()
        };
        let (mut g, mut c) = (build(&gpu), build(&Context::cpu()));
        let mut tg = g.trainer(&data, &config).unwrap();
        let mut tc = c.trainer(&data, &config).unwrap();
        for _ in 0..5 {
            tg.step(&mut g).unwrap();
            tc.step(&mut c).unwrap();
        }
        let e = rel_err(&g.parameters().unwrap(), &c.parameters().unwrap());
        assert!(e < 1e-4, "{}: parameters rel err {e}", gpu.id());
        let x = &data.features()[..2 * t];
        let e = rel_err(&g.predict(x).unwrap(), &c.predict(x).unwrap());
        assert!(e < 1e-4, "{}: predictions rel err {e}", gpu.id());
    }
}

target_tests!(layers_follow_cpu:
    opencl_layers_follow_cpu => OpenCl,
    cuda_layers_follow_cpu => Cuda,
    hip_layers_follow_cpu => Hip,
    hip_on_cuda_layers_follow_cpu => HipOnCuda,
);

/// A data set of u32 token ids trains exactly as the same ids held as f32 features, predicts
/// the same through `predict_ids`, keeps its ids through a split, and is refused with an id
/// past the table or by a network without an embedding.
#[test]
fn token_id_data_matches_f32_ids() {
    let ctx = Context::cpu();
    let mut rng = Rng::new(5);
    let (vocab, t) = (6, 4);
    let f = id_data(&mut rng, 10, t, vocab);
    let ids: Vec<u32> = f.features().iter().map(|&v| v as u32).collect();
    let u = Dataset::tokens(ids.clone(), t, f.targets().clone()).unwrap();
    assert_eq!((u.len(), u.width()), (f.len(), f.width()));
    assert!(u.features().is_empty() && f.token_ids().is_none());
    let config = TrainingConfig {
        use_gpu: false,
        epochs: 2,
        batch_size: 3,
        ..Default::default()
    };
    let (mut a, mut b) = (
        embedding_lstm(&ctx, 9, vocab, t),
        embedding_lstm(&ctx, 9, vocab, t),
    );
    a.train(&f, &config).unwrap();
    b.train(&u, &config).unwrap();
    assert_eq!(a.parameters().unwrap(), b.parameters().unwrap());
    assert_eq!(a.evaluate(&f).unwrap(), b.evaluate(&u).unwrap());
    assert_eq!(
        a.predict(f.features()).unwrap(),
        b.predict_ids(&ids).unwrap()
    );
    let (first, _) = u.split_at(3).unwrap();
    assert_eq!(first.token_ids(), Some(&ids[..3 * t]));

    let mut bad = ids.clone();
    bad[5] = vocab as u32;
    let data = Dataset::tokens(bad.clone(), t, f.targets().clone()).unwrap();
    let is_bad_id = |e: Error| matches!(e, Error::InvalidData(ref m) if m.contains("token id"));
    assert!(is_bad_id(b.check_data(&data).unwrap_err()));
    assert!(is_bad_id(b.evaluate(&data).unwrap_err()));
    assert!(is_bad_id(b.predict_ids(&bad).unwrap_err()));
    let mut dense = Network::builder(&ctx)
        .dense(t, vocab, Activation::Identity)
        .build(Loss::SoftmaxCrossEntropy)
        .unwrap();
    let needs_embedding =
        |e: Error| matches!(e, Error::InvalidData(ref m) if m.contains("embedding"));
    assert!(needs_embedding(dense.check_data(&u).unwrap_err()));
    assert!(needs_embedding(dense.predict_ids(&ids).unwrap_err()));
}

/// An id past 2^24, which f32 features cannot hold (2^24 + 1 rounds to 2^24): `predict_ids`
/// looks up exactly that row of the table.
#[test]
fn token_ids_beyond_2_24() {
    const NUM: usize = (1 << 24) + 2;
    let ctx = Context::cpu();
    let mut net = Network::builder(&ctx)
        .embedding(NUM, 1)
        .dense(1, 1, Activation::Identity)
        .build(Loss::Mse)
        .unwrap();
    // Row i of the table holds i % 1000; the dense layer passes it through.
    let mut params: Vec<f32> = (0..NUM).map(|i| (i % 1000) as f32).collect();
    params.extend([1.0, 0.0]);
    net.set_parameters(&params).unwrap();
    let far = (1u32 << 24) + 1;
    assert_eq!(
        net.predict_ids(&[far, far - 1, 3]).unwrap(),
        [217.0, 216.0, 3.0]
    );
    // The same id as f32 is 2^24: the row before.
    assert_eq!(net.predict(&[far as f32]).unwrap(), [216.0]);
}
