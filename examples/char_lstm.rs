//! A character model on a Shakespeare play built from the sequence layers: a token embedding,
//! a 2-layer LSTM (`num_layers` 2) with dropout between and after its layers, and a linear head
//! at every step.
//! It trains on the best device (the CPU backend when there is no GPU) and ends with text
//! sampled at a chosen temperature (dropout is off while sampling).
//!
//! ```text
//! cargo run --release --example char_lstm -- [--device ID] [--cpu] [--epochs N]
//!     [--temperature T] [--length N] [--help]
//! ```
//!
//! The last line is for scripts:
//! `char_lstm final_loss=<x> val_loss=<x> val_accuracy=<0..1> temperature=<t> device=<id> seconds=<s>`.

mod common;

use std::process::ExitCode;
use std::time::Instant;

use rnn::nn::Loss;
use rnn::nn::{
    CharCorpus, Network, Optimizer, RecurrentCell, RecurrentOptions, Rng, RnnOutput,
    TrainingConfig, format_epoch,
};
use rnn::{Activation, Context, DeviceId};

static TEXT: &str = include_str!("data/asyoulik.txt");

const USAGE: &str = "usage: char_lstm [--device ID] [--cpu] [--epochs N] [--temperature T] [--length N] [--help]
  --device ID        train on this device (cuda:0, opencl:0:1, hip:0, cpu); default: RNN_DEVICE, else the best GPU, else the CPU
  --cpu              train on the CPU backend
  --epochs N         training epochs (default 15)
  --temperature T    sampling temperature, > 0 (default 0.7; lower is more conservative)
  --length N         characters to sample (default 300)
  --help             this text";

/// Characters per training sequence (and the window the sampler feeds).
const STEPS: usize = 48;
const EMBED: usize = 32;
const HIDDEN: usize = 128;
const DROPOUT: f32 = 0.2;

struct Args {
    device: Option<DeviceId>,
    cpu: bool,
    epochs: usize,
    temperature: f32,
    length: usize,
}

fn parse_args() -> Result<Option<Args>, String> {
    let mut args = Args {
        device: None,
        cpu: false,
        epochs: 15,
        temperature: 0.7,
        length: 300,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        match flag.as_str() {
            "--help" | "-h" => return Ok(None),
            "--cpu" => args.cpu = true,
            "--device" => args.device = Some(common::device(&mut it, "--device")?),
            "--epochs" => args.epochs = common::count(&mut it, "--epochs")?,
            "--length" => args.length = common::count(&mut it, "--length")?,
            "--temperature" => {
                let v = common::value(&mut it, "--temperature")?;
                args.temperature = match v.parse::<f32>() {
                    Ok(t) if t > 0.0 && t.is_finite() => t,
                    _ => return Err(format!("--temperature takes a number > 0, got '{v}'")),
                };
            }
            other => return Err(format!("unknown argument '{other}'")),
        }
    }
    if args.cpu && args.device.is_some_and(|d| d != DeviceId::Cpu) {
        return Err("--cpu and --device name different devices".into());
    }
    Ok(Some(args))
}

/// Feeds the last [`STEPS`] characters and draws the next one from the last step's
/// distribution at `temperature`.
fn sample(
    net: &mut Network,
    corpus: &CharCorpus,
    len: usize,
    temperature: f32,
) -> rnn::Result<String> {
    let mut rng = Rng::new(11);
    let mut window: Vec<u32> =
        corpus.token_ids(&TEXT.chars().skip(2000).take(STEPS).collect::<String>())?;
    let v = corpus.vocab_size();
    let mut out = String::new();
    for _ in 0..len {
        let logits = net.predict_ids(&window)?;
        let last = &logits[(STEPS - 1) * v..STEPS * v];
        let next = CharCorpus::sample_index(last, temperature, &mut rng)?;
        out.push(corpus.char(next).unwrap_or(' '));
        window.remove(0);
        window.push(next as u32);
    }
    Ok(out)
}

fn run(args: &Args) -> rnn::Result<()> {
    let started = Instant::now();
    let config = TrainingConfig {
        use_gpu: !args.cpu,
        device: args.device,
        epochs: args.epochs,
        batch_size: 32,
        learning_rate: 3e-3,
        optimizer: Optimizer::adam(),
        clip_grad_norm: Some(5.0),
        validation_split: 0.1,
        seed: 4,
        ..Default::default()
    };
    let ctx: Context = config.context()?;
    let id = ctx.id();
    println!("device: {id} ({})", ctx.info().name);
    let corpus = CharCorpus::new(TEXT)?;
    let v = corpus.vocab_size();
    let data = corpus.token_sequences(STEPS, STEPS, usize::MAX)?;
    println!(
        "embedding {v}x{EMBED} -> LSTM {HIDDEN} -> dropout {DROPOUT} -> LSTM {HIDDEN} -> dropout \
         {DROPOUT} -> dense {v}, on {} sequences of {STEPS} characters",
        data.len()
    );
    // `nn.LSTM(num_layers=2, dropout=p)` (dropout between the layers) then `nn.Dropout(p)`.
    let mut net = Network::builder(&ctx)
        .seed(2)
        .sequence_length(STEPS)
        .embedding(v, EMBED)
        .recurrent(
            RecurrentCell::Lstm,
            EMBED,
            HIDDEN,
            RnnOutput::Sequence,
            RecurrentOptions::new().layers(2).dropout(DROPOUT),
        )
        .dropout(DROPOUT)
        .dense(HIDDEN, v, Activation::Identity)
        .build(Loss::SoftmaxCrossEntropy)?;
    let config = TrainingConfig {
        device: Some(id),
        use_gpu: id != DeviceId::Cpu,
        ..config
    };
    let history = net.train(&data, &config)?;
    for e in &history.epochs {
        println!("  {}", format_epoch(e, args.epochs));
    }
    let last = history.last();
    let final_loss = last.map_or(f32::NAN, |e| e.loss);
    let val_loss = last.and_then(|e| e.val_loss).unwrap_or(f32::NAN);
    let val_acc = last.and_then(|e| e.val_accuracy).unwrap_or(f32::NAN);
    println!("sample at temperature {}:", args.temperature);
    println!(
        "{}",
        sample(&mut net, &corpus, args.length, args.temperature)?
    );
    println!(
        "char_lstm final_loss={final_loss:.4} val_loss={val_loss:.4} val_accuracy={val_acc:.4} \
         temperature={} device={id} seconds={:.2}",
        args.temperature,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

fn main() -> ExitCode {
    env_logger::init();
    common::main(USAGE, parse_args, run)
}
