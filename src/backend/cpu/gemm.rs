//! GEMM through the `gemm` crate (packed, SIMD microkernels; transposes are expressed as strides),
//! with an optional epilogue that runs on each block of C right after that block's product, on
//! the same thread, while it is still in cache.
//!
//! Threading by size. Large products use the crate's own Rayon threading (it shares packed panels
//! between threads). Mid-sized ones (an RNN step, 64 x 256 x 256) lose most of their time there:
//! the crate packs op(B) on one thread before it splits, and the calling thread sleeps while
//! workers run. They are instead cut into blocks of columns (a few per thread, taken dynamically)
//! or rows (one per thread), each an independent single-threaded product (a column block packs
//! only its own panel), with the calling thread taking blocks too. Small products stay on the
//! calling thread.

use std::marker::PhantomData;
use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};

use rayon::prelude::*;

use super::access::lock;
use crate::buffer::View;
use crate::error::Result;
use crate::ops::{Gemm, check};

/// Multiply-adds from which the crate's own threading takes over.
const CRATE_PAR_MACS: usize = 1 << 24;
/// Multiply-adds below which a product runs on the calling thread alone.
const SPLIT_MIN_MACS: usize = 1 << 21;
/// Fewest columns of C one block takes: the crate's widest f32 microkernel covers 64 of them
/// (C is row-major, so the crate works on the transposed problem, where they are its rows).
const MIN_BLOCK_COLS: usize = 64;
/// Column blocks per thread at most (more balance late wake-ups, fewer cost less per call).
const BLOCKS_PER_THREAD: usize = 2;
/// Fewest rows of C one block takes when the split is by rows.
const MIN_BLOCK_ROWS: usize = 16;

/// `epi(row, first_col, segment)`: finishes a row segment of C once its product is done.
pub(super) type Epilogue<'a> = dyn Fn(usize, usize, &mut [f32]) + Sync + 'a;

pub(super) fn gemm(ctx: u64, g: Gemm, a: View<'_>, b: View<'_>, c: View<'_>) -> Result<()> {
    check::gemm(&g, &a, &b, &c)?;
    lock("gemm", ctx, [a, b], [c], |[a, b], [c]| {
        run(&g, a, b, c, None)
    })
}

/// `C = alpha op(A) op(B) + beta C`, then `epi(row, first_col, segment)` (when given) over
/// every row segment of C, each right after the product of its block. `a`, `b`, `c` must have
/// the lengths `check::gemm` demands (every caller checks them first).
pub(super) fn run(g: &Gemm, a: &[f32], b: &[f32], c: &mut [f32], epi: Option<&Epilogue<'_>>) {
    let (m, n, k) = (g.m, g.n, g.k);
    if m == 0 || n == 0 {
        return;
    }
    assert!(
        a.len() == m * k && b.len() == k * n && c.len() == m * n,
        "gemm: operand lengths do not match {m}x{n}x{k}"
    );
    if k == 0 || g.alpha == 0.0 {
        // No product to add: C = beta * C, and beta = 0 must not propagate NaN from C.
        if g.beta == 0.0 {
            c.fill(0.0);
        } else {
            c.iter_mut().for_each(|v| *v *= g.beta);
        }
        if let Some(epi) = epi {
            c.chunks_mut(n).enumerate().for_each(|(i, r)| epi(i, 0, r));
        }
        return;
    }
    let macs = m.saturating_mul(n).saturating_mul(k);
    let threads = rayon::current_num_threads();
    if macs >= CRATE_PAR_MACS {
        let dst = Dst::new(c, n);
        let whole = || product(g, a, b, &dst, 0..m, 0..n, gemm::Parallelism::Rayon(threads));
        if rayon::current_thread_index().is_some() {
            whole();
        } else {
            // The crate forks once per packed panel and depth block (dozens of times for a long
            // k); run from a pool thread, each fork is a cheap in-pool join instead of a
            // hand-off that puts the calling thread to sleep and wakes it again.
            rayon::scope(|_| whole());
        }
        if let Some(epi) = epi {
            c.par_chunks_mut(n)
                .enumerate()
                .with_min_len((super::par::PAR_MIN / n).max(1))
                .for_each(|(i, r)| epi(i, 0, r));
        }
        return;
    }
    // Column blocks share nothing (each packs only its own panel of op(B)), so there are a few
    // per thread, taken dynamically: a worker that wakes late leaves its share to the others.
    // Row blocks would each pack all of op(B), so there is one per thread.
    let col_blocks = (n / MIN_BLOCK_COLS).min(BLOCKS_PER_THREAD * threads);
    let row_blocks = (m / MIN_BLOCK_ROWS).min(threads);
    let by_cols = col_blocks >= row_blocks.min(threads);
    let parts = if macs < SPLIT_MIN_MACS || threads == 1 {
        1
    } else if by_cols {
        col_blocks.max(1)
    } else {
        row_blocks.max(1)
    };
    let dst = Dst::new(c, n);
    let block = |p: usize| {
        let (rows, cols) = if by_cols {
            (0..m, share(n, parts, p))
        } else {
            (share(m, parts, p), 0..n)
        };
        product(
            g,
            a,
            b,
            &dst,
            rows.clone(),
            cols.clone(),
            gemm::Parallelism::None,
        );
        if let Some(epi) = epi {
            for i in rows {
                dst.row(i, cols.clone(), |seg| epi(i, cols.start, seg));
            }
        }
    };
    if parts == 1 {
        block(0);
        return;
    }
    let next = AtomicUsize::new(0);
    let take = || {
        loop {
            let p = next.fetch_add(1, Ordering::Relaxed);
            if p >= parts {
                break;
            }
            block(p);
        }
    };
    // The calling thread takes blocks too instead of sleeping while the pool works.
    rayon::in_place_scope(|s| {
        for _ in 1..threads.min(parts) {
            let take = &take;
            s.spawn(move |_| take());
        }
        take();
    });
}

/// Part `p` of `parts` nearly equal consecutive parts of `0..len`.
fn share(len: usize, parts: usize, p: usize) -> Range<usize> {
    (len * p / parts)..(len * (p + 1) / parts)
}

/// C (row-major, `n` columns), shared by the tasks that each write their own disjoint block.
struct Dst<'a> {
    ptr: *mut f32,
    len: usize,
    n: usize,
    _c: PhantomData<&'a mut [f32]>,
}

// SAFETY: a `Dst` is built from an exclusive borrow of C (held for its lifetime), and the tasks
// that share it write only the disjoint row/column blocks `run` hands them.
unsafe impl Send for Dst<'_> {}
// SAFETY: as above; `&Dst` gives access only through `product` and `row`, whose callers pass
// disjoint blocks.
unsafe impl Sync for Dst<'_> {}

impl<'a> Dst<'a> {
    fn new(c: &'a mut [f32], n: usize) -> Self {
        Dst {
            ptr: c.as_mut_ptr(),
            len: c.len(),
            n,
            _c: PhantomData,
        }
    }

    /// `f` over row `i`, columns `cols`. The calling task owns this segment: no other task
    /// touches it while `f` runs.
    fn row(&self, i: usize, cols: Range<usize>, f: impl FnOnce(&mut [f32])) {
        let start = i * self.n + cols.start;
        assert!(cols.end <= self.n && start + cols.len() <= self.len);
        // SAFETY: the range lies inside C (asserted above) and belongs to the calling task's
        // block, which no other task reads or writes; the slice lives only for `f`.
        let seg = unsafe { std::slice::from_raw_parts_mut(self.ptr.add(start), cols.len()) };
        f(seg)
    }
}

/// `C[rows, cols] = alpha op(A)[rows, :] op(B)[:, cols] + beta C[rows, cols]`.
fn product(
    g: &Gemm,
    a: &[f32],
    b: &[f32],
    c: &Dst<'_>,
    rows: Range<usize>,
    cols: Range<usize>,
    parallelism: gemm::Parallelism,
) {
    let (m, n, k) = (g.m, g.n, g.k);
    assert!(rows.end <= m && cols.end <= n && c.n == n && c.len == m * n);
    assert!(a.len() == m * k && b.len() == k * n);
    if rows.is_empty() || cols.is_empty() {
        return;
    }
    // Row-major strides (row stride, column stride) of op(A) (m x k) and op(B) (k x n).
    let (a_rs, a_cs) = if g.trans_a { (1, m) } else { (k, 1) };
    let (b_rs, b_cs) = if g.trans_b { (1, k) } else { (n, 1) };
    // SAFETY: the lengths asserted above make every element the strides address, from the
    // block's first row of op(A), first column of op(B) and corner of C, lie inside its slice.
    // The caller owns C's block [rows, cols] exclusively (`Dst`), and C cannot overlap `a` or
    // `b` (the access layer split it from them after overlap checks), so the writes alias
    // nothing that is read. `read_dst` is false when beta == 0, so C's old contents (possibly
    // NaN) are ignored, as the `Gemm` contract requires. The crate computes
    // dst = alpha_crate * dst + beta_crate * lhs * rhs, hence the swapped scalars.
    unsafe {
        gemm::gemm(
            rows.len(),
            cols.len(),
            k,
            c.ptr.add(rows.start * n + cols.start),
            1,
            n as isize,
            g.beta != 0.0,
            a.as_ptr().add(rows.start * a_rs),
            a_cs as isize,
            a_rs as isize,
            b.as_ptr().add(cols.start * b_cs),
            b_cs as isize,
            b_rs as isize,
            g.beta,
            g.alpha,
            false,
            false,
            false,
            parallelism,
        );
    }
}
