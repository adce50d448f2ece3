//! GEMM through the `gemm` crate (packed, SIMD microkernels; transposes are expressed as strides).

use super::access::lock;
use crate::buffer::View;
use crate::error::Result;
use crate::ops::{Gemm, check};

/// Products with fewer multiply-adds than this run on one thread: splitting them costs more
/// than it saves.
const PAR_FLOPS: usize = 1 << 22;

pub(super) fn gemm(ctx: u64, g: Gemm, a: View<'_>, b: View<'_>, c: View<'_>) -> Result<()> {
    check::gemm(&g, &a, &b, &c)?;
    lock("gemm", ctx, [a, b], [c], |[a, b], [c]| run(&g, a, b, c))
}

pub(super) fn run(g: &Gemm, a: &[f32], b: &[f32], c: &mut [f32]) {
    let (m, n, k) = (g.m, g.n, g.k);
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 || g.alpha == 0.0 {
        // No product to add: C = beta * C, and beta = 0 must not propagate NaN from C.
        if g.beta == 0.0 {
            c.fill(0.0);
        } else {
            c.iter_mut().for_each(|v| *v *= g.beta);
        }
        return;
    }
    // Row-major strides (row stride, column stride) of op(A) (m x k) and op(B) (k x n).
    let (a_rs, a_cs) = if g.trans_a { (1, m) } else { (k, 1) };
    let (b_rs, b_cs) = if g.trans_b { (1, k) } else { (n, 1) };
    let parallelism = if m.saturating_mul(n).saturating_mul(k) >= PAR_FLOPS {
        gemm::Parallelism::Rayon(rayon::current_num_threads())
    } else {
        gemm::Parallelism::None
    };
    // SAFETY: `check::gemm` verified a.len() == m*k, b.len() == k*n and c.len() == m*n, so
    // every element the strides above address lies inside its slice; `c` is a unique `&mut`
    // (the access layer split it from the inputs, which overlap-checks rejected), so the writes
    // alias nothing that is read. `read_dst` is false when beta == 0, so C's old contents
    // (possibly NaN) are ignored, as the `Gemm` contract requires. The crate computes
    // dst = alpha_crate * dst + beta_crate * lhs * rhs, hence the swapped scalars.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            c.as_mut_ptr(),
            1,
            n as isize,
            g.beta != 0.0,
            a.as_ptr(),
            a_cs as isize,
            a_rs as isize,
            b.as_ptr(),
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
