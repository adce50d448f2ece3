//! LSTM and GRU layers: PyTorch semantics against an f64 reference, finite-difference gradient
//! checks, checkpoints with PyTorch names, training, and every GPU backend against the CPU.

use proptest::prelude::*;
use rnn::nn::{Dataset, Loss, Network, RecurrentCell, RecurrentOptions, Rng, RnnOutput};
use rnn::{Activation, Context};

use crate::fixtures::config_for;
use crate::follow::{affine, assert_follows_cpu, sequence_and_last_data, sigmoid};
use crate::gradcheck::{LayerCase, classes, random, sequence_and_last};
use crate::support::{Target, contexts, rel_err};

#[derive(Debug, Clone, Copy, PartialEq)]
enum Cell {
    Lstm,
    Gru,
}

impl Cell {
    fn gates(self) -> usize {
        match self {
            Cell::Lstm => 4,
            Cell::Gru => 3,
        }
    }
}

trait AddCell {
    fn cell(self, cell: Cell, inputs: usize, hidden: usize, output: RnnOutput) -> Self;
}

impl AddCell for rnn::nn::NetworkBuilder {
    fn cell(self, cell: Cell, inputs: usize, hidden: usize, output: RnnOutput) -> Self {
        match cell {
            Cell::Lstm => self.lstm(inputs, hidden, output),
            Cell::Gru => self.gru(inputs, hidden, output),
        }
    }
}

/// PyTorch's `nn.LSTM` / `nn.GRU` forward in f64 from the flat parameters (layout order
/// `weight_ih_l0, weight_hh_l0, bias_ih_l0, bias_hh_l0`), zero initial state. `x` is
/// `[n][steps][inputs]` flat; returns every hidden state, `[n][steps][hidden]` flat.
fn reference(cell: Cell, p: &[f32], x: &[f32], steps: usize, i: usize, h: usize) -> Vec<f64> {
    let g = cell.gates() * h;
    let (w_ih, rest) = p.split_at(g * i);
    let (w_hh, rest) = rest.split_at(g * h);
    let (b_ih, b_hh) = rest.split_at(g);
    let mut out = Vec::new();
    for sample in x.chunks(steps * i) {
        let mut hs = vec![0.0f64; h];
        let mut cs = vec![0.0f64; h];
        for xt in sample.chunks(i) {
            let xt: Vec<f64> = xt.iter().map(|&v| v as f64).collect();
            let gx = affine(w_ih, b_ih, &xt);
            let gh = affine(w_hh, b_hh, &hs);
            for j in 0..h {
                match cell {
                    Cell::Lstm => {
                        let a = |k: usize| gx[k * h + j] + gh[k * h + j];
                        let (ig, fg, gg, og) =
                            (sigmoid(a(0)), sigmoid(a(1)), a(2).tanh(), sigmoid(a(3)));
                        cs[j] = fg * cs[j] + ig * gg;
                        hs[j] = og * cs[j].tanh();
                    }
                    Cell::Gru => {
                        let r = sigmoid(gx[j] + gh[j]);
                        let z = sigmoid(gx[h + j] + gh[h + j]);
                        let n = (gx[2 * h + j] + r * gh[2 * h + j]).tanh();
                        hs[j] = (1.0 - z) * n + z * hs[j];
                    }
                }
            }
            out.extend_from_slice(&hs);
        }
    }
    out
}

/// Central differences of the mean loss for every parameter, compared with the analytic
/// gradient tensor by tensor: a wrong input gradient of a recurrent layer shows as a wrong
/// gradient of the layer in front of it, which a norm over all parameters could hide. Gated
/// cells are smooth, so unlike ReLU networks no parameter sits on a kink. A tensor whose
/// gradient is tiny is held to `tol` times a floor instead of its own norm, since f32 loss
/// differences carry noise of about 1e-4 per element.
pub(crate) fn check(net: &mut Network, data: &Dataset, eps: f32, tol: f64, what: &str) {
    net.compute_gradients(data).unwrap();
    let analytic = net.gradients().unwrap();
    let base = net.parameters().unwrap();
    let mut p = base.clone();
    let mut numeric = vec![0.0f32; base.len()];
    for (k, g) in numeric.iter_mut().enumerate() {
        p[k] = base[k] + eps;
        net.set_parameters(&p).unwrap();
        let plus = net.compute_gradients(data).unwrap() as f64;
        p[k] = base[k] - eps;
        net.set_parameters(&p).unwrap();
        let minus = net.compute_gradients(data).unwrap() as f64;
        p[k] = base[k];
        *g = ((plus - minus) / (2.0 * eps as f64)) as f32;
    }
    net.set_parameters(&base).unwrap();
    assert!(
        numeric.iter().any(|g| g.abs() > 1e-3),
        "{what}: numeric gradient is all ~zero: the check would prove nothing"
    );
    let norm = |v: &[f32]| v.iter().map(|&x| (x as f64).powi(2)).sum::<f64>().sqrt();
    for t in net.param_info() {
        let r = t.offset..t.offset + t.len();
        let (a, n) = (&analytic[r.clone()], &numeric[r]);
        let diff: Vec<f32> = a.iter().zip(n).map(|(x, y)| x - y).collect();
        let floor = 1e-2 * (t.len() as f64).sqrt();
        let e = norm(&diff) / norm(n).max(floor);
        assert!(
            e < tol,
            "{what}: {} gradient rel err {e} (tol {tol})\nanalytic {a:?}\nnumeric {n:?}",
            t.name
        );
    }
}

#[test]
fn cpu_forward_matches_pytorch_semantics() {
    let ctx = Context::cpu();
    let (n, t, i, h) = (3, 4, 2, 3);
    let mut rng = Rng::new(11);
    for cell in [Cell::Lstm, Cell::Gru] {
        let g = cell.gates() * h;
        let mut net = Network::builder(&ctx)
            .seed(5)
            .sequence_length(t)
            .cell(cell, i, h, RnnOutput::Sequence)
            .build(Loss::Mse)
            .unwrap();
        let shapes: Vec<(&str, Vec<usize>)> = net
            .param_info()
            .iter()
            .map(|p| (p.name.as_str(), p.shape.clone()))
            .collect();
        assert_eq!(
            shapes,
            [
                ("0.weight_ih_l0", vec![g, i]),
                ("0.weight_hh_l0", vec![g, h]),
                ("0.bias_ih_l0", vec![g]),
                ("0.bias_hh_l0", vec![g]),
            ],
            "{cell:?}"
        );
        // PyTorch initializes every recurrent parameter in ±1/sqrt(H).
        let bound = 1.0 / (h as f32).sqrt();
        let init = net.parameters().unwrap();
        assert!(init.iter().all(|v| v.abs() <= bound), "{cell:?}: {init:?}");
        assert!(init.iter().any(|v| v.abs() > 0.5 * bound), "{cell:?}");

        // Weights large enough to drive every gate well away from its linear range.
        let p: Vec<f32> = (0..net.num_parameters())
            .map(|_| rng.uniform_range(-1.5, 1.5))
            .collect();
        net.set_parameters(&p).unwrap();
        let x = random(&mut rng, n * t * i);
        let want = reference(cell, &p, &x, t, i, h);
        let got = net.predict(&x).unwrap();
        let want32: Vec<f32> = want.iter().map(|&v| v as f32).collect();
        let e = rel_err(&got, &want32);
        assert!(
            e < 1e-5,
            "{cell:?}: rel err {e}\ngot {got:?}\nwant {want:?}"
        );

        // `Last` hands on exactly the last state of each sample.
        let mut last = Network::builder(&ctx)
            .sequence_length(t)
            .cell(cell, i, h, RnnOutput::Last)
            .build(Loss::Mse)
            .unwrap();
        last.set_parameters(&p).unwrap();
        let got = last.predict(&x).unwrap();
        let want_last: Vec<f32> = want32
            .chunks(t * h)
            .flat_map(|s| s[(t - 1) * h..].to_vec())
            .collect();
        let e = rel_err(&got, &want_last);
        assert!(e < 1e-5, "{cell:?} last: rel err {e}");
    }
}

/// A case small enough to follow by hand: one unit, one input, every weight 0.5 and every
/// bias 0, input 1 then -1.
#[test]
fn cpu_hand_computed_single_unit() {
    let ctx = Context::cpu();
    let s = |v: f64| 1.0 / (1.0 + (-v).exp());
    // LSTM: step 1 pre-activations are 0.5 for every gate (h_0 = 0), so
    // c_1 = s(.5) tanh(.5), h_1 = s(.5) tanh(c_1); step 2 pre-activations are -0.5 + 0.5 h_1.
    let c1 = s(0.5) * 0.5f64.tanh();
    let h1 = s(0.5) * c1.tanh();
    let a2 = -0.5 + 0.5 * h1;
    let c2 = s(a2) * c1 + s(a2) * a2.tanh();
    let h2 = s(a2) * c2.tanh();
    // GRU: gx = 0.5 x, gh = 0.5 h_prev per gate.
    let n1 = 0.5f64.tanh();
    let g1 = (1.0 - s(0.5)) * n1;
    let (r2, z2) = (s(-0.5 + 0.5 * g1), s(-0.5 + 0.5 * g1));
    let n2 = (-0.5 + r2 * 0.5 * g1).tanh();
    let g2 = (1.0 - z2) * n2 + z2 * g1;
    for (cell, want) in [(Cell::Lstm, [h1, h2]), (Cell::Gru, [g1, g2])] {
        let mut net = Network::builder(&ctx)
            .sequence_length(2)
            .cell(cell, 1, 1, RnnOutput::Sequence)
            .build(Loss::Mse)
            .unwrap();
        let g = cell.gates();
        let mut p = vec![0.5f32; 2 * g];
        p.extend(vec![0.0f32; 2 * g]);
        net.set_parameters(&p).unwrap();
        let got = net.predict(&[1.0, -1.0]).unwrap();
        for (a, b) in got.iter().zip(want) {
            assert!(
                (*a as f64 - b).abs() < 1e-6,
                "{cell:?}: {got:?} vs {want:?}"
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    #[test]
    fn cpu_gated_gradients_sequence_and_last(seed in any::<u64>(), n in 1usize..4, t in 1usize..5, i in 1usize..4, h in 1usize..4) {
        let mut rng = Rng::new(seed);
        for cell in [RecurrentCell::Lstm, RecurrentCell::Gru] {
            let case = LayerCase { cell, opts: RecurrentOptions::new(), n, t, i, h };
            sequence_and_last(&Context::cpu(), case, false, seed, &mut rng, check);
        }
    }
}

#[test]
fn cpu_stacked_lstm_gru_rnn() {
    let ctx = Context::cpu();
    let mut rng = Rng::new(8);
    let (n, t, i) = (3, 5, 2);
    let mut net = Network::builder(&ctx)
        .seed(2)
        .sequence_length(t)
        .lstm(i, 3, RnnOutput::Sequence)
        .gru(3, 4, RnnOutput::Sequence)
        .rnn(4, 3, Activation::Tanh, RnnOutput::Last)
        .dense(3, 2, Activation::Identity)
        .build(Loss::SoftmaxCrossEntropy)
        .unwrap();
    let data =
        Dataset::classification(random(&mut rng, n * t * i), t * i, vec![0, 1, 1], 2).unwrap();
    check(&mut net, &data, 1e-3, 3e-2, "lstm > gru > rnn");
}

#[test]
fn cpu_gated_checkpoint_round_trip() {
    let ctx = Context::cpu();
    let dir = std::env::temp_dir().join(format!("rnn-nn-test-gated-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("gated.safetensors");
    let model = |seed| {
        Network::builder(&ctx)
            .seed(seed)
            .sequence_length(3)
            .lstm(2, 4, RnnOutput::Sequence)
            .gru(4, 3, RnnOutput::Last)
            .build(Loss::Mse)
            .unwrap()
    };
    let mut a = model(1);
    a.save(&path).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let mut names = st.names();
    names.sort();
    assert_eq!(
        names,
        [
            "0.bias_hh_l0",
            "0.bias_ih_l0",
            "0.weight_hh_l0",
            "0.weight_ih_l0",
            "1.bias_hh_l0",
            "1.bias_ih_l0",
            "1.weight_hh_l0",
            "1.weight_ih_l0"
        ]
    );
    assert_eq!(st.tensor("0.weight_ih_l0").unwrap().shape(), [16, 2]);
    assert_eq!(st.tensor("1.weight_hh_l0").unwrap().shape(), [9, 3]);
    let mut b = model(2);
    assert_ne!(a.parameters().unwrap(), b.parameters().unwrap());
    b.load(&path).unwrap();
    assert_eq!(a.parameters().unwrap(), b.parameters().unwrap());
    let x: Vec<f32> = (0..12).map(|i| (i as f32 * 0.37).sin()).collect();
    assert_eq!(a.predict(&x).unwrap(), b.predict(&x).unwrap());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The class of a sample is written only at its first step; the later steps are noise, so the
/// layer must carry it through the whole sequence.
fn remember_first(rng: &mut Rng, n: usize, t: usize, c: usize) -> Dataset {
    let mut x = Vec::with_capacity(n * t * c);
    let labels = classes(rng, n, c);
    for &label in &labels {
        for k in 0..c {
            x.push(if k == label as usize { 1.0 } else { 0.0 });
        }
        x.extend((0..(t - 1) * c).map(|_| rng.uniform_range(-0.5, 0.5)));
    }
    Dataset::classification(x, t * c, labels, c).unwrap()
}

fn memory_model(ctx: &Context, cell: Cell, t: usize, c: usize) -> Network {
    Network::builder(ctx)
        .seed(7)
        .sequence_length(t)
        .cell(cell, c, 16, RnnOutput::Last)
        .dense(16, c, Activation::Identity)
        .build(Loss::SoftmaxCrossEntropy)
        .unwrap()
}

#[test]
fn cpu_gated_training_remembers_the_first_step() {
    let ctx = Context::cpu();
    let (t, c) = (8, 3);
    let mut rng = Rng::new(21);
    let train = remember_first(&mut rng, 384, t, c);
    let test = remember_first(&mut rng, 128, t, c);
    for cell in [Cell::Lstm, Cell::Gru] {
        let mut net = memory_model(&ctx, cell, t, c);
        let mut config = config_for(&ctx, 16, 32, 1e-2);
        config.clip_grad_norm = Some(1.0);
        let h = net.train(&train, &config).unwrap();
        let l = h.losses();
        assert!(l.iter().all(|v| v.is_finite()), "{cell:?}: {l:?}");
        assert!(
            l[l.len() - 1] < 0.25 * l[0],
            "{cell:?}: loss should fall to under a quarter: {l:?}"
        );
        let acc = net.evaluate(&test).unwrap().accuracy.unwrap();
        assert!(
            acc > 0.95,
            "{cell:?}: held-out accuracy {acc} (losses {l:?})"
        );
    }
}

/// On every device of `target`: outputs, loss and every gradient of LSTM and GRU networks
/// (sequence and last state, with a layer in front so the input gradient is exercised) agree
/// with the CPU backend, and a short training run follows the CPU's losses.
fn follows_cpu(target: Target, test: &str) {
    let (t, i, c) = (6, 3, 4);
    let mut rng = Rng::new(31);
    let (seq_data, last_data) = sequence_and_last_data(&mut rng, (5, t, i, c));
    let (tt, tc) = (6, 3);
    let train = remember_first(&mut rng, 96, tt, tc);
    let contexts = contexts(target, test);
    for cell in [Cell::Lstm, Cell::Gru] {
        let model = |ctx: &Context, last: bool| {
            let b = Network::builder(ctx).sequence_length(t);
            if last {
                b.seed(4)
                    .dense(i, 5, Activation::Tanh)
                    .cell(cell, 5, 6, RnnOutput::Last)
                    .dense(6, 2, Activation::Identity)
                    .build(Loss::Mse)
            } else {
                b.seed(3)
                    .cell(cell, i, 7, RnnOutput::Sequence)
                    .dense(7, c, Activation::Identity)
                    .build(Loss::SoftmaxCrossEntropy)
            }
            .unwrap()
        };
        let training = |ctx: &Context| {
            memory_model(ctx, cell, tt, tc)
                .train(&train, &config_for(ctx, 3, 32, 1e-2))
                .unwrap()
        };
        let cases = [(false, &seq_data), (true, &last_data)];
        assert_follows_cpu(&contexts, &format!("{cell:?}"), cases, model, training);
    }
}

target_tests!(follows_cpu(named):
    opencl_gated_follow_cpu => OpenCl,
    cuda_gated_follow_cpu => Cuda,
    hip_gated_follow_cpu => Hip,
    hip_on_cuda_gated_follow_cpu => HipOnCuda,
);
