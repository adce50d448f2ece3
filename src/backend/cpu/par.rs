//! When to go parallel. Rayon costs a few microseconds per split, so work below roughly 32K
//! elements runs on the calling thread; larger work is cut into chunks that amortise it.

use std::sync::atomic::{AtomicUsize, Ordering};

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

/// Runs `f(p)` for every part `p` in `0..parts` on up to `threads` threads, the calling thread
/// among them (rather than sleeping while the pool works); each thread takes the next part
/// still untaken, so a worker that wakes late leaves its share to the others.
pub(super) fn spread(parts: usize, threads: usize, f: impl Fn(usize) + Sync) {
    let next = AtomicUsize::new(0);
    let take = || {
        loop {
            let p = next.fetch_add(1, Ordering::Relaxed);
            if p >= parts {
                break;
            }
            f(p);
        }
    };
    if threads <= 1 || parts <= 1 {
        return take();
    }
    rayon::in_place_scope(|s| {
        for _ in 1..threads.min(parts) {
            let take = &take;
            s.spawn(move |_| take());
        }
        take();
    });
}

/// Rows per parallel task for row-wise work over rows of `cols` elements.
pub(super) fn min_rows(cols: usize) -> usize {
    (PAR_MIN / cols.max(1)).max(1)
}

/// Whether row-wise work may spread over the pool or must stay on the calling thread (a caller
/// that has already shared its work out over the pool, so that a split would only queue behind
/// the other threads' work).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Split {
    Pool,
    Caller,
}

impl Split {
    /// Rows per task over rows of `cols` elements: [`min_rows`], or all of them (a parallel
    /// iterator that never splits runs on the calling thread without touching the pool).
    pub(super) fn min_rows(self, cols: usize) -> usize {
        match self {
            Split::Pool => min_rows(cols),
            Split::Caller => usize::MAX,
        }
    }
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
