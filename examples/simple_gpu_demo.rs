//! Exercises every device `rnn` finds: a buffer round trip, a user kernel (SAXPY) compiled at
//! run time in the device's own dialect, a matrix product through `LinalgOps::gemm` checked against
//! the CPU backend, and the time it takes to build the built-in kernels, cold and from the disk
//! cache. Exits non-zero when any check fails.
//!
//! ```text
//! cargo run --release --example simple_gpu_demo                      # every device
//! cargo run --release --example simple_gpu_demo -- --device opencl:0:0
//! ```

use std::process::ExitCode;
use std::time::Instant;

use rnn::cache::KernelCache;
use rnn::{
    BackendKind, Context, DeviceId, DeviceInfo, Dialect, Gemm, GpuManager, KernelArg, KernelSource,
    LaunchConfig,
};

/// SAXPY (`y += a * x`) in each dialect. Buffers arrive as base pointer + element offset
/// (see `KernelArg`), so the kernel adds the offsets itself.
const SAXPY_OPENCL: &str = r#"
__kernel void saxpy(__global const float* x_base, ulong x_off,
                    __global float* y_base, ulong y_off,
                    uint n, float a) {
    size_t i = get_global_id(0);
    if (i < n) {
        __global const float* x = x_base + x_off;
        __global float* y = y_base + y_off;
        y[i] = a * x[i] + y[i];
    }
}
"#;

const SAXPY_CUDA: &str = r#"
extern "C" __global__ void saxpy(const float* x_base, unsigned long long x_off,
                                 float* y_base, unsigned long long y_off,
                                 unsigned int n, float a) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        const float* x = x_base + x_off;
        float* y = y_base + y_off;
        y[i] = a * x[i] + y[i];
    }
}
"#;

/// hiprtc predefines the HIP spellings of `__global__`, `blockIdx`, ... so the CUDA text is
/// valid HIP; it is kept separate to show which dialect each runtime compiles.
const SAXPY_HIP: &str = SAXPY_CUDA;

fn saxpy_source(dialect: Dialect) -> KernelSource {
    let text = match dialect {
        Dialect::OpenCl => SAXPY_OPENCL,
        Dialect::Cuda => SAXPY_CUDA,
        Dialect::Hip => SAXPY_HIP,
        other => unreachable!("no saxpy source for {other:?}"),
    };
    KernelSource::new(dialect, text, "saxpy")
}

fn dialect_of(backend: BackendKind) -> Option<Dialect> {
    match backend {
        BackendKind::Cuda => Some(Dialect::Cuda),
        BackendKind::OpenCl => Some(Dialect::OpenCl),
        BackendKind::Hip => Some(Dialect::Hip),
        // The CPU backend compiles no kernels, nor would a runtime this demo does not know.
        _ => None,
    }
}

/// Deterministic values in [-1, 1) (xorshift64*), so runs are comparable.
struct Values(u64);

impl Values {
    fn take(&mut self, n: usize) -> Vec<f32> {
        (0..n)
            .map(|_| {
                self.0 ^= self.0 >> 12;
                self.0 ^= self.0 << 25;
                self.0 ^= self.0 >> 27;
                let bits = self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 40;
                (bits as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
            })
            .collect()
    }
}

fn rel_err(out: &[f32], reference: &[f32]) -> f64 {
    let mut num = 0.0f64;
    let mut den = 0.0f64;
    for (o, r) in out.iter().zip(reference) {
        if !o.is_finite() {
            return f64::INFINITY;
        }
        num += (f64::from(*o) - f64::from(*r)).powi(2);
        den += f64::from(*r).powi(2);
    }
    num.sqrt() / den.sqrt().max(1e-30)
}

type Check = Result<String, String>;

/// Prints one step's outcome; returns whether it passed.
fn report(step: &str, outcome: Check) -> bool {
    match outcome {
        Ok(detail) => {
            println!("  [ok]   {step}: {detail}");
            true
        }
        Err(detail) => {
            println!("  [FAIL] {step}: {detail}");
            false
        }
    }
}

fn round_trip(ctx: &Context, values: &mut Values) -> Check {
    let n = 1 << 20;
    let data = values.take(n);
    let t = ctx.tensor(&[n], &data).map_err(|e| e.to_string())?;
    let back = t.to_vec().map_err(|e| e.to_string())?;
    match back
        .iter()
        .zip(&data)
        .position(|(a, b)| a.to_bits() != b.to_bits())
    {
        None if back.len() == n => Ok(format!("{n} floats uploaded and read back unchanged")),
        None => Err(format!("read back {} floats, expected {n}", back.len())),
        Some(i) => Err(format!("element {i}: wrote {}, read {}", data[i], back[i])),
    }
}

/// Runs SAXPY on views that start inside their buffers, and checks that the elements around
/// the views are untouched (the offset convention is honoured, nothing is written out of range).
fn saxpy(ctx: &Context, dialect: Dialect, values: &mut Values) -> Check {
    let e = |e: rnn::Error| e.to_string();
    let (n, x_off, y_off, y_pad) = (100_003usize, 3usize, 5usize, 4usize);
    let a = 1.75f32;
    let x_host = values.take(n);
    let y_host = values.take(n);
    let sentinel = 7.0f32;

    let t0 = Instant::now();
    let kernel = ctx.compile(&saxpy_source(dialect)).map_err(e)?;
    let compile_ms = t0.elapsed().as_secs_f64() * 1e3;

    let xb = ctx.alloc(x_off + n).map_err(e)?;
    let yb = ctx.alloc(y_off + n + y_pad).map_err(e)?;
    ctx.ops()
        .upload(xb.view(), &[vec![sentinel; x_off], x_host.clone()].concat())
        .map_err(e)?;
    let y_init = [vec![sentinel; y_off], y_host.clone(), vec![sentinel; y_pad]].concat();
    ctx.ops().upload(yb.view(), &y_init).map_err(e)?;
    let xv = xb.slice(x_off, n).map_err(e)?;
    let yv = yb.slice(y_off, n).map_err(e)?;
    ctx.launch(
        &kernel,
        LaunchConfig::for_elements(n, 256),
        &[
            KernelArg::Buffer(xv),
            KernelArg::Buffer(yv),
            KernelArg::U32(n as u32),
            KernelArg::F32(a),
        ],
    )
    .map_err(e)?;
    let mut y_all = vec![0.0f32; yb.len()];
    ctx.ops().download(yb.view(), &mut y_all).map_err(e)?;

    let expected: Vec<f32> = x_host
        .iter()
        .zip(&y_host)
        .map(|(x, y)| a.mul_add(*x, *y))
        .collect();
    let outside = y_all[..y_off]
        .iter()
        .chain(&y_all[y_off + n..])
        .any(|v| *v != sentinel);
    if outside {
        return Err("elements outside the y view were written".into());
    }
    let err = rel_err(&y_all[y_off..y_off + n], &expected);
    if err > 1e-6 {
        return Err(format!("relative error {err:.2e} (limit 1e-6)"));
    }
    Ok(format!(
        "{n} elements at offsets {x_off}/{y_off}, compiled in {compile_ms:.1} ms, relative \
         error {err:.1e}"
    ))
}

/// `alpha * op(A) op(B)` in f64 on the host: the check of the CPU backend itself.
fn host_gemm(g: &Gemm, a: &[f32], b: &[f32]) -> Vec<f32> {
    let at = |i: usize, p: usize| {
        if g.trans_a {
            a[p * g.m + i]
        } else {
            a[i * g.k + p]
        }
    };
    let bt = |p: usize, j: usize| {
        if g.trans_b {
            b[j * g.k + p]
        } else {
            b[p * g.n + j]
        }
    };
    let mut c = vec![0.0f32; g.m * g.n];
    for i in 0..g.m {
        for j in 0..g.n {
            let dot: f64 = (0..g.k)
                .map(|p| f64::from(at(i, p)) * f64::from(bt(p, j)))
                .sum();
            c[i * g.n + j] = (f64::from(g.alpha) * dot) as f32;
        }
    }
    c
}

/// `C = alpha * op(A) op(B)` on `ctx`, compared with the CPU backend (or, on the CPU backend,
/// with an f64 host loop).
fn gemm_case(ctx: &Context, g: Gemm, values: &mut Values) -> Result<f64, String> {
    let e = |e: rnn::Error| e.to_string();
    let a = values.take(g.m * g.k);
    let b = values.take(g.k * g.n);
    let run = |c: &Context| -> rnn::Result<Vec<f32>> {
        let ab = c.tensor(&[a.len()], &a)?;
        let bb = c.tensor(&[b.len()], &b)?;
        // NaN-poisoned: with beta = 0 every element must be written, never read.
        let cb = c.tensor(&[g.m * g.n], &vec![f32::NAN; g.m * g.n])?;
        c.ops().gemm(g, ab.view(), bb.view(), cb.view())?;
        cb.to_vec()
    };
    let out = run(ctx).map_err(e)?;
    let reference = if ctx.info().backend == BackendKind::Cpu {
        host_gemm(&g, &a, &b)
    } else {
        run(&Context::cpu()).map_err(|err| format!("CPU reference: {err}"))?
    };
    Ok(rel_err(&out, &reference))
}

fn gemm(ctx: &Context, values: &mut Values) -> Check {
    let cases = [
        ("A*B", Gemm::new(257, 193, 129)),
        (
            "0.5*A^T*B^T",
            Gemm::new(130, 67, 301).ta().tb().scaled(0.5, 0.0),
        ),
    ];
    let reference = if ctx.info().backend == BackendKind::Cpu {
        "an f64 host loop"
    } else {
        "the CPU backend"
    };
    let mut parts = Vec::new();
    for (name, g) in cases {
        let err = gemm_case(ctx, g, values).map_err(|e| format!("{name}: {e}"))?;
        if err > 1e-5 {
            return Err(format!(
                "{name} ({}x{}x{}): relative error {err:.2e} vs {reference} (limit 1e-5)",
                g.m, g.n, g.k
            ));
        }
        parts.push(format!("{name} {}x{}x{} rel err {err:.1e}", g.m, g.n, g.k));
    }
    Ok(format!("vs {reference}: {}", parts.join(", ")))
}

fn cache_entries(cache: &KernelCache) -> Option<usize> {
    cache.stats().ok().map(|s| s.entries)
}

/// Times `warm_up` on this context (compiled, or loaded from the disk cache if an earlier run
/// stored the binaries), then on a second context of the same device, which has no modules in
/// memory and so must come from the disk cache.
fn warm_up(manager: &GpuManager, ctx: &Context, cache: &KernelCache) -> Check {
    let e = |e: rnn::Error| e.to_string();
    let before = cache_entries(cache);
    let t0 = Instant::now();
    ctx.warm_up().map_err(e)?;
    let first_ms = t0.elapsed().as_secs_f64() * 1e3;
    let after_first = cache_entries(cache);

    let second = manager.create_context(ctx.id()).map_err(e)?;
    let t1 = Instant::now();
    second.warm_up().map_err(e)?;
    let second_ms = t1.elapsed().as_secs_f64() * 1e3;

    let Some(dir) = cache.dir() else {
        return Ok(format!(
            "first context {first_ms:.1} ms, second context {second_ms:.1} ms (disk cache off: \
             both compiled)"
        ));
    };
    let counts = match (before, after_first) {
        (Some(b), Some(a)) => format!("cache entries {b} -> {a}"),
        _ => "cache entries unknown".into(),
    };
    let origin = match (before, after_first) {
        (Some(b), Some(a)) if a > b => "the first context compiled them and stored them",
        (_, Some(a)) if a > 0 => {
            "the first context found them already on disk (an earlier run stored them)"
        }
        // An unwritable or unreadable directory: the kernels were compiled, never stored, so
        // the second context compiled them again.
        _ => {
            return Ok(format!(
                "first context {first_ms:.1} ms, second context {second_ms:.1} ms (both \
                 compiled: nothing is stored in {}, {counts}; is it writable?)",
                dir.display()
            ));
        }
    };
    Ok(format!(
        "first context {first_ms:.1} ms, second context {second_ms:.1} ms (from the disk \
         cache); {origin}; {counts} in {}",
        dir.display()
    ))
}

/// Every check on one device; returns whether all passed.
fn demo(manager: &GpuManager, info: &DeviceInfo, cache: &KernelCache, seed: u64) -> bool {
    println!("\n{info}");
    let ctx = match manager.create_context(info.id) {
        Ok(c) => c,
        Err(e) => return report("context", Err(e.to_string())),
    };
    let mut values = Values(seed | 1);
    let mut ok = true;
    match dialect_of(info.backend) {
        Some(dialect) => {
            ok &= report("built-in kernels (warm_up)", warm_up(manager, &ctx, cache));
            ok &= report("buffer round trip", round_trip(&ctx, &mut values));
            ok &= report(
                &format!("user kernel ({dialect} SAXPY)"),
                saxpy(&ctx, dialect, &mut values),
            );
            ok &= report("gemm", gemm(&ctx, &mut values));
        }
        None => {
            println!(
                "  [--]   CPU backend: no kernel compiler; its ops are native Rust (the reference)"
            );
            ok &= report("buffer round trip", round_trip(&ctx, &mut values));
            ok &= report("gemm", gemm(&ctx, &mut values));
        }
    }
    ok
}

fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let mut chosen: Option<DeviceId> = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--device" => match args.next().map(|v| v.parse::<DeviceId>()) {
                Some(Ok(id)) => chosen = Some(id),
                Some(Err(e)) => {
                    eprintln!("error: {e}");
                    return ExitCode::from(2);
                }
                None => {
                    eprintln!("error: --device needs an id (cuda:0, opencl:0:1, hip:0, cpu)");
                    return ExitCode::from(2);
                }
            },
            "-h" | "--help" => {
                println!("usage: simple_gpu_demo [--device <id>]");
                return ExitCode::SUCCESS;
            }
            other => {
                eprintln!("unknown argument '{other}' (usage: simple_gpu_demo [--device <id>])");
                return ExitCode::from(2);
            }
        }
    }

    let manager = match GpuManager::new() {
        Ok(m) => m,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    println!("Runtimes:");
    for status in manager.backends() {
        println!("  {status}");
    }

    let devices: Vec<DeviceInfo> = match chosen {
        Some(id) => match manager.device(id) {
            Ok(d) => vec![d.clone()],
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
        },
        None => manager.devices().to_vec(),
    };
    if !devices.iter().any(|d| d.backend != BackendKind::Cpu) {
        println!("\nNo GPU or OpenCL device found; only the CPU backend is demonstrated.");
    }

    let cache = KernelCache::from_env();
    let mut failed = Vec::new();
    for (i, info) in devices.iter().enumerate() {
        if !demo(&manager, info, &cache, 0x5eed_0000 + i as u64) {
            failed.push(info.id.to_string());
        }
    }

    println!();
    let compiled_any = devices.iter().any(|d| d.backend != BackendKind::Cpu);
    if !compiled_any {
        println!("Kernel cache: not used (the CPU backend compiles nothing).");
    } else if let Some(dir) = cache.dir() {
        match cache_entries(&cache) {
            Some(n) if n > 0 => println!(
                "Kernel cache: {} now holds {n} entries; a second run of this demo loads the \
                 built-in kernels from it instead of compiling them.",
                dir.display()
            ),
            _ => println!(
                "Kernel cache: {} holds no entries (not writable? see the warnings above); \
                 every run compiles.",
                dir.display()
            ),
        }
    } else {
        println!("Kernel cache: off (RNN_CACHE=off); every run compiles.");
    }
    if failed.is_empty() {
        println!("All checks passed on {} device(s).", devices.len());
        ExitCode::SUCCESS
    } else {
        println!("Checks FAILED on: {}", failed.join(", "));
        ExitCode::FAILURE
    }
}
