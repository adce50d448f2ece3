//! When to go parallel. Rayon costs a few microseconds per split, so work below roughly 32K
//! elements runs on the calling thread; larger work is cut into chunks that amortise it.

use rayon::prelude::*;

/// Elements below which an op stays on the calling thread.
pub(super) const PAR_MIN: usize = 32 * 1024;
/// Elements per parallel task of an elementwise op.
const CHUNK: usize = 16 * 1024;

/// Calls `f(start, chunk)` over consecutive chunks of `out`, where `start` is the chunk's first
/// index (so inputs are cut with the same range), in parallel when `out` is large.
pub(super) fn chunks(out: &mut [f32], f: impl Fn(usize, &mut [f32]) + Sync + Send) {
    if out.len() < PAR_MIN {
        f(0, out);
    } else {
        out.par_chunks_mut(CHUNK)
            .enumerate()
            .for_each(|(i, c)| f(i * CHUNK, c));
    }
}

/// Rows per parallel task for row-wise work over rows of `cols` elements.
pub(super) fn min_rows(cols: usize) -> usize {
    (PAR_MIN / cols.max(1)).max(1)
}

/// `sum_i f(x[i])` in f64, chunked and parallel when large.
pub(super) fn sum_map(x: &[f32], f: impl Fn(f32) -> f64 + Sync + Send) -> f64 {
    // Eight independent accumulators let the adds pipeline (and vectorize).
    let seq = |c: &[f32]| {
        let mut acc = [0.0f64; 8];
        let mut it = c.chunks_exact(8);
        for c8 in &mut it {
            for (a, &v) in acc.iter_mut().zip(c8) {
                *a += f(v);
            }
        }
        let tail: f64 = it.remainder().iter().map(|&v| f(v)).sum();
        acc.iter().sum::<f64>() + tail
    };
    if x.len() < PAR_MIN {
        seq(x)
    } else {
        x.par_chunks(CHUNK).map(seq).sum()
    }
}
