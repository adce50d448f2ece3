//! Row-wise softmax and log-softmax, the fused softmax cross-entropy, and MSE.
//! Every exponential is taken of `x - max(row)`, so no row overflows.

use super::CpuOps;
use crate::ops::prelude::*;
use crate::ops::{MatShape, Mse, SoftmaxCrossEntropy};
use rayon::prelude::*;

use super::access::{Src, lock, lock_inplace, read_u32, valid_index};
use super::activation::rows_of;
use super::fastmath::exp;
use super::par::{PAR_MIN, min_rows};
use crate::buffer::View;
use crate::error::Result;
use crate::ops::check;

fn row_max(x: &[f32]) -> f32 {
    x.iter().copied().fold(f32::NEG_INFINITY, f32::max)
}

/// `row = exp(row - max)` in place; returns the sum of the exponentials.
fn exp_shifted(row: &mut [f32], max: f32) -> f32 {
    super::simd::map(row, |v| exp(v - max));
    sum(row)
}

/// A sum with eight independent partial sums, so the loop vectorizes.
fn sum(x: &[f32]) -> f32 {
    let mut acc = [0.0f32; 8];
    let mut it = x.chunks_exact(8);
    for c in &mut it {
        for (a, &v) in acc.iter_mut().zip(c) {
            *a += v;
        }
    }
    acc.iter().sum::<f32>() + it.remainder().iter().sum::<f32>()
}

fn softmax_row(row: &mut [f32]) {
    let max = row_max(row);
    let inv = 1.0 / exp_shifted(row, max);
    row.iter_mut().for_each(|v| *v *= inv);
}

fn log_softmax_row(row: &mut [f32]) {
    let max = row_max(row);
    let mut acc = [0.0f32; 8];
    let mut it = row.chunks_exact(8);
    for c in &mut it {
        for (a, &v) in acc.iter_mut().zip(c) {
            *a += exp(v - max);
        }
    }
    let tail: f32 = it.remainder().iter().map(|&v| exp(v - max)).sum();
    let shift = max + (acc.iter().sum::<f32>() + tail).ln();
    row.iter_mut().for_each(|v| *v -= shift);
}

/// Runs a row function over `y`, copying each row of `x` into it first unless it runs in place.
fn row_op(
    op: &str,
    ctx: u64,
    x: View<'_>,
    y: View<'_>,
    rows: usize,
    cols: usize,
    f: fn(&mut [f32]),
) -> Result<()> {
    let n = check::area(op, rows, cols)?;
    check::len(op, "x", &x, n)?;
    check::len(op, "y", &y, n)?;
    if n == 0 {
        return Ok(());
    }
    lock_inplace(op, ctx, [x], [y], 0b1, |[x], [y]| match x {
        Src::Out => rows_of(y, cols, f),
        Src::Slice(x) => {
            let body = |(yr, xr): (&mut [f32], &[f32])| {
                yr.copy_from_slice(xr);
                f(yr)
            };
            if n < PAR_MIN {
                y.chunks_mut(cols).zip(x.chunks(cols)).for_each(body);
            } else {
                y.par_chunks_mut(cols)
                    .zip(x.par_chunks(cols))
                    .with_min_len(min_rows(cols))
                    .for_each(body);
            }
        }
    })
}

/// `totals[i] += sum(sums[i])` for each view, the rows added in order in f64 (the same bits
/// for the same inputs).
fn add_totals<const K: usize>(
    op: &str,
    ctx: u64,
    sums: [View<'_>; K],
    totals: View<'_>,
) -> Result<()> {
    lock(op, ctx, sums, [totals], |sums, [t]| {
        for (total, rows) in t.iter_mut().zip(sums) {
            *total += rows.iter().map(|&v| v as f64).sum::<f64>() as f32;
        }
    })
}

/// One row of the fused cross-entropy: writes the gradient, returns (loss, correct).
fn xent_row(xr: &[f32], dr: &mut [f32], label: u32, grad_scale: f32) -> (f32, f32) {
    // Arg-max with the first maximum winning ties, fused with the row max.
    let mut max = f32::NEG_INFINITY;
    let mut arg = 0;
    for (j, &v) in xr.iter().enumerate() {
        if v > max {
            max = v;
            arg = j;
        }
    }
    dr.copy_from_slice(xr);
    let sum = exp_shifted(dr, max);
    let scale = grad_scale / sum;
    let label = valid_index(label, xr.len());
    // The other classes' share, summed apart: p_t - 1 = -others / sum, and the loss of a
    // confident row is ln(1 + others). Both cancel when formed from p_t (a 1e-5 gradient taken
    // as 0.99999 - 1 keeps two digits).
    let others = label.map(|t| dr[..t].iter().chain(&dr[t + 1..]).sum::<f32>());
    dr.iter_mut().for_each(|v| *v *= scale);
    match (label, others) {
        (Some(t), Some(others)) => {
            dr[t] = -others * scale;
            let loss = if xr[t] == max {
                others.ln_1p()
            } else {
                max + sum.ln() - xr[t]
            };
            (loss, if arg == t { 1.0 } else { 0.0 })
        }
        _ => (f32::NAN, 0.0),
    }
}

/// One row of MSE: writes the gradient, returns the row's loss.
fn mse_row(pr: &[f32], tr: &[f32], dr: &mut [f32], g: f32, inv: f32) -> f32 {
    let mut sq = 0.0f32;
    for ((d, &p), &t) in dr.iter_mut().zip(pr).zip(tr) {
        let e = p - t;
        sq += e * e;
        *d = g * e;
    }
    sq * inv
}

impl LossOps for CpuOps {
    fn softmax(&self, x: View<'_>, y: View<'_>, rows: usize, cols: usize) -> Result<()> {
        let ctx = self.context;
        row_op("softmax", ctx, x, y, rows, cols, softmax_row)
    }

    fn log_softmax(&self, x: View<'_>, y: View<'_>, rows: usize, cols: usize) -> Result<()> {
        let ctx = self.context;
        row_op("log_softmax", ctx, x, y, rows, cols, log_softmax_row)
    }

    fn softmax_cross_entropy(&self, a: SoftmaxCrossEntropy<'_>) -> Result<()> {
        let (ctx, op) = (self.context, SoftmaxCrossEntropy::OP);
        let n = a.check(ctx)?;
        let (row_correct, grad_scale) = (a.row_correct, a.grad_scale);
        let (dlogits, row_loss) = (a.out.grad, a.out.row_loss);
        let MatShape { rows, cols } = a.shape;
        if rows == 0 {
            return Ok(());
        }
        if cols == 0 {
            return Err(crate::Error::shape(op, "zero classes"));
        }
        let labels = read_u32(op, ctx, "labels", &a.labels)?;
        let outs = [dlogits, row_loss, row_correct];
        lock(op, ctx, [a.logits], outs, |[x], [dx, loss, correct]| {
            let labels = &labels[..];
            if n < PAR_MIN {
                x.chunks(cols)
                    .zip(dx.chunks_mut(cols))
                    .zip(labels)
                    .zip(loss.iter_mut())
                    .zip(correct.iter_mut())
                    .for_each(|((((xr, dr), &t), l), c)| {
                        (*l, *c) = xent_row(xr, dr, t, grad_scale)
                    });
            } else {
                x.par_chunks(cols)
                    .zip(dx.par_chunks_mut(cols))
                    .zip(labels.par_iter())
                    .zip(loss.par_iter_mut())
                    .zip(correct.par_iter_mut())
                    .with_min_len(min_rows(cols))
                    .for_each(|((((xr, dr), &t), l), c)| {
                        (*l, *c) = xent_row(xr, dr, t, grad_scale)
                    });
            }
        })?;
        match a.out.totals {
            Some(t) => add_totals(op, ctx, [row_loss, row_correct], t),
            None => Ok(()),
        }
    }

    fn mse(&self, a: Mse<'_>) -> Result<()> {
        let (ctx, op) = (self.context, Mse::OP);
        let n = a.check(ctx)?;
        let (dpred, row_loss) = (a.out.grad, a.out.row_loss);
        let MatShape { rows, cols } = a.shape;
        if rows == 0 {
            return Ok(());
        }
        if cols == 0 {
            return Err(crate::Error::shape(op, "zero columns"));
        }
        let inv = 1.0 / cols as f32;
        let g = 2.0 * a.grad_scale * inv;
        lock(
            op,
            ctx,
            [a.pred, a.target],
            [dpred, row_loss],
            |[p, t], [dp, loss]| {
                if n < PAR_MIN {
                    p.chunks(cols)
                        .zip(t.chunks(cols))
                        .zip(dp.chunks_mut(cols))
                        .zip(loss.iter_mut())
                        .for_each(|(((pr, tr), dr), l)| *l = mse_row(pr, tr, dr, g, inv));
                } else {
                    p.par_chunks(cols)
                        .zip(t.par_chunks(cols))
                        .zip(dp.par_chunks_mut(cols))
                        .zip(loss.par_iter_mut())
                        .with_min_len(min_rows(cols))
                        .for_each(|(((pr, tr), dr), l)| *l = mse_row(pr, tr, dr, g, inv));
                }
            },
        )?;
        match a.out.totals {
            Some(t) => add_totals(op, ctx, [row_loss], t),
            None => Ok(()),
        }
    }
}
