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
//! calling thread, and so does every product of a caller that has shared its work out over the
//! pool already (`run_split` with `Split::Caller`).

use super::CpuOps;
use crate::ops::prelude::*;
use std::marker::PhantomData;
use std::ops::Range;

use rayon::prelude::*;

use super::access::lock;
use super::par::{Split, spread};
use crate::buffer::View;
use crate::dtype::DType;
use crate::error::Result;
use crate::ops::{DenseForward, DenseParamGrads, Gemm, check, dense, linalg};

/// Multiply-adds from which the crate's own threading takes over.
const CRATE_PAR_MACS: usize = 1 << 24;
/// Multiply-adds below which a product runs on the calling thread alone.
pub(super) const SPLIT_MIN_MACS: usize = 1 << 21;
/// Fewest columns of C one block takes: the crate's widest f32 microkernel covers 64 of them
/// (C is row-major, so the crate works on the transposed problem, where they are its rows).
const MIN_BLOCK_COLS: usize = 64;
/// Column blocks per thread at most (more balance late wake-ups, fewer cost less per call).
const BLOCKS_PER_THREAD: usize = 2;
/// Fewest rows of C one block takes when the split is by rows.
const MIN_BLOCK_ROWS: usize = 16;
/// Columns of C up to which `C = A^T B` is formed transposed ([`thin`]). The crate computes
/// the transposed problem of a row-major C, C's columns being its rows; with at most two of its
/// widest microkernel heights of them (2 x 48 under AVX-512) it leaves op(A) unpacked and walks
/// the rows of A, a page apart for a 1024-wide A, in every block. An LSTM's `dW_ih` (1024 x 96,
/// k = 4096) runs about half as fast so as `C^T = B^T A` in column blocks.
const THIN_COLS: usize = 96;

/// `epi(row, first_col, segment)`: finishes a row segment of C once its product is done.
pub(super) type Epilogue<'a> = dyn Fn(usize, usize, &mut [f32]) + Sync + 'a;

/// `C = alpha op(A) op(B) + beta C`, then `epi(row, first_col, segment)` (when given) over
/// every row segment of C, each right after the product of its block. `a`, `b`, `c` must have
/// the lengths `check::gemm` demands (every caller checks them first).
pub(super) fn run(g: &Gemm, a: &[f32], b: &[f32], c: &mut [f32], epi: Option<&Epilogue<'_>>) {
    run_split(g, a, b, c, epi, Split::Pool)
}

/// [`run`], or with [`Split::Caller`] all of it on the calling thread (for callers that have
/// already shared their work out over the pool: the row groups of a sequence, `row_groups`).
pub(super) fn run_split(
    g: &Gemm,
    a: &[f32],
    b: &[f32],
    c: &mut [f32],
    epi: Option<&Epilogue<'_>>,
    split: Split,
) {
    let threads = match split {
        Split::Pool => rayon::current_num_threads(),
        Split::Caller => 1,
    };
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
    let plain = g.beta == 0.0 && epi.is_none();
    if g.trans_a && !g.trans_b && plain && n <= THIN_COLS && macs >= SPLIT_MIN_MACS {
        return thin(g, a, b, c, threads);
    }
    if macs >= CRATE_PAR_MACS && threads > 1 {
        let dst = Dst::new(c, n);
        let b = OpB::whole(g, b);
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
    blocks(g, a, b, c, epi, threads);
}

/// `C = A^T B` (`beta == 0`) formed as `C^T = B^T A` in column blocks, then transposed.
fn thin(g: &Gemm, a: &[f32], b: &[f32], c: &mut [f32], threads: usize) {
    let (m, n) = (g.m, g.n);
    let swapped = Gemm::new(n, m, g.k).ta().scaled(g.alpha, 0.0);
    let mut ct = vec![0.0f32; n * m];
    blocks(&swapped, b, a, &mut ct, None, threads);
    c.copy_from_slice(&transpose(&ct, n, m));
}

/// [`run_split`] below the crate's own threading: the product in blocks of C, one task each.
fn blocks(
    g: &Gemm,
    a: &[f32],
    b: &[f32],
    c: &mut [f32],
    epi: Option<&Epilogue<'_>>,
    threads: usize,
) {
    let (m, n, k) = (g.m, g.n, g.k);
    let macs = m.saturating_mul(n).saturating_mul(k);
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
        let b = OpB::whole(g, b);
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
    spread(parts, threads, block);
}

/// `w` (`rows x cols`, row-major) transposed.
pub(super) fn transpose(w: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    // A band of TILE columns at a time: each row of `w` is read contiguously, and the TILE output
    // rows it scatters into stay in cache across the rows of the band.
    const TILE: usize = 32;
    let mut t = vec![0.0f32; rows * cols];
    for (c0, band) in (0..cols).step_by(TILE).zip(t.chunks_mut(rows * TILE)) {
        let width = band.len() / rows;
        for (r, row) in w.chunks_exact(cols).enumerate() {
            for (j, &v) in row[c0..c0 + width].iter().enumerate() {
                band[j * rows + r] = v;
            }
        }
    }
    t
}

/// Part `p` of `parts` nearly equal consecutive parts of `0..len`.
pub(super) fn share(len: usize, parts: usize, p: usize) -> Range<usize> {
    (len * p / parts)..(len * (p + 1) / parts)
}

/// C (row-major, `n` columns), shared by the tasks that each write their own disjoint block.
pub(super) struct Dst<'a> {
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
    pub(super) fn new(c: &'a mut [f32], n: usize) -> Self {
        Dst {
            ptr: c.as_mut_ptr(),
            len: c.len(),
            n,
            _c: PhantomData,
        }
    }

    /// `f` over row `i`, columns `cols`. The calling task owns this segment: no other task
    /// touches it while `f` runs.
    pub(super) fn row(&self, i: usize, cols: Range<usize>, f: impl FnOnce(&mut [f32])) {
        let start = i * self.n + cols.start;
        assert!(cols.end <= self.n && start + cols.len() <= self.len);
        // SAFETY: the range lies inside C (asserted above) and belongs to the calling task's
        // block, which no other task reads or writes; the slice lives only for `f`.
        let seg = unsafe { std::slice::from_raw_parts_mut(self.ptr.add(start), cols.len()) };
        f(seg)
    }
}

/// op(B) as the GEMM reads it: row-major strides over `b`, whose element 0 is op(B)'s element
/// `(0, first)`; it holds the columns of op(B) from `first` on (all of them, or one panel).
#[derive(Clone, Copy)]
pub(super) struct OpB<'a> {
    pub b: &'a [f32],
    pub rs: usize,
    pub cs: usize,
    pub first: usize,
}

impl<'a> OpB<'a> {
    /// All of op(B) for `g`, from B as stored.
    fn whole(g: &Gemm, b: &'a [f32]) -> Self {
        let (rs, cs) = if g.trans_b { (1, g.k) } else { (g.n, 1) };
        OpB {
            b,
            rs,
            cs,
            first: 0,
        }
    }
}

/// `C[rows, cols] = alpha op(A)[rows, :] op(B)[:, cols] + beta C[rows, cols]`.
pub(super) fn product(
    g: &Gemm,
    a: &[f32],
    b: OpB<'_>,
    c: &Dst<'_>,
    rows: Range<usize>,
    cols: Range<usize>,
    parallelism: gemm::Parallelism,
) {
    let (m, n, k) = (g.m, g.n, g.k);
    assert!(rows.end <= m && cols.end <= n && c.n == n && c.len == m * n);
    if rows.is_empty() || cols.is_empty() || k == 0 {
        return;
    }
    assert!(a.len() == m * k && cols.start >= b.first);
    assert!((k - 1) * b.rs + (cols.end - 1 - b.first) * b.cs < b.b.len());
    // Row-major strides (row stride, column stride) of op(A) (m x k).
    let (a_rs, a_cs) = if g.trans_a { (1, m) } else { (k, 1) };
    // SAFETY: the lengths asserted above make every element the strides address, from the
    // block's first row of op(A), first column of op(B) and corner of C, lie inside its slice.
    // The caller owns C's block [rows, cols] exclusively (`Dst`), and C cannot overlap `a` or
    // `b` (the access layer split it from them after overlap checks, or `b` is a packed copy),
    // so the writes alias nothing that is read. `read_dst` is false when beta == 0, so C's old
    // contents (possibly NaN) are ignored, as the `Gemm` contract requires. The crate computes
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
            b.b.as_ptr().add((cols.start - b.first) * b.cs),
            b.cs as isize,
            b.rs as isize,
            g.beta,
            g.alpha,
            false,
            false,
            false,
            parallelism,
        );
    }
}

/// The dense layer ops of f32 views as their default compositions: GEMM, then the bias and
/// activation (or the column sums), each already one parallel pass on the CPU; of bf16/f16
/// views one staged pass each (`half_dense.rs`).
impl DenseOps for CpuOps {
    fn dense_forward(&self, a: DenseForward<'_>) -> Result<()> {
        match a.float_type(self.context)? {
            DType::F32 => dense::composed_forward(self, a),
            t => self.half_dense_forward(a, t),
        }
    }

    fn dense_param_grads(&self, a: DenseParamGrads<'_>) -> Result<()> {
        match a.float_type(self.context)? {
            DType::F32 => dense::composed_param_grads(self, a),
            _ => self.half_param_grads(a),
        }
    }
}

impl LinalgOps for CpuOps {
    fn gemm(&self, g: Gemm, a: View<'_>, b: View<'_>, c: View<'_>) -> Result<()> {
        let ctx = self.context;
        let (t, _) = linalg::gemm_types(ctx, &a, &b, &c)?;
        if t != DType::F32 {
            return self.half_gemm(g, [a, b, c]);
        }
        check::gemm(&g, &a, &b, &c)?;
        lock("gemm", ctx, [a, b], [c], |[a, b], [c]| {
            run(&g, a, b, c, None)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transposes() {
        let (rows, cols) = (37, 70);
        let w: Vec<f32> = (0..rows * cols).map(|i| i as f32).collect();
        let t = transpose(&w, rows, cols);
        for r in 0..rows {
            for c in 0..cols {
                assert_eq!(t[c * rows + r], w[r * cols + c]);
            }
        }
    }

    #[test]
    fn thin_transposed_products_match_the_sum() {
        // Past SPLIT_MIN_MACS with n <= THIN_COLS: the transposed path, on the pool and not.
        let (m, n, k) = (301, 33, 257);
        let val = |i: usize| ((i * 7919 % 1013) as f32 / 1013.0 - 0.5) * 2.0;
        let a: Vec<f32> = (0..k * m).map(val).collect();
        let b: Vec<f32> = (0..k * n).map(|i| val(i + 17)).collect();
        let g = Gemm::new(m, n, k).ta().scaled(0.5, 0.0);
        for split in [Split::Pool, Split::Caller] {
            let mut c = vec![f32::NAN; m * n];
            run_split(&g, &a, &b, &mut c, None, split);
            for i in 0..m {
                for j in 0..n {
                    let want: f64 = (0..k)
                        .map(|p| f64::from(a[p * m + i]) * f64::from(b[p * n + j]))
                        .sum::<f64>()
                        * 0.5;
                    let got = f64::from(c[i * n + j]);
                    assert!(
                        (got - want).abs() < 1e-4 * (1.0 + want.abs()),
                        "{got} vs {want}"
                    );
                }
            }
        }
    }
}
