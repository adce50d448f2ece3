//! Layer normalization, forward and backward, row-parallel; the column sums of the weight and
//! bias gradients run over the rows in order (deterministic).

use super::CpuOps;
use crate::ops::prelude::*;
use crate::ops::{LayerNormBackward, LayerNormForward, MatShape};
use rayon::prelude::*;

use super::access::lock;
use super::par::{PAR_MIN, min_rows};
use crate::error::Result;

/// Mean and `1 / sqrt(biased variance + eps)` of one row (two passes, in f64).
fn row_stats(x: &[f32], eps: f32) -> (f32, f32) {
    let n = x.len() as f64;
    let mean = x.iter().map(|&v| v as f64).sum::<f64>() / n;
    let var = x.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / n;
    (mean as f32, (1.0 / (var + eps as f64).sqrt()) as f32)
}

impl NormOps for CpuOps {
    fn layer_norm_forward(&self, a: LayerNormForward<'_>) -> Result<()> {
        let n = a.check(self.context)? as usize;
        let [x, weight, bias, y, stats] = a.views();
        let (cols, eps) = (a.shape.cols, a.eps);
        let (op, ctx) = (LayerNormForward::OP, self.context);
        if n == 0 {
            return lock(op, ctx, [x, weight, bias], [y, stats], |_, _| ());
        }
        lock(
            op,
            ctx,
            [x, weight, bias],
            [y, stats],
            |[x, w, b], [y, stats]| {
                let body = |((yr, st), xr): ((&mut [f32], &mut [f32]), &[f32])| {
                    let (mean, rstd) = row_stats(xr, eps);
                    st[0] = mean;
                    st[1] = rstd;
                    for c in 0..cols {
                        yr[c] = (xr[c] - mean) * rstd * w[c] + b[c];
                    }
                };
                if n < PAR_MIN {
                    y.chunks_mut(cols)
                        .zip(stats.chunks_mut(2))
                        .zip(x.chunks(cols))
                        .for_each(body);
                } else {
                    y.par_chunks_mut(cols)
                        .zip(stats.par_chunks_mut(2))
                        .zip(x.par_chunks(cols))
                        .with_min_len(min_rows(cols))
                        .for_each(body);
                }
            },
        )
    }

    fn layer_norm_backward(&self, a: LayerNormBackward<'_>) -> Result<()> {
        let n = a.check(self.context)? as usize;
        let [dy, x, weight, stats, dx, dweight, dbias] = a.views();
        let MatShape { rows, cols } = a.shape;
        lock(
            LayerNormBackward::OP,
            self.context,
            [dy, x, weight, stats],
            [dx, dweight, dbias],
            |[dy, x, w, stats], [dx, dw, db]| {
                if cols == 0 {
                    return;
                }
                let inv_n = 1.0 / cols as f32;
                let body = |(r, dxr): (usize, &mut [f32])| {
                    let (mean, rstd) = (stats[2 * r], stats[2 * r + 1]);
                    let (xr, dyr) = (&x[r * cols..(r + 1) * cols], &dy[r * cols..(r + 1) * cols]);
                    let (mut s1, mut s2) = (0.0f32, 0.0f32);
                    for c in 0..cols {
                        let g = dyr[c] * w[c];
                        s1 += g;
                        s2 += g * ((xr[c] - mean) * rstd);
                    }
                    let (m1, m2) = (s1 * inv_n, s2 * inv_n);
                    for c in 0..cols {
                        let xhat = (xr[c] - mean) * rstd;
                        dxr[c] = rstd * (dyr[c] * w[c] - m1 - xhat * m2);
                    }
                };
                if n < PAR_MIN {
                    dx.chunks_mut(cols).enumerate().for_each(body);
                } else {
                    dx.par_chunks_mut(cols)
                        .enumerate()
                        .with_min_len(min_rows(cols))
                        .for_each(body);
                }
                let (mut aw, mut ab) = (vec![0.0f64; cols], vec![0.0f64; cols]);
                for r in 0..rows {
                    let (mean, rstd) = (stats[2 * r], stats[2 * r + 1]);
                    for c in 0..cols {
                        let g = dy[r * cols + c];
                        aw[c] += (g * ((x[r * cols + c] - mean) * rstd)) as f64;
                        ab[c] += g as f64;
                    }
                }
                for c in 0..cols {
                    dw[c] = aw[c] as f32;
                    db[c] = ab[c] as f32;
                }
            },
        )
    }
}
