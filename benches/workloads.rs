//! The DESIGN.md reference workloads on one device, printed as `name value unit` with the
//! names and units of `shared/bench/pytorch_reference.py` so the two can be compared line by
//! line. Training steps are timed with whole-step graphs (the default, where the device has
//! them) and again without (`<name>_nograph`). W1 at batch 4096 also trains in bf16 and f16
//! (`w1_mlp_b4096_step_bf16`, `_f16`), W2, W5 and W6 in bf16 (`w2_rnn_step_bf16`, ...): the
//! names of PyTorch's autocast figures, which the ratio lines pair with its eager and
//! `_graph` ones.
//!
//! ```text
//! cargo bench --bench workloads -- [--device ID] [--only w1,w2,w3,w4,w5,w6,parts]
//!     [--torch FILE]      also print ours / PyTorch (eager and _graph) from that script's output
//!     [--profile STEPS]   no timing: warm up, then run STEPS training steps of each selected
//!                         workload inside a profiler range (for `ncu --profile-from-start off`);
//!                         on OpenCL the context's kernel timer is on and a table of the
//!                         kernels of one step is printed (scripts/opencl_roofline.py joins it
//!                         with the ncu table of the same figure)
//!     [--hgemm-grid]      only the bf16/f16 product grid: a dense layer's forward, input-
//!                         and weight-gradient products over M x N x K points, each line with
//!                         its route, us and TFLOP/s, vendor BLAS on and off
//!     [--split]           no timing: per training figure, the host's enqueueing time per
//!                         step and the device's time per step (the steps queued behind
//!                         GEMMs that outlast the enqueueing, so the device runs them back
//!                         to back), to tell a host-bound step from a device-bound one
//! ```

use rnn::ops::RecurrentWeights;
use rnn::ops::RnnStepBackward;
use rnn::ops::RnnStepForward;
use rnn::ops::SeqShape;
use std::process::ExitCode;
use std::time::Instant;

use rnn::nn::{Dataset, Loss, Network, Optimizer, Precision, Rng, RnnOutput, TrainingConfig};
use rnn::{
    Activation, BackendKind, Context, ContextOptions, DeviceId, DeviceKind, Gemm, GpuManager,
    KernelTime,
};

#[path = "common/char_data.rs"]
mod char_data;
#[path = "common/half_gemm.rs"]
mod half_gemm;
use char_data::one_hot_sequences;

fn random(rng: &mut Rng, n: usize) -> Vec<f32> {
    (0..n).map(|_| rng.normal()).collect()
}

/// Mean microseconds per call of `f`, after `warm` untimed calls, synchronizing before each
/// clock read.
fn time_us(ctx: &Context, warm: usize, iters: usize, mut f: impl FnMut()) -> rnn::Result<f64> {
    for _ in 0..warm {
        f();
    }
    ctx.synchronize()?;
    let t = Instant::now();
    for _ in 0..iters {
        f();
    }
    ctx.synchronize()?;
    Ok(t.elapsed().as_secs_f64() * 1e6 / iters as f64)
}

/// The host's time to enqueue one call of `step` and the device's time to run one, in
/// microseconds, over `iters` calls, and whether the split held. The calls are queued behind
/// square GEMMs that take about twice as long as queueing them, so the device finds them all
/// queued and runs them back to back: their device time is the whole run's minus the GEMMs'
/// alone. The split holds when the host finished queueing before the GEMMs did.
fn host_and_device_us(
    ctx: &Context,
    iters: usize,
    mut step: impl FnMut(),
) -> rnn::Result<(f64, f64, bool)> {
    let ops = ctx.ops();
    let n = 2048;
    let a = ctx.tensor(&[n, n], &vec![0.5f32; n * n])?;
    let c = ctx.zeros(&[n, n])?;
    let gemm = || ops.gemm(Gemm::new(n, n, n), a.view(), a.view(), c.view());
    gemm()?;
    ctx.synchronize()?;
    let t = Instant::now();
    for _ in 0..4 {
        gemm()?;
    }
    ctx.synchronize()?;
    let one = t.elapsed().as_secs_f64() / 4.0;
    let t = Instant::now();
    (0..iters).for_each(|_| step());
    let host_alone = t.elapsed().as_secs_f64();
    ctx.synchronize()?;
    let reps = ((2.0 * host_alone / one).ceil() as usize).clamp(1, 2000);
    let t = Instant::now();
    for _ in 0..reps {
        gemm()?;
    }
    ctx.synchronize()?;
    let blockers = t.elapsed().as_secs_f64();
    let t = Instant::now();
    for _ in 0..reps {
        gemm()?;
    }
    let h = Instant::now();
    (0..iters).for_each(|_| step());
    let host = h.elapsed().as_secs_f64();
    let queued = t.elapsed().as_secs_f64();
    ctx.synchronize()?;
    let total = t.elapsed().as_secs_f64();
    let per = |s: f64| s * 1e6 / iters as f64;
    Ok((per(host), per(total - blockers), queued < blockers))
}

fn config(batch: usize, graphs: bool, precision: Precision) -> TrainingConfig {
    TrainingConfig {
        batch_size: batch,
        learning_rate: 1e-3,
        optimizer: Optimizer::adam(),
        graphs,
        precision,
        ..Default::default()
    }
}

/// How a training workload is run.
#[derive(Clone, Copy)]
enum Mode {
    /// Mean step time, with or without whole-step graphs.
    Time { graphs: bool },
    /// Warm up, then this many steps of the named figure inside a profiler range; no timing,
    /// but the per-kernel table where the context times its kernels (OpenCL).
    Profile(usize, &'static str),
    /// No timing: the host and device times of one step ([`host_and_device_us`]).
    Split(&'static str),
}

/// The kernels of one step, from the times of `steps` steps that took `wall` seconds: a
/// markdown table under a `## OpenCL kernel times: FIGURE ...` heading, then the kernel time
/// and the wall time per step (scripts/opencl_roofline.py reads both).
fn print_kernel_times(ctx: &Context, figure: &str, steps: usize, wall: f64, times: &[KernelTime]) {
    let per_step = |x: u64| x as f64 / steps as f64;
    let total_us: f64 = times.iter().map(|t| per_step(t.nanos) / 1e3).sum();
    println!(
        "## OpenCL kernel times: {figure} on {} ({}), {steps} step(s)",
        ctx.id(),
        ctx.info().name
    );
    println!("| kernel | launches/step | us/step | share |");
    println!("| --- | --- | --- | --- |");
    for t in times {
        let us = per_step(t.nanos) / 1e3;
        let share = if total_us > 0.0 {
            100.0 * us / total_us
        } else {
            0.0
        };
        let launches = per_step(t.launches);
        println!(
            "| {} | {} | {us:.1} | {share:.1}% |",
            t.entry,
            if launches.fract() == 0.0 {
                format!("{launches:.0}")
            } else {
                format!("{launches:.2}")
            }
        );
    }
    println!(
        "kernel_time_per_step {figure} {total_us:.1} us; wall_per_step {:.1} us \
         (the timer's events included)",
        wall * 1e6 / steps as f64
    );
    println!();
}

/// A training figure's network, data and batch size, and the precision it trains in.
struct Figure<'a> {
    net: &'a mut Network,
    data: &'a Dataset,
    batch: usize,
    precision: Precision,
}

fn step_us(ctx: &Context, fig: Figure<'_>, gpu: bool, mode: Mode) -> rnn::Result<f64> {
    let graphs = !matches!(mode, Mode::Time { graphs: false });
    let Figure {
        net,
        data,
        batch,
        precision,
    } = fig;
    let mut trainer = net.trainer(data, &config(batch, graphs, precision))?;
    let (warm, iters) = if gpu { (20, 200) } else { (3, 20) };
    let mut err = None;
    let mut step = || {
        if let Err(e) = trainer.step(net) {
            err.get_or_insert(e);
        }
    };
    let us = match mode {
        Mode::Time { .. } => time_us(ctx, warm, iters, step)?,
        Mode::Split(figure) => {
            (0..warm).for_each(|_| step());
            let (host, device, ok) = host_and_device_us(ctx, iters, step)?;
            println!(
                "split {figure} host {host:.1} us device {device:.1} us{}",
                if ok {
                    ""
                } else {
                    " (the host outlasted the blocking GEMMs: device time is an upper bound)"
                }
            );
            0.0
        }
        Mode::Profile(steps, figure) => {
            (0..3).for_each(|_| step());
            ctx.synchronize()?;
            // The warm-up's kernels are not part of the table.
            ctx.kernel_times()?;
            ctx.profiler_range(true)?;
            let t = Instant::now();
            (0..steps).for_each(|_| step());
            ctx.synchronize()?;
            let wall = t.elapsed().as_secs_f64();
            ctx.profiler_range(false)?;
            if let Some(times) = ctx.kernel_times()? {
                print_kernel_times(ctx, figure, steps, wall, &times);
            }
            0.0
        }
    };
    err.map_or(Ok(us), Err)
}

fn w1(
    ctx: &Context,
    (batch, precision): (usize, Precision),
    gpu: bool,
    mode: Mode,
) -> rnn::Result<f64> {
    let mut rng = Rng::new(1);
    let mut net = Network::builder(ctx)
        .dense(784, 512, Activation::Relu)
        .dense(512, 512, Activation::Relu)
        .dense(512, 10, Activation::Identity)
        .build(Loss::SoftmaxCrossEntropy)?;
    let labels = (0..batch).map(|_| rng.below(10) as u32).collect();
    let data = Dataset::classification(random(&mut rng, batch * 784), 784, labels, 10)?;
    let fig = Figure {
        net: &mut net,
        data: &data,
        batch,
        precision,
    };
    step_us(ctx, fig, gpu, mode)
}

/// The recurrent layer of W2 (Elman), W5 (LSTM) and W6 (GRU).
#[derive(Clone, Copy)]
enum Cell {
    Elman,
    Lstm,
    Gru,
}

/// W2/W5/W6: a character model, vocab 96 one-hot in, hidden 256, 64 steps, batch 64, a
/// linear head with cross-entropy at every step, Adam.
fn char_model(
    ctx: &Context,
    (cell, precision): (Cell, Precision),
    gpu: bool,
    mode: Mode,
) -> rnn::Result<f64> {
    let (v, h, t, b) = (96, 256, 64, 64);
    let mut rng = Rng::new(2);
    let builder = Network::builder(ctx).sequence_length(t);
    let builder = match cell {
        Cell::Elman => builder.rnn(v, h, Activation::Tanh, RnnOutput::Sequence),
        Cell::Lstm => builder.lstm(v, h, RnnOutput::Sequence),
        Cell::Gru => builder.gru(v, h, RnnOutput::Sequence),
    };
    let mut net = builder
        .dense(h, v, Activation::Identity)
        .build(Loss::SoftmaxCrossEntropy)?;
    let (x, targets) = one_hot_sequences(&mut rng, b, t, v);
    let data = Dataset::new(x, t * v, targets)?;
    let fig = Figure {
        net: &mut net,
        data: &data,
        batch: b,
        precision,
    };
    step_us(ctx, fig, gpu, mode)
}

fn w3(ctx: &Context, n: usize, gpu: bool) -> rnn::Result<f64> {
    Ok(w3_checked(ctx, n, gpu)?.0)
}

/// W3's rate in GFLOP/s and the product's error: over 512 sampled entries, the largest
/// `|c - c_f64| / Σ_k |a_ik b_kj|` (f32 rounding of the terms, unit roundoff 6e-8 per operation).
fn w3_checked(ctx: &Context, n: usize, gpu: bool) -> rnn::Result<(f64, f64)> {
    let mut rng = Rng::new(3);
    let (ha, hb) = (random(&mut rng, n * n), random(&mut rng, n * n));
    let a = ctx.tensor(&[n, n], &ha)?;
    let b = ctx.tensor(&[n, n], &hb)?;
    let c = ctx.zeros(&[n, n])?;
    let (warm, iters) = if gpu { (5, 50) } else { (1, 3) };
    let mut err = None;
    let us = time_us(ctx, warm, iters, || {
        if let Err(e) = ctx
            .ops()
            .gemm(Gemm::new(n, n, n), a.view(), b.view(), c.view())
        {
            err.get_or_insert(e);
        }
    })?;
    if let Some(e) = err {
        return Err(e);
    }
    let hc = c.to_vec()?;
    let mut worst = 0.0f64;
    for s in 0..512 {
        let (i, j) = ((s * 7919 + 13) % n, (s * 104_729 + 7) % n);
        let (mut exact, mut scale) = (0.0f64, 0.0f64);
        for p in 0..n {
            let t = f64::from(ha[i * n + p]) * f64::from(hb[p * n + j]);
            exact += t;
            scale += t.abs();
        }
        worst = worst.max((f64::from(hc[i * n + j]) - exact).abs() / scale.max(f64::MIN_POSITIVE));
    }
    Ok((2.0 * (n as f64).powi(3) / (us * 1e-6) / 1e9, worst))
}

fn w4(ctx: &Context, gpu: bool) -> rnn::Result<(f64, f64)> {
    let n = 64 << 20;
    let x = ctx.tensor(&[n], &random(&mut Rng::new(4), n))?;
    let y = ctx.zeros(&[n])?;
    let iters = if gpu { 50 } else { 5 };
    let mut err = None;
    let relu = time_us(ctx, 3, iters, || {
        if let Err(e) = ctx.ops().activation(x.view(), y.view(), Activation::Relu) {
            err.get_or_insert(e);
        }
    })?;
    let copy = time_us(ctx, 3, iters, || {
        if let Err(e) = ctx.ops().copy(x.view(), y.view()) {
            err.get_or_insert(e);
        }
    })?;
    let gbs = |us: f64| 8.0 * n as f64 / (us * 1e-6) / 1e9;
    err.map_or(Ok((gbs(relu), gbs(copy))), Err)
}

/// Where W2's time goes: microseconds per launch of its per-time-step pieces (64 x 256), and of
/// a one-element fill (the launch overhead floor). Diagnostic; not in the default set.
fn parts(ctx: &Context, gpu: bool) -> rnn::Result<Vec<(&'static str, f64)>> {
    let (b, h) = (64, 256);
    let mut rng = Rng::new(5);
    let t = |n: usize, rng: &mut Rng| ctx.tensor(&[n], &random(rng, n));
    let (pre, hp, w, bi, bh) = (
        t(b * h, &mut rng)?,
        t(b * h, &mut rng)?,
        t(h * h, &mut rng)?,
        t(h, &mut rng)?,
        t(h, &mut rng)?,
    );
    let h2 = t(b * h, &mut rng)?;
    let out = ctx.zeros(&[b * h])?;
    let one = ctx.zeros(&[1])?;
    let ops = ctx.ops();
    let iters = if gpu { 2000 } else { 50 };
    let mut err = None;
    let mut keep = |r: rnn::Result<()>| {
        if let Err(e) = r {
            err.get_or_insert(e);
        }
    };
    let mut rows = Vec::new();
    rows.push((
        "part_fill1_launch",
        time_us(ctx, 20, iters, || keep(ops.fill(one.view(), 1.0)))?,
    ));
    rows.push((
        "part_rnn_step_forward_64x256",
        time_us(ctx, 20, iters, || {
            keep(ops.rnn_step_forward(RnnStepForward::new(
                pre.view(),
                hp.view(),
                RecurrentWeights::new(w.view(), bi.view(), bh.view()),
                out.view(),
                Activation::Tanh,
                SeqShape::step(b, h),
            )))
        })?,
    ));
    rows.push((
        "part_rnn_step_backward_64x256",
        time_us(ctx, 20, iters, || {
            keep(ops.rnn_step_backward(RnnStepBackward::new(
                pre.view(),
                Some(hp.view()),
                w.view(),
                h2.view(),
                out.view(),
                Activation::Tanh,
                SeqShape::step(b, h),
            )))
        })?,
    ));
    rows.push((
        "part_gemm_64x256x256",
        time_us(ctx, 20, iters, || {
            keep(ops.gemm(
                Gemm::new(b, h, h).tb().scaled(1.0, 1.0),
                hp.view(),
                w.view(),
                out.view(),
            ))
        })?,
    ));
    err.map_or(Ok(rows), Err)
}

/// `name value unit` lines of pytorch_reference.py (other lines are ignored).
fn read_torch(path: &str) -> Result<Vec<(String, f64)>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("--torch {path}: {e}"))?;
    Ok(text
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let name = w.next()?;
            let value = w.next()?.parse::<f64>().ok()?;
            w.next()?;
            Some((name.to_string(), value))
        })
        .collect())
}

/// Ours against PyTorch's eager and `_graph` figures of the same name: times as
/// ours / PyTorch (lower is better), rates as ours / PyTorch (higher is better).
fn print_ratios(ours: &[(String, f64, &'static str)], torch: &[(String, f64)]) {
    let find = |n: &str| torch.iter().find(|(t, _)| t == n).map(|&(_, v)| v);
    println!("# ratios (ours / PyTorch; times: lower is better, rates: higher is better)");
    for (name, value, unit) in ours {
        let base = name.trim_end_matches("_nograph");
        let mut line = format!("ratio {name} ours {value:.1} {unit}");
        for suffix in ["", "_graph"] {
            if let Some(t) = find(&format!("{base}{suffix}")) {
                line += &format!(" | torch{suffix} {t:.1} ratio {:.2}", value / t);
            }
        }
        println!("{line}");
    }
}

fn run() -> Result<(), String> {
    let mut device: Option<DeviceId> = None;
    let mut only: Option<Vec<String>> = None;
    let mut torch: Option<String> = None;
    let mut profile: Option<usize> = None;
    let mut split = false;
    let mut hgemm_grid = false;
    let mut vendor_blas = true;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--device" => {
                let v = args.next().ok_or("--device needs a value")?;
                device = Some(v.parse().map_err(|e: rnn::Error| e.to_string())?);
            }
            "--only" => {
                let v = args.next().ok_or("--only needs a value")?;
                only = Some(v.split(',').map(|s| s.trim().to_string()).collect());
            }
            "--torch" => torch = Some(args.next().ok_or("--torch needs a file")?),
            "--profile" => {
                let v = args.next().ok_or("--profile needs a step count")?;
                profile = Some(
                    v.parse()
                        .map_err(|_| format!("--profile: '{v}' is not a step count"))?,
                );
            }
            "--split" => split = true,
            "--hgemm-grid" => hgemm_grid = true,
            "--gemm" => {
                vendor_blas = match args.next().as_deref() {
                    Some("vendor") => true,
                    Some("own") => false,
                    other => {
                        return Err(format!("--gemm takes 'vendor' or 'own', not {other:?}"));
                    }
                }
            }
            // cargo bench passes --bench to every bench binary.
            "--bench" => {}
            other => {
                return Err(format!(
                    "unknown argument '{other}' (use --device ID, --only w1,w2,w3,w4,w5,w6, \
                     --torch FILE, --profile STEPS, --split, --hgemm-grid, --gemm vendor|own)"
                ));
            }
        }
    }
    if let Some(o) = &only
        && let Some(bad) = o.iter().find(|w| {
            !["w1", "w2", "w3", "w4", "w5", "w6", "parts"].contains(&w.as_str())
                && !w.contains("_step")
        })
    {
        return Err(format!(
            "unknown workload '{bad}' (w1, w2, w3, w4, w5, w6, parts, or a step figure's name)"
        ));
    }
    let want = |w: &str| match &only {
        Some(o) => o.iter().any(|x| x == w),
        None => w != "parts",
    };
    let manager = GpuManager::new().map_err(|e| e.to_string())?;
    let id = match device {
        Some(d) => d,
        None => manager.best_device().map_err(|e| e.to_string())?.id,
    };
    if hgemm_grid {
        return half_gemm::grid(&manager, id).map_err(|e| e.to_string());
    }
    let mut options = ContextOptions::default();
    // `--gemm own`: the training figures use the built-in GEMM kernels even where a vendor BLAS
    // exists.
    options.vendor_blas = vendor_blas;
    // `--profile`: OpenCL times its kernels itself (Nsight Compute cannot); ignored elsewhere.
    options.profile_kernels = profile.is_some();
    let ctx = manager
        .create_context_with(id, options)
        .map_err(|e| e.to_string())?;
    let gpu = ctx.info().kind == DeviceKind::Gpu;
    eprintln!(
        "device {} ({}), GEMM: {}",
        id,
        ctx.info().name,
        if vendor_blas {
            "vendor BLAS where present"
        } else {
            "built-in kernels"
        }
    );
    let e = |e: rnn::Error| e.to_string();
    type Train<'a> = Box<dyn Fn(Mode) -> rnn::Result<f64> + 'a>;
    let mut training: Vec<(&str, &'static str, Train<'_>)> = Vec::new();
    let c = &ctx;
    // The bf16/f16 figures (TrainingConfig::precision) are named as PyTorch's autocast ones,
    // so the ratio lines pair them with its eager and `_graph` figures.
    for (name, batch, precision) in [
        ("w1_mlp_b256_step", 256, Precision::F32),
        ("w1_mlp_b4096_step", 4096, Precision::F32),
        ("w1_mlp_b4096_step_bf16", 4096, Precision::Bf16),
        ("w1_mlp_b4096_step_f16", 4096, Precision::F16),
    ] {
        let run = move |m| w1(c, (batch, precision), gpu, m);
        training.push(("w1", name, Box::new(run)));
    }
    for (w, name, cell, precision) in [
        ("w2", "w2_rnn_step", Cell::Elman, Precision::F32),
        ("w5", "w5_lstm_step", Cell::Lstm, Precision::F32),
        ("w6", "w6_gru_step", Cell::Gru, Precision::F32),
        ("w2", "w2_rnn_step_bf16", Cell::Elman, Precision::Bf16),
        ("w5", "w5_lstm_step_bf16", Cell::Lstm, Precision::Bf16),
        ("w6", "w6_gru_step_bf16", Cell::Gru, Precision::Bf16),
    ] {
        let run = move |m| char_model(c, (cell, precision), gpu, m);
        training.push((w, name, Box::new(run)));
    }
    let mut ours: Vec<(String, f64, &'static str)> = Vec::new();
    for (w, name, f) in &training {
        if !want(w) && !only.as_ref().is_some_and(|o| o.iter().any(|x| x == name)) {
            continue;
        }
        if let Some(steps) = profile {
            eprintln!("profiling {steps} steps of {name}");
            f(Mode::Profile(steps, name)).map_err(e)?;
            continue;
        }
        if split {
            f(Mode::Split(name)).map_err(e)?;
            continue;
        }
        for (graphs, suffix) in [(true, ""), (false, "_nograph")] {
            let us = f(Mode::Time { graphs }).map_err(e)?;
            println!("{name}{suffix} {us:.1} us");
            ours.push((format!("{name}{suffix}"), us, "us"));
        }
    }
    if profile.is_some() || split {
        return Ok(());
    }
    if want("w3") {
        if gpu {
            // Each route in a context of its own: the default options with one change.
            let measure = |change: &dyn Fn(&mut ContextOptions)| -> Result<(f64, f64), String> {
                let mut options = ContextOptions::default();
                change(&mut options);
                let c = manager.create_context_with(id, options).map_err(e)?;
                w3_checked(&c, 4096, true).map_err(e)
            };
            let (route, route_err) = measure(&|_| {})?;
            println!(
                "w3_sgemm4096_fp32 {route:.1} GFLOP/s (the default route: the warpgroup kernel \
                 where it takes the product, else vendor BLAS where the device has one)"
            );
            println!("w3_sgemm4096_fp32_error {route_err:.2e}");
            ours.push(("w3_sgemm4096_fp32".into(), route, "GFLOP/s"));
            let (blas, blas_err) = measure(&|o| o.warpgroup_gemm = false)?;
            println!("w3_sgemm4096_vendor {blas:.1} GFLOP/s (vendor BLAS where present)");
            println!("w3_sgemm4096_vendor_error {blas_err:.2e}");
            // TF32 (PyTorch's allow_tf32) for scale: the rate and error f32 GEMMs give up.
            let (tf32, tf32_err) = measure(&|o| o.allow_tf32 = true)?;
            println!("w3_sgemm4096_tf32 {tf32:.1} GFLOP/s");
            println!("w3_sgemm4096_tf32_error {tf32_err:.2e}");
            let (own, own_err) = measure(&|o| o.vendor_blas = false)?;
            println!("w3_sgemm4096_kernel {own:.1} GFLOP/s");
            println!("w3_sgemm4096_kernel_error {own_err:.2e}");
            println!("w3_sgemm4096_kernel_vs_cublas {:.2}", own / blas);
        } else {
            let v = w3(&ctx, 1024, false).map_err(e)?;
            println!("w3_sgemm1024_fp32 {v:.1} GFLOP/s");
            ours.push(("w3_sgemm1024_fp32".into(), v, "GFLOP/s"));
        }
        if ctx.info().backend == BackendKind::OpenCl {
            // Each OpenCL GEMM kernel forced, whatever the per-launch choice would take.
            let n = if gpu { 4096 } else { 1024 };
            for tile in [128, 64] {
                let mut options = ContextOptions::default();
                options.opencl_sgemm_tile = Some(tile);
                match manager.create_context_with(id, options) {
                    Ok(tctx) => {
                        let v = w3(&tctx, n, gpu).map_err(e)?;
                        println!("w3_sgemm{n}_tile{tile} {:.3} TFLOP/s", v / 1000.0);
                    }
                    Err(err) => eprintln!("w3_sgemm{n}_tile{tile}: {err}"),
                }
            }
        }
    }
    if want("w3") {
        // bf16/f16 products next to the f32 ones (the default route of this context).
        let n = if gpu { 4096 } else { 256 };
        for (name, rate, err) in half_gemm::rows(&ctx, n, gpu).map_err(e)? {
            println!("{name} {rate:.2} TFLOP/s");
            println!("{name}_error {err:.2e}");
            ours.push((name, rate * 1000.0, "GFLOP/s"));
        }
    }
    if want("w4") {
        let (relu, copy) = w4(&ctx, gpu).map_err(e)?;
        println!("w4_relu_64M {relu:.1} GB/s");
        println!("w4_copy_64M {copy:.1} GB/s");
        ours.push(("w4_relu_64M".into(), relu, "GB/s"));
        ours.push(("w4_copy_64M".into(), copy, "GB/s"));
    }
    if want("parts") {
        for (name, us) in parts(&ctx, gpu).map_err(e)? {
            println!("{name} {us:.2} us");
        }
    }
    if let Some(path) = torch {
        print_ratios(&ours, &read_torch(&path)?);
    }
    Ok(())
}

fn main() -> ExitCode {
    env_logger::init();
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
