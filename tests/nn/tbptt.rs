//! Truncated backpropagation through time (`TrainingConfig::carry_state`,
//! `Dataset::token_streams`): the training loop and the `Trainer` carrying each stream's state
//! from window to window equal the same SGD steps carried by hand through the state API, and
//! differ from training without the carry; the errors.

use rnn::nn::{
    Dataset, Loss, Network, Optimizer, Progress, RecurrentCell, RecurrentOptions, RecurrentState,
    Rng, RnnOutput, TrainingConfig,
};
use rnn::{Activation, Context, Error};

use crate::support::rel_err;

const VOCAB: usize = 5;
const STREAMS: usize = 3;
const WINDOW: usize = 4;
const LR: f32 = 0.5;

fn model(ctx: &Context, cell: RecurrentCell, opts: RecurrentOptions) -> Network {
    Network::builder(ctx)
        .seed(11)
        .sequence_length(WINDOW)
        .embedding(VOCAB, 3)
        .recurrent(cell, 3, 4, RnnOutput::Sequence, opts)
        .dense(4 * opts.directions(), VOCAB, Activation::Identity)
        .build(Loss::SoftmaxCrossEntropy)
        .unwrap()
}

fn tokens(n: usize) -> Vec<u32> {
    let mut rng = Rng::new(2);
    (0..n).map(|_| rng.below(VOCAB) as u32).collect()
}

fn config(epochs: usize, carry_state: bool) -> TrainingConfig {
    TrainingConfig {
        use_gpu: false,
        epochs,
        batch_size: STREAMS,
        learning_rate: LR,
        optimizer: Optimizer::sgd(),
        shuffle: false,
        progress: Progress::Off,
        carry_state,
        ..Default::default()
    }
}

/// Samples `from..from + STREAMS` of `data` as their own data set.
fn batch(data: &Dataset, from: usize) -> Dataset {
    let ids = data.token_ids().unwrap();
    let (rnn::nn::Targets::Classes { labels, .. }, w) = (data.targets(), data.width()) else {
        unreachable!("token streams have class targets")
    };
    let rows = from * w..(from + STREAMS) * w;
    let targets = rnn::nn::Targets::Classes {
        labels: labels[rows.clone()].to_vec(),
        classes: VOCAB,
        per_sample: w,
    };
    Dataset::tokens(ids[rows].to_vec(), w, targets).unwrap()
}

/// `epochs` passes of plain SGD over the windows in order, each window's state the final state
/// of the one before (zeros at each epoch's start), carried through the state API.
fn by_hand(net: &mut Network, data: &Dataset, epochs: usize) {
    let ctx = net.context().clone();
    for _ in 0..epochs {
        let mut state: RecurrentState = net.zero_state(STREAMS);
        for from in (0..data.len() - data.len() % STREAMS).step_by(STREAMS) {
            let b = batch(data, from);
            net.compute_gradients_with_state(&b, &state, None).unwrap();
            let g = net.gradients().unwrap();
            let x = ctx
                .tensor_as(&[STREAMS, WINDOW], b.token_ids().unwrap())
                .unwrap();
            let (_, end) = net.forward_with_state(&x, &state).unwrap();
            state = end;
            let p: Vec<f32> = net
                .parameters()
                .unwrap()
                .iter()
                .zip(&g)
                .map(|(p, g)| p - LR * g)
                .collect();
            net.set_parameters(&p).unwrap();
        }
    }
}

#[test]
fn carried_training_equals_the_state_carried_by_hand() {
    let ctx = Context::cpu();
    // 3 streams of 4 windows.
    let data =
        Dataset::token_streams(&tokens(STREAMS * 4 * WINDOW + 1), VOCAB, STREAMS, WINDOW).unwrap();
    assert_eq!(data.len(), 4 * STREAMS);
    let cells = [
        (RecurrentCell::Lstm, RecurrentOptions::new().layers(2)),
        (RecurrentCell::Gru, RecurrentOptions::new()),
        (
            RecurrentCell::Rnn(Activation::Tanh),
            RecurrentOptions::new(),
        ),
    ];
    for (cell, opts) in cells {
        let mut want = model(&ctx, cell, opts);
        by_hand(&mut want, &data, 2);
        let want = want.parameters().unwrap();
        let mut carried = model(&ctx, cell, opts);
        carried.train(&data, &config(2, true)).unwrap();
        let e = rel_err(&carried.parameters().unwrap(), &want);
        assert!(
            e < 1e-4,
            "{cell:?}: carried training vs by hand, rel err {e}"
        );
        // Without the carry every window starts from zeros: other parameters.
        let mut plain = model(&ctx, cell, opts);
        plain.train(&data, &config(2, false)).unwrap();
        let e = rel_err(&plain.parameters().unwrap(), &want);
        assert!(
            e > 1e-3,
            "{cell:?}: training without the carry matched it ({e})"
        );
        // The Trainer carries the same way (zeros again when it wraps around).
        let mut stepped = model(&ctx, cell, opts);
        let mut trainer = stepped.trainer(&data, &config(1, true)).unwrap();
        for _ in 0..8 {
            trainer.step(&mut stepped).unwrap();
        }
        let e = rel_err(&stepped.parameters().unwrap(), &want);
        assert!(e < 1e-4, "{cell:?}: Trainer vs by hand, rel err {e}");
        // Plain passes still start from zeros after carried training.
        let b = batch(&data, 0);
        let x = ctx
            .tensor_as(&[STREAMS, WINDOW], b.token_ids().unwrap())
            .unwrap();
        let plain_out = carried.forward(&x).unwrap().to_vec().unwrap();
        let zero = carried.zero_state(STREAMS);
        let (from_zero, _) = carried.forward_with_state(&x, &zero).unwrap();
        assert_eq!(plain_out, from_zero.to_vec().unwrap(), "{cell:?}");
    }
}

#[test]
fn token_streams_lay_out_consecutive_windows() {
    let t: Vec<u32> = (0..23).map(|i| i % VOCAB as u32).collect();
    // 22 inputs with a next token: 2 streams of 11, windows of 5: 2 windows each.
    let d = Dataset::token_streams(&t, VOCAB, 2, 5).unwrap();
    assert_eq!(d.len(), 4);
    let ids = d.token_ids().unwrap();
    // Window w of stream b starts at b * 11 + w * 5.
    for (sample, start) in [(0, 0), (1, 11), (2, 5), (3, 16)] {
        assert_eq!(&ids[sample * 5..sample * 5 + 5], &t[start..start + 5]);
    }
    let rnn::nn::Targets::Classes { labels, .. } = d.targets() else {
        unreachable!()
    };
    assert_eq!(&labels[15..20], &t[17..22]);
    assert!(Dataset::token_streams(&t, VOCAB, 0, 5).is_err());
    assert!(Dataset::token_streams(&t, VOCAB, 5, 5).is_err());
}

#[test]
fn carry_state_errors() {
    let ctx = Context::cpu();
    let data = Dataset::token_streams(&tokens(100), VOCAB, STREAMS, WINDOW).unwrap();
    let mut net = model(&ctx, RecurrentCell::Lstm, RecurrentOptions::new());
    let shuffled = TrainingConfig {
        shuffle: true,
        ..config(1, true)
    };
    let e = net.train(&data, &shuffled).unwrap_err();
    assert!(e.to_string().contains("shuffle"), "{e}");
    let mut bi = model(
        &ctx,
        RecurrentCell::Gru,
        RecurrentOptions::new().bidirectional(true),
    );
    let e = bi.train(&data, &config(1, true)).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    assert!(e.to_string().contains("bidirectional"), "{e}");
    let mut dense = Network::builder(&ctx)
        .sequence_length(WINDOW)
        .embedding(VOCAB, 3)
        .dense(3, VOCAB, Activation::Identity)
        .build(Loss::SoftmaxCrossEntropy)
        .unwrap();
    let e = dense.train(&data, &config(1, true)).unwrap_err();
    assert!(e.to_string().contains("no recurrent layer"), "{e}");
    // Padded windows end at different steps: no state to carry past the padding.
    let lengths: Vec<usize> = (0..data.len()).map(|i| 1 + i % WINDOW).collect();
    let padded = data.with_lengths(&lengths).unwrap();
    let e = net.train(&padded, &config(1, true)).unwrap_err();
    assert!(e.to_string().contains("padded"), "{e}");
    let e = net.trainer(&padded, &config(1, true)).unwrap_err();
    assert!(e.to_string().contains("padded"), "{e}");
    let initial = net.zero_state(padded.len());
    let e = net
        .compute_gradients_with_state(&padded, &initial, None)
        .unwrap_err();
    assert!(e.to_string().contains("padded"), "{e}");
}

/// Carried training on `t`'s devices (training steps recorded as graphs where the device
/// records them, so the carry copy replays inside the step) against the same on the CPU.
fn carried_training_follows_cpu(t: crate::support::Target) {
    let data =
        Dataset::token_streams(&tokens(STREAMS * 6 * WINDOW + 1), VOCAB, STREAMS, WINDOW).unwrap();
    let cells = [
        (RecurrentCell::Lstm, RecurrentOptions::new().layers(2)),
        (RecurrentCell::Gru, RecurrentOptions::new()),
    ];
    let on = |ctx: &Context| TrainingConfig {
        optimizer: Optimizer::sgd(),
        learning_rate: LR,
        shuffle: false,
        progress: Progress::Off,
        carry_state: true,
        ..crate::fixtures::config_for(ctx, 3, STREAMS, LR)
    };
    let cpu = Context::cpu();
    for ctx in crate::support::contexts(t, "gpu_carried_training") {
        for (cell, opts) in cells {
            let mut want = model(&cpu, cell, opts);
            want.train(&data, &on(&cpu)).unwrap();
            let mut got = model(&ctx, cell, opts);
            let history = got.train(&data, &on(&ctx)).unwrap();
            assert_eq!(history.device, ctx.id());
            let e = rel_err(&got.parameters().unwrap(), &want.parameters().unwrap());
            assert!(
                e < 1e-3,
                "{} {cell:?}: parameters vs CPU, rel err {e}",
                ctx.id()
            );
        }
    }
}

target_tests!(carried_training_follows_cpu:
    opencl_carried_training_follows_cpu => OpenCl,
    cuda_carried_training_follows_cpu => Cuda,
    hip_carried_training_follows_cpu => Hip,
    hip_on_cuda_carried_training_follows_cpu => HipOnCuda,
);
