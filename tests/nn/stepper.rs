//! Step-by-step inference ([`rnn::nn::Stepper`]) against the whole-sequence forward pass: Elman,
//! LSTM and GRU, one layer and two stacked, on token ids through an embedding and on features,
//! a dense head at every step or after the last state, fed one step a call and several, on the
//! CPU and every backend; the carried state read back and set; the same sampled text as a full
//! re-run from the start; bad input.

use rnn::nn::{
    CharCorpus, Loss, Network, RecurrentCell, RecurrentOptions, Rng, RnnOutput, StepState, Stepper,
};
use rnn::{Activation, Context, Error};

use crate::eval_graphs::records;
use crate::support::{Target, contexts};

const BATCH: usize = 3;
const STEPS: usize = 7;
const VOCAB: usize = 11;
const FEATURES: usize = 4;
const HIDDEN: usize = 8;
/// Steps per call: one, several, and a change of size in between (7 in all).
const CALLS: [usize; 4] = [1, 2, 3, 1];

const CELLS: [RecurrentCell; 3] = [
    RecurrentCell::Rnn(Activation::Tanh),
    RecurrentCell::Lstm,
    RecurrentCell::Gru,
];

/// How a test model reads its input.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Input {
    Tokens,
    Features,
}

/// A model: its cell, layers, input and output.
type Kind = (RecurrentCell, usize, Input, RnnOutput);

/// `input -> recurrent(cell, layers) -> dense` over `steps` steps. One layer takes the plain
/// builder methods (the single-cell layers), two the stacked layer.
fn model(ctx: &Context, (cell, layers, input, output): Kind, steps: usize) -> Network {
    let mut b = Network::builder(ctx).seed(7).sequence_length(steps);
    let width = match input {
        Input::Tokens => {
            b = b.embedding(VOCAB, 5);
            5
        }
        Input::Features => FEATURES,
    };
    b = match (cell, layers) {
        (RecurrentCell::Rnn(act), 1) => b.rnn(width, HIDDEN, act, output),
        (RecurrentCell::Lstm, 1) => b.lstm(width, HIDDEN, output),
        (RecurrentCell::Gru, 1) => b.gru(width, HIDDEN, output),
        _ => b.recurrent(
            cell,
            width,
            HIDDEN,
            output,
            RecurrentOptions::new().layers(layers).dropout(0.3),
        ),
    };
    // Dropout after the recurrent layer too: off in inference, on both sides.
    b.dropout(0.2)
        .dense(HIDDEN, VOCAB, Activation::Identity)
        .build(Loss::SoftmaxCrossEntropy)
        .unwrap()
}

/// Values per step of an input.
fn width(input: Input) -> usize {
    match input {
        Input::Tokens => 1,
        Input::Features => FEATURES,
    }
}

/// `BATCH` samples of `steps` steps, sample-major: token ids (as f32) or features.
fn inputs(input: Input, steps: usize, seed: u64) -> Vec<f32> {
    let mut rng = Rng::new(seed);
    (0..BATCH * steps * width(input))
        .map(|_| match input {
            Input::Tokens => rng.below(VOCAB) as f32,
            Input::Features => rng.uniform() * 2.0 - 1.0,
        })
        .collect()
}

/// Steps `from..from + k` of every sample of `x` (`width` values a step), sample-major.
fn steps_of(x: &[f32], width: usize, from: usize, k: usize) -> Vec<f32> {
    x.chunks(x.len() / BATCH)
        .flat_map(|sample| &sample[from * width..(from + k) * width])
        .copied()
        .collect()
}

fn assert_close(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (a, b)) in got.iter().zip(want).enumerate() {
        assert!(
            (a - b).abs() <= 1e-5 * b.abs().max(1.0),
            "{what}: value {i} is {a}, the whole-sequence forward gives {b}"
        );
    }
}

/// A model's input over its whole sequence and what `predict` gives for it.
struct Reference {
    x: Vec<f32>,
    input: Input,
    output: RnnOutput,
    full: Vec<f32>,
    steps: usize,
}

impl Reference {
    fn new(net: &mut Network, (_, _, input, output): Kind, steps: usize) -> Self {
        let x = inputs(input, steps, 3);
        let full = net.predict(&x).unwrap();
        Reference {
            x,
            input,
            output,
            full,
            steps,
        }
    }

    /// Feeds the whole sequence, `calls[i]` steps in call `i`, and checks every output: each
    /// step's, or (`Last`) the final one's.
    fn follow(&self, stepper: &mut Stepper<'_>, calls: &[usize], what: &str) {
        assert_eq!(calls.iter().sum::<usize>(), self.steps, "{what}: the calls");
        let mut from = 0;
        for &k in calls {
            let got = stepper
                .step(&steps_of(&self.x, width(self.input), from, k))
                .unwrap();
            let what = format!("{what}, steps {from}..{}", from + k);
            from += k;
            match self.output {
                RnnOutput::Sequence => {
                    assert_close(&got, &steps_of(&self.full, VOCAB, from - k, k), &what)
                }
                RnnOutput::Last if from == self.steps => assert_close(&got, &self.full, &what),
                RnnOutput::Last => assert_eq!(got.len(), BATCH * VOCAB, "{what}: the last step's"),
            }
        }
    }
}

/// Every model kind: the stepper, fed [`CALLS`] steps at a time and then one step a call
/// after a reset, gives the outputs of `predict` over the whole sequence.
fn stepper_matches_full_forward(target: Target, test: &str) {
    for ctx in contexts(target, test) {
        for cell in CELLS {
            for layers in [1, 2] {
                for input in [Input::Tokens, Input::Features] {
                    for output in [RnnOutput::Sequence, RnnOutput::Last] {
                        let what = format!("{} {cell:?} x{layers} {input:?} {output:?}", ctx.id());
                        check_model(target, &ctx, (cell, layers, input, output), &what);
                    }
                }
            }
        }
    }
}

fn check_model(target: Target, ctx: &Context, kind: Kind, what: &str) {
    let mut net = model(ctx, kind, STEPS);
    let reference = Reference::new(&mut net, kind, STEPS);
    let mut stepper = net.stepper(BATCH).unwrap();
    reference.follow(&mut stepper, &CALLS, what);
    stepper.reset().unwrap();
    reference.follow(&mut stepper, &[1; STEPS], &format!("{what}, after a reset"));
    // One step a call: its first call ran op by op, the second (the fourth call) was recorded,
    // and the calls after the reset replay it; 2 and 3 steps a call ran once, op by op.
    let want = if records(target) {
        (1, STEPS as u64)
    } else {
        (0, 0)
    };
    assert_eq!(stepper.graph_counts(), want, "{what}: (recorded, replayed)");
}

target_tests!(stepper_matches_full_forward(named):
    cpu_stepper_matches_full_forward => Cpu,
    opencl_stepper_matches_full_forward => OpenCl,
    cuda_stepper_matches_full_forward => Cuda,
    hip_stepper_matches_full_forward => Hip,
    hip_on_cuda_stepper_matches_full_forward => HipOnCuda,
);

/// More steps-per-call sizes than the stepper keeps buffers for: the least recently used go
/// (one step a call among them, made again later), and the state moves with every change.
fn many_shapes(target: Target, test: &str) {
    const CALLS: [usize; 7] = [1, 2, 3, 4, 5, 1, 5];
    for ctx in contexts(target, test) {
        for cell in CELLS {
            let kind = (cell, 2, Input::Tokens, RnnOutput::Sequence);
            let steps = CALLS.iter().sum();
            let mut net = model(&ctx, kind, steps);
            let reference = Reference::new(&mut net, kind, steps);
            let mut stepper = net.stepper(BATCH).unwrap();
            reference.follow(&mut stepper, &CALLS, &format!("{} {cell:?}", ctx.id()));
        }
    }
}

target_tests!(many_shapes(named):
    cpu_stepper_many_shapes => Cpu,
    opencl_stepper_many_shapes => OpenCl,
    cuda_stepper_many_shapes => Cuda,
    hip_stepper_many_shapes => Hip,
    hip_on_cuda_stepper_many_shapes => HipOnCuda,
);

/// The state read after some steps and set into a fresh stepper continues the sequence as the
/// first stepper does; its layout is PyTorch's `[layers, batch, hidden]`.
fn state_round_trip(target: Target, test: &str) {
    for ctx in contexts(target, test) {
        for cell in CELLS {
            let mut net = model(&ctx, (cell, 2, Input::Features, RnnOutput::Sequence), STEPS);
            let x = inputs(Input::Features, STEPS, 5);
            let full = net.predict(&x).unwrap();
            let mut a = net.stepper(BATCH).unwrap();
            a.step(&steps_of(&x, FEATURES, 0, 3)).unwrap();
            let state = a.state().unwrap();
            assert_eq!(state.len(), 1, "{cell:?}: one recurrent layer");
            assert_eq!(state[0].shape, [2, BATCH, HIDDEN]);
            assert_eq!(state[0].h.len(), 2 * BATCH * HIDDEN);
            assert_eq!(
                state[0].c.is_some(),
                cell == RecurrentCell::Lstm,
                "{cell:?}"
            );
            assert!(
                state[0].h.iter().any(|&v| v != 0.0),
                "{cell:?}: a state after 3 steps"
            );
            let mut b = net.stepper(BATCH).unwrap();
            b.set_state(&state).unwrap();
            assert_eq!(b.state().unwrap(), state, "{cell:?}: set then read");
            let rest = steps_of(&x, FEATURES, 3, 4);
            let want = steps_of(&full, VOCAB, 3, 4);
            assert_close(&a.step(&rest).unwrap(), &want, &format!("{cell:?} carried"));
            assert_close(&b.step(&rest).unwrap(), &want, &format!("{cell:?} set"));
            b.reset().unwrap();
            let zero = b.state().unwrap();
            assert!(zero[0].h.iter().all(|&v| v == 0.0), "{cell:?}: reset");
        }
    }
}

target_tests!(state_round_trip(named):
    cpu_stepper_state_round_trip => Cpu,
    opencl_stepper_state_round_trip => OpenCl,
    cuda_stepper_state_round_trip => Cuda,
    hip_stepper_state_round_trip => Hip,
    hip_on_cuda_stepper_state_round_trip => HipOnCuda,
);

/// Generation: warm the stepper up on a prompt, then one character a call, sampling at a seed;
/// the reference re-runs the network from the start of the text for every character (the
/// context padded to the window after its end, which a one-way recurrent network cannot see).
/// The window is as long as the whole text, so both see every character: the same text.
fn same_text_as_full_rerun(target: Target, test: &str) {
    const PROMPT: usize = 6;
    const NEW: usize = 30;
    let text = "the quick brown fox jumps over the lazy dog";
    let corpus = CharCorpus::new(text).unwrap();
    let v = corpus.vocab_size();
    let window = PROMPT + NEW;
    for ctx in contexts(target, test) {
        let mut net = Network::builder(&ctx)
            .seed(9)
            .sequence_length(window)
            .embedding(v, 6)
            .recurrent(
                RecurrentCell::Lstm,
                6,
                16,
                RnnOutput::Sequence,
                RecurrentOptions::new().layers(2),
            )
            .dense(16, v, Activation::Identity)
            .build(Loss::SoftmaxCrossEntropy)
            .unwrap();
        let prompt = corpus.token_ids(&text[..PROMPT]).unwrap();
        let mut rng = Rng::new(11);
        let mut rerun = prompt.clone();
        let mut rerun_logits = Vec::new();
        for _ in 0..NEW {
            let mut padded = rerun.clone();
            padded.resize(window, 0);
            let logits = net.predict_ids(&padded).unwrap();
            let last = &logits[(rerun.len() - 1) * v..rerun.len() * v];
            rerun.push(CharCorpus::sample_index(last, 1.0, &mut rng).unwrap() as u32);
            rerun_logits.push(last.to_vec());
        }
        let mut rng = Rng::new(11);
        let mut stepper = net.stepper(1).unwrap();
        let mut stepped = prompt.clone();
        let mut logits = stepper.step_ids(&prompt).unwrap()[(PROMPT - 1) * v..].to_vec();
        for want in &rerun_logits {
            let what = format!("{}: logits after {} characters", ctx.id(), stepped.len());
            assert_close(&logits, want, &what);
            let next = CharCorpus::sample_index(&logits, 1.0, &mut rng).unwrap() as u32;
            stepped.push(next);
            logits = stepper.step_ids(&[next]).unwrap();
        }
        assert_eq!(stepped, rerun, "{}: sampled ids", ctx.id());
    }
}

target_tests!(same_text_as_full_rerun(named):
    cpu_stepper_same_text_as_full_rerun => Cpu,
    opencl_stepper_same_text_as_full_rerun => OpenCl,
    cuda_stepper_same_text_as_full_rerun => Cuda,
    hip_stepper_same_text_as_full_rerun => Hip,
    hip_on_cuda_stepper_same_text_as_full_rerun => HipOnCuda,
);

fn invalid_argument(e: Error, needle: &str) {
    assert!(
        matches!(e, Error::InvalidArgument(_) | Error::InvalidData(_)),
        "{e:?}"
    );
    assert!(e.to_string().contains(needle), "{e} lacks '{needle}'");
}

#[test]
fn stepper_rejects_bad_networks_and_input() {
    let ctx = Context::cpu();
    let bi = Network::builder(&ctx)
        .sequence_length(4)
        .recurrent(
            RecurrentCell::Gru,
            3,
            4,
            RnnOutput::Sequence,
            RecurrentOptions::new().bidirectional(true),
        )
        .build(Loss::Mse)
        .unwrap();
    invalid_argument(bi.stepper(1).unwrap_err(), "bidirectional");
    let dense = Network::builder(&ctx)
        .dense(3, 2, Activation::Identity)
        .build(Loss::Mse)
        .unwrap();
    invalid_argument(dense.stepper(1).unwrap_err(), "no recurrent layer");

    let lstm = (RecurrentCell::Lstm, 2, Input::Tokens, RnnOutput::Sequence);
    let net = model(&ctx, lstm, STEPS);
    invalid_argument(net.stepper(0).unwrap_err(), "batch");
    let mut s = net.stepper(2).unwrap();
    invalid_argument(s.step_ids(&[1, 2, 3]).unwrap_err(), "not whole steps");
    invalid_argument(s.step_ids(&[]).unwrap_err(), "not whole steps");
    invalid_argument(s.step_ids(&[1, VOCAB as u32]).unwrap_err(), "token id");
    invalid_argument(s.step(&[1.0, 2.5]).unwrap_err(), "token id");
    invalid_argument(s.step(&[1.0, f32::NAN]).unwrap_err(), "finite");

    let gru = (RecurrentCell::Gru, 1, Input::Features, RnnOutput::Last);
    let features = model(&ctx, gru, STEPS);
    let mut f = features.stepper(1).unwrap();
    invalid_argument(f.step_ids(&[1]).unwrap_err(), "embedding");

    let good = s.state().unwrap();
    invalid_argument(s.set_state(&[]).unwrap_err(), "recurrent layer");
    let mut wrong = good.clone();
    wrong[0].shape = [2, 1, HIDDEN];
    invalid_argument(s.set_state(&wrong).unwrap_err(), "shape");
    let mut wrong = good.clone();
    wrong[0].c = None;
    invalid_argument(s.set_state(&wrong).unwrap_err(), "cell state");
    let mut wrong = good.clone();
    wrong[0].h[3] = f32::INFINITY;
    invalid_argument(s.set_state(&wrong).unwrap_err(), "finite");
    let gru_state = f.state().unwrap();
    let with_c = vec![StepState {
        c: Some(gru_state[0].h.clone()),
        ..gru_state[0].clone()
    }];
    invalid_argument(f.set_state(&with_c).unwrap_err(), "only an LSTM");
    // A failed call changes nothing.
    assert_eq!(s.state().unwrap(), good);
}
