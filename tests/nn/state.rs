//! Recurrent state in and out (`Network::forward_with_state`,
//! `Network::compute_gradients_with_state`): finite-difference checks of the gradients for the
//! initial state and of the parameter gradients of a loss that also reads the final state,
//! the state round trip (one long forward equals two short ones with the state carried), every
//! GPU backend against the CPU, and the errors.

use rnn::nn::{
    Dataset, LayerState, Loss, Network, RecurrentCell, RecurrentOptions, RecurrentState, Rng,
    RnnOutput, Targets,
};
use rnn::{Activation, Context, ContextOptions, Error, RecurrentAlgorithm};

use crate::gradcheck::random;
use crate::support::{Target, contexts_with, rel_err};

const CELLS: [RecurrentCell; 3] = [
    RecurrentCell::Rnn(Activation::Tanh),
    RecurrentCell::Lstm,
    RecurrentCell::Gru,
];

/// Samples, steps, input features and hidden units of the checked networks.
const N: usize = 3;
const T: usize = 4;
const I: usize = 2;
const H: usize = 3;

/// An embedding-free network: the recurrent layer (`opts`, `Sequence`) under a dense head with
/// MSE, or with `Last` a recurrent layer whose `h_n` feeds the head.
fn model(ctx: &Context, cell: RecurrentCell, opts: RecurrentOptions, steps: usize) -> Network {
    Network::builder(ctx)
        .seed(5)
        .sequence_length(steps)
        .recurrent(cell, I, H, RnnOutput::Sequence, opts)
        .dense(H * opts.directions(), 2, Activation::Identity)
        .build(Loss::Mse)
        .unwrap()
}

fn data(rng: &mut Rng, steps: usize) -> Dataset {
    let targets = Targets::Values {
        values: random(rng, N * steps * 2),
        width: steps * 2,
    };
    Dataset::new(random(rng, N * steps * I), steps * I, targets).unwrap()
}

/// A state shaped as `like` with random values.
fn random_state(rng: &mut Rng, like: &RecurrentState) -> RecurrentState {
    let mut s = like.clone();
    for l in &mut s.layers {
        l.h = random(rng, l.h.len());
        if let Some(c) = &mut l.c {
            *c = random(rng, c.len());
        }
    }
    s
}

/// `<a, b>` over every h and c value.
fn dot(a: &RecurrentState, b: &RecurrentState) -> f64 {
    let mut s = 0.0;
    for (x, y) in a.layers.iter().zip(&b.layers) {
        s +=
            x.h.iter()
                .zip(&y.h)
                .map(|(p, q)| *p as f64 * *q as f64)
                .sum::<f64>();
        if let (Some(p), Some(q)) = (&x.c, &y.c) {
            s += p
                .iter()
                .zip(q)
                .map(|(p, q)| *p as f64 * *q as f64)
                .sum::<f64>();
        }
    }
    s
}

/// Every h then c value of a state, flattened.
fn flat(s: &RecurrentState) -> Vec<f32> {
    let mut v = Vec::new();
    for l in &s.layers {
        v.extend(&l.h);
        v.extend(l.c.iter().flatten());
    }
    v
}

/// The same state with its `i`-th flattened value moved by `d`.
fn nudged(s: &RecurrentState, mut i: usize, d: f32) -> RecurrentState {
    let mut s = s.clone();
    let values = s
        .layers
        .iter_mut()
        .flat_map(|l| [Some(&mut l.h), l.c.as_mut()].into_iter().flatten());
    for v in values {
        if i < v.len() {
            v[i] += d;
            break;
        }
        i -= v.len();
    }
    s
}

/// The objective the checks differentiate: the network's mean loss from `h0` plus `<r, h_n>`.
fn objective(net: &mut Network, data: &Dataset, h0: &RecurrentState, r: &RecurrentState) -> f64 {
    let (loss, _) = net.compute_gradients_with_state(data, h0, Some(r)).unwrap();
    let x = net
        .context()
        .tensor(&[data.len(), data.width()], data.features())
        .unwrap();
    let (_, h_n) = net.forward_with_state(&x, h0).unwrap();
    loss as f64 + dot(r, &h_n)
}

/// Central differences of [`objective`] w.r.t. every initial-state value and a spread of
/// parameters against the analytic gradients.
fn check_state_gradients(ctx: &Context, cell: RecurrentCell, opts: RecurrentOptions, seed: u64) {
    let what = format!("{} {cell:?} {opts:?}", ctx.id());
    let mut rng = Rng::new(seed);
    let mut net = model(ctx, cell, opts, T);
    let d = data(&mut rng, T);
    let zero = net.zero_state(N);
    let (h0, r) = (random_state(&mut rng, &zero), random_state(&mut rng, &zero));
    let (_, dh0) = net.compute_gradients_with_state(&d, &h0, Some(&r)).unwrap();
    let dparams = net.gradients().unwrap();
    let eps = 1e-2f32;
    let analytic = flat(&dh0);
    let numeric: Vec<f32> = (0..analytic.len())
        .map(|i| {
            let plus = objective(&mut net, &d, &nudged(&h0, i, eps), &r);
            let minus = objective(&mut net, &d, &nudged(&h0, i, -eps), &r);
            ((plus - minus) / (2.0 * eps as f64)) as f32
        })
        .collect();
    assert!(numeric.iter().any(|g| g.abs() > 1e-3), "{what}: all ~zero");
    let e = rel_err(&analytic, &numeric);
    assert!(
        e < 1e-2,
        "{what}: initial-state gradient rel err {e}\n{analytic:?}\n{numeric:?}"
    );
    // The parameter gradients include the final-state term.
    let base = net.parameters().unwrap();
    let picks: Vec<usize> = (0..base.len()).step_by(base.len() / 12 + 1).collect();
    let mut p = base.clone();
    let (mut a, mut n) = (Vec::new(), Vec::new());
    for &i in &picks {
        p[i] = base[i] + eps;
        net.set_parameters(&p).unwrap();
        let plus = objective(&mut net, &d, &h0, &r);
        p[i] = base[i] - eps;
        net.set_parameters(&p).unwrap();
        let minus = objective(&mut net, &d, &h0, &r);
        p[i] = base[i];
        a.push(dparams[i]);
        n.push(((plus - minus) / (2.0 * eps as f64)) as f32);
    }
    net.set_parameters(&base).unwrap();
    let e = rel_err(&a, &n);
    assert!(
        e < 1e-2,
        "{what}: parameter gradient rel err {e}\n{a:?}\n{n:?}"
    );
}

fn shapes() -> [RecurrentOptions; 2] {
    [
        RecurrentOptions::new(),
        RecurrentOptions::new().layers(2).bidirectional(true),
    ]
}

#[test]
fn cpu_state_gradients_match_finite_differences() {
    let ctx = Context::cpu();
    for (k, cell) in CELLS.into_iter().enumerate() {
        for opts in shapes() {
            check_state_gradients(&ctx, cell, opts, 40 + k as u64);
        }
    }
}

/// The outputs, final states, loss and all gradients of `ctx` against the CPU's.
fn follows_cpu(t: Target) {
    follows_cpu_with(t, "gpu_recurrent_state", |_| {});
}

/// [`follows_cpu`] on contexts with `tweak` applied to their options.
fn follows_cpu_with(t: Target, test: &str, tweak: impl Fn(&mut ContextOptions)) {
    let cpu = Context::cpu();
    for ctx in contexts_with(t, test, tweak) {
        for (k, cell) in CELLS.into_iter().enumerate() {
            for opts in shapes() {
                let what = format!("{} {cell:?} {opts:?}", ctx.id());
                let mut rng = Rng::new(70 + k as u64);
                let d = data(&mut rng, T);
                let (mut a, mut b) = (model(&cpu, cell, opts, T), model(&ctx, cell, opts, T));
                let zero = a.zero_state(N);
                let (h0, r) = (random_state(&mut rng, &zero), random_state(&mut rng, &zero));
                let (la, ga) = a.compute_gradients_with_state(&d, &h0, Some(&r)).unwrap();
                let (lb, gb) = b.compute_gradients_with_state(&d, &h0, Some(&r)).unwrap();
                assert!((la - lb).abs() <= 1e-4 * la.abs() + 1e-6, "{what}: loss");
                let e = rel_err(&flat(&gb), &flat(&ga));
                assert!(e < 1e-3, "{what}: initial-state gradient rel err {e}");
                let e = rel_err(&b.gradients().unwrap(), &a.gradients().unwrap());
                assert!(e < 1e-3, "{what}: parameter gradient rel err {e}");
                let xa = cpu.tensor(&[N, T * I], d.features()).unwrap();
                let xb = ctx.tensor(&[N, T * I], d.features()).unwrap();
                let (ya, sa) = a.forward_with_state(&xa, &h0).unwrap();
                let (yb, sb) = b.forward_with_state(&xb, &h0).unwrap();
                let e = rel_err(&yb.to_vec().unwrap(), &ya.to_vec().unwrap());
                assert!(e < 1e-4, "{what}: output rel err {e}");
                let e = rel_err(&flat(&sb), &flat(&sa));
                assert!(e < 1e-4, "{what}: final state rel err {e}");
            }
        }
    }
}

/// Forced to the block-local kernels that read W_hh through the L1 cache (OpenCL only; PoCL in
/// CI): outputs, states and gradients against the CPU, and the finite-difference checks of the
/// initial-state and parameter gradients.
#[test]
fn opencl_l1_recurrent_state_follows_cpu() {
    let l1 =
        |o: &mut ContextOptions| o.recurrent_algorithm = Some(RecurrentAlgorithm::BlockLocalL1);
    follows_cpu_with(Target::OpenCl, "opencl_l1_recurrent_state", l1);
    for ctx in contexts_with(Target::OpenCl, "opencl_l1_state_gradients", l1) {
        for (k, cell) in CELLS.into_iter().enumerate() {
            for opts in shapes() {
                check_state_gradients(&ctx, cell, opts, 40 + k as u64);
            }
        }
    }
}

/// Forced to the block-local kernels with W_hh in registers
/// (`RecurrentAlgorithm::BlockLocalRegisters`; every GPU target, PoCL in CI): outputs, states
/// and gradients against the CPU.
#[test]
fn registers_recurrent_state_follows_cpu() {
    let regs = |o: &mut ContextOptions| {
        o.recurrent_algorithm = Some(RecurrentAlgorithm::BlockLocalRegisters)
    };
    for t in [Target::OpenCl, Target::Cuda, Target::Hip, Target::HipOnCuda] {
        follows_cpu_with(t, "registers_recurrent_state", regs);
    }
}

target_tests!(follows_cpu:
    opencl_recurrent_state_follows_cpu => OpenCl,
    cuda_recurrent_state_follows_cpu => Cuda,
    hip_recurrent_state_follows_cpu => Hip,
    hip_on_cuda_recurrent_state_follows_cpu => HipOnCuda,
);

#[test]
fn cpu_forward_over_2k_steps_is_two_forwards_of_k_with_the_state_carried() {
    let ctx = Context::cpu();
    let k = 3;
    for cell in CELLS {
        let opts = RecurrentOptions::new().layers(2);
        let (mut long, mut short) = (model(&ctx, cell, opts, 2 * k), model(&ctx, cell, opts, k));
        short.set_parameters(&long.parameters().unwrap()).unwrap();
        let mut rng = Rng::new(9);
        let x = random(&mut rng, N * 2 * k * I);
        let h0 = random_state(&mut rng, &long.zero_state(N));
        let (y, h_n) = long
            .forward_with_state(&ctx.tensor(&[N, 2 * k * I], &x).unwrap(), &h0)
            .unwrap();
        let halves: Vec<Vec<f32>> = (0..2)
            .map(|part| {
                (0..N)
                    .flat_map(|s| {
                        let at = s * 2 * k * I + part * k * I;
                        x[at..at + k * I].to_vec()
                    })
                    .collect()
            })
            .collect();
        let first = ctx.tensor(&[N, k * I], &halves[0]).unwrap();
        let (y1, mid) = short.forward_with_state(&first, &h0).unwrap();
        let second = ctx.tensor(&[N, k * I], &halves[1]).unwrap();
        let (y2, end) = short.forward_with_state(&second, &mid).unwrap();
        let (y, y1, y2) = (
            y.to_vec().unwrap(),
            y1.to_vec().unwrap(),
            y2.to_vec().unwrap(),
        );
        let per = k * 2;
        for s in 0..N {
            let want = &y[s * 2 * per..(s + 1) * 2 * per];
            let got: Vec<f32> = [&y1[s * per..(s + 1) * per], &y2[s * per..(s + 1) * per]].concat();
            assert!(rel_err(&got, want) < 1e-5, "{cell:?}: sample {s} outputs");
        }
        assert!(
            rel_err(&flat(&end), &flat(&h_n)) < 1e-5,
            "{cell:?}: final state"
        );
        // The plain forward still starts from zeros afterwards.
        let plain = short.forward(&first).unwrap().to_vec().unwrap();
        let (from_zero, _) = short
            .forward_with_state(&first, &short.zero_state(N))
            .unwrap();
        assert_eq!(
            plain,
            from_zero.to_vec().unwrap(),
            "{cell:?}: zero state restored"
        );
    }
}

#[test]
fn bad_states_are_clear_errors() {
    let ctx = Context::cpu();
    let mut net = model(
        &ctx,
        RecurrentCell::Lstm,
        RecurrentOptions::new().layers(2),
        T,
    );
    let x = ctx.tensor(&[N, T * I], &[0.1; N * T * I]).unwrap();
    let good = net.zero_state(N);
    assert_eq!(good.layers.len(), 1);
    assert_eq!((good.layers[0].cells, good.layers[0].batch), (2, N));
    net.forward_with_state(&x, &good).unwrap();
    // A batch that is not the input's.
    let other = net.zero_state(N + 1);
    let e = net.forward_with_state(&x, &other).unwrap_err();
    assert!(matches!(e, Error::Shape { .. }), "{e}");
    // An LSTM without its cell state.
    let mut no_c = good.clone();
    no_c.layers[0].c = None;
    let e = net.forward_with_state(&x, &no_c).unwrap_err();
    assert!(e.to_string().contains("cell state"), "{e}");
    // Too few values, and one layer state too many.
    let mut short = good.clone();
    short.layers[0].h.pop();
    assert!(net.forward_with_state(&x, &short).is_err());
    let mut two = good.clone();
    two.layers.push(LayerState::zeros(1, N, H, false));
    assert!(net.forward_with_state(&x, &two).is_err());
    // A value that is not finite.
    let mut nan = good.clone();
    nan.layers[0].h[0] = f32::NAN;
    let e = net.forward_with_state(&x, &nan).unwrap_err();
    assert!(matches!(e, Error::InvalidData(_)), "{e}");
    // A network without a recurrent layer.
    let mut dense = Network::builder(&ctx)
        .dense(2, 2, Activation::Identity)
        .build(Loss::Mse)
        .unwrap();
    let x = ctx.tensor(&[1, 2], &[0.0, 1.0]).unwrap();
    let e = dense.forward_with_state(&x, &good).unwrap_err();
    assert!(e.to_string().contains("no recurrent layer"), "{e}");
    assert!(dense.zero_state(3).layers.is_empty());
}
