//! op(B) of a GEMM packed once into panels of columns, for a product repeated with the same B
//! (the recurrent weights of a sequence, once per time step and row group). Each panel is
//! `k x width`, row-major and contiguous, which the GEMM crate reads in place a panel row at a
//! time. Read in place from the whole matrix instead, op(B)'s rows lie a full row apart (4 KB
//! for a 1024-wide op(B)), and the crate walks them so, unpacked, whenever C has few rows (a
//! row group), markedly slower than reading packed panels; and where it does pack, it packs again on every call (a transposed op(B) on every step).

use super::gemm::{Dst, Epilogue, OpB, SPLIT_MIN_MACS, product};
use super::par::{Split, spread};
use crate::ops::Gemm;

/// Columns per panel: a whole number of the crate's f32 microkernel heights under AVX2 (16),
/// and few panels per product (each is a crate call); the width within 96-192 does not matter.
const PANEL: usize = 128;

/// op(B), `k x n`, in panels of [`PANEL`] columns (the last one narrower).
pub(super) struct Packed {
    data: Vec<f32>,
    k: usize,
    n: usize,
}

impl Packed {
    /// op(B) from B stored `k x n`, or `n x k` when `trans`.
    pub(super) fn new(b: &[f32], k: usize, n: usize, trans: bool) -> Self {
        assert_eq!(b.len(), k * n, "packed operand length");
        let mut data = vec![0.0f32; k * n];
        if k > 0 {
            for (q, dst) in data.chunks_mut(k * PANEL).enumerate() {
                let (c0, width) = (q * PANEL, dst.len() / k);
                if trans {
                    // Column j of the panel is row c0 + j of B.
                    for (j, row) in b[c0 * k..(c0 + width) * k].chunks_exact(k).enumerate() {
                        for (p, &v) in row.iter().enumerate() {
                            dst[p * width + j] = v;
                        }
                    }
                } else {
                    for (p, row) in dst.chunks_exact_mut(width).enumerate() {
                        row.copy_from_slice(&b[p * n + c0..p * n + c0 + width]);
                    }
                }
            }
        }
        Packed { data, k, n }
    }

    /// Panel `q` as the GEMM reads it.
    fn panel(&self, q: usize) -> OpB<'_> {
        let c0 = q * PANEL;
        let width = PANEL.min(self.n - c0);
        OpB {
            b: &self.data[c0 * self.k..(c0 + width) * self.k],
            rs: width,
            cs: 1,
            first: c0,
        }
    }

    /// `C = alpha A op(B) + beta C` (`g` not transposed, with this op(B)'s `k` and `n`), then
    /// `epi(row, first_col, segment)` over each row segment of a panel's columns right after
    /// that panel's product, on the same thread. With [`Split::Pool`] a large product spreads
    /// its panels over the pool.
    pub(super) fn run(
        &self,
        g: &Gemm,
        a: &[f32],
        c: &mut [f32],
        epi: Option<&Epilogue<'_>>,
        split: Split,
    ) {
        assert!(g.k == self.k && g.n == self.n && !g.trans_a && !g.trans_b);
        assert!(a.len() == g.m * g.k && c.len() == g.m * g.n);
        let dst = Dst::new(c, g.n);
        let one = |q: usize| {
            let b = self.panel(q);
            let cols = b.first..b.first + b.rs;
            product(g, a, b, &dst, 0..g.m, cols.clone(), gemm::Parallelism::None);
            if let Some(epi) = epi {
                for i in 0..g.m {
                    dst.row(i, cols.clone(), |seg| epi(i, cols.start, seg));
                }
            }
        };
        let macs = g.m.saturating_mul(g.n).saturating_mul(g.k);
        let threads = match split {
            Split::Pool if macs >= SPLIT_MIN_MACS => rayon::current_num_threads(),
            _ => 1,
        };
        spread(self.n.div_ceil(PANEL), threads, one);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panels_give_the_plain_product() {
        let (m, n, k) = (5, 300, 7);
        let val = |i: usize| ((i * 7919 % 1013) as f32 / 1013.0 - 0.5) * 2.0;
        let a: Vec<f32> = (0..m * k).map(val).collect();
        let b: Vec<f32> = (0..k * n).map(|i| val(i + 3)).collect();
        let c0: Vec<f32> = (0..m * n).map(|i| val(i + 11)).collect();
        let g = Gemm::new(m, n, k).scaled(1.0, 1.0);
        let bt = super::super::gemm::transpose(&b, k, n);
        for (packed, split) in [
            (Packed::new(&b, k, n, false), Split::Caller),
            (Packed::new(&bt, k, n, true), Split::Pool),
        ] {
            let mut c = c0.clone();
            let epi = |i: usize, j0: usize, seg: &mut [f32]| {
                seg.iter_mut()
                    .enumerate()
                    .for_each(|(j, v)| *v -= (i * n + j0 + j) as f32);
            };
            packed.run(&g, &a, &mut c, Some(&epi), split);
            for i in 0..m {
                for j in 0..n {
                    let dot: f32 = (0..k).map(|p| a[i * k + p] * b[p * n + j]).sum();
                    let want = c0[i * n + j] + dot - (i * n + j) as f32;
                    let got = c[i * n + j];
                    assert!(
                        (got - want).abs() < 1e-3 * (1.0 + want.abs()),
                        "{got} vs {want}"
                    );
                }
            }
        }
    }
}
