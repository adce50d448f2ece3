//! The bf16/f16 GEMM rows of W3 (issue 28): TFLOP/s of `LinalgOps::gemm` on bf16 and f16
//! operands at 4096^3 (into T) and at the three products of W1's 784-512 layer at batch 4096
//! (forward `x W^T` into T, weight gradient `dz^T x` into f32, input gradient `dz W` into T),
//! each with its error: over 256 sampled entries, the largest `|c - c_f64| / Σ_k |a_ik b_kj|`
//! against f64 sums of the rounded operands (the T outputs add their own rounding, 2^-9 for
//! bf16 and 2^-12 for f16 relative).
//!
//! [`grid`] (`--hgemm-grid`): a dense layer's three products over a grid of shapes, each with
//! the route it takes, with the vendor library on and off.

use std::time::Instant;

use half::{bf16, f16};
use rnn::ops::prelude::*;
use rnn::ops::{
    Activated, BiasActBackwardProduct, BiasActGrads, DenseForward, DenseParamGrads, DenseParams,
    DenseShape, MatShape,
};
use rnn::{
    Activation, BackendKind, Buffer, Context, ContextOptions, DType, DeviceId, Gemm, GpuManager,
    HalfGemmDevice, half_gemm_route,
};

/// `(name, product, whether C is T)`.
fn shapes(n: usize) -> [(String, Gemm, bool); 4] {
    let batch = n;
    [
        (format!("{n}"), Gemm::new(n, n, n), true),
        ("w1_fwd".into(), Gemm::new(batch, 512, 784).tb(), true),
        ("w1_dw".into(), Gemm::new(512, 784, batch).ta(), false),
        ("w1_dx".into(), Gemm::new(batch, 784, 512), true),
    ]
}

/// Deterministic values in [-1, 1), rounded to `t`, as f32 and as `t`'s bits in a buffer.
fn operand(ctx: &Context, t: DType, n: usize, seed: u64) -> rnn::Result<(Vec<f32>, Buffer)> {
    let mut s = seed | 1;
    let vals: Vec<f32> = (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect();
    let ops = ctx.ops();
    let buf = ops.alloc_as(t, n)?;
    let rounded: Vec<f32> = if t == DType::Bf16 {
        let h: Vec<bf16> = vals.iter().map(|&x| bf16::from_f32(x)).collect();
        ops.upload_as(buf.view(), &h)?;
        h.iter().map(|x| x.to_f32()).collect()
    } else {
        let h: Vec<f16> = vals.iter().map(|&x| f16::from_f32(x)).collect();
        ops.upload_as(buf.view(), &h)?;
        h.iter().map(|x| x.to_f32()).collect()
    };
    Ok((rounded, buf))
}

/// C's elements as f32.
fn download(ctx: &Context, c: &Buffer) -> rnn::Result<Vec<f32>> {
    let ops = ctx.ops();
    let n = c.len();
    Ok(match c.dtype() {
        DType::Bf16 => {
            let mut h = vec![bf16::ZERO; n];
            ops.download_as(c.view(), &mut h)?;
            h.iter().map(|x| x.to_f32()).collect()
        }
        DType::F16 => {
            let mut h = vec![f16::ZERO; n];
            ops.download_as(c.view(), &mut h)?;
            h.iter().map(|x| x.to_f32()).collect()
        }
        _ => {
            let mut f = vec![0.0f32; n];
            ops.download(c.view(), &mut f)?;
            f
        }
    })
}

/// One product's rate in TFLOP/s and its error.
fn measure(ctx: &Context, t: DType, g: Gemm, low_out: bool, gpu: bool) -> rnn::Result<(f64, f64)> {
    let (m, n, k) = (g.m, g.n, g.k);
    let (ha, a) = operand(ctx, t, m * k, 1)?;
    let (hb, b) = operand(ctx, t, k * n, 2)?;
    let ops = ctx.ops();
    let c = ops.alloc_as(if low_out { t } else { DType::F32 }, m * n)?;
    let run = || ops.gemm(g, a.view(), b.view(), c.view());
    let (warm, iters) = if gpu { (5, 50) } else { (1, 2) };
    for _ in 0..warm {
        run()?;
    }
    ctx.synchronize()?;
    let start = Instant::now();
    for _ in 0..iters {
        run()?;
    }
    ctx.synchronize()?;
    let secs = start.elapsed().as_secs_f64() / iters as f64;
    let hc = download(ctx, &c)?;
    let at = |i: usize, p: usize| {
        if g.trans_a {
            ha[p * m + i]
        } else {
            ha[i * k + p]
        }
    };
    let bt = |p: usize, j: usize| {
        if g.trans_b {
            hb[j * k + p]
        } else {
            hb[p * n + j]
        }
    };
    let mut worst = 0.0f64;
    for s in 0..256 {
        let (i, j) = ((s * 7919 + 13) % m, (s * 104_729 + 7) % n);
        let (mut exact, mut scale) = (0.0f64, 0.0f64);
        for p in 0..k {
            let term = f64::from(at(i, p)) * f64::from(bt(p, j));
            exact += term;
            scale += term.abs();
        }
        let err = (f64::from(hc[i * n + j]) - exact).abs() / scale.max(f64::MIN_POSITIVE);
        worst = worst.max(err);
    }
    Ok((2.0 * (m * n * k) as f64 / secs / 1e12, worst))
}

/// Every row: `(name, TFLOP/s, error)`, in bf16 then f16; `n` is the square side and W1's
/// batch.
pub fn rows(ctx: &Context, n: usize, gpu: bool) -> rnn::Result<Vec<(String, f64, f64)>> {
    let mut out = Vec::new();
    for t in [DType::Bf16, DType::F16] {
        for (name, g, low_out) in shapes(n) {
            let (rate, err) = measure(ctx, t, g, low_out, gpu)?;
            out.push((format!("w3_hgemm_{name}_{t}"), rate, err));
        }
    }
    Ok(out)
}

/// Rows M (the batch), outputs N and inputs K of the grid's layers: half of the 80 points of
/// their product, a checkerboard over the three indices (each size still meets every other).
const GRID_M: [usize; 4] = [256, 1024, 4096, 16384];
const GRID_N: [usize; 5] = [10, 64, 512, 1024, 4096];
const GRID_K: [usize; 4] = [64, 512, 784, 2048];

/// A T buffer of `n` elements of magnitude 0.1 and alternating sign.
fn filled(ctx: &Context, t: DType, n: usize) -> rnn::Result<Buffer> {
    let ops = ctx.ops();
    let b = ops.alloc_as(t, n)?;
    let bits: u16 = if t == DType::Bf16 { 0x3dcd } else { 0x2e66 };
    let bytes: Vec<u8> = (0..n)
        .flat_map(|i| (bits | if i % 2 == 1 { 0x8000 } else { 0 }).to_ne_bytes())
        .collect();
    ops.upload_bytes(b.view(), &bytes)?;
    Ok(b)
}

/// Mean microseconds of `f` after three untimed calls (the first one's error returned).
fn time_op(ctx: &Context, flops: f64, f: impl Fn() -> rnn::Result<()>) -> rnn::Result<f64> {
    f()?;
    f()?;
    f()?;
    ctx.synchronize()?;
    let iters = (1e11 / flops).clamp(5.0, 200.0) as usize;
    let start = Instant::now();
    for _ in 0..iters {
        f()?;
    }
    ctx.synchronize()?;
    Ok(start.elapsed().as_secs_f64() * 1e6 / iters as f64)
}

/// One of [`grid_point`]'s timed ops, and the product it runs (`true`: with an epilogue).
type Product<'a> = dyn Fn() -> rnn::Result<()> + 'a;

/// One layer's products in `t`: the dense forward (`x W^T`, bias and ReLU epilogue), the
/// input gradient as the layer below takes it (`dz W` times that layer's ReLU derivative,
/// with its bias gradient's column sums) and the weight gradient (`dz^T x` into f32, with the
/// bias gradient's column sums). Prints one line per product: route, microseconds, TFLOP/s.
fn grid_point(
    ctx: &Context,
    device: HalfGemmDevice,
    t: DType,
    vendor: &str,
    (m, n, k): (usize, usize, usize),
) -> rnn::Result<()> {
    let ops = ctx.ops();
    let (x, w, bias) = (
        filled(ctx, t, m * k)?,
        filled(ctx, t, n * k)?,
        filled(ctx, t, n)?,
    );
    let (z, y) = (filled(ctx, t, m * n)?, filled(ctx, t, m * n)?);
    let (z_below, y_below, dz_below) = (
        filled(ctx, t, m * k)?,
        filled(ctx, t, m * k)?,
        filled(ctx, t, m * k)?,
    );
    let (dw, db, db_below) = (
        ops.alloc_as(DType::F32, n * k)?,
        ops.alloc_as(DType::F32, n)?,
        ops.alloc_as(DType::F32, k)?,
    );
    let shape = DenseShape::new(m, k, n);
    let act = Activation::Relu;
    let flops = 2.0 * (m * n * k) as f64;
    let forward = || {
        let params = DenseParams::new(w.view(), bias.view());
        ops.dense_forward(DenseForward::new(
            x.view(),
            params,
            z.view(),
            y.view(),
            act,
            shape,
        ))
    };
    let input_grad = || {
        ops.bias_act_backward_product(BiasActBackwardProduct::new(
            z.view(),
            w.view(),
            Activated::new(z_below.view(), y_below.view(), act),
            BiasActGrads::new(dz_below.view(), db_below.view()),
            MatShape::new(m, k),
            n,
        ))
    };
    let weight_grad = || {
        let grads = DenseParams::new(dw.view(), db.view());
        ops.dense_param_grads(DenseParamGrads::new(z.view(), x.view(), grads, shape))
    };
    let cases: [(&str, Gemm, bool, &Product<'_>); 3] = [
        ("fwd", shape.forward_gemm(), true, &forward),
        ("dgrad", Gemm::new(m, k, n), true, &input_grad),
        ("wgrad", shape.weight_grad_gemm(), false, &weight_grad),
    ];
    for (name, g, epilogue, f) in cases {
        let us = time_op(ctx, flops, f)?;
        let route = if ctx.info().backend == BackendKind::Cuda {
            half_gemm_route(device, &g, epilogue)
        } else {
            "own-kernels"
        };
        println!(
            "hgemm_grid {t} {name} {m}x{n}x{k} vendor={vendor} route={route} {us:.1} us {:.2} TFLOP/s",
            flops / us / 1e6
        );
    }
    Ok(())
}

/// `--hgemm-grid` on device `id`: [`grid_point`] at every grid point in bf16 and f16, with
/// `vendor_blas` on and (on CUDA, where it changes the route) off.
pub fn grid(manager: &GpuManager, id: DeviceId) -> rnn::Result<()> {
    for vendor in [true, false] {
        let mut options = ContextOptions::default();
        options.vendor_blas = vendor;
        let ctx = manager.create_context_with(id, options)?;
        let info = ctx.info();
        let cuda = info.backend == BackendKind::Cuda;
        let arch: u32 = info
            .arch
            .trim_start_matches("sm_")
            .chars()
            .take_while(char::is_ascii_digit)
            .collect::<String>()
            .parse()
            .unwrap_or(0);
        let device = HalfGemmDevice {
            vendor: vendor && cuda,
            tensor_cores: cuda && arch >= 80,
            sms: info.compute_units,
        };
        let label = if cuda {
            if vendor { "on" } else { "off" }
        } else {
            "n/a"
        };
        for t in [DType::Bf16, DType::F16] {
            for (i, &m) in GRID_M.iter().enumerate() {
                for (j, &n) in GRID_N.iter().enumerate() {
                    for (l, &k) in GRID_K.iter().enumerate() {
                        if (i + j + l) % 2 == 0 {
                            grid_point(&ctx, device, t, label, (m, n, k))?;
                        }
                    }
                }
            }
        }
        if !cuda {
            break;
        }
    }
    Ok(())
}
