//! Trains two real models on the best device this machine has (the CPU backend when there is
//! no GPU), and says which device that was:
//!
//! (a) an MLP on 5,000 real MNIST digits (1,000 held out as a test set);
//! (b) an Elman RNN character model on a Shakespeare play, ending with a line of sampled text.
//!
//! ```text
//! cargo run --release --example real_gpu_neural_network -- [--device ID] [--epochs N]
//!     [--rnn-epochs N] [--cpu] [--plot DIR] [--no-progress] [--help]
//! ```
//!
//! `RNN_PRECISION=f32|tf32|bf16|f16` (default f32) sets the precision the MLP trains and is
//! tested in ([`rnn::nn::Precision`]); a bad value is an error.
//!
//! Progress goes to stderr: a bar per epoch on a terminal, one line per epoch otherwise.
//! `--plot DIR` writes each model's loss and accuracy curves (`mlp.png`, `rnn.png`) and history
//! (`.csv`, `.json`) to DIR.
//!
//! The last two lines are for scripts:
//! `mlp test_accuracy=<0..1> device=<id> seconds=<s> precision=<p>` and
//! `rnn final_loss=<x> device=<id> seconds=<s>`.

mod common;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use rnn::nn::{
    CharCorpus, Dataset, Loss, Network, Optimizer, Precision, Progress, Rng, RnnOutput,
    TrainingConfig, TrainingHistory,
};
use rnn::{Activation, Context, DeviceId, GpuManager};

static MNIST: &[u8] = include_bytes!("data/mnist_5k.csv.gz");
static TEXT: &str = include_str!("data/asyoulik.txt");

const USAGE: &str = "usage: real_gpu_neural_network [--device ID] [--epochs N] [--rnn-epochs N] [--cpu] [--plot DIR] [--no-progress] [--help]
  --device ID      train on this device (cuda:0, opencl:0:1, hip:0, cpu); default: RNN_DEVICE, else the best GPU, else the CPU
  --epochs N       MLP epochs (default 10)
  --rnn-epochs N   RNN epochs (default 10)
  --cpu            train on the CPU backend (use_gpu: false)
  --plot DIR       write loss/accuracy curves (mlp.png, rnn.png) and histories (.csv, .json) to DIR
  --no-progress    no progress bar or per-epoch lines
  --help           this text
environment: RNN_PRECISION=f32|tf32|bf16|f16 (the MLP's precision, default f32)";

struct Args {
    device: Option<DeviceId>,
    epochs: usize,
    rnn_epochs: usize,
    cpu: bool,
    plot: Option<PathBuf>,
    progress: Progress,
    /// The MLP's precision, from `RNN_PRECISION`.
    precision: Precision,
}

fn parse_args() -> Result<Option<Args>, String> {
    let mut args = Args {
        device: None,
        epochs: 10,
        rnn_epochs: 10,
        cpu: false,
        plot: None,
        progress: Progress::Auto,
        precision: Precision::from_env("RNN_PRECISION").map_err(|e| e.to_string())?,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        match flag.as_str() {
            "--help" | "-h" => return Ok(None),
            "--cpu" => args.cpu = true,
            "--no-progress" => args.progress = Progress::Off,
            "--plot" => args.plot = Some(PathBuf::from(common::value(&mut it, "--plot")?)),
            "--device" => args.device = Some(common::device(&mut it, "--device")?),
            "--epochs" => args.epochs = common::count(&mut it, "--epochs")?,
            "--rnn-epochs" => args.rnn_epochs = common::count(&mut it, "--rnn-epochs")?,
            other => return Err(format!("unknown argument '{other}'")),
        }
    }
    if args.cpu && args.device.is_some_and(|d| d != DeviceId::Cpu) {
        return Err("--cpu and --device name different devices".into());
    }
    Ok(Some(args))
}

fn choose_context(args: &Args) -> rnn::Result<Context> {
    let config = TrainingConfig {
        use_gpu: !args.cpu,
        device: args.device,
        // Tf32: the context is created with TF32 GEMMs allowed.
        precision: args.precision,
        ..Default::default()
    };
    if config.use_gpu && config.device.is_none() {
        let manager = GpuManager::new()?;
        for s in manager.backends() {
            println!("  {s}");
        }
    }
    config.context()
}

/// Writes `name.png`, `name.csv` and `name.json` to `dir`.
fn save_curves(dir: &Path, name: &str, title: &str, h: &TrainingHistory) -> rnn::Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| rnn::Error::io(dir, e))?;
    h.plot(title, dir.join(format!("{name}.png")))?;
    h.save_csv(dir.join(format!("{name}.csv")))?;
    h.save_json(dir.join(format!("{name}.json")))?;
    println!("  curves: {}", dir.join(format!("{name}.png")).display());
    Ok(())
}

fn mlp(ctx: &Context, args: &Args) -> rnn::Result<(f32, f64)> {
    let epochs = args.epochs;
    let started = Instant::now();
    let data = Dataset::from_mnist_csv(MNIST)?;
    let (train, test) = data.train_test_split(1000, 7)?;
    println!(
        "(a) MLP 784-256-128-10 on {} MNIST digits, {} held out, in {}",
        train.len(),
        test.len(),
        args.precision
    );
    let mut net = Network::builder(ctx)
        .seed(1)
        .dense(784, 256, Activation::Relu)
        .dense(256, 128, Activation::Relu)
        .dense(128, 10, Activation::Identity)
        .build(Loss::SoftmaxCrossEntropy)?;
    let config = TrainingConfig {
        device: Some(ctx.id()),
        use_gpu: ctx.id() != DeviceId::Cpu,
        epochs,
        batch_size: 64,
        learning_rate: 1e-3,
        optimizer: Optimizer::adam(),
        validation_split: 0.1,
        seed: 3,
        progress: args.progress,
        precision: args.precision,
        ..Default::default()
    };
    // Training leaves the network in its precision: the test below runs in it too.
    let history = net.train(&train, &config)?;
    if let Some(dir) = &args.plot {
        let title = format!("MLP 784-256-128-10 on MNIST ({})", ctx.id());
        save_curves(dir, "mlp", &title, &history)?;
    }
    let eval = net.evaluate(&test)?;
    let acc = eval.accuracy.unwrap_or(0.0);
    println!("  test loss {:.4}, test accuracy {:.4}", eval.loss, acc);
    Ok((acc, started.elapsed().as_secs_f64()))
}

fn char_rnn(ctx: &Context, args: &Args) -> rnn::Result<(f32, f64)> {
    let epochs = args.rnn_epochs;
    let started = Instant::now();
    let corpus = CharCorpus::new(TEXT)?;
    let steps = 32;
    let data = corpus.sequences(steps, steps, 4000)?;
    let v = corpus.vocab_size();
    println!(
        "(b) Elman RNN {v}-128-{v} (tanh) on {} sequences of {steps} characters",
        data.len()
    );
    let mut net = Network::builder(ctx)
        .seed(2)
        .sequence_length(steps)
        .rnn(v, 128, Activation::Tanh, RnnOutput::Sequence)
        .dense(128, v, Activation::Identity)
        .build(Loss::SoftmaxCrossEntropy)?;
    let config = TrainingConfig {
        device: Some(ctx.id()),
        use_gpu: ctx.id() != DeviceId::Cpu,
        epochs,
        batch_size: 32,
        learning_rate: 3e-3,
        optimizer: Optimizer::adam(),
        clip_grad_norm: Some(5.0),
        seed: 4,
        progress: args.progress,
        ..Default::default()
    };
    let history = net.train(&data, &config)?;
    if let Some(dir) = &args.plot {
        let title = format!("Elman RNN on Shakespeare ({})", ctx.id());
        save_curves(dir, "rnn", &title, &history)?;
    }
    let final_loss = history.last().map_or(f32::NAN, |e| e.loss);
    println!("  sample: {}", sample(&mut net, &corpus, steps, 120)?);
    Ok((final_loss, started.elapsed().as_secs_f64()))
}

/// Generates text by feeding the last `steps` characters and drawing from the last step's
/// distribution.
fn sample(net: &mut Network, corpus: &CharCorpus, steps: usize, len: usize) -> rnn::Result<String> {
    let mut rng = Rng::new(11);
    let seed: String = TEXT.chars().skip(1000).take(steps).collect();
    let mut window: Vec<char> = seed.chars().collect();
    let mut out = String::new();
    let v = corpus.vocab_size();
    for _ in 0..len {
        let text: String = window.iter().collect();
        let logits = net.predict(&corpus.one_hot(&text)?)?;
        let last = &logits[(steps - 1) * v..steps * v];
        let next = corpus
            .char(CharCorpus::sample_index(last, 0.8, &mut rng)?)
            .unwrap_or(' ');
        out.push(next);
        window.remove(0);
        window.push(next);
    }
    Ok(out.replace('\n', " / "))
}

fn run(args: &Args) -> rnn::Result<()> {
    let ctx = choose_context(args)?;
    let id = ctx.id();
    println!("device: {} ({})", id, ctx.info().name);
    let (acc, mlp_secs) = mlp(&ctx, args)?;
    let (loss, rnn_secs) = char_rnn(&ctx, args)?;
    println!(
        "mlp test_accuracy={acc:.4} device={id} seconds={mlp_secs:.2} precision={}",
        args.precision
    );
    println!("rnn final_loss={loss:.4} device={id} seconds={rnn_secs:.2}");
    Ok(())
}

fn main() -> ExitCode {
    env_logger::init();
    common::main(USAGE, parse_args, run)
}
