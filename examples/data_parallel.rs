//! Data-parallel training of the MNIST MLP (784-256-128-10) across GPUs with NCCL, and a
//! throughput mode for benchmarks.
//!
//! One process per GPU, launched the way torchrun launches (it sets RANK, WORLD_SIZE,
//! LOCAL_RANK, MASTER_ADDR, MASTER_PORT; each process trains on cuda:<LOCAL_RANK>):
//!
//! ```text
//! # one host, 2 GPUs: torchrun starts the processes (any launcher that sets the variables works)
//! torchrun --standalone --nproc_per_node 2 --no-python target/release/examples/data_parallel
//! # ... or, equivalently, without torchrun:
//! for r in 0 1; do RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 \
//!     target/release/examples/data_parallel & done; wait
//!
//! # two hosts, 2 GPUs each: run on each host, with --node_rank 0 on the host named in
//! # --master_addr (reachable from the other host; rank 0 listens on the master port + 1 under
//! # torchrun, on MASTER_PORT otherwise, or RNN_RENDEZVOUS_PORT)
//! torchrun --nnodes 2 --node_rank 0 --nproc_per_node 2 --master_addr host0 --master_port 29500 \
//!     --no-python target/release/examples/data_parallel
//! torchrun --nnodes 2 --node_rank 1 --nproc_per_node 2 --master_addr host0 --master_port 29500 \
//!     --no-python target/release/examples/data_parallel
//! ```
//!
//! NCCL must be loadable (`libnccl.so.2`): `pip install nvidia-nccl-cu12` and put its
//! `nvidia/nccl/lib` folder on LD_LIBRARY_PATH (a PyTorch install has one), or set
//! RNN_NCCL_LIBRARY. Across hosts NCCL picks the network itself (NCCL_SOCKET_IFNAME and
//! NCCL_IB_HCA steer it, as for PyTorch).
//!
//! One process driving several GPUs (a thread per GPU) instead: `--devices cuda:0,cuda:1` (or
//! RNN_DEVICE=cuda:0,cuda:1).
//!
//! Throughput: `--bench mlp4096|w2 --batch N [--devices LIST] [--steps S]` trains a synthetic
//! compute-bound MLP 784-4096-4096-10 (Adam, softmax-CE), or W2 (Elman RNN, vocab 96, hidden
//! 256, 64 steps), at global batch N and prints `samples_per_sec=...` of the best timed epoch.
//!
//! Only rank 0 prints progress and writes the checkpoint (`--save PATH`).

mod common;

use std::process::ExitCode;

use rnn::dist::DistEnv;
use rnn::nn::{
    Dataset, Loss, Network, Optimizer, Rng, RnnOutput, Targets, TrainingConfig, TrainingHistory,
    format_epoch,
};
use rnn::{Activation, Context, DeviceId, GpuManager};

static MNIST: &[u8] = include_bytes!("data/mnist_5k.csv.gz");

const USAGE: &str = "usage: data_parallel [--devices LIST] [--epochs N] [--batch N] [--save PATH]
                     [--bench mlp4096|w2] [--steps S] [--overlap]
  --devices LIST   one process, these GPUs (cuda:0,cuda:1); default: one process per GPU as
                   torchrun's variables say, else RNN_DEVICE (a list trains data-parallel)
  --epochs N       epochs (default 10; --bench: 4, the first is warm-up)
  --batch N        global batch, divided evenly among the GPUs (default 128; --bench: 16384
                   for mlp4096, 4096 for w2)
  --save PATH      rank 0 writes the trained parameters here (safetensors)
  --bench MODEL    synthetic throughput run: mlp4096 (784-4096-4096-10) or w2 (Elman RNN)
  --steps S        --bench: global steps per epoch (default 8)
  --overlap        all-reduce each layer's gradients during backward, on a second stream
                   (TrainingConfig::overlap_allreduce)";

struct Args {
    devices: Vec<DeviceId>,
    epochs: Option<usize>,
    batch: Option<usize>,
    save: Option<String>,
    bench: Option<String>,
    steps: usize,
    overlap: bool,
}

fn parse_args() -> Result<Option<Args>, String> {
    let mut a = Args {
        devices: Vec::new(),
        epochs: None,
        batch: None,
        save: None,
        bench: None,
        steps: 8,
        overlap: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        match flag.as_str() {
            "-h" | "--help" => return Ok(None),
            "--overlap" => a.overlap = true,
            "--devices" => {
                a.devices = common::value(&mut it, "--devices")?
                    .split(',')
                    .map(|d| d.parse::<DeviceId>().map_err(|e| e.to_string()))
                    .collect::<Result<_, _>>()?
            }
            "--epochs" => a.epochs = Some(common::count(&mut it, "--epochs")?),
            "--batch" => a.batch = Some(common::count(&mut it, "--batch")?),
            "--steps" => a.steps = common::count(&mut it, "--steps")?,
            "--save" => a.save = Some(common::value(&mut it, "--save")?),
            "--bench" => {
                let m = common::value(&mut it, "--bench")?;
                if m != "mlp4096" && m != "w2" {
                    return Err(format!("--bench takes mlp4096 or w2, got '{m}'"));
                }
                a.bench = Some(m)
            }
            other => return Err(format!("unknown argument '{other}'")),
        }
    }
    Ok(Some(a))
}

/// Two ReLU layers and a linear head of the `widths` (inputs first), for softmax cross-entropy.
fn mlp(ctx: &Context, [inputs, h1, h2, classes]: [usize; 4]) -> rnn::Result<Network> {
    Network::builder(ctx)
        .seed(1)
        .dense(inputs, h1, Activation::Relu)
        .dense(h1, h2, Activation::Relu)
        .dense(h2, classes, Activation::Identity)
        .build(Loss::SoftmaxCrossEntropy)
}

/// The network and its data: MNIST, or a synthetic benchmark workload of `n` samples.
fn workload(args: &Args, ctx: &Context, batch: usize) -> rnn::Result<(Network, Dataset)> {
    let mut rng = Rng::new(5);
    match args.bench.as_deref() {
        None => {
            let net = mlp(ctx, [784, 256, 128, 10])?;
            // The file is ordered; the split shuffles (the same way on every rank).
            let (train, _) = Dataset::from_mnist_csv(MNIST)?.train_test_split(500, 7)?;
            Ok((net, train))
        }
        Some("mlp4096") => {
            let n = batch * args.steps;
            let net = mlp(ctx, [784, 4096, 4096, 10])?;
            let x = (0..n * 784)
                .map(|_| rng.below(256) as f32 / 255.0)
                .collect();
            let labels = (0..n).map(|_| rng.below(10) as u32).collect();
            Ok((net, Dataset::classification(x, 784, labels, 10)?))
        }
        _ => {
            let (v, h, t) = (96, 256, 64);
            let n = batch * args.steps;
            let net = Network::builder(ctx)
                .seed(1)
                .sequence_length(t)
                .rnn(v, h, Activation::Tanh, RnnOutput::Sequence)
                .dense(h, v, Activation::Identity)
                .build(Loss::SoftmaxCrossEntropy)?;
            let mut x = vec![0.0f32; n * t * v];
            for row in x.chunks_mut(v) {
                row[rng.below(v)] = 1.0;
            }
            let targets = Targets::Classes {
                labels: (0..n * t).map(|_| rng.below(v) as u32).collect(),
                classes: v,
                per_sample: t,
            };
            Ok((net, Dataset::new(x, t * v, targets)?))
        }
    }
}

fn run(args: &Args) -> rnn::Result<()> {
    let dist = DistEnv::from_env()?;
    let bench = args.bench.is_some();
    let batch = args.batch.unwrap_or(match args.bench.as_deref() {
        None => 128,
        Some("mlp4096") => 16384,
        _ => 4096,
    });
    let epochs = args.epochs.unwrap_or(if bench { 4 } else { 10 });
    let rank0 = dist.as_ref().is_none_or(|d| d.rank == 0);
    // Rank 0's device, or this process's device.
    let first = match (&dist, args.devices.first()) {
        (Some(d), _) => DeviceId::Cuda(d.local_rank),
        (None, Some(&d)) => d,
        (None, None) => TrainingConfig::default().context()?.id(),
    };
    let ctx = if first == DeviceId::Cpu {
        Context::cpu()
    } else {
        GpuManager::new()?.create_context(first)?
    };
    let (mut net, data) = workload(args, &ctx, batch)?;
    let config = TrainingConfig {
        devices: args.devices.clone(),
        overlap_allreduce: args.overlap,
        epochs,
        batch_size: batch,
        learning_rate: 1e-3,
        optimizer: Optimizer::adam(),
        validation_split: if bench { 0.0 } else { 0.1 },
        seed: 3,
        log_every: 0,
        ..Default::default()
    };
    let ranks = dist
        .as_ref()
        .map_or(args.devices.len().max(1), |d| d.world_size);
    if rank0 {
        println!(
            "{}: {} samples, global batch {batch}, {ranks} GPU(s){}",
            args.bench.as_deref().unwrap_or("MNIST MLP 784-256-128-10"),
            data.len(),
            if dist.is_some() {
                " (one process each)"
            } else {
                ""
            }
        );
    }
    let history: TrainingHistory = match &dist {
        Some(_) => net.train_distributed(&data, &config)?,
        None => net.train(&data, &config)?,
    };
    if !rank0 {
        return Ok(());
    }
    for e in &history.epochs {
        println!("  {}", format_epoch(e, epochs));
    }
    if bench {
        // The first epoch compiles kernels and records the step graphs.
        let best = history.epochs[1.min(history.epochs.len() - 1)..]
            .iter()
            .map(|e| e.samples_per_sec)
            .fold(0.0, f64::max);
        println!(
            "bench={}{} gpus={ranks} batch={batch} samples_per_sec={best:.0}",
            args.bench.as_deref().unwrap_or(""),
            if args.overlap { "+overlap" } else { "" }
        );
        if dist.is_none() && args.devices.len() > 1 {
            // What bucketed overlap of the all-reduce with backward could save at most: the
            // all-reduce's share of a step, measured alone.
            let ms = allreduce_ms(&args.devices, net.num_parameters())?;
            let step_ms = 1e3 * batch as f64 / best.max(1e-9);
            println!(
                "allreduce gpus={ranks} floats={} allreduce_ms={ms:.3} step_ms={step_ms:.3} \
                 share={:.1}%",
                net.num_parameters(),
                100.0 * ms / step_ms
            );
        }
    } else if let Some(last) = history.last() {
        println!(
            "mnist val_accuracy={:.4} gpus={ranks} seconds={:.2}",
            last.val_accuracy.unwrap_or(0.0),
            history.total_seconds
        );
    }
    if let Some(path) = &args.save {
        net.save(path)?;
        println!("rank 0 wrote {path}");
    }
    Ok(())
}

/// Milliseconds of one in-place mean all-reduce of `len` floats across `devices`, one thread
/// per device, averaged over 20 after 3 warm-up calls.
fn allreduce_ms(devices: &[DeviceId], len: usize) -> rnn::Result<f64> {
    let manager = GpuManager::new()?;
    let contexts = devices
        .iter()
        .map(|&d| manager.create_context(d))
        .collect::<rnn::Result<Vec<_>>>()?;
    let comms = rnn::dist::Communicator::for_contexts(&contexts)?;
    let times = std::thread::scope(|s| {
        let handles: Vec<_> = contexts
            .iter()
            .zip(&comms)
            .map(|(ctx, comm)| {
                s.spawn(move || -> rnn::Result<f64> {
                    let buf = ctx.alloc(len)?;
                    ctx.ops().fill(buf.view(), 1.0)?;
                    for _ in 0..3 {
                        comm.all_reduce_mean(ctx, buf.view())?;
                    }
                    ctx.synchronize()?;
                    let t = std::time::Instant::now();
                    for _ in 0..20 {
                        comm.all_reduce_mean(ctx, buf.view())?;
                    }
                    ctx.synchronize()?;
                    let ms = t.elapsed().as_secs_f64() * 1e3 / 20.0;
                    comm.close();
                    Ok(ms)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("all-reduce thread"))
            .collect::<rnn::Result<Vec<f64>>>()
    })?;
    Ok(times.into_iter().fold(0.0, f64::max))
}

fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    common::main(USAGE, parse_args, run)
}
