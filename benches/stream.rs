//! Step time of training in memory against training from a stream of shard files, on one
//! device: the same MLP (784-H-H-10 with H = 1024, batch 256 by default) on the same random samples,
//! printed as `name value unit` lines. The stream's step time is within a few percent of the
//! in-memory one when the reading thread and the copies are hidden behind the steps.
//!
//! ```text
//! cargo bench --bench stream -- [--device ID] [--samples N] [--batch B] [--epochs E]
//!     [--shard N]   samples per shard file (default 8192)
//!     [--hidden H]  width of the two hidden layers (default 1024; a small one leaves
//!                   mostly the feeding's cost, to time the host side on a slow device)
//! ```
//!
//! Figures: `stream_step_us_memory` and `stream_step_us_files` are the last epoch's
//! microseconds per step (each epoch is timed from its first step to its last, without
//! validation), `stream_over_memory` their ratio. The shard files are written to a temporary
//! directory first, so they are read from the page cache.

use std::process::ExitCode;

use rnn::nn::{
    DataStream, Dataset, Loss, Network, Progress, Rng, ShardFiles, TrainData, TrainingConfig,
};
use rnn::{Activation, Context, DeviceId, GpuManager};

struct Args {
    device: Option<DeviceId>,
    samples: usize,
    batch: usize,
    epochs: usize,
    shard: usize,
    hidden: usize,
}

fn parse() -> Result<Args, String> {
    let mut a = Args {
        device: None,
        samples: 60_000,
        batch: 256,
        epochs: 3,
        shard: 8192,
        hidden: 1024,
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
            // cargo bench passes --bench to every bench binary.
            "--bench" => {}
            other => {
                return Err(format!(
                    "unknown argument '{other}' (use --device ID, --samples N, --batch B, \
                     --epochs E, --shard N, --hidden H)"
                ));
            }
        }
    }
    Ok(a)
}

/// The last epoch's microseconds per step of a fresh network trained on `data`.
fn step_us(ctx: &Context, data: TrainData<'_>, a: &Args) -> rnn::Result<f64> {
    let mut net = Network::builder(ctx)
        .seed(1)
        .dense(784, a.hidden, Activation::Relu)
        .dense(a.hidden, a.hidden, Activation::Relu)
        .dense(a.hidden, 10, Activation::Identity)
        .build(Loss::SoftmaxCrossEntropy)?;
    let config = TrainingConfig {
        use_gpu: ctx.id() != DeviceId::Cpu,
        device: Some(ctx.id()),
        epochs: a.epochs,
        batch_size: a.batch,
        learning_rate: 1e-3,
        progress: Progress::Off,
        ..Default::default()
    };
    let history = net.train(data, &config)?;
    let last = history.epochs.last().expect("at least one epoch");
    Ok(a.batch as f64 / last.samples_per_sec * 1e6)
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
        "device {} ({}): {} samples, batch {}, {} epochs, {} per shard",
        ctx.id(),
        ctx.info().name,
        a.samples,
        a.batch,
        a.epochs,
        a.shard
    );
    let mut rng = Rng::new(3);
    let x: Vec<f32> = (0..a.samples * 784).map(|_| rng.uniform()).collect();
    let y: Vec<u32> = (0..a.samples).map(|_| rng.below(10) as u32).collect();
    let data = Dataset::classification(x, 784, y, 10).map_err(err)?;
    let dir = std::env::temp_dir().join(format!("rnn-bench-stream-{}", std::process::id()));
    let paths = data.write_shards(&dir, a.shard).map_err(err)?;
    let stream = DataStream::new(ShardFiles::open(&paths).map_err(err)?);
    let memory = step_us(&ctx, (&data).into(), &a).map_err(err)?;
    let files = step_us(&ctx, (&stream).into(), &a).map_err(err)?;
    let _ = std::fs::remove_dir_all(&dir);
    println!("stream_step_us_memory {memory:.1} us");
    println!("stream_step_us_files {files:.1} us");
    println!("stream_over_memory {:.3} x", files / memory);
    Ok(())
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
