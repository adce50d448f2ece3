//! Reductions: column sums (bias gradients), row sums, the total sum, and gradient-norm clipping.

use super::CpuOps;
use crate::ops::prelude::*;
use rayon::prelude::*;

use super::access::lock;
use super::par::{PAR_MIN, chunks, min_rows, sum_map};
use crate::buffer::View;
use crate::error::Result;
use crate::ops::{MatShape, SumAxis, check};

/// `out = beta * out`, where beta = 0 overwrites (so NaN in `out` does not survive).
fn prescale(out: &mut [f32], beta: f32) {
    if beta == 0.0 {
        out.fill(0.0);
    } else if beta != 1.0 {
        out.iter_mut().for_each(|v| *v *= beta);
    }
}

impl ReduceOps for CpuOps {
    fn sum_rows(&self, x: View<'_>, out: View<'_>, shape: MatShape, beta: f32) -> Result<()> {
        let MatShape { rows, cols } = shape;
        let n = SumAxis::Rows.check(&x, &out, shape)?;
        lock("sum_rows", self.context, [x], [out], |[x], [out]| {
            // Each task owns a block of columns and walks every row, adding whole row segments
            // (contiguous, vectorized) into its block of `out`.
            let block = |start: usize, ob: &mut [f32]| {
                prescale(ob, beta);
                for r in 0..rows {
                    let xr = &x[r * cols + start..r * cols + start + ob.len()];
                    for (o, &v) in ob.iter_mut().zip(xr) {
                        *o += v;
                    }
                }
            };
            if n < PAR_MIN || cols < 128 {
                block(0, out);
            } else {
                let threads = rayon::current_num_threads().max(1);
                let width = cols.div_ceil(threads * 2).next_multiple_of(16).max(64);
                out.par_chunks_mut(width)
                    .enumerate()
                    .for_each(|(i, ob)| block(i * width, ob));
            }
        })
    }

    fn sum_cols(&self, x: View<'_>, out: View<'_>, shape: MatShape, beta: f32) -> Result<()> {
        let cols = shape.cols;
        let n = SumAxis::Cols.check(&x, &out, shape)?;
        lock("sum_cols", self.context, [x], [out], |[x], [out]| {
            if cols == 0 {
                prescale(out, beta);
                return;
            }
            let body = |(o, xr): (&mut f32, &[f32])| {
                let s = sum_map(xr, |v| v as f64) as f32;
                *o = if beta == 0.0 { s } else { beta * *o + s };
            };
            if n < PAR_MIN {
                out.iter_mut().zip(x.chunks(cols)).for_each(body);
            } else {
                out.par_iter_mut()
                    .zip(x.par_chunks(cols))
                    .with_min_len(min_rows(cols))
                    .for_each(body);
            }
        })
    }

    fn sum_all(&self, x: View<'_>, out: View<'_>, beta: f32) -> Result<()> {
        let ctx = self.context;
        check::len("sum_all", "out", &out, 1)?;
        lock("sum_all", ctx, [x], [out], |[x], [out]| {
            let s = sum_map(x, |v| v as f64) as f32;
            out[0] = if beta == 0.0 { s } else { beta * out[0] + s };
        })
    }

    fn clip_grad_norm(&self, grads: View<'_>, max_norm: f32, norm_out: View<'_>) -> Result<()> {
        let ctx = self.context;
        let op = "clip_grad_norm";
        check::len(op, "norm_out", &norm_out, 1)?;
        lock(op, ctx, [], [grads, norm_out], |[], [g, norm_out]| {
            let norm = sum_map(g, |v| (v as f64) * (v as f64)).sqrt() as f32;
            norm_out[0] = norm;
            let coef = max_norm / (norm + 1e-6);
            if coef < 1.0 {
                chunks(g, |_, g| g.iter_mut().for_each(|v| *v *= coef));
            }
        })
    }
}
