//! The bf16/f16 GEMM rows of W3 (issue 28): TFLOP/s of `LinalgOps::gemm` on bf16 and f16
//! operands at 4096^3 (into T) and at the three products of W1's 784-512 layer at batch 4096
//! (forward `x W^T` into T, weight gradient `dz^T x` into f32, input gradient `dz W` into T),
//! each with its error: over 256 sampled entries, the largest `|c - c_f64| / Σ_k |a_ik b_kj|`
//! against f64 sums of the rounded operands (the T outputs add their own rounding, 2^-9 for
//! bf16 and 2^-12 for f16 relative).

use std::time::Instant;

use half::{bf16, f16};
use rnn::ops::prelude::*;
use rnn::{Buffer, Context, DType, Gemm};

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
