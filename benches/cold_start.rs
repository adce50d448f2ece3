//! Cold and warm start per GPU device: the time from process start to a ready context, to the
//! end of the first training step of the `real_gpu_neural_network` example's MLP, and the whole
//! example. Every figure is taken in a fresh child process (nothing is warm in-process): cold
//! with a new, empty `RNN_CACHE_DIR`, warm with the same directory again, then once more
//! (`warm again`: after the families the first warm start built); each with the op-set
//! modules built on first use (`lazy`, `RNN_KERNEL_PREFETCH=0`), prefetched in the background
//! at context creation as a context does by default (`prefetch`, `RNN_KERNEL_PREFETCH=1`: the
//! families a run is likely to launch, by need; on NVIDIA OpenCL tier 0 alone, whose stand-ins
//! and copies carry the first steps; see src/backend/gpu/prefetch.rs and tier0.rs), and
//! prefetched without tier 0 (`prefetch-no-tier0`, `RNN_KERNEL_TIER0=off` as well, which is
//! already the default on CUDA and HIP).
//!
//! ```text
//! cargo bench --bench cold_start -- [--device ID]... [--modes lazy,prefetch] [--no-example]
//!     --device ID    a device to measure (repeatable); default: every GPU device found
//!     --modes LIST   which of lazy, prefetch, prefetch-no-tier0 (default all three)
//!     --no-example   only the context and first-step figures
//! ```
//!
//! The example binary is looked for next to this one (the GPU bundle's `bin/`), then in the
//! target directory's `examples/`; `RNN_EXAMPLE_BIN` names it explicitly.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;

use rnn::nn::{Dataset, Loss, Network, Optimizer, Progress, Rng, TrainingConfig};
use rnn::{Activation, DeviceId, DeviceKind, GpuManager};

/// Set in a child: the device to time.
const CHILD: &str = "RNN_COLD_START_CHILD";

/// The child: a context on `id`, then one training step of the example's MLP (784-256-128-10,
/// ReLU, softmax cross-entropy, Adam, batch 64) on random digits; prints the times since the
/// process started.
fn child(id: &str) -> rnn::Result<()> {
    let start = Instant::now();
    let id: DeviceId = id.parse()?;
    let ctx = GpuManager::new()?.create_context(id)?;
    let context_s = start.elapsed().as_secs_f64();
    let mut rng = Rng::new(5);
    let batch = 64;
    let features: Vec<f32> = (0..batch * 784).map(|_| rng.uniform()).collect();
    let labels: Vec<u32> = (0..batch as u32).map(|i| i % 10).collect();
    let data = Dataset::classification(features, 784, labels, 10)?;
    let layers = [
        (784, 256, Activation::Relu),
        (256, 128, Activation::Relu),
        (128, 10, Activation::Identity),
    ];
    let builder = layers
        .into_iter()
        .fold(Network::builder(&ctx).seed(1), |b, (i, o, a)| {
            b.dense(i, o, a)
        });
    let mut net = builder.build(Loss::SoftmaxCrossEntropy)?;
    let config = TrainingConfig {
        device: Some(id),
        use_gpu: true,
        epochs: 1,
        batch_size: batch,
        learning_rate: 1e-3,
        optimizer: Optimizer::adam(),
        validation_split: 0.0,
        seed: 3,
        progress: Progress::Off,
        ..Default::default()
    };
    // One epoch of one batch: the history's loss is read back, so the step has finished.
    let history = net.train(&data, &config)?;
    let step_s = start.elapsed().as_secs_f64();
    let loss = history.last().map_or(f32::NAN, |e| e.loss);
    println!("context_s={context_s:.3} first_step_s={step_s:.3} loss={loss:.4}");
    Ok(())
}

/// A fresh directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> std::io::Result<Self> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let path = std::env::temp_dir().join(format!(
            "rnn-cold-start-{tag}-{}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir_all(&path)?;
        Ok(TempDir(path))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// How a measured process builds its modules.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Lazy,
    Prefetch,
    PrefetchNoTier0,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Lazy => "lazy",
            Mode::Prefetch => "prefetch",
            Mode::PrefetchNoTier0 => "prefetch-no-tier0",
        }
    }
}

/// The environment of one measured process: the cache directory and the module mode. The
/// NVIDIA driver keeps a compute cache of its own (OpenCL program builds, PTX JIT) across
/// processes, which other runs on the machine have filled: each cache directory gets a fresh one
/// inside it, so that cold is a first run's cold and warm finds what the cold run left.
fn configure<'a>(cmd: &'a mut Command, cache: &Path, mode: Mode) -> &'a mut Command {
    cmd.env("RNN_CACHE_DIR", cache)
        .env("CUDA_CACHE_PATH", cache.join("nvidia-compute-cache"))
        .env_remove("CUDA_CACHE_DISABLE")
        .env_remove("RNN_CACHE")
        .env(
            "RNN_KERNEL_PREFETCH",
            if mode == Mode::Lazy { "0" } else { "1" },
        )
        .env_remove("RNN_KERNEL_TIER0");
    if mode == Mode::PrefetchNoTier0 {
        cmd.env("RNN_KERNEL_TIER0", "off");
    }
    cmd
}

/// `(context_s, first_step_s)` of a child on `id`, or why it failed.
fn time_child(id: &str, cache: &Path, mode: Mode) -> Result<(f64, f64), String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut cmd = Command::new(exe);
    configure(&mut cmd, cache, mode).env(CHILD, id);
    let out = cmd.output().map_err(|e| e.to_string())?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let field = |name: &str| -> Option<f64> {
        stdout
            .split_whitespace()
            .find_map(|w| w.strip_prefix(name)?.strip_prefix('=')?.parse().ok())
    };
    match (
        out.status.success(),
        field("context_s"),
        field("first_step_s"),
    ) {
        (true, Some(c), Some(s)) => Ok((c, s)),
        _ => Err(format!(
            "{}: {}{}",
            out.status,
            stdout.trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        )),
    }
}

/// Seconds the whole example took on `id`, or why it failed.
fn time_example(example: &Path, id: &str, cache: &Path, mode: Mode) -> Result<f64, String> {
    let mut cmd = Command::new(example);
    configure(&mut cmd, cache, mode).args(["--device", id, "--no-progress"]);
    let started = Instant::now();
    let out = cmd.output().map_err(|e| e.to_string())?;
    let secs = started.elapsed().as_secs_f64();
    if out.status.success() {
        Ok(secs)
    } else {
        Err(format!(
            "{}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// The example binary: `RNN_EXAMPLE_BIN`, else next to this binary, else in the target
/// directory's `examples/` (this binary lives in `deps/`).
fn find_example() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("RNN_EXAMPLE_BIN") {
        return Some(PathBuf::from(p));
    }
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?;
    let name = "real_gpu_neural_network";
    [dir.join(name), dir.parent()?.join("examples").join(name)]
        .into_iter()
        .find(|p| p.is_file())
}

struct Args {
    devices: Vec<String>,
    modes: Vec<Mode>,
    example: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        devices: Vec::new(),
        modes: vec![Mode::Lazy, Mode::Prefetch, Mode::PrefetchNoTier0],
        example: true,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        match flag.as_str() {
            "--device" => args.devices.push(it.next().ok_or("--device needs an id")?),
            "--modes" => {
                let list = it.next().ok_or("--modes needs a list")?;
                args.modes = list
                    .split(',')
                    .map(|m| match m.trim() {
                        "lazy" => Ok(Mode::Lazy),
                        "prefetch" => Ok(Mode::Prefetch),
                        "prefetch-no-tier0" => Ok(Mode::PrefetchNoTier0),
                        other => Err(format!(
                            "unknown mode '{other}' (lazy, prefetch, prefetch-no-tier0)"
                        )),
                    })
                    .collect::<Result<_, _>>()?;
            }
            "--no-example" => args.example = false,
            // What `cargo bench` passes to a harness-less bench.
            "--bench" => {}
            other => return Err(format!("unknown argument '{other}'")),
        }
    }
    Ok(args)
}

fn cell(r: &Result<f64, String>, failures: &mut Vec<String>, what: &str) -> String {
    match r {
        Ok(s) => format!("{s:.2}"),
        Err(e) => {
            failures.push(format!("{what}: {e}"));
            "failed".into()
        }
    }
}

fn main() -> ExitCode {
    if let Ok(id) = std::env::var(CHILD) {
        return match child(&id) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let devices = if args.devices.is_empty() {
        match GpuManager::new() {
            Ok(m) => m
                .devices()
                .iter()
                .filter(|d| d.kind == DeviceKind::Gpu)
                .map(|d| d.id.to_string())
                .collect(),
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::FAILURE;
            }
        }
    } else {
        args.devices.clone()
    };
    if devices.is_empty() {
        println!("no GPU device found; name one with --device (e.g. an OpenCL CPU device)");
        return ExitCode::SUCCESS;
    }
    let example = if args.example { find_example() } else { None };
    if args.example && example.is_none() {
        println!("example binary not found (set RNN_EXAMPLE_BIN); its column is left out");
    }
    println!(
        "seconds from process start; cold: empty kernel cache, warm: the same cache again \
         (and once more: warm again)"
    );
    println!(
        "| device | modules | cache | context | first step | whole example |\n|---|---|---|---|---|---|"
    );
    let mut failures = Vec::new();
    for id in &devices {
        for &mode in &args.modes {
            let dirs = (TempDir::new("child"), TempDir::new("example"));
            let (Ok(child_dir), Ok(example_dir)) = dirs else {
                eprintln!("error: cannot create a temporary cache directory");
                return ExitCode::FAILURE;
            };
            // `warm again`: the first warm start still builds the families that tier 0's
            // stand-ins carried through the cold one (src/backend/gpu/tier0.rs); the second is
            // a start with every family it uses in the cache.
            for cache in ["cold", "warm", "warm again"] {
                let what = format!("{id} {} {cache}", mode.name());
                let (context, step) = match time_child(id, &child_dir.0, mode) {
                    Ok((c, s)) => (format!("{c:.2}"), format!("{s:.2}")),
                    Err(e) => {
                        failures.push(format!("{what}: {e}"));
                        ("failed".into(), "failed".into())
                    }
                };
                let whole = match &example {
                    Some(bin) => cell(
                        &time_example(bin, id, &example_dir.0, mode),
                        &mut failures,
                        &format!("{what} example"),
                    ),
                    None => "-".into(),
                };
                println!(
                    "| {id} | {} | {cache} | {context} | {step} | {whole} |",
                    mode.name()
                );
            }
        }
    }
    for f in &failures {
        eprintln!("failed: {f}");
    }
    if failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
