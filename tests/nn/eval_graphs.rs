//! Evaluation and prediction batches recorded once per batch size as device graphs (CUDA, HIP)
//! and replayed give the same bits as running them op by op, across parameter updates, a partial
//! last batch, and dropout (off in evaluation, on in the training in between). On the CPU and
//! OpenCL both sides run op by op and nothing is recorded.

use rnn::nn::{CharCorpus, Dataset, Evaluation, Loss, Network, Optimizer, RnnOutput};
use rnn::nn::{Progress, TrainingConfig};
use rnn::{Activation, Context};

use crate::support::{Target, contexts};

static MNIST: &[u8] = include_bytes!("../../examples/data/mnist_5k.csv.gz");
static TEXT: &str = include_str!("../../examples/data/asyoulik.txt");

/// Samples evaluated: one full evaluation batch (1024) and a partial one of 76.
const EVAL: usize = 1100;
/// Rounds of (evaluate and predict op by op, then `CALLS` times with graphs, then train).
const ROUNDS: u64 = 3;
const CALLS: u64 = 3;

/// Whether this target records graphs here (every CUDA and HIP runtime the crate supports can),
/// unless `RNN_GRAPHS` turns them off.
pub(crate) fn records(t: Target) -> bool {
    let env_off = std::env::var("RNN_GRAPHS").is_ok_and(|v| {
        matches!(
            v.trim().to_ascii_lowercase().as_str(),
            "0" | "off" | "false" | "no"
        )
    });
    matches!(t, Target::Cuda | Target::Hip | Target::HipOnCuda) && !env_off
}

fn bits(e: &Evaluation) -> (u32, Option<u32>) {
    (e.loss.to_bits(), e.accuracy.map(f32::to_bits))
}

fn same_bits(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

/// Runs the rounds on `net` and checks every graphed result against the op-by-op one of the
/// same round, then the number of recordings and replays.
fn check(target: Target, net: &mut Network, what: &str, val: &Dataset, train: &Dataset) {
    let ctx = net.context().clone();
    let config = TrainingConfig {
        use_gpu: ctx.id() != rnn::DeviceId::Cpu,
        prefer_gpu: false,
        device: Some(ctx.id()),
        epochs: 1,
        batch_size: 50,
        learning_rate: 1e-2,
        optimizer: Optimizer::adam(),
        // The per-epoch validation evaluates through the same path (one batch of 60).
        validation_split: 0.2,
        progress: Progress::Off,
        seed: 5,
        ..Default::default()
    };
    assert_eq!(net.eval_graph_counts(), (0, 0));
    for round in 0..ROUNDS {
        net.set_graphs(false);
        let want = net.evaluate(val).unwrap();
        let want_out = net.predict(val.features()).unwrap();
        net.set_graphs(true);
        for call in 0..CALLS {
            let got = net.evaluate(val).unwrap();
            assert_eq!(
                bits(&got),
                bits(&want),
                "{} {what} round {round} call {call}: evaluate {got:?} with graphs, {want:?} \
                 op by op",
                ctx.id()
            );
            let out = net.predict(val.features()).unwrap();
            assert!(
                same_bits(&out, &want_out),
                "{} {what} round {round} call {call}: predictions differ (rel err {:e})",
                ctx.id(),
                crate::support::rel_err(&out, &want_out)
            );
        }
        // The parameters change in place; the next round's replays must read the new ones.
        let history = net.train(train, &config).unwrap();
        let val_loss = history.last().unwrap().val_loss.unwrap();
        assert!(val_loss.is_finite(), "{what}: validation loss {val_loss}");
    }
    let counts = net.eval_graph_counts();
    if records(target) {
        // Per batch size (1024, 76) and kind (evaluate, predict): the first graphed call runs
        // op by op, the second records, the rest replay. The training's validation batch (60)
        // is warmed, recorded and replayed once over the three runs.
        let calls = ROUNDS * CALLS;
        let want = (2 * 2 + 1, 2 * 2 * (calls - 2) + 1);
        assert_eq!(counts, want, "{} {what}: (recorded, replayed)", ctx.id());
    } else {
        assert_eq!(counts, (0, 0), "{} {what}: nothing records here", ctx.id());
    }
}

fn eval_graphs_match_op_by_op(target: Target, test: &str) {
    // RUST_LOG=warn shows why a recording fell back to op by op (the counts below catch it).
    let _ = env_logger::builder().is_test(true).try_init();
    let data = Dataset::from_mnist_csv(MNIST).unwrap();
    let (rest, val) = data.train_test_split(EVAL, 2).unwrap();
    let train = rest.split_at(300).unwrap().0;
    let corpus = CharCorpus::new(&TEXT[..8_000]).unwrap();
    let seqs = corpus.sequences(10, 5, EVAL + 300).unwrap();
    assert_eq!(seqs.len(), EVAL + 300);
    let (seq_train, seq_val) = seqs.split_at(300).unwrap();
    for ctx in contexts(target, test) {
        let mut mlp = Network::builder(&ctx)
            .seed(3)
            .dense(784, 64, Activation::Relu)
            .dropout(0.3)
            .dense(64, 10, Activation::Identity)
            .build(Loss::SoftmaxCrossEntropy)
            .unwrap();
        check(target, &mut mlp, "mlp", &val, &train);
        // Sequence outputs: time-major inside, gathered to batch-major rows for predictions.
        let mut lstm = lstm(&ctx, corpus.vocab_size());
        check(target, &mut lstm, "lstm", &seq_val, &seq_train);
    }
}

fn lstm(ctx: &Context, vocab: usize) -> Network {
    Network::builder(ctx)
        .seed(4)
        .sequence_length(10)
        .lstm(vocab, 24, RnnOutput::Sequence)
        .dropout(0.2)
        .dense(24, vocab, Activation::Identity)
        .build(Loss::SoftmaxCrossEntropy)
        .unwrap()
}

target_tests!(eval_graphs_match_op_by_op(named):
    cpu_eval_graphs_match_op_by_op => Cpu,
    opencl_eval_graphs_match_op_by_op => OpenCl,
    cuda_eval_graphs_match_op_by_op => Cuda,
    hip_eval_graphs_match_op_by_op => Hip,
    hip_on_cuda_eval_graphs_match_op_by_op => HipOnCuda,
);
