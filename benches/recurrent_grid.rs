//! The recurrent shape grid: for every point of `benches/recurrent_grid.points` (the
//! list `scripts/recurrent_grid.py` times in PyTorch), a recurrent model with a linear head and
//! softmax cross-entropy at every step: the time of one whole Adam training step and of one
//! forward (inference), each the median over repetitions after a warm-up, and which recurrence
//! algorithm ran (`RecurrentAlgorithm`: block-local, block-local-l1, block-local-regs,
//! persistent, gemm, steps).
//!
//! ```text
//! cargo bench --bench recurrent_grid -- [--device ID] [--points FILE] [--quick] [--only A,B]
//!                                       [--algos all|A,B] [--precision P]
//!     --device ID     the device (else RNN_DEVICE, else cuda:0)
//!     --points FILE   the grid (else RNN_GRID_POINTS, else benches/recurrent_grid.points)
//!     --quick         only the points marked `quick`, fewer repetitions (CPU, PoCL)
//!     --only A,B      only the points whose name contains one of these
//!     --precision P   f32 (default, else RNN_PRECISION), tf32, bf16 or f16: the training
//!                     precision; names other than f32 gain `_P` after the point's
//!                     (PyTorch's side: scripts/recurrent_grid.py --autocast P)
//!     --algos all|A,B (else RNN_GRID_ALGOS) time every point once per algorithm, forced through
//!                     `ContextOptions::recurrent_algorithm` (`all`: every one), instead of once
//!                     with the automatic choice
//! ```
//!
//! Prints `NAME_train US us alg=ALG` and `NAME_infer US us alg=ALG` per point (the names and
//! units of the PyTorch script's lines, which scripts/recurrent_grid_table.py joins), or
//! `NAME_train failed ERROR`. ALG is the algorithm's name, `forward/backward` where the two
//! passes differ (`persistent/steps`), `A+B` where calls of one pass differed, `cpu`, or `none`.
//! With `--algos`, each line ends in ` forced=ALGO`, and a point the forced algorithm cannot run
//! in either pass (the op set then chooses automatically) gets one comment line instead:
//! `# NAME forced=ALGO cannot run (ran ALG)`.
//!
//! The algorithm is read from the debug record the GPU op set writes for every sequence op
//! (src/backend/gpu/seq_route.rs): `{device}: {entry} {batch}x{hidden} runs {algorithm}`.

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use log::Log;
use parking_lot::Mutex;
use rnn::nn::{
    Dataset, Loss, Network, Optimizer, Precision, RecurrentCell, RecurrentOptions, Rng, RnnOutput,
    TrainingConfig,
};
use rnn::{
    Activation, BackendKind, Context, ContextOptions, DeviceId, GpuManager, RecurrentAlgorithm,
};

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

fn config(batch: usize, precision: Precision) -> TrainingConfig {
    TrainingConfig {
        batch_size: batch,
        precision,
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

/// The GPU op set's records of the sequence ops that ran, as `entry algorithm`, collected while
/// [`COLLECT`] is on.
static RECORDS: Mutex<Vec<String>> = Mutex::new(Vec::new());
static COLLECT: AtomicBool = AtomicBool::new(false);

/// env_logger as configured by `RUST_LOG`, plus the collection of the algorithm records.
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
            // "{device}: {entry} {batch}x{hidden} runs {algorithm}"
            let message = record.args().to_string();
            if let Some((_, rest)) = message.split_once(": ") {
                let words: Vec<&str> = rest.split_whitespace().collect();
                if let [entry, _, "runs", algorithm] = words[..] {
                    RECORDS.lock().push(format!("{entry} {algorithm}"));
                }
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

/// Runs `f` collecting the algorithm records; returns its value and the records.
fn with_records<R>(f: impl FnOnce() -> R) -> (R, Vec<String>) {
    RECORDS.lock().clear();
    COLLECT.store(true, Ordering::Relaxed);
    let r = f();
    COLLECT.store(false, Ordering::Relaxed);
    (r, std::mem::take(&mut *RECORDS.lock()))
}

/// The algorithms `records` name for pass `pass` (`forward`, `backward`) of `cell`: one name,
/// several joined by `+`, or `none`.
fn pass_algorithm(cell: Cell, pass: &str, records: &[String]) -> String {
    let entry = format!("{}_seq_{pass} ", cell.kernel_prefix());
    let mut names: Vec<&str> = records
        .iter()
        .filter_map(|r| r.strip_prefix(&entry))
        .collect();
    names.sort_unstable();
    names.dedup();
    if names.is_empty() {
        "none".into()
    } else {
        names.join("+")
    }
}

/// The forward's algorithm, and with `backward` the backward's: one name where they agree,
/// else `forward/backward`.
fn label(cell: Cell, records: &[String], backward: bool) -> String {
    let forward = pass_algorithm(cell, "forward", records);
    let back = backward.then(|| pass_algorithm(cell, "backward", records));
    match back {
        Some(b) if b != forward => format!("{forward}/{b}"),
        _ => forward,
    }
}

/// Whether `algorithm` is among the names of label `label`.
fn ran(label: &str, algorithm: RecurrentAlgorithm) -> bool {
    label.split(['/', '+']).any(|name| name == algorithm.name())
}

/// A figure's microseconds and algorithm, or why it failed.
type Figure = Result<(f64, String), String>;

/// What one timed run of a point gives: the train and inference figures, or (forced) the
/// label of what ran instead where the forced algorithm ran in neither pass.
enum Timed {
    Figures(Figure, Figure),
    CannotRun(String),
}

/// Times point `p` on a fresh context of device `id` (each context's pool keeps the memory its
/// models released, so one kept for the next point would hold memory this one needs) with
/// `forced` as its recurrent algorithm.
fn run_point(
    manager: &GpuManager,
    id: DeviceId,
    (p, plan, precision): (&Point, &Plan, Precision),
    forced: Option<RecurrentAlgorithm>,
) -> Timed {
    let fail = |e: rnn::Error| Timed::Figures(Err(e.to_string()), Err(e.to_string()));
    let mut options = ContextOptions::default();
    options.recurrent_algorithm = forced;
    let ctx = match manager.create_context_with(id, options) {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    let cpu = ctx.info().backend == BackendKind::Cpu;
    let mut m = match model(&ctx, p) {
        Ok(m) => m,
        Err(e) => return fail(e),
    };
    let mut trainer = match m.net.trainer(&m.data, &config(p.batch, precision)) {
        Ok(t) => t,
        Err(e) => return fail(e),
    };
    // The first (eager) step says what runs; it is part of the warm-up.
    let (first, records) = with_records(|| trainer.step(&mut m.net));
    if let Err(e) = first {
        return fail(e);
    }
    let train_alg = if cpu {
        "cpu".to_string()
    } else {
        label(p.cell, &records, true)
    };
    if let Some(a) = forced
        && !cpu
        && !ran(&train_alg, a)
    {
        return Timed::CannotRun(train_alg);
    }
    let train_us = median_us(&ctx, plan, || trainer.step(&mut m.net));
    let (infer_us, records) = with_records(|| {
        median_us(&ctx, plan, || {
            m.net.forward(&m.x)?;
            Ok(())
        })
    });
    let infer_alg = if cpu {
        "cpu".to_string()
    } else {
        label(p.cell, &records, false)
    };
    let figure =
        |us: rnn::Result<f64>, alg: String| us.map(|us| (us, alg)).map_err(|e| e.to_string());
    Timed::Figures(figure(train_us, train_alg), figure(infer_us, infer_alg))
}

/// A figure's line (` forced=ALGO` appended where `forced`); no spaces inside `alg`
/// (scripts/recurrent_grid_table.py splits on them).
fn print_figure(name: &str, figure: Figure, forced: Option<RecurrentAlgorithm>) {
    let tail = forced.map_or(String::new(), |a| format!(" forced={a}"));
    match figure {
        Ok((us, alg)) => println!("{name} {us:.1} us alg={}{tail}", alg.replace(' ', "_")),
        Err(e) => println!("{name} failed {}{tail}", e.replace('\n', " ")),
    }
}

/// The algorithms of `--algos` / `RNN_GRID_ALGOS`: `all`, or names separated by commas.
fn parse_algos(value: &str) -> Result<Vec<RecurrentAlgorithm>, String> {
    if value.trim() == "all" {
        return Ok(RecurrentAlgorithm::FORCIBLE.to_vec());
    }
    value
        .split(',')
        .map(|name| name.parse().map_err(|e: rnn::Error| e.to_string()))
        .collect()
}

fn run() -> Result<(), String> {
    let mut device = std::env::var("RNN_DEVICE").ok();
    let mut points =
        std::env::var("RNN_GRID_POINTS").unwrap_or_else(|_| DEFAULT_POINTS.to_string());
    let mut algos = match std::env::var("RNN_GRID_ALGOS") {
        Ok(v) if !v.trim().is_empty() => Some(parse_algos(&v)?),
        _ => None,
    };
    let mut quick = false;
    let mut only: Option<Vec<String>> = None;
    let mut precision = match std::env::var("RNN_PRECISION") {
        Ok(v) if !v.trim().is_empty() => Precision::parse(&v).map_err(|e| e.to_string())?,
        _ => Precision::F32,
    };
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
            "--algos" => algos = Some(parse_algos(&args.next().ok_or("--algos needs a value")?)?),
            "--precision" => {
                let v = args.next().ok_or("--precision needs a value")?;
                precision = Precision::parse(&v).map_err(|e| e.to_string())?;
            }
            // cargo bench passes --bench to every bench binary.
            "--bench" => {}
            other => {
                return Err(format!(
                    "unknown argument '{other}' (use --device ID, --points FILE, --quick, \
                     --only A,B, --algos all|A,B, --precision f32|tf32|bf16|f16)"
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
    let device_name = manager
        .devices()
        .iter()
        .find(|d| d.id == id)
        .map_or_else(|| id.to_string(), |d| d.name.clone());
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
    let forced: Vec<Option<RecurrentAlgorithm>> = match &algos {
        None => vec![None],
        Some(list) => list.iter().copied().map(Some).collect(),
    };
    println!(
        "# recurrent_grid device={id} name={device_name:?} points={} algorithms={} precision={}",
        selected.len(),
        algos.as_ref().map_or("auto".to_string(), |l| {
            l.iter().map(|a| a.name()).collect::<Vec<_>>().join(",")
        }),
        precision.name()
    );
    // The names of PyTorch's autocast figures (scripts/recurrent_grid.py --autocast).
    let suffix = match precision {
        Precision::F32 => String::new(),
        p => format!("_{}", p.name()),
    };
    for p in &selected {
        let name = p.name() + &suffix;
        for &a in &forced {
            match run_point(&manager, id, (p, &plan, precision), a) {
                Timed::Figures(train, infer) => {
                    print_figure(&format!("{name}_train"), train, a);
                    print_figure(&format!("{name}_infer"), infer, a);
                }
                Timed::CannotRun(alg) => {
                    let a = a.map_or("auto", RecurrentAlgorithm::name);
                    println!("# {name} forced={a} cannot run (ran {alg})");
                }
            }
        }
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
