//! Generation speed of `examples/char_lstm`'s model (an embedding of 32, a 2-layer LSTM, a
//! linear head over the play's characters; dropout, off in inference, left out) on one device:
//! tokens per second drawn with a [`rnn::nn::Stepper`] (the prompt in one call, then one token
//! a call from the carried state) against re-running the whole 48-token window for every token,
//! at batch 1 and 32 (that many sequences drawn side by side), hidden 128 and 512. Tokens are
//! the arg-max of each sequence's logits, read back to the host every token, as
//! scripts/generate_reference.py does with PyTorch's `nn.LSTM` stepping a carried `(h, c)`.
//!
//! ```text
//! cargo bench --bench generate -- [--device ID] [--hidden 128,512] [--batch 1,32] [--seconds S]
//! ```
//!
//! Prints one line per figure, `name value unit`:
//! `generate_h{H}_b{B}_stepper <tokens/s> tokens/s`, `generate_h{H}_b{B}_window <tokens/s>
//! tokens/s` and `generate_h{H}_b{B}_stepper_over_window <ratio> x`. Each figure times as many
//! tokens as fill `--seconds` (default 2) after a warm-up (the stepper's first calls compile
//! kernels and record the step as a graph where the device records).

use std::process::ExitCode;
use std::time::Instant;

use rnn::nn::{CharCorpus, Loss, Network, RecurrentCell, RecurrentOptions, RnnOutput};
use rnn::{Activation, DeviceId, GpuManager};

static TEXT: &str = include_str!("../examples/data/asyoulik.txt");

/// `examples/char_lstm`'s window and embedding width.
const WINDOW: usize = 48;
const EMBED: usize = 32;
/// Tokens of the play each sequence starts from (the stepper's first call).
const PROMPT: usize = 16;
/// Calls before the clock starts.
const WARM_UP: usize = 3;

struct Args {
    device: Option<DeviceId>,
    hidden: Vec<usize>,
    batch: Vec<usize>,
    seconds: f64,
}

fn counts(v: Option<String>, what: &str) -> Result<Vec<usize>, String> {
    let v = v.ok_or(format!("{what} needs a value"))?;
    v.split(',')
        .map(|n| match n.trim().parse::<usize>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(format!("{what}: '{n}' is not a positive count")),
        })
        .collect()
}

fn parse() -> Result<Args, String> {
    let mut a = Args {
        device: None,
        hidden: vec![128, 512],
        batch: vec![1, 32],
        seconds: 2.0,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--device" => {
                let v = args.next().ok_or("--device needs a value")?;
                a.device = Some(v.parse().map_err(|e: rnn::Error| e.to_string())?);
            }
            "--hidden" => a.hidden = counts(args.next(), "--hidden")?,
            "--batch" => a.batch = counts(args.next(), "--batch")?,
            "--seconds" => {
                let v = args.next().ok_or("--seconds needs a value")?;
                a.seconds = match v.parse::<f64>() {
                    Ok(s) if s > 0.0 && s.is_finite() => s,
                    _ => return Err(format!("--seconds takes a number > 0, got '{v}'")),
                };
            }
            // cargo bench passes --bench to every bench binary.
            "--bench" => {}
            other => {
                return Err(format!(
                    "unknown argument '{other}' (use --device ID, --hidden H,H, --batch B,B, \
                     --seconds S)"
                ));
            }
        }
    }
    Ok(a)
}

/// The arg-max token of each sequence's row of `vocab` logits.
fn arg_max(logits: &[f32], vocab: usize) -> Vec<u32> {
    logits
        .chunks(vocab)
        .map(|row| {
            let best = row
                .iter()
                .enumerate()
                .fold(
                    (0, f32::NEG_INFINITY),
                    |b, (i, &v)| if v > b.1 { (i, v) } else { b },
                );
            best.0 as u32
        })
        .collect()
}

/// Tokens per second of `next(token)`, which draws the next token of every sequence: called
/// [`WARM_UP`] times, then until `seconds` have passed.
fn tokens_per_sec(
    batch: usize,
    seconds: f64,
    mut next: impl FnMut() -> rnn::Result<()>,
) -> rnn::Result<f64> {
    for _ in 0..WARM_UP {
        next()?;
    }
    let started = Instant::now();
    let mut calls = 0usize;
    while calls < 10 || started.elapsed().as_secs_f64() < seconds {
        next()?;
        calls += 1;
    }
    Ok((calls * batch) as f64 / started.elapsed().as_secs_f64())
}

/// The stepper's and the window re-run's tokens per second for one model and batch.
fn figures(net: &mut Network, prompt: &[u32], a: &Args, batch: usize) -> rnn::Result<[f64; 2]> {
    let v = net.output_features();
    // Every sequence starts from the same prompt: the device does the same work as for
    // different ones.
    let prompts = prompt[..PROMPT].repeat(batch);
    let stepper_rate = {
        let mut stepper = net.stepper(batch)?;
        let first = stepper.step_ids(&prompts)?;
        let last_rows: Vec<f32> = first
            .chunks(PROMPT * v)
            .flat_map(|s| &s[(PROMPT - 1) * v..])
            .copied()
            .collect();
        let mut tokens = arg_max(&last_rows, v);
        tokens_per_sec(batch, a.seconds, || {
            tokens = arg_max(&stepper.step_ids(&tokens)?, v);
            Ok(())
        })?
    };
    let mut windows = prompt[..WINDOW].repeat(batch);
    let window_rate = tokens_per_sec(batch, a.seconds, || {
        let logits = net.predict_ids(&windows)?;
        for (w, out) in windows.chunks_mut(WINDOW).zip(logits.chunks(WINDOW * v)) {
            let next = arg_max(&out[(WINDOW - 1) * v..], v)[0];
            w.rotate_left(1);
            w[WINDOW - 1] = next;
        }
        Ok(())
    })?;
    Ok([stepper_rate, window_rate])
}

fn run() -> Result<(), String> {
    let a = parse()?;
    let err = |e: rnn::Error| e.to_string();
    let manager = GpuManager::new().map_err(err)?;
    let ctx = match a.device {
        Some(id) => manager.create_context(id),
        None => manager.default_context(),
    }
    .map_err(err)?;
    let corpus = CharCorpus::new(TEXT).map_err(err)?;
    let v = corpus.vocab_size();
    let prompt: String = TEXT.chars().skip(2000).take(WINDOW).collect();
    let prompt = corpus.token_ids(&prompt).map_err(err)?;
    eprintln!(
        "device {} ({}): embedding {v}x{EMBED}, 2-layer LSTM, dense {v}; window {WINDOW}",
        ctx.id(),
        ctx.info().name
    );
    for &hidden in &a.hidden {
        let mut net = Network::builder(&ctx)
            .seed(2)
            .sequence_length(WINDOW)
            .embedding(v, EMBED)
            .recurrent(
                RecurrentCell::Lstm,
                EMBED,
                hidden,
                RnnOutput::Sequence,
                RecurrentOptions::new().layers(2),
            )
            .dense(hidden, v, Activation::Identity)
            .build(Loss::SoftmaxCrossEntropy)
            .map_err(err)?;
        for &batch in &a.batch {
            let [stepper, window] = figures(&mut net, &prompt, &a, batch).map_err(err)?;
            let name = format!("generate_h{hidden}_b{batch}");
            println!("{name}_stepper {stepper:.1} tokens/s");
            println!("{name}_window {window:.1} tokens/s");
            println!("{name}_stepper_over_window {:.2} x", stepper / window);
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    // RUST_LOG=rnn::nn::step_graph=debug shows each step recorded as a graph.
    env_logger::init();
    run().map_or_else(
        |e| {
            eprintln!("generate bench: {e}");
            ExitCode::FAILURE
        },
        |()| ExitCode::SUCCESS,
    )
}
