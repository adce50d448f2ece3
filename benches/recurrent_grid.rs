//! The recurrent shape grid: for every point of `benches/recurrent_grid.points` (the
//! list `scripts/recurrent_grid.py` times in PyTorch), a recurrent model with a linear head and
//! softmax cross-entropy at every step: the time of one whole Adam training step and of one
//! forward (inference), each the median over repetitions after a warm-up, and which recurrence
//! algorithm ran: the persistent on-chip kernels (one launch per sequence op) or the per-step
//! fallback (one launch per time step).
//!
//! ```text
//! cargo bench --bench recurrent_grid -- [--device ID] [--points FILE] [--quick] [--only A,B]
//!     --device ID     the device (else RNN_DEVICE, else cuda:0)
//!     --points FILE   the grid (else RNN_GRID_POINTS, else benches/recurrent_grid.points)
//!     --quick         only the points marked `quick`, fewer repetitions (CPU, PoCL)
//!     --only A,B      only the points whose name contains one of these
//! ```
//!
//! Prints `NAME_train US us alg=ALG` and `NAME_infer US us alg=ALG` per point (the names and
//! units of the PyTorch script's lines, which scripts/recurrent_grid_table.py joins), or
//! `NAME_train failed ERROR`. ALG is `persistent`, `block-local`, `gemm`, `steps`,
//! `forward/backward` where the two differ (`persistent/steps`), `cpu`, or `unknown`.
//!
//! The algorithm is read from the kernels that ran where the context times its kernels
//! (OpenCL: a second context with `ContextOptions::profile_kernels` runs one step and one
//! forward of each point). CUDA keeps no kernel names, so there the bench reads the debug
//! record the GPU op set writes when a persistent grid does not fit and it loops the step
//! kernels instead, or runs the per-step GEMMs or the block-local kernels; a model that must
//! fall back checks at start that such records arrive.

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use log::Log;
use parking_lot::Mutex;
use rnn::nn::{
    Dataset, Loss, Network, Optimizer, RecurrentCell, RecurrentOptions, Rng, RnnOutput,
    TrainingConfig,
};
use rnn::{Activation, BackendKind, Context, ContextOptions, DeviceId, GpuManager};

#[path = "common/char_data.rs"]
mod char_data;
use char_data::one_hot_sequences;

/// One-hot input features and head classes per step (the W2/W5/W6 vocabulary).
const VOCAB: usize = 96;
/// The grid file when neither `--points` nor `RNN_GRID_POINTS` names one.
const DEFAULT_POINTS: &str = "benches/recurrent_grid.points";

/// The recurrent cell of a point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cell {
    Elman,
    Lstm,
    Gru,
}

impl Cell {
    fn parse(word: &str) -> Option<Cell> {
        match word {
            "elman" => Some(Cell::Elman),
            "lstm" => Some(Cell::Lstm),
            "gru" => Some(Cell::Gru),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Cell::Elman => "elman",
            Cell::Lstm => "lstm",
            Cell::Gru => "gru",
        }
    }

    /// The prefix of the cell's kernel entries (`rnn_seq_forward_regs`, `lstm_step_backward`).
    fn kernel_prefix(self) -> &'static str {
        match self {
            Cell::Elman => "rnn",
            Cell::Lstm => "lstm",
            Cell::Gru => "gru",
        }
    }

    fn recurrent(self) -> RecurrentCell {
        match self {
            Cell::Elman => RecurrentCell::Rnn(Activation::Tanh),
            Cell::Lstm => RecurrentCell::Lstm,
            Cell::Gru => RecurrentCell::Gru,
        }
    }
}

/// One point of the grid.
#[derive(Clone, Debug)]
struct Point {
    cell: Cell,
    hidden: usize,
    batch: usize,
    steps: usize,
    layers: usize,
    bidirectional: bool,
    quick: bool,
}

impl Point {
    /// `cell hidden batch steps layers uni|bi [quick]`.
    fn parse(line: &str) -> Result<Point, String> {
        let words: Vec<&str> = line.split_whitespace().collect();
        if !(6..=7).contains(&words.len()) {
            return Err("expected `cell hidden batch steps layers uni|bi [quick]`".into());
        }
        let cell = Cell::parse(words[0])
            .ok_or_else(|| format!("cell '{}' is not elman, lstm or gru", words[0]))?;
        let count = |i: usize, what: &str| -> Result<usize, String> {
            match words[i].parse::<usize>() {
                Ok(n) if n > 0 => Ok(n),
                _ => Err(format!("{what} '{}' is not a positive integer", words[i])),
            }
        };
        let bidirectional = match words[5] {
            "uni" => false,
            "bi" => true,
            other => return Err(format!("directions '{other}' is not uni or bi")),
        };
        let quick = match words.get(6) {
            None => false,
            Some(&"quick") => true,
            Some(other) => return Err(format!("'{other}' is not `quick`")),
        };
        Ok(Point {
            cell,
            hidden: count(1, "hidden")?,
            batch: count(2, "batch")?,
            steps: count(3, "steps")?,
            layers: count(4, "layers")?,
            bidirectional,
            quick,
        })
    }

    fn name(&self) -> String {
        format!(
            "{}_h{}_b{}_t{}_l{}_{}",
            self.cell.name(),
            self.hidden,
            self.batch,
            self.steps,
            self.layers,
            if self.bidirectional { "bi" } else { "uni" }
        )
    }
}

/// The points of a grid file (`#` starts a comment).
fn read_points(path: &str) -> Result<Vec<Point>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    text.lines()
        .enumerate()
        .map(|(i, l)| (i, l.split('#').next().unwrap_or("").trim()))
        .filter(|(_, l)| !l.is_empty())
        .map(|(i, l)| Point::parse(l).map_err(|e| format!("{path}:{}: {e}", i + 1)))
        .collect()
}

/// A point's model on `ctx` with its data: the recurrent stack, a linear head at every step,
/// softmax cross-entropy; one-hot input, random labels; `batch` samples (one training batch).
struct Model {
    net: Network,
    data: Dataset,
    /// The same features on the device, for the forward.
    x: rnn::Tensor,
}

fn model(ctx: &Context, p: &Point) -> rnn::Result<Model> {
    let (v, h, t, b) = (VOCAB, p.hidden, p.steps, p.batch);
    let dirs = if p.bidirectional { 2 } else { 1 };
    let options = RecurrentOptions::new()
        .layers(p.layers)
        .bidirectional(p.bidirectional);
    let net = Network::builder(ctx)
        .seed(1)
        .sequence_length(t)
        .recurrent(p.cell.recurrent(), v, h, RnnOutput::Sequence, options)
        .dense(h * dirs, v, Activation::Identity)
        .build(Loss::SoftmaxCrossEntropy)?;
    let mut rng = Rng::new(2);
    let (x, targets) = one_hot_sequences(&mut rng, b, t, v);
    let device_x = ctx.tensor(&[b, t * v], &x)?;
    Ok(Model {
        net,
        data: Dataset::new(x, t * v, targets)?,
        x: device_x,
    })
}

fn config(batch: usize) -> TrainingConfig {
    TrainingConfig {
        batch_size: batch,
        learning_rate: 1e-3,
        optimizer: Optimizer::adam(),
        graphs: true,
        ..Default::default()
    }
}

/// How long to measure each figure.
struct Plan {
    /// Untimed calls first (the first training steps run eagerly, then record the step graph).
    warm: usize,
    /// Timed repetitions; the figure is their median.
    reps: usize,
    /// The target length of one repetition, which sets its number of calls.
    rep_seconds: f64,
    /// At most this many calls a repetition.
    max_calls: usize,
}

/// The median over `plan.reps` repetitions of the time per call of `f` in microseconds, each
/// repetition as many back-to-back calls as fill `plan.rep_seconds` (by one timed call after
/// the warm-up), synchronizing before each clock read.
fn median_us(
    ctx: &Context,
    plan: &Plan,
    mut f: impl FnMut() -> rnn::Result<()>,
) -> rnn::Result<f64> {
    for _ in 0..plan.warm {
        f()?;
    }
    ctx.synchronize()?;
    let t = Instant::now();
    f()?;
    ctx.synchronize()?;
    let one = t.elapsed().as_secs_f64().max(1e-7);
    let calls = ((plan.rep_seconds / one).ceil() as usize).clamp(1, plan.max_calls);
    let mut reps = Vec::with_capacity(plan.reps);
    for _ in 0..plan.reps {
        let t = Instant::now();
        for _ in 0..calls {
            f()?;
        }
        ctx.synchronize()?;
        reps.push(t.elapsed().as_secs_f64() / calls as f64);
    }
    reps.sort_by(f64::total_cmp);
    Ok(reps[reps.len() / 2] * 1e6)
}

/// The GPU op set's debug records of sequence ops that did not run persistent, as
/// `steps:<entry>` (a persistent launch that did not fit), `gemm:<entry>` (the per-step GEMM
/// path ran) and `local:<entry>` (the block-local kernel ran), collected while [`COLLECT`] is
/// on.
static FALLBACKS: Mutex<Vec<String>> = Mutex::new(Vec::new());
static COLLECT: AtomicBool = AtomicBool::new(false);

/// env_logger as configured by `RUST_LOG`, plus the collection of fallback records.
struct GridLogger {
    inner: env_logger::Logger,
}

impl GridLogger {
    /// Installs the logger; debug records reach it whatever `RUST_LOG` says.
    fn install() -> Result<(), String> {
        let inner = env_logger::Builder::from_default_env().build();
        let level = inner.filter().max(log::LevelFilter::Debug);
        log::set_boxed_logger(Box::new(GridLogger { inner })).map_err(|e| e.to_string())?;
        log::set_max_level(level);
        Ok(())
    }
}

impl Log for GridLogger {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.level() <= log::Level::Debug || self.inner.enabled(metadata)
    }

    fn log(&self, record: &log::Record<'_>) {
        if COLLECT.load(Ordering::Relaxed) && record.level() == log::Level::Debug {
            let message = record.args().to_string();
            // "{device}: {entry} {batch}x{hidden} does not fit ...; running it per step", and
            // "{device}: {entry} {batch}x{hidden} runs per step as GEMMs and cell launches", and
            // "{device}: {entry_local} {batch}x{hidden} runs block-local (...)"
            let kind = if message.contains("runs per step as GEMMs") {
                Some("gemm")
            } else if message.contains("runs block-local") {
                Some("local")
            } else if message.contains("running it per step") {
                Some("steps")
            } else {
                None
            };
            if let Some(kind) = kind
                && let Some(entry) = message
                    .split_once(": ")
                    .and_then(|(_, rest)| rest.split_whitespace().next())
            {
                FALLBACKS.lock().push(format!("{kind}:{entry}"));
            }
        }
        if self.inner.enabled(record.metadata()) {
            self.inner.log(record);
        }
    }

    fn flush(&self) {
        self.inner.flush();
    }
}

/// Runs `f` collecting the fallback records; returns its value and the entries that fell back.
fn with_fallbacks<R>(f: impl FnOnce() -> R) -> (R, Vec<String>) {
    FALLBACKS.lock().clear();
    COLLECT.store(true, Ordering::Relaxed);
    let r = f();
    COLLECT.store(false, Ordering::Relaxed);
    (r, std::mem::take(&mut *FALLBACKS.lock()))
}

/// How the sequence ops of one pass (forward or backward) ran.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Path {
    Persistent,
    /// The block-local kernels (one launch per sequence op, no barrier between blocks).
    BlockLocal,
    Steps,
    /// Both kinds of kernel ran (calls of one pass took different paths).
    Mixed,
    /// Per-step GEMMs and cell (or bias-activation) launches; from kernel names: no sequence or
    /// step kernel of the cell was seen.
    Gemm,
}

impl Path {
    fn of(persistent: bool, steps: bool) -> Path {
        match (persistent, steps) {
            (true, false) => Path::Persistent,
            (false, true) => Path::Steps,
            (true, true) => Path::Mixed,
            (false, false) => Path::Gemm,
        }
    }

    fn word(self) -> &'static str {
        match self {
            Path::Persistent => "persistent",
            Path::BlockLocal => "block-local",
            Path::Steps => "steps",
            Path::Mixed => "mixed",
            Path::Gemm => "gemm",
        }
    }
}

/// `forward` alone, or both passes: one word where they agree, else `forward/backward`.
fn label(forward: Path, backward: Option<Path>) -> String {
    match backward {
        Some(b) if b != forward => format!("{}/{}", forward.word(), b.word()),
        _ => forward.word().to_string(),
    }
}

/// The paths of the forward and backward sequence ops of `cell`, from the kernel entries that
/// ran: `<prefix>_seq_<pass>_local` are the block-local kernels, the other `<prefix>_seq_*` the
/// persistent ones, `<prefix>_step_*` the per-step fallback.
fn paths_from_kernels(cell: Cell, entries: &[String]) -> (Path, Path) {
    let ran = |kind: &str, pass: &str, local: bool| {
        let prefix = format!("{}_{kind}_{pass}", cell.kernel_prefix());
        entries
            .iter()
            .any(|e| e.starts_with(&prefix) && e.ends_with("_local") == local)
    };
    let pass = |name: &str| {
        if ran("seq", name, true) && !ran("seq", name, false) && !ran("step", name, false) {
            Path::BlockLocal
        } else {
            Path::of(ran("seq", name, false), ran("step", name, false))
        }
    };
    (pass("forward"), pass("backward"))
}

/// The paths from the records of a run that called both passes of `cell`: a pass that ran the
/// GEMM path or the block-local kernel says so; one whose persistent entry fell back otherwise
/// looped the step kernels; one with no record ran persistent.
fn paths_from_fallbacks(cell: Cell, fell_back: &[String]) -> (Path, Path) {
    let pass = |name: &str| {
        let entry = format!("{}_seq_{name}", cell.kernel_prefix());
        let has = |kind: &str| {
            fell_back
                .iter()
                .any(|e| e.starts_with(&format!("{kind}:{entry}")))
        };
        if has("gemm") {
            Path::Gemm
        } else if has("local") {
            Path::BlockLocal
        } else if has("steps") {
            Path::Steps
        } else {
            Path::Persistent
        }
    };
    (pass("forward"), pass("backward"))
}

/// How the bench learns which algorithm a point ran.
enum Detector {
    /// A second context of the device that times its kernels (OpenCL), one per point.
    KernelTimer,
    /// The fallback records (CUDA, checked at start to arrive).
    FallbackRecords,
    /// The CPU backend: no GPU algorithm to tell.
    Cpu,
    /// Neither works here; the reason.
    Unknown(String),
}

/// The detector for `ctx`: on OpenCL the kernel timer of a second, profiling context of the
/// device; on CUDA and HIP the op set's records, where a model that cannot run persistent
/// kernels anywhere (an LSTM of hidden 2048: its 16-unit W slice alone is 512 KB of shared
/// memory) leaves one (`steps:` or `gemm:lstm_seq_forward`).
fn detector(ctx: &Context) -> Detector {
    match ctx.info().backend {
        BackendKind::Cpu => return Detector::Cpu,
        BackendKind::OpenCl => return Detector::KernelTimer,
        _ => {}
    }
    let probe = Point {
        cell: Cell::Lstm,
        hidden: 2048,
        batch: 1,
        steps: 1,
        layers: 1,
        bidirectional: false,
        quick: false,
    };
    let (ran, fell_back) = with_fallbacks(|| -> rnn::Result<()> {
        let mut m = model(ctx, &probe)?;
        m.net.forward(&m.x)?;
        ctx.synchronize()
    });
    match ran {
        Err(e) => Detector::Unknown(format!("the fallback probe failed: {e}")),
        Ok(()) if fell_back.iter().any(|e| e.ends_with(":lstm_seq_forward")) => {
            Detector::FallbackRecords
        }
        Ok(()) => Detector::Unknown(
            "no kernel timer, and no fallback record from a model that must fall back".into(),
        ),
    }
}

/// The train and inference algorithms of `p` from one step and one forward on a profiling
/// context of device `id`, dropped on return: each context's pool keeps the memory its models
/// released, so a context kept for the next point would hold memory the timing context needs.
fn algorithms_by_timer(
    manager: &GpuManager,
    id: DeviceId,
    p: &Point,
) -> rnn::Result<(String, String)> {
    let mut options = ContextOptions::default();
    options.profile_kernels = true;
    let profiled = &manager.create_context_with(id, options)?;
    let mut m = model(profiled, p)?;
    let mut trainer = m.net.trainer(&m.data, &config(p.batch))?;
    let entries = |ctx: &Context| -> rnn::Result<Vec<String>> {
        let times = ctx.kernel_times()?.unwrap_or_default();
        Ok(times.into_iter().map(|t| t.entry).collect())
    };
    // The model's initialisation is not part of either table.
    profiled.synchronize()?;
    entries(profiled)?;
    trainer.step(&mut m.net)?;
    let (fwd, bwd) = paths_from_kernels(p.cell, &entries(profiled)?);
    m.net.forward(&m.x)?;
    let (infer, _) = paths_from_kernels(p.cell, &entries(profiled)?);
    Ok((label(fwd, Some(bwd)), label(infer, None)))
}

/// A figure's microseconds and algorithm, or why it failed.
type Figure = Result<(f64, String), String>;

/// Where a point runs: the device's context, or (OpenCL) a fresh context of it per point, since
/// there the profiling context of [`algorithms_by_timer`] runs beside it, and each context's
/// pool keeps the memory its models released.
struct Runner<'a> {
    manager: &'a GpuManager,
    shared: &'a Context,
    detector: Detector,
    plan: Plan,
}

/// Times one point; the algorithms from the runner's detector. Returns the train and
/// inference lines' `(us, alg)`.
fn run_point(runner: &Runner<'_>, p: &Point) -> (Figure, Figure) {
    let (detector, plan, id) = (&runner.detector, &runner.plan, runner.shared.id());
    let by_timer = match detector {
        Detector::KernelTimer => Some(algorithms_by_timer(runner.manager, id, p)),
        _ => None,
    };
    let fresh = match detector {
        Detector::KernelTimer => match runner.manager.create_context(id) {
            Ok(c) => Some(c),
            Err(e) => return (Err(e.to_string()), Err(e.to_string())),
        },
        _ => None,
    };
    let ctx = fresh.as_ref().unwrap_or(runner.shared);
    let mut m = match model(ctx, p) {
        Ok(m) => m,
        Err(e) => return (Err(e.to_string()), Err(e.to_string())),
    };
    let (train_us, train_fell) = with_fallbacks(|| {
        let mut trainer = m.net.trainer(&m.data, &config(p.batch))?;
        median_us(ctx, plan, || trainer.step(&mut m.net))
    });
    let (infer_us, infer_fell) = with_fallbacks(|| {
        median_us(ctx, plan, || {
            m.net.forward(&m.x)?;
            Ok(())
        })
    });
    let (train_alg, infer_alg) = match (detector, by_timer) {
        (_, Some(Ok(algs))) => algs,
        (_, Some(Err(e))) => {
            eprintln!("{}: no algorithm from the kernel timer: {e}", p.name());
            ("unknown".into(), "unknown".into())
        }
        (Detector::FallbackRecords, None) => {
            let (fwd, bwd) = paths_from_fallbacks(p.cell, &train_fell);
            let (infer, _) = paths_from_fallbacks(p.cell, &infer_fell);
            (label(fwd, Some(bwd)), label(infer, None))
        }
        (Detector::Cpu, None) => ("cpu".into(), "cpu".into()),
        _ => ("unknown".into(), "unknown".into()),
    };
    (
        train_us
            .map(|us| (us, train_alg))
            .map_err(|e| e.to_string()),
        infer_us
            .map(|us| (us, infer_alg))
            .map_err(|e| e.to_string()),
    )
}

/// A figure's line; no spaces inside `alg` (scripts/recurrent_grid_table.py splits on them).
fn print_figure(name: &str, figure: Figure) {
    match figure {
        Ok((us, alg)) => println!("{name} {us:.1} us alg={}", alg.replace(' ', "_")),
        Err(e) => println!("{name} failed {}", e.replace('\n', " ")),
    }
}

fn run() -> Result<(), String> {
    let mut device = std::env::var("RNN_DEVICE").ok();
    let mut points =
        std::env::var("RNN_GRID_POINTS").unwrap_or_else(|_| DEFAULT_POINTS.to_string());
    let mut quick = false;
    let mut only: Option<Vec<String>> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--device" => device = Some(args.next().ok_or("--device needs a value")?),
            "--points" => points = args.next().ok_or("--points needs a file")?,
            "--quick" => quick = true,
            "--only" => {
                let v = args.next().ok_or("--only needs a value")?;
                only = Some(v.split(',').map(|s| s.trim().to_string()).collect());
            }
            // cargo bench passes --bench to every bench binary.
            "--bench" => {}
            other => {
                return Err(format!(
                    "unknown argument '{other}' (use --device ID, --points FILE, --quick, \
                     --only A,B)"
                ));
            }
        }
    }
    let id: DeviceId = device
        .as_deref()
        .unwrap_or("cuda:0")
        .parse()
        .map_err(|e: rnn::Error| e.to_string())?;
    let selected: Vec<Point> = read_points(&points)?
        .into_iter()
        .filter(|p| !quick || p.quick)
        .filter(|p| {
            only.as_ref()
                .is_none_or(|o| o.iter().any(|s| p.name().contains(s.as_str())))
        })
        .collect();
    if selected.is_empty() {
        return Err(format!("no point of {points} selected"));
    }
    let manager = GpuManager::new().map_err(|e| e.to_string())?;
    let ctx = manager.create_context(id).map_err(|e| e.to_string())?;
    let plan = if quick {
        Plan {
            warm: 2,
            reps: 3,
            rep_seconds: 0.005,
            max_calls: 20,
        }
    } else {
        Plan {
            warm: 3,
            reps: 5,
            rep_seconds: 0.01,
            max_calls: 200,
        }
    };
    let detector = detector(&ctx);
    let how = match &detector {
        Detector::KernelTimer => "kernel names (the context's kernel timer)".to_string(),
        Detector::FallbackRecords => "the op set's fallback records".to_string(),
        Detector::Cpu => "none (CPU backend)".to_string(),
        Detector::Unknown(why) => format!("unknown: {why}"),
    };
    println!(
        "# recurrent_grid device={} name={:?} points={} algorithm from {how}",
        ctx.id(),
        ctx.info().name,
        selected.len()
    );
    let runner = Runner {
        manager: &manager,
        shared: &ctx,
        detector,
        plan,
    };
    for p in &selected {
        let name = p.name();
        let (train, infer) = run_point(&runner, p);
        print_figure(&format!("{name}_train"), train);
        print_figure(&format!("{name}_infer"), infer);
    }
    Ok(())
}

fn main() -> ExitCode {
    if let Err(e) = GridLogger::install() {
        eprintln!("error: cannot install the logger: {e}");
        return ExitCode::FAILURE;
    }
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
