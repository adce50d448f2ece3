//! Truncated backpropagation through time on a whole Shakespeare play: the same character LSTM
//! trained two ways for the same epochs, batch, optimizer and size, and compared on held-out
//! text (the play's last tenth).
//!
//! - fixed windows: shuffled windows of [`WINDOW`] characters, each from a zero state (what
//!   `char_lstm` does);
//! - carried state: the training text as [`BATCH`] parallel streams cut into windows of
//!   [`WINDOW`] (`Dataset::token_streams`), each stream's state carried from window to window
//!   (`TrainingConfig::carry_state`, detached), so the model learns from context beyond one
//!   window.
//!
//! Both are evaluated on the held-out text twice: as windows from a zero state
//! (`Network::evaluate`), and as streams read window after window with the state carried
//! (`Network::forward_with_state`), which is how a stateful model is used.
//!
//! ```text
//! cargo run --release --example char_tbptt -- [--device ID] [--cpu] [--epochs N] [--help]
//! ```
//!
//! The last line is for scripts: `char_tbptt fixed_val_loss=<x> fixed_val_loss_carried=<x>
//! tbptt_val_loss=<x> tbptt_val_loss_carried=<x> epochs=<n> device=<id> seconds=<s>`.

mod common;

use std::process::ExitCode;
use std::time::Instant;

use rnn::nn::{
    CharCorpus, Dataset, Loss, Network, Optimizer, RecurrentCell, RecurrentOptions, RnnOutput,
    TrainingConfig, format_epoch,
};
use rnn::{Activation, Context, DeviceId};

static TEXT: &str = include_str!("data/asyoulik.txt");

const USAGE: &str = "usage: char_tbptt [--device ID] [--cpu] [--epochs N] [--help]
  --device ID   train on this device (cuda:0, opencl:0:1, hip:0, cpu); default: RNN_DEVICE, else the best GPU, else the CPU
  --cpu         train on the CPU backend
  --epochs N    training epochs of each model (default 10)
  --help        this text";

/// Characters per window (the steps backpropagation runs through).
const WINDOW: usize = 32;
/// Samples per step: the parallel streams of the carried-state model.
const BATCH: usize = 32;
const EMBED: usize = 32;
const HIDDEN: usize = 128;
/// Streams the held-out text is read as, with the state carried.
const VAL_STREAMS: usize = 8;

struct Args {
    device: Option<DeviceId>,
    cpu: bool,
    epochs: usize,
}

fn parse_args() -> Result<Option<Args>, String> {
    let mut args = Args {
        device: None,
        cpu: false,
        epochs: 10,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        match flag.as_str() {
            "--help" | "-h" => return Ok(None),
            "--cpu" => args.cpu = true,
            "--device" => args.device = Some(common::device(&mut it, "--device")?),
            "--epochs" => args.epochs = common::count(&mut it, "--epochs")?,
            other => return Err(format!("unknown argument '{other}'")),
        }
    }
    if args.cpu && args.device.is_some_and(|d| d != DeviceId::Cpu) {
        return Err("--cpu and --device name different devices".into());
    }
    Ok(Some(args))
}

/// The model both runs train: embedding, a 2-layer LSTM, a linear head at every step.
fn model(ctx: &Context, vocab: usize) -> rnn::Result<Network> {
    Network::builder(ctx)
        .seed(2)
        .sequence_length(WINDOW)
        .embedding(vocab, EMBED)
        .recurrent(
            RecurrentCell::Lstm,
            EMBED,
            HIDDEN,
            RnnOutput::Sequence,
            RecurrentOptions::new().layers(2),
        )
        .dense(HIDDEN, vocab, Activation::Identity)
        .build(Loss::SoftmaxCrossEntropy)
}

/// Mean cross-entropy over `streams` (laid out by `Dataset::token_streams` with
/// [`VAL_STREAMS`] streams), read window after window with the state carried.
fn carried_loss(net: &mut Network, streams: &Dataset) -> rnn::Result<f32> {
    let (ids, labels) = match (streams.token_ids(), streams.targets()) {
        (Some(ids), rnn::nn::Targets::Classes { labels, .. }) => (ids, labels),
        _ => unreachable!("token streams hold ids and class labels"),
    };
    let ctx = net.context().clone();
    let mut state = net.zero_state(VAL_STREAMS);
    let (mut sum, mut rows) = (0.0f64, 0usize);
    let per_batch = VAL_STREAMS * WINDOW;
    for (x, y) in ids
        .chunks_exact(per_batch)
        .zip(labels.chunks_exact(per_batch))
    {
        let input = ctx.tensor_as(&[VAL_STREAMS, WINDOW], x)?;
        let (logits, next) = net.forward_with_state(&input, &state)?;
        state = next;
        let logits = logits.to_vec()?;
        let v = logits.len() / per_batch;
        for (row, &label) in logits.chunks_exact(v).zip(y) {
            let max = row.iter().fold(f32::NEG_INFINITY, |m, &x| m.max(x));
            let lse = row
                .iter()
                .map(|&x| ((x - max) as f64).exp())
                .sum::<f64>()
                .ln();
            sum += lse + max as f64 - row[label as usize] as f64;
            rows += 1;
        }
    }
    Ok((sum / rows.max(1) as f64) as f32)
}

fn run(args: &Args) -> rnn::Result<()> {
    let started = Instant::now();
    let base = TrainingConfig {
        use_gpu: !args.cpu,
        device: args.device,
        epochs: args.epochs,
        batch_size: BATCH,
        learning_rate: 3e-3,
        optimizer: Optimizer::adam(),
        clip_grad_norm: Some(5.0),
        seed: 4,
        ..Default::default()
    };
    let ctx: Context = base.context()?;
    let id = ctx.id();
    println!("device: {id} ({})", ctx.info().name);
    let base = TrainingConfig {
        device: Some(id),
        use_gpu: id != DeviceId::Cpu,
        ..base
    };
    let corpus = CharCorpus::new(TEXT)?;
    let v = corpus.vocab_size();
    let chars: Vec<char> = TEXT.chars().collect();
    let cut = chars.len() * 9 / 10;
    let train_text: String = chars[..cut].iter().collect();
    let val_text: String = chars[cut..].iter().collect();
    let train_ids = corpus.token_ids(&train_text)?;
    let val_ids = corpus.token_ids(&val_text)?;

    // One stream: the consecutive windows of the text, which training shuffles.
    let windows = Dataset::token_streams(&train_ids, v, 1, WINDOW)?;
    let streams = Dataset::token_streams(&train_ids, v, BATCH, WINDOW)?;
    let val_windows = Dataset::token_streams(&val_ids, v, 1, WINDOW)?;
    let val_streams = Dataset::token_streams(&val_ids, v, VAL_STREAMS, WINDOW)?;
    println!(
        "embedding {v}x{EMBED} -> 2-layer LSTM {HIDDEN} -> dense {v}; {} training characters \
         ({} windows of {WINDOW}), {} held out",
        train_ids.len(),
        windows.len(),
        val_ids.len()
    );

    let mut results = Vec::new();
    for (name, data, config) in [
        ("fixed windows", &windows, base.clone()),
        (
            "carried state",
            &streams,
            TrainingConfig {
                shuffle: false,
                carry_state: true,
                ..base.clone()
            },
        ),
    ] {
        let mut net = model(&ctx, v)?;
        println!("{name}:");
        let history = net.train(data, &config)?;
        for e in &history.epochs {
            println!("  {}", format_epoch(e, args.epochs));
        }
        let zero = net.evaluate(&val_windows)?.loss;
        let carried = carried_loss(&mut net, &val_streams)?;
        println!(
            "  held-out loss: {zero:.4} (windows from a zero state), {carried:.4} (state carried)"
        );
        results.push((zero, carried));
    }
    let [(fixed, fixed_carried), (tbptt, tbptt_carried)] = results[..] else {
        unreachable!("two runs")
    };
    println!(
        "char_tbptt fixed_val_loss={fixed:.4} fixed_val_loss_carried={fixed_carried:.4} \
         tbptt_val_loss={tbptt:.4} tbptt_val_loss_carried={tbptt_carried:.4} epochs={} \
         device={id} seconds={:.2}",
        args.epochs,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

fn main() -> ExitCode {
    env_logger::init();
    common::main(USAGE, parse_args, run)
}
