//! A character model on a Shakespeare play built from the sequence layers: a token embedding,
//! a 2-layer LSTM (`num_layers` 2) with dropout between and after its layers, and a linear head
//! at every step.
//! It trains on the best device (the CPU backend when there is no GPU) and ends with text
//! sampled at a chosen temperature (dropout is off while sampling).
//!
//! The text is sampled with a [`rnn::nn::Stepper`]: the prompt in one call, then one character
//! a call from the carried LSTM state. The same text is sampled again by re-running the
//! 48-character window for every character, the way this example sampled before, as a checked
//! reference: while the prompt and the characters drawn so far fit the window (padded after its
//! end, which the one-way LSTM cannot see), both see the same context and must draw the same
//! characters at the same seed; after that the window forgets the oldest characters and the
//! stepper does not, so the texts may part. Both samplers' characters per second are printed.
//!
//! ```text
//! cargo run --release --example char_lstm -- [--device ID] [--cpu] [--epochs N]
//!     [--temperature T] [--length N] [--prompt N] [--help]
//! ```
//!
//! `RNN_PRECISION=f32|tf32|bf16|f16` (default f32) sets the training precision
//! ([`rnn::nn::Precision`]); the sampling runs in f32 from the f32 master weights either way.
//!
//! The last line is for scripts:
//! `char_lstm final_loss=<x> val_loss=<x> val_accuracy=<0..1> temperature=<t> device=<id> seconds=<s>
//! same_chars=<n> stepper_chars_per_sec=<x> window_chars_per_sec=<x> precision=<p>`.

mod common;

use std::process::ExitCode;
use std::time::Instant;

use rnn::nn::Loss;
use rnn::nn::{
    CharCorpus, Network, Optimizer, Precision, RecurrentCell, RecurrentOptions, Rng, RnnOutput,
    TrainingConfig, format_epoch,
};
use rnn::{Activation, Context, DeviceId};

static TEXT: &str = include_str!("data/asyoulik.txt");

const USAGE: &str = "usage: char_lstm [--device ID] [--cpu] [--epochs N] [--temperature T] [--length N] [--prompt N] [--help]
  --device ID        train on this device (cuda:0, opencl:0:1, hip:0, cpu); default: RNN_DEVICE, else the best GPU, else the CPU
  --cpu              train on the CPU backend
  --epochs N         training epochs (default 15)
  --temperature T    sampling temperature, > 0 (default 0.7; lower is more conservative)
  --length N         characters to sample (default 300)
  --prompt N         characters of the play the sampling starts from, 1 to 48 (default 16)
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
    prompt: usize,
}

fn parse_args() -> Result<Option<Args>, String> {
    let mut args = Args {
        device: None,
        cpu: false,
        epochs: 15,
        temperature: 0.7,
        length: 300,
        prompt: 16,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        match flag.as_str() {
            "--help" | "-h" => return Ok(None),
            "--cpu" => args.cpu = true,
            "--device" => args.device = Some(common::device(&mut it, "--device")?),
            "--epochs" => args.epochs = common::count(&mut it, "--epochs")?,
            "--length" => args.length = common::count(&mut it, "--length")?,
            "--prompt" => match common::count(&mut it, "--prompt")? {
                n if n <= STEPS => args.prompt = n,
                n => {
                    return Err(format!(
                        "--prompt takes at most {STEPS} characters, got {n}"
                    ));
                }
            },
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

/// Where sampling starts in the play.
const PROMPT_AT: usize = 2000;
/// The seed of the sampling.
const SAMPLE_SEED: u64 = 11;

/// Characters drawn by one sampler, and how long drawing them took.
struct Sampled {
    ids: Vec<u32>,
    seconds: f64,
}

impl Sampled {
    fn chars_per_sec(&self) -> f64 {
        self.ids.len() as f64 / self.seconds.max(1e-9)
    }
}

/// What both samplers draw: `len` characters after `prompt` at `temperature`.
struct Draw<'a> {
    prompt: &'a [u32],
    vocab: usize,
    len: usize,
    temperature: f32,
}

impl Draw<'_> {
    /// Draws the characters one by one at [`SAMPLE_SEED`], each from the logits
    /// `next_logits(context)` gives for the character after `context` (the prompt and the
    /// characters drawn so far), and times it.
    fn run(
        &self,
        mut next_logits: impl FnMut(&[u32]) -> rnn::Result<Vec<f32>>,
    ) -> rnn::Result<Sampled> {
        let started = Instant::now();
        let mut rng = Rng::new(SAMPLE_SEED);
        let mut context = self.prompt.to_vec();
        for _ in 0..self.len {
            let logits = next_logits(&context)?;
            let next = CharCorpus::sample_index(&logits, self.temperature, &mut rng)?;
            context.push(next as u32);
        }
        Ok(Sampled {
            ids: context.split_off(self.prompt.len()),
            seconds: started.elapsed().as_secs_f64(),
        })
    }

    /// With a stepper: the prompt in one call, then each drawn character in a call of one
    /// step, from the carried state.
    fn stepper(&self, net: &Network) -> rnn::Result<Sampled> {
        let mut stepper = net.stepper(1)?;
        let v = self.vocab;
        self.run(|context| {
            if context.len() == self.prompt.len() {
                Ok(stepper.step_ids(context)?[(context.len() - 1) * v..].to_vec())
            } else {
                stepper.step_ids(&context[context.len() - 1..])
            }
        })
    }

    /// By running the whole [`STEPS`]-character window for each character: the context so far
    /// padded after its end while it is shorter than the window, then its last [`STEPS`]
    /// characters.
    fn window(&self, net: &mut Network) -> rnn::Result<Sampled> {
        let v = self.vocab;
        self.run(|context| {
            let mut window = context[context.len().saturating_sub(STEPS)..].to_vec();
            let last = window.len() - 1;
            window.resize(STEPS, 0);
            Ok(net.predict_ids(&window)?[last * v..(last + 1) * v].to_vec())
        })
    }
}

fn text_of(corpus: &CharCorpus, ids: &[u32]) -> String {
    ids.iter()
        .map(|&i| corpus.char(i as usize).unwrap_or(' '))
        .collect()
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
        precision: Precision::from_env("RNN_PRECISION")?,
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
    // The stepper computes in f32; the window re-run it is checked against must too.
    net.set_precision(Precision::F32)?;
    for e in &history.epochs {
        println!("  {}", format_epoch(e, args.epochs));
    }
    let last = history.last();
    let final_loss = last.map_or(f32::NAN, |e| e.loss);
    let val_loss = last.and_then(|e| e.val_loss).unwrap_or(f32::NAN);
    let val_acc = last.and_then(|e| e.val_accuracy).unwrap_or(f32::NAN);
    let prompt_text: String = TEXT.chars().skip(PROMPT_AT).take(args.prompt).collect();
    let prompt = corpus.token_ids(&prompt_text)?;
    let (len, t) = (args.length, args.temperature);
    let draw = Draw {
        prompt: &prompt,
        vocab: v,
        len,
        temperature: t,
    };
    let stepped = draw.stepper(&net)?;
    let window = draw.window(&mut net)?;
    println!("sample at temperature {t}, after {prompt_text:?}:");
    println!("{}", text_of(&corpus, &stepped.ids));
    // Characters drawn while the whole context fits the window: from `prompt` characters of
    // context up to STEPS.
    let fits = (STEPS + 1 - prompt.len()).min(len);
    let same = stepped
        .ids
        .iter()
        .zip(&window.ids)
        .take_while(|(a, b)| a == b)
        .count();
    if same < fits {
        return Err(rnn::Error::InvalidData(format!(
            "the stepper and the window re-run drew different characters at {same}, while the \
             context still fit the {STEPS}-character window (stepper {:?}, window {:?})",
            text_of(&corpus, &stepped.ids[..fits]),
            text_of(&corpus, &window.ids[..fits])
        )));
    }
    println!(
        "the window re-run draws the same first {same} characters ({fits} while the context fits \
         its {STEPS} characters); stepper {:.0} characters/s, window re-run {:.0} characters/s",
        stepped.chars_per_sec(),
        window.chars_per_sec()
    );
    println!(
        "char_lstm final_loss={final_loss:.4} val_loss={val_loss:.4} val_accuracy={val_acc:.4} \
         temperature={t} device={id} seconds={:.2} same_chars={same} \
         stepper_chars_per_sec={:.1} window_chars_per_sec={:.1} precision={}",
        started.elapsed().as_secs_f64(),
        stepped.chars_per_sec(),
        window.chars_per_sec(),
        config.precision
    );
    Ok(())
}

fn main() -> ExitCode {
    env_logger::init();
    common::main(USAGE, parse_args, run)
}
