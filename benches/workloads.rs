//! The DESIGN.md reference workloads on one device, printed as `name value unit` with the
//! names and units of `shared/bench/pytorch_reference.py` so the two can be compared line by
//! line.
//!
//! ```text
//! cargo bench --bench workloads -- [--device ID] [--only w1,w2,w3,w4]
//! ```

use std::process::ExitCode;
use std::time::Instant;

use rnn::nn::{Dataset, Loss, Network, Optimizer, Rng, RnnOutput, Targets, TrainingConfig};
use rnn::{Activation, Context, ContextOptions, DeviceId, DeviceKind, Gemm, GpuManager};

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

fn config(batch: usize) -> TrainingConfig {
    TrainingConfig {
        batch_size: batch,
        learning_rate: 1e-3,
        optimizer: Optimizer::adam(),
        ..Default::default()
    }
}

fn step_us(
    ctx: &Context,
    net: &mut Network,
    data: &Dataset,
    batch: usize,
    gpu: bool,
) -> rnn::Result<f64> {
    let mut trainer = net.trainer(data, &config(batch))?;
    let (warm, iters) = if gpu { (20, 200) } else { (3, 20) };
    let mut err = None;
    let us = time_us(ctx, warm, iters, || {
        if let Err(e) = trainer.step(net) {
            err.get_or_insert(e);
        }
    })?;
    err.map_or(Ok(us), Err)
}

fn w1(ctx: &Context, batch: usize, gpu: bool) -> rnn::Result<f64> {
    let mut rng = Rng::new(1);
    let mut net = Network::builder(ctx)
        .dense(784, 512, Activation::Relu)
        .dense(512, 512, Activation::Relu)
        .dense(512, 10, Activation::Identity)
        .build(Loss::SoftmaxCrossEntropy)?;
    let labels = (0..batch).map(|_| rng.below(10) as u32).collect();
    let data = Dataset::classification(random(&mut rng, batch * 784), 784, labels, 10)?;
    step_us(ctx, &mut net, &data, batch, gpu)
}

fn w2(ctx: &Context, gpu: bool) -> rnn::Result<f64> {
    let (v, h, t, b) = (96, 256, 64, 64);
    let mut rng = Rng::new(2);
    let mut net = Network::builder(ctx)
        .sequence_length(t)
        .rnn(v, h, Activation::Tanh, RnnOutput::Sequence)
        .dense(h, v, Activation::Identity)
        .build(Loss::SoftmaxCrossEntropy)?;
    let mut x = vec![0.0f32; b * t * v];
    for row in x.chunks_mut(v) {
        row[rng.below(v)] = 1.0;
    }
    let labels = (0..b * t).map(|_| rng.below(v) as u32).collect();
    let targets = Targets::Classes {
        labels,
        classes: v,
        per_sample: t,
    };
    let data = Dataset::new(x, t * v, targets)?;
    step_us(ctx, &mut net, &data, b, gpu)
}

fn w3(ctx: &Context, n: usize, gpu: bool) -> rnn::Result<f64> {
    let mut rng = Rng::new(3);
    let a = ctx.tensor(&[n, n], &random(&mut rng, n * n))?;
    let b = ctx.tensor(&[n, n], &random(&mut rng, n * n))?;
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
    err.map_or(Ok(2.0 * (n as f64).powi(3) / (us * 1e-6) / 1e9), Err)
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
            keep(ops.rnn_step_forward(
                pre.view(),
                hp.view(),
                w.view(),
                bi.view(),
                bh.view(),
                out.view(),
                Activation::Tanh,
                b,
                h,
            ))
        })?,
    ));
    rows.push((
        "part_rnn_step_backward_64x256",
        time_us(ctx, 20, iters, || {
            keep(ops.rnn_step_backward(
                pre.view(),
                Some(hp.view()),
                w.view(),
                h2.view(),
                out.view(),
                Activation::Tanh,
                b,
                h,
            ))
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

fn run() -> Result<(), String> {
    let mut device: Option<DeviceId> = None;
    let mut only: Option<Vec<String>> = None;
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
            // cargo bench passes --bench to every bench binary.
            "--bench" => {}
            other => {
                return Err(format!(
                    "unknown argument '{other}' (use --device ID, --only w1,w2,w3,w4)"
                ));
            }
        }
    }
    if let Some(o) = &only
        && let Some(bad) = o
            .iter()
            .find(|w| !["w1", "w2", "w3", "w4", "parts"].contains(&w.as_str()))
    {
        return Err(format!("unknown workload '{bad}' (w1, w2, w3, w4, parts)"));
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
    let ctx = manager.create_context(id).map_err(|e| e.to_string())?;
    let gpu = ctx.info().kind == DeviceKind::Gpu;
    eprintln!("device {} ({})", id, ctx.info().name);
    let e = |e: rnn::Error| e.to_string();
    if want("w1") {
        println!("w1_mlp_b256_step {:.1} us", w1(&ctx, 256, gpu).map_err(e)?);
        println!(
            "w1_mlp_b4096_step {:.1} us",
            w1(&ctx, 4096, gpu).map_err(e)?
        );
    }
    if want("w2") {
        println!("w2_rnn_step {:.1} us", w2(&ctx, gpu).map_err(e)?);
    }
    if want("w3") {
        if gpu {
            println!(
                "w3_sgemm4096_fp32 {:.1} GFLOP/s",
                w3(&ctx, 4096, true).map_err(e)?
            );
            let mut options = ContextOptions::default();
            options.vendor_blas = false;
            let kctx = manager.create_context_with(id, options).map_err(e)?;
            println!(
                "w3_sgemm4096_kernel {:.1} GFLOP/s",
                w3(&kctx, 4096, true).map_err(e)?
            );
        } else {
            println!(
                "w3_sgemm1024_fp32 {:.1} GFLOP/s",
                w3(&ctx, 1024, false).map_err(e)?
            );
        }
    }
    if want("w4") {
        let (relu, copy) = w4(&ctx, gpu).map_err(e)?;
        println!("w4_relu_64M {relu:.1} GB/s");
        println!("w4_copy_64M {copy:.1} GB/s");
    }
    if want("parts") {
        for (name, us) in parts(&ctx, gpu).map_err(e)? {
            println!("{name} {us:.2} us");
        }
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
