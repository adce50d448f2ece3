//! Step time of training in memory against training from a stream of shard files, on one
//! device: the same MLP (784-H-H-10 with H = 1024, batch 256 by default) on the same random samples,
//! printed as `name value unit` lines. The stream's step time is within a few percent of the
//! in-memory one when the reading threads, the gathering and the copies are hidden behind the
//! steps.
//!
//! ```text
//! cargo bench --bench stream -- [--device ID] [--samples N] [--batch B] [--epochs E]
//!     [--shard N]   samples per shard file (default 8192)
//!     [--hidden H]  width of the two hidden layers (default 1024; a small one leaves
//!                   mostly the feeding's cost, to time the host side on a slow device)
//!     [--gather auto|device|host]  where the stream's batches are gathered (`StreamGather`;
//!                   default auto)
//!     [--repeat R]  rounds of the two runs, one after the other (default 1): single runs at
//!                   batch 1024 on an H100 differ by more than the 5% they are judged by
//! ```
//!
//! Figures, the same quantity on both sides (the same steps of the same epochs, wall time):
//! - `stream_step_us_*`: all epochs' wall time over all their steps (epoch boundaries
//!   included: the recording of the step graphs, the wait for a stream's first window where
//!   set-up did not hide it), with `stream_over_memory` their ratio: the figure the 5% target
//!   is about (the in-memory side uploads its data set before its first epoch, outside it);
//! - `stream_steady_step_us_*`: the same over epochs 2 and later (`stream_steady_over_memory`);
//! - `stream_call_step_us_*`: the whole `train` call over all steps, set-up included (the
//!   data set's upload against the stream's pinned blocks and threads; `stream_call_over_memory`);
//! - with `--repeat`, each round's lines follow a `stream_round R` line, and
//!   `stream_median_over_memory` / `stream_median_steady_over_memory` end the output: the
//!   median over the rounds of each round's ratio.
//!
//! Every built-in kernel is compiled (or loaded) first, then a one-epoch warm-up run makes the
//! allocations both runs reuse, so neither side pays for that. The shard files are written to a
//! temporary directory first, so they are read from the page cache.

use std::process::ExitCode;
use std::time::Instant;

use rnn::nn::{
    DataStream, Dataset, Loss, Network, Progress, Rng, ShardFiles, StreamGather, TrainData,
    TrainingConfig,
};
use rnn::{Activation, Context, DeviceId, GpuManager};

struct Args {
    device: Option<DeviceId>,
    samples: usize,
    batch: usize,
    epochs: usize,
    shard: usize,
    hidden: usize,
    gather: StreamGather,
    repeat: usize,
}

fn parse() -> Result<Args, String> {
    let mut a = Args {
        device: None,
        samples: 60_000,
        batch: 256,
        epochs: 3,
        shard: 8192,
        hidden: 1024,
        gather: StreamGather::Auto,
        repeat: 1,
    };
    let mut args = std::env::args().skip(1);
    let number = |v: Option<String>, what: &str| -> Result<usize, String> {
        let v = v.ok_or(format!("{what} needs a value"))?;
        v.parse()
            .map_err(|_| format!("{what}: '{v}' is not a count"))
            .and_then(|n: usize| match n {
                0 => Err(format!("{what} must be > 0")),
                n => Ok(n),
            })
    };
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--device" => {
                let v = args.next().ok_or("--device needs a value")?;
                a.device = Some(v.parse().map_err(|e: rnn::Error| e.to_string())?);
            }
            "--samples" => a.samples = number(args.next(), "--samples")?,
            "--batch" => a.batch = number(args.next(), "--batch")?,
            "--epochs" => a.epochs = number(args.next(), "--epochs")?,
            "--shard" => a.shard = number(args.next(), "--shard")?,
            "--hidden" => a.hidden = number(args.next(), "--hidden")?,
            "--repeat" => a.repeat = number(args.next(), "--repeat")?,
            "--gather" => {
                a.gather = match args.next().as_deref() {
                    Some("auto") => StreamGather::Auto,
                    Some("device") => StreamGather::Device,
                    Some("host") => StreamGather::Host,
                    other => return Err(format!("--gather auto|device|host, not {other:?}")),
                }
            }
            // cargo bench passes --bench to every bench binary.
            "--bench" => {}
            other => {
                return Err(format!(
                    "unknown argument '{other}' (use --device ID, --samples N, --batch B, \
                     --epochs E, --shard N, --hidden H, --gather auto|device|host, --repeat R)"
                ));
            }
        }
    }
    Ok(a)
}

/// Wall times of one training run, in seconds, and its steps per epoch.
struct Timed {
    /// The whole `train` call.
    call: f64,
    /// Each epoch (`EpochStats::seconds`; no validation here).
    epochs: Vec<f64>,
    steps_per_epoch: usize,
}

impl Timed {
    /// Microseconds per step: all epochs, epochs 2 and later, the whole call.
    fn step_us(&self) -> [f64; 3] {
        let steps = |epochs: usize| (epochs * self.steps_per_epoch).max(1) as f64 * 1e-6;
        let all: f64 = self.epochs.iter().sum();
        let steady: f64 = self.epochs.iter().skip(1).sum();
        [
            all / steps(self.epochs.len()),
            steady / steps(self.epochs.len().saturating_sub(1)),
            self.call / steps(self.epochs.len()),
        ]
    }
}

/// Trains a fresh network on `data` for `epochs` epochs.
fn train(ctx: &Context, data: TrainData<'_>, a: &Args, epochs: usize) -> rnn::Result<Timed> {
    let mut net = Network::builder(ctx)
        .seed(1)
        .dense(784, a.hidden, Activation::Relu)
        .dense(a.hidden, a.hidden, Activation::Relu)
        .dense(a.hidden, 10, Activation::Identity)
        .build(Loss::SoftmaxCrossEntropy)?;
    let config = TrainingConfig {
        use_gpu: ctx.id() != DeviceId::Cpu,
        device: Some(ctx.id()),
        epochs,
        batch_size: a.batch,
        learning_rate: 1e-3,
        progress: Progress::Off,
        ..Default::default()
    };
    let t0 = Instant::now();
    let history = net.train(data, &config)?;
    Ok(Timed {
        call: t0.elapsed().as_secs_f64(),
        epochs: history.epochs.iter().map(|e| e.seconds).collect(),
        steps_per_epoch: data.len().div_ceil(a.batch),
    })
}

fn run() -> Result<(), String> {
    // `RUST_LOG=rnn=debug` shows where each stream epoch's feeding time went.
    env_logger::init();
    let a = parse()?;
    let err = |e: rnn::Error| e.to_string();
    let ctx = match a.device {
        Some(DeviceId::Cpu) => Context::cpu(),
        Some(id) => GpuManager::new()
            .and_then(|m| m.create_context(id))
            .map_err(err)?,
        None => {
            let m = GpuManager::new().map_err(err)?;
            let id = m.best_device().map_err(err)?.id;
            m.create_context(id).map_err(err)?
        }
    };
    eprintln!(
        "device {} ({}): {} samples, batch {}, {} epochs, {} per shard, gather {:?}",
        ctx.id(),
        ctx.info().name,
        a.samples,
        a.batch,
        a.epochs,
        a.shard,
        a.gather
    );
    let mut rng = Rng::new(3);
    let x: Vec<f32> = (0..a.samples * 784).map(|_| rng.uniform()).collect();
    let y: Vec<u32> = (0..a.samples).map(|_| rng.below(10) as u32).collect();
    let data = Dataset::classification(x, 784, y, 10).map_err(err)?;
    let dir = std::env::temp_dir().join(format!("rnn-bench-stream-{}", std::process::id()));
    let paths = data.write_shards(&dir, a.shard).map_err(err)?;
    let stream = DataStream::new(ShardFiles::open(&paths).map_err(err)?).gather(a.gather);
    // Every built-in kernel first (through the disk cache): a family left to its first use, or
    // built in the background once other kernels have carried enough of its work (NVIDIA
    // OpenCL's tile GEMMs on a cold cache), would otherwise build during a measured run.
    ctx.warm_up().map_err(err)?;
    train(&ctx, (&data).into(), &a, 1).map_err(err)?;
    let mut ratios = Vec::with_capacity(a.repeat);
    for round in 1..=a.repeat {
        if a.repeat > 1 {
            println!("stream_round {round}");
        }
        let memory = train(&ctx, (&data).into(), &a, a.epochs).map_err(err)?;
        let files = train(&ctx, (&stream).into(), &a, a.epochs).map_err(err)?;
        ratios.push(report(&memory, &files, a.epochs));
    }
    let _ = std::fs::remove_dir_all(&dir);
    if a.repeat > 1 {
        let median = |i: usize| {
            let mut v: Vec<f64> = ratios.iter().map(|r| r[i]).collect();
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        let rounds = a.repeat;
        println!(
            "stream_median_over_memory {:.3} x (all epochs, {rounds} rounds)",
            median(0)
        );
        if a.epochs > 1 {
            println!(
                "stream_median_steady_over_memory {:.3} x (epochs 2 and later, {rounds} rounds)",
                median(1)
            );
        }
    }
    Ok(())
}

/// Prints one round's figures; returns its ratios (all epochs, epochs 2 and later, the call).
fn report(memory: &Timed, files: &Timed, epochs: usize) -> [f64; 3] {
    let (m, f) = (memory.step_us(), files.step_us());
    for (i, (what, span)) in [
        ("", "all epochs"),
        ("_steady", "epochs 2 and later"),
        ("_call", "the whole train call"),
    ]
    .into_iter()
    .enumerate()
    {
        if i == 1 && epochs < 2 {
            continue;
        }
        println!("stream{what}_step_us_memory {:.1} us ({span})", m[i]);
        println!("stream{what}_step_us_files {:.1} us ({span})", f[i]);
        println!("stream{what}_over_memory {:.3} x ({span})", f[i] / m[i]);
    }
    let per_epoch = |t: &Timed| {
        t.epochs
            .iter()
            .map(|s| format!("{:.1}", s * 1e3))
            .collect::<Vec<_>>()
            .join(" ")
    };
    println!("stream_epoch_ms_memory {} ms", per_epoch(memory));
    println!("stream_epoch_ms_files {} ms", per_epoch(files));
    [0, 1, 2].map(|i| f[i] / m[i])
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("stream bench: {e}");
            ExitCode::FAILURE
        }
    }
}
