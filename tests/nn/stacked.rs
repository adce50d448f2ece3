//! Stacked and bidirectional RNN/LSTM/GRU layers: PyTorch semantics (names, output layout,
//! `h_n`) against an f64 reference, finite-difference gradient checks, checkpoints, and every
//! GPU backend against the CPU.

use std::collections::HashMap;

use proptest::prelude::*;
use rnn::nn::{Dataset, Loss, Network, RecurrentCell, RecurrentOptions, Rng, RnnOutput, Targets};
use rnn::{Activation, Context};

use crate::fixtures::config_for;
use crate::follow::{affine, assert_follows_cpu, sequence_and_last_data, sigmoid};
use crate::gated::check;
use crate::gradcheck::{LayerCase, classes, random, sequence_and_last};
use crate::support::{Target, contexts, rel_err};

const CELLS: [RecurrentCell; 4] = [
    RecurrentCell::Rnn(Activation::Tanh),
    RecurrentCell::Rnn(Activation::Relu),
    RecurrentCell::Lstm,
    RecurrentCell::Gru,
];

fn gates(cell: RecurrentCell) -> usize {
    match cell {
        RecurrentCell::Rnn(_) => 1,
        RecurrentCell::Lstm => 4,
        RecurrentCell::Gru => 3,
        other => unreachable!("no reference for {other:?}"),
    }
}

/// The network's parameters by name, as a PyTorch `state_dict` would hold them.
fn state_dict(net: &Network) -> HashMap<String, Vec<f32>> {
    let p = net.parameters().unwrap();
    net.param_info()
        .iter()
        .map(|t| (t.name.clone(), p[t.offset..t.offset + t.len()].to_vec()))
        .collect()
}

/// One direction of one layer over one sample's sequence, PyTorch's equations in f64; the
/// hidden state after every step, in the order the steps were taken.
fn run_cell(
    cell: RecurrentCell,
    sd: &HashMap<String, Vec<f32>>,
    suffix: &str,
    xs: &[Vec<f64>],
    h: usize,
) -> Vec<Vec<f64>> {
    let get = |n: &str| &sd[&format!("0.{n}{suffix}")];
    let (w_ih, w_hh, b_ih, b_hh) = (
        get("weight_ih"),
        get("weight_hh"),
        get("bias_ih"),
        get("bias_hh"),
    );
    let (mut hs, mut cs) = (vec![0.0f64; h], vec![0.0f64; h]);
    let mut out = Vec::new();
    for x in xs {
        let gx = affine(w_ih, b_ih, x);
        let gh = affine(w_hh, b_hh, &hs);
        for j in 0..h {
            match cell {
                RecurrentCell::Rnn(act) => {
                    let z = gx[j] + gh[j];
                    hs[j] = if act == Activation::Relu {
                        z.max(0.0)
                    } else {
                        z.tanh()
                    };
                }
                RecurrentCell::Lstm => {
                    let a = |k: usize| gx[k * h + j] + gh[k * h + j];
                    let (ig, fg, gg, og) =
                        (sigmoid(a(0)), sigmoid(a(1)), a(2).tanh(), sigmoid(a(3)));
                    cs[j] = fg * cs[j] + ig * gg;
                    hs[j] = og * cs[j].tanh();
                }
                RecurrentCell::Gru => {
                    let r = sigmoid(gx[j] + gh[j]);
                    let z = sigmoid(gx[h + j] + gh[h + j]);
                    let n = (gx[2 * h + j] + r * gh[2 * h + j]).tanh();
                    hs[j] = (1.0 - z) * n + z * hs[j];
                }
                other => unreachable!("no reference for {other:?}"),
            }
        }
        out.push(hs.clone());
    }
    out
}

/// PyTorch's `output` (`[n][steps][H * dirs]`) and `h_n` of the top layer in the layout
/// `Last` promises (`[n][H * dirs]`: forward then reverse), flat.
fn reference(
    cell: RecurrentCell,
    sd: &HashMap<String, Vec<f32>>,
    x: &[f32],
    shape: (usize, usize, usize),
    opts: RecurrentOptions,
) -> (Vec<f32>, Vec<f32>) {
    reference_train(cell, sd, x, shape, opts, None)
}

/// [`reference`] in training: with `Some(seed)`, the inter-layer dropout of a network built
/// with that seed (layer 0, random counter 0) is applied to the outputs of every layer but the
/// last, element `(t * n + b) * width + j` of each (time-major rows, as the device holds them).
fn reference_train(
    cell: RecurrentCell,
    sd: &HashMap<String, Vec<f32>>,
    x: &[f32],
    (t, i, h): (usize, usize, usize),
    opts: RecurrentOptions,
    dropout_seed: Option<u64>,
) -> (Vec<f32>, Vec<f32>) {
    let n = x.len() / (t * i);
    let (mut seq, mut last) = (Vec::new(), Vec::new());
    for (b, sample) in x.chunks(t * i).enumerate() {
        let mut input: Vec<Vec<f64>> = sample
            .chunks(i)
            .map(|r| r.iter().map(|&v| v as f64).collect())
            .collect();
        let mut h_n = Vec::new();
        for k in 0..opts.num_layers {
            let fwd = run_cell(cell, sd, &format!("_l{k}"), &input, h);
            h_n = fwd[t - 1].clone();
            let mut out = fwd;
            if opts.bidirectional {
                let rev_in: Vec<Vec<f64>> = input.iter().rev().cloned().collect();
                let rev = run_cell(cell, sd, &format!("_l{k}_reverse"), &rev_in, h);
                h_n.extend_from_slice(&rev[t - 1]);
                for (s, o) in out.iter_mut().enumerate() {
                    o.extend_from_slice(&rev[t - 1 - s]);
                }
            }
            if let Some(seed) = dropout_seed
                && k + 1 < opts.num_layers
            {
                let state = rnn::ops::rng_state_values(seed, 0);
                let p = opts.dropout;
                for (s, o) in out.iter_mut().enumerate() {
                    let w = o.len();
                    for (j, v) in o.iter_mut().enumerate() {
                        let idx = ((s * n + b) * w + j) as u32;
                        let keep = rnn::ops::dropout_keeps(&state, k as u32, idx, p);
                        *v = if keep { *v / (1.0 - p as f64) } else { 0.0 };
                    }
                }
            }
            input = out;
        }
        seq.extend(input.iter().flatten().map(|&v| v as f32));
        last.extend(h_n.iter().map(|&v| v as f32));
    }
    (seq, last)
}

fn stack(
    ctx: &Context,
    cell: RecurrentCell,
    (t, i, h): (usize, usize, usize),
    output: RnnOutput,
    opts: RecurrentOptions,
) -> Network {
    Network::builder(ctx)
        .seed(9)
        .sequence_length(t)
        .recurrent(cell, i, h, output, opts)
        .build(Loss::Mse)
        .unwrap()
}

#[test]
fn cpu_stack_matches_pytorch_semantics() {
    let ctx = Context::cpu();
    let (n, t, i, h) = (3, 4, 2, 3);
    let mut rng = Rng::new(12);
    for cell in CELLS {
        for (layers, bidir) in [(2, false), (1, true), (3, true)] {
            let opts = RecurrentOptions::new().layers(layers).bidirectional(bidir);
            let dirs = opts.directions();
            let mut seq = stack(&ctx, cell, (t, i, h), RnnOutput::Sequence, opts);
            // PyTorch's parameter names, shapes and order.
            let mut want = Vec::new();
            for k in 0..layers {
                for sfx in ["", "_reverse"].iter().take(dirs) {
                    let g = gates(cell) * h;
                    let inp = if k == 0 { i } else { h * dirs };
                    want.push((format!("0.weight_ih_l{k}{sfx}"), vec![g, inp]));
                    want.push((format!("0.weight_hh_l{k}{sfx}"), vec![g, h]));
                    want.push((format!("0.bias_ih_l{k}{sfx}"), vec![g]));
                    want.push((format!("0.bias_hh_l{k}{sfx}"), vec![g]));
                }
            }
            let got: Vec<(String, Vec<usize>)> = seq
                .param_info()
                .iter()
                .map(|p| (p.name.clone(), p.shape.clone()))
                .collect();
            assert_eq!(got, want, "{cell:?} {opts:?}");
            assert_eq!(seq.output_features(), h * dirs);

            let p: Vec<f32> = (0..seq.num_parameters())
                .map(|_| rng.uniform_range(-1.2, 1.2))
                .collect();
            seq.set_parameters(&p).unwrap();
            let x = random(&mut rng, n * t * i);
            let (want_seq, want_last) = reference(cell, &state_dict(&seq), &x, (t, i, h), opts);
            let e = rel_err(&seq.predict(&x).unwrap(), &want_seq);
            assert!(e < 1e-5, "{cell:?} {opts:?} sequence: rel err {e}");

            let mut last = stack(&ctx, cell, (t, i, h), RnnOutput::Last, opts);
            last.set_parameters(&p).unwrap();
            let got = last.predict(&x).unwrap();
            let e = rel_err(&got, &want_last);
            assert!(e < 1e-5, "{cell:?} {opts:?} last: rel err {e}");
            if bidir && t > 1 {
                // h_n is not the last row of the output: the reverse half differs.
                let last_row: Vec<f32> = want_seq
                    .chunks(t * h * dirs)
                    .flat_map(|s| s[(t - 1) * h * dirs..].to_vec())
                    .collect();
                assert!(rel_err(&got, &last_row) > 1e-3, "{cell:?} {opts:?}");
            }
        }
    }
}

/// Plain options build exactly the plain layer: same names, same parameters, same outputs.
#[test]
fn cpu_plain_options_are_the_plain_layer() {
    let ctx = Context::cpu();
    let x = random(&mut Rng::new(3), 2 * 3 * 2);
    let plain = |b: rnn::nn::NetworkBuilder| b.seed(4).sequence_length(3);
    let mut a = plain(Network::builder(&ctx))
        .lstm(2, 3, RnnOutput::Sequence)
        .build(Loss::Mse)
        .unwrap();
    let mut b = plain(Network::builder(&ctx))
        .recurrent(
            RecurrentCell::Lstm,
            2,
            3,
            RnnOutput::Sequence,
            RecurrentOptions::new(),
        )
        .build(Loss::Mse)
        .unwrap();
    assert_eq!(a.layers(), b.layers());
    assert_eq!(a.param_info(), b.param_info());
    assert_eq!(a.predict(&x).unwrap(), b.predict(&x).unwrap());
}

#[test]
fn cpu_stack_bad_options_are_errors() {
    let ctx = Context::cpu();
    let try_build = |cell, opts: RecurrentOptions| {
        Network::builder(&ctx)
            .sequence_length(3)
            .recurrent(cell, 2, 3, RnnOutput::Last, opts)
            .build(Loss::Mse)
    };
    let two = RecurrentOptions::new().layers(2);
    for (cell, opts, what) in [
        (
            RecurrentCell::Lstm,
            RecurrentOptions::new().layers(0),
            "num_layers",
        ),
        (RecurrentCell::Gru, two.dropout(1.0), "dropout"),
        (RecurrentCell::Gru, two.dropout(-0.1), "dropout"),
        (RecurrentCell::Gru, two.dropout(f32::NAN), "dropout"),
        (RecurrentCell::Rnn(Activation::Sigmoid), two, "Tanh or Relu"),
    ] {
        let err = try_build(cell, opts).unwrap_err();
        assert!(matches!(err, rnn::Error::InvalidArgument(_)), "{err}");
        assert!(err.to_string().contains(what), "{err}");
    }
    // The next layer must take `2 * hidden` from a bidirectional layer.
    let err = Network::builder(&ctx)
        .sequence_length(3)
        .recurrent(
            RecurrentCell::Gru,
            2,
            3,
            RnnOutput::Last,
            RecurrentOptions::new().bidirectional(true),
        )
        .dense(3, 1, Activation::Identity)
        .build(Loss::Mse)
        .unwrap_err();
    assert!(err.to_string().contains("gives 6"), "{err}");
}

/// PyTorch's `dropout` argument: in training it drops outputs of every layer but the last
/// (exactly the masks `RandomOps::dropout` defines, at those places); in prediction it is off.
#[test]
fn cpu_stack_dropout_training_only() {
    let ctx = Context::cpu();
    let (n, t, i, h) = (3, 4, 2, 5);
    let mut rng = Rng::new(23);
    for cell in CELLS {
        for bidir in [false, true] {
            let opts = RecurrentOptions::new()
                .layers(3)
                .bidirectional(bidir)
                .dropout(0.4);
            let mut net = stack(&ctx, cell, (t, i, h), RnnOutput::Sequence, opts);
            let mut plain = stack(
                &ctx,
                cell,
                (t, i, h),
                RnnOutput::Sequence,
                opts.dropout(0.0),
            );
            assert!(net.layers()[0] != plain.layers()[0]);
            let x = random(&mut rng, n * t * i);
            let sd = state_dict(&net);
            // Evaluation: no dropout.
            let got = net.predict(&x).unwrap();
            assert_eq!(got, plain.predict(&x).unwrap(), "{cell:?} {opts:?}");
            // Training (`compute_gradients` runs in training mode): the reference's masks.
            let w = h * opts.directions();
            let zeros = vec![0.0; n * t * w];
            let data = Dataset::regression(x.clone(), t * i, zeros, t * w).unwrap();
            let loss = net.compute_gradients(&data).unwrap() as f64;
            let (y, _) = reference_train(cell, &sd, &x, (t, i, h), opts, Some(9));
            let want = y.iter().map(|&v| (v as f64).powi(2)).sum::<f64>() / (n * t * w) as f64;
            assert!(
                (loss - want).abs() <= 1e-5 * want,
                "{cell:?} {opts:?}: training loss {loss}, reference {want}"
            );
            let plain_loss = plain.compute_gradients(&data).unwrap() as f64;
            assert!(
                (loss - plain_loss).abs() > 1e-3 * plain_loss,
                "{cell:?} {opts:?}"
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, ..ProptestConfig::default() })]

    /// The gradients with inter-layer dropout in training (the masks stay fixed across the
    /// finite differences: `compute_gradients` does not advance the random state).
    #[test]
    fn cpu_stack_dropout_gradients(seed in any::<u64>(), n in 1usize..3, t in 1usize..4, h in 1usize..3, p in 0.1f32..0.6) {
        let ctx = Context::cpu();
        let mut rng = Rng::new(seed);
        for cell in [RecurrentCell::Rnn(Activation::Tanh), RecurrentCell::Lstm, RecurrentCell::Gru] {
            for bidir in [false, true] {
                let opts = RecurrentOptions::new().layers(3).bidirectional(bidir).dropout(p);
                let w = h * opts.directions();
                let mut net = Network::builder(&ctx)
                    .seed(seed)
                    .sequence_length(t)
                    .dense(2, 3, Activation::Tanh)
                    .recurrent(cell, 3, h, RnnOutput::Last, opts)
                    .dense(w, 2, Activation::Identity)
                    .build(Loss::Mse)
                    .unwrap();
                let data = Dataset::regression(random(&mut rng, n * t * 2), t * 2, random(&mut rng, n * 2), 2).unwrap();
                // eps 4e-3, the f32 optimum for central differences (cube root of the unit
                // roundoff): three layers of masks scaled by up to 1/(1-p) amplify the loss's
                // rounding noise, which at 1e-3 reached the tolerance (a CI draw at p = 0.51).
                check(&mut net, &data, 4e-3, 3e-2, &format!("{cell:?} {opts:?} dropout"));
            }
        }
    }

    /// Every cell, stacked and bidirectional, as a sequence model (a head at every step) and
    /// from `Last`, with a dense layer in front so the stack's input gradient is checked too.
    #[test]
    fn cpu_stack_gradients(seed in any::<u64>(), n in 1usize..3, t in 1usize..4, i in 1usize..3, h in 1usize..3, layers in 1usize..3) {
        let ctx = Context::cpu();
        let mut rng = Rng::new(seed);
        // Relu's kinks make finite differences meaningless at random points: Tanh stands in
        // for the Elman cell here (Relu's path differs only in the cell kernel).
        for cell in [RecurrentCell::Rnn(Activation::Tanh), RecurrentCell::Lstm, RecurrentCell::Gru] {
            for bidir in [false, true] {
                let opts = RecurrentOptions::new().layers(layers).bidirectional(bidir);
                if opts == RecurrentOptions::new() {
                    continue;
                }
                let case = LayerCase { cell, opts, n, t, i, h };
                sequence_and_last(&ctx, case, true, seed, &mut rng, check);
            }
        }
    }
}

#[test]
fn cpu_stack_checkpoint_round_trip() {
    let ctx = Context::cpu();
    let dir = std::env::temp_dir().join(format!("rnn-nn-test-stack-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("stack.safetensors");
    // Two layers of `cell` (bidirectional or not), then three GRU layers.
    let model = |seed, cell, bidirectional: bool| {
        let first = RecurrentOptions::new()
            .layers(2)
            .bidirectional(bidirectional);
        let width = if bidirectional { 8 } else { 4 };
        Network::builder(&ctx)
            .seed(seed)
            .sequence_length(3)
            .recurrent(cell, 2, 4, RnnOutput::Sequence, first)
            .recurrent(
                RecurrentCell::Gru,
                width,
                3,
                RnnOutput::Last,
                RecurrentOptions::new().layers(3),
            )
            .build(Loss::Mse)
            .unwrap()
    };
    for cell in CELLS {
        let mut a = model(1, cell, true);
        a.save(&path).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
        assert_eq!(st.len(), 4 * 4 + 3 * 4);
        let g = gates(cell) * 4;
        assert_eq!(st.tensor("0.weight_ih_l0").unwrap().shape(), [g, 2]);
        assert_eq!(st.tensor("0.weight_ih_l1_reverse").unwrap().shape(), [g, 8]);
        assert_eq!(st.tensor("0.bias_hh_l1_reverse").unwrap().shape(), [g]);
        assert_eq!(st.tensor("1.weight_hh_l2").unwrap().shape(), [9, 3]);
        let mut b = model(2, cell, true);
        assert_ne!(a.parameters().unwrap(), b.parameters().unwrap());
        b.load(&path).unwrap();
        assert_eq!(a.parameters().unwrap(), b.parameters().unwrap());
        let x: Vec<f32> = (0..12).map(|i| (i as f32 * 0.37).sin()).collect();
        assert_eq!(a.predict(&x).unwrap(), b.predict(&x).unwrap());
        // A one-direction checkpoint does not load into the bidirectional network.
        let err = model(1, cell, false).load(&path).unwrap_err();
        assert!(err.to_string().contains("0.weight_ih_l1"), "{err}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// One-hot classes at every step; the label of step `t` is the class of step `t + 1` (of
/// the last step, its own): only a layer that reads the sequence backwards can know it.
fn next_step(rng: &mut Rng, n: usize, t: usize, c: usize) -> Dataset {
    let (mut x, mut labels) = (Vec::new(), Vec::new());
    for _ in 0..n {
        let cls = classes(rng, t, c);
        for &k in &cls {
            x.extend((0..c).map(|j| if j == k as usize { 1.0 } else { 0.0 }));
        }
        labels.extend((0..t).map(|s| cls[(s + 1).min(t - 1)]));
    }
    let targets = Targets::Classes {
        labels,
        classes: c,
        per_sample: t,
    };
    Dataset::new(x, t * c, targets).unwrap()
}

fn next_step_model(
    ctx: &Context,
    cell: RecurrentCell,
    t: usize,
    c: usize,
    opts: RecurrentOptions,
) -> Network {
    let w = 12 * opts.directions();
    Network::builder(ctx)
        .seed(5)
        .sequence_length(t)
        .recurrent(cell, c, 12, RnnOutput::Sequence, opts)
        .dense(w, c, Activation::Identity)
        .build(Loss::SoftmaxCrossEntropy)
        .unwrap()
}

/// The reverse half of each output row belongs to the same time step as the forward half: a
/// bidirectional layer learns to predict the next step's class, a one-direction layer cannot
/// do better than chance there.
#[test]
fn cpu_bidirectional_training_sees_the_future() {
    let ctx = Context::cpu();
    let (t, c) = (6, 3);
    let mut rng = Rng::new(17);
    let train = next_step(&mut rng, 384, t, c);
    let test = next_step(&mut rng, 128, t, c);
    for cell in [RecurrentCell::Gru, RecurrentCell::Lstm] {
        let mut accs = Vec::new();
        for bidir in [true, false] {
            let opts = RecurrentOptions::new().layers(2).bidirectional(bidir);
            let mut net = next_step_model(&ctx, cell, t, c, opts);
            let h = net.train(&train, &config_for(&ctx, 12, 32, 1e-2)).unwrap();
            assert!(h.losses().iter().all(|v| v.is_finite()), "{:?}", h.losses());
            accs.push(net.evaluate(&test).unwrap().accuracy.unwrap());
        }
        // Chance on the 5 steps that need the future, certainty on the last: about 0.44.
        assert!(accs[0] > 0.9, "{cell:?} bidirectional accuracy {}", accs[0]);
        assert!(accs[1] < 0.6, "{cell:?} one-direction accuracy {}", accs[1]);
    }
}

/// On every device of `target`: outputs, loss and every gradient of stacked bidirectional
/// networks of each cell with inter-layer dropout (sequence and last state, with a layer in
/// front) agree with the CPU, and so do a few training steps.
fn follows_cpu(target: Target, test: &str) {
    let (t, h) = (5, 5);
    let mut rng = Rng::new(41);
    let (seq_data, last_data) = sequence_and_last_data(&mut rng, (4, t, 3, 4));
    // With dropout: the masks are the same bits on every backend.
    let bi2 = RecurrentOptions::new()
        .layers(2)
        .bidirectional(true)
        .dropout(0.25);
    let train = next_step(&mut rng, 96, 4, 3);
    let train_opts = RecurrentOptions::new()
        .layers(2)
        .bidirectional(true)
        .dropout(0.2);
    let contexts = contexts(target, test);
    for cell in CELLS {
        let model = |ctx: &Context, last: bool| {
            let b = Network::builder(ctx)
                .seed(6)
                .sequence_length(t)
                .dense(3, 4, Activation::Tanh);
            if last {
                b.recurrent(cell, 4, h, RnnOutput::Last, bi2)
                    .dense(2 * h, 2, Activation::Identity)
                    .build(Loss::Mse)
            } else {
                b.recurrent(cell, 4, h, RnnOutput::Sequence, bi2)
                    .dense(2 * h, 4, Activation::Identity)
                    .build(Loss::SoftmaxCrossEntropy)
            }
            .unwrap()
        };
        let training = |ctx: &Context| {
            next_step_model(ctx, cell, 4, 3, train_opts)
                .train(&train, &config_for(ctx, 3, 32, 1e-2))
                .unwrap()
        };
        let cases = [(false, &seq_data), (true, &last_data)];
        assert_follows_cpu(&contexts, &format!("{cell:?}"), cases, model, training);
    }
}

target_tests!(follows_cpu(named):
    opencl_stack_follows_cpu => OpenCl,
    cuda_stack_follows_cpu => Cuda,
    hip_stack_follows_cpu => Hip,
    hip_on_cuda_stack_follows_cpu => HipOnCuda,
);
