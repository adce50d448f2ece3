//! LSTM and GRU cell steps, one batch row per task unit. The GEMMs around them are ordinary
//! `gemm` calls; these fuse everything elementwise in a step. The row passes are shared with the
//! whole-sequence ops (`gated_seq`), which add the biases and the recurrent product. (The
//! Elman steps, GEMM included, are in `rnn_step`.)
//!
//! Rayon only splits when a task would get at least `min_rows` rows, so small batches run on the
//! calling thread without a separate sequential path; with [`Split::Caller`] (a caller that has
//! shared its work out already) it never splits. Each row's gate math runs through
//! `simd::vectorized`, compiled for the widest vector instructions the CPU has (the crate's
//! baseline is SSE2); without fused multiply-adds, so the results are the same bits either way.

use super::CpuOps;
use crate::ops::GruGateGrads;
use crate::ops::prelude::*;
use rayon::prelude::*;

use super::access::lock;
use super::fastmath::{sigmoid, tanh};
use super::par::Split;
use super::simd::{Lanes, vectorized};
use crate::error::Result;
use crate::ops::{GruCellBackward, GruCellForward, LstmCellBackward, LstmCellForward};

/// A row of one buffer, read-only (a field of the row passes below).
type In<'a> = &'a [f32];
/// A row of one buffer, written.
type Out<'a> = &'a mut [f32];

/// The first `K` `hidden`-wide gate blocks of a row (read-only).
#[inline(always)]
fn gate_slices<const K: usize>(row: &[f32], hidden: usize) -> [&[f32]; K] {
    std::array::from_fn(|k| &row[k * hidden..(k + 1) * hidden])
}

/// Splits a row of `k * hidden` gate values into its `hidden`-wide gate blocks.
#[inline(always)]
fn gate_blocks<const K: usize>(row: &mut [f32], hidden: usize) -> [&mut [f32]; K] {
    let mut rest = row;
    std::array::from_fn(|_| {
        let (head, tail) = std::mem::take(&mut rest).split_at_mut(hidden);
        rest = tail;
        head
    })
}

/// The LSTM forward over `rows x 4*hidden` gates: the pre-activations in `g` (plus
/// `b_ih + b_hh` per gate column, when given) are overwritten with the activated gates;
/// `c = f * c_prev + i * g`, `h = o * tanh(c)`.
pub(super) fn lstm_forward_rows(
    g: &mut [f32],
    bias: Option<(&[f32], &[f32])>,
    cp: &[f32],
    c: &mut [f32],
    h: &mut [f32],
    hidden: usize,
    split: Split,
) {
    g.par_chunks_mut(4 * hidden)
        .zip(cp.par_chunks(hidden))
        .zip(c.par_chunks_mut(hidden))
        .zip(h.par_chunks_mut(hidden))
        .with_min_len(split.min_rows(6 * hidden))
        .for_each(|(((gr, cpr), cr), hr)| vectorized(LstmForwardRow(gr, bias, cpr, cr, hr)));
}

/// One row of [`lstm_forward_rows`].
struct LstmForwardRow<'a>(Out<'a>, Option<(In<'a>, In<'a>)>, In<'a>, Out<'a>, Out<'a>);

impl Lanes for LstmForwardRow<'_> {
    #[inline(always)]
    fn run(self) {
        let LstmForwardRow(gr, bias, cpr, cr, hr) = self;
        let hidden = cr.len();
        if let Some((bi, bh)) = bias {
            for ((v, a), b) in gr.iter_mut().zip(bi).zip(bh) {
                *v += a + b;
            }
        }
        let [gi, gf, gg, go] = gate_blocks::<4>(gr, hidden);
        for j in 0..hidden {
            let i = sigmoid(gi[j]);
            let f = sigmoid(gf[j]);
            let g = tanh(gg[j]);
            let o = sigmoid(go[j]);
            (gi[j], gf[j], gg[j], go[j]) = (i, f, g, o);
            let cv = f * cpr[j] + i * g;
            cr[j] = cv;
            hr[j] = o * tanh(cv);
        }
    }
}

/// The LSTM backward over `rows x 4*hidden` activated gates `g`: from `dh` (reaching `h`) and
/// `dc` (reaching `c` from the next step; overwritten with the gradient for `c_prev`), writes
/// `dg`, the gradient w.r.t. the gate pre-activations.
#[allow(clippy::too_many_arguments)]
pub(super) fn lstm_backward_rows(
    g: &[f32],
    cp: &[f32],
    c: &[f32],
    dh: &[f32],
    dc: &mut [f32],
    dg: &mut [f32],
    hidden: usize,
    split: Split,
) {
    dg.par_chunks_mut(4 * hidden)
        .zip(dc.par_chunks_mut(hidden))
        .zip(g.par_chunks(4 * hidden))
        .zip(cp.par_chunks(hidden))
        .zip(c.par_chunks(hidden))
        .zip(dh.par_chunks(hidden))
        .with_min_len(split.min_rows(10 * hidden))
        .for_each(|(((((dgr, dcr), gr), cpr), cr), dhr)| {
            vectorized(LstmBackwardRow(dgr, dcr, gr, cpr, cr, dhr))
        });
}

/// One row of [`lstm_backward_rows`].
struct LstmBackwardRow<'a>(Out<'a>, Out<'a>, In<'a>, In<'a>, In<'a>, In<'a>);

impl Lanes for LstmBackwardRow<'_> {
    #[inline(always)]
    fn run(self) {
        let LstmBackwardRow(dgr, dcr, gr, cpr, cr, dhr) = self;
        let hidden = cr.len();
        let [di, df, dgg, d_o] = gate_blocks::<4>(dgr, hidden);
        let [gi, gf, gg, go] = gate_slices::<4>(gr, hidden);
        for j in 0..hidden {
            let (i, f, g, o) = (gi[j], gf[j], gg[j], go[j]);
            let tc = tanh(cr[j]);
            let dct = dcr[j] + dhr[j] * o * (1.0 - tc * tc);
            di[j] = dct * g * i * (1.0 - i);
            df[j] = dct * cpr[j] * f * (1.0 - f);
            dgg[j] = dct * i * (1.0 - g * g);
            d_o[j] = dhr[j] * tc * o * (1.0 - o);
            dcr[j] = dct * f;
        }
    }
}

/// The GRU forward over `rows` rows: `gx` (plus `b_ih` when given) and `gh` are
/// `rows x 3*hidden`; writes `h` and `cache = [r, z, n, gh_n]` (`rows x 4*hidden`).
#[allow(clippy::too_many_arguments)]
pub(super) fn gru_forward_rows(
    gx: &[f32],
    b_ih: Option<&[f32]>,
    gh: &[f32],
    hp: &[f32],
    h: &mut [f32],
    cache: &mut [f32],
    hidden: usize,
    split: Split,
) {
    h.par_chunks_mut(hidden)
        .zip(cache.par_chunks_mut(4 * hidden))
        .zip(gx.par_chunks(3 * hidden))
        .zip(gh.par_chunks(3 * hidden))
        .zip(hp.par_chunks(hidden))
        .with_min_len(split.min_rows(12 * hidden))
        .for_each(|((((hr, cr), gxr), ghr), hpr)| {
            vectorized(GruForwardRow(hr, cr, gxr, b_ih, ghr, hpr))
        });
}

/// One row of [`gru_forward_rows`].
struct GruForwardRow<'a>(Out<'a>, Out<'a>, In<'a>, Option<In<'a>>, In<'a>, In<'a>);

impl Lanes for GruForwardRow<'_> {
    #[inline(always)]
    fn run(self) {
        let GruForwardRow(hr, cr, gxr, b_ih, ghr, hpr) = self;
        let hidden = hr.len();
        let [cr_r, cr_z, cr_n, cr_ghn] = gate_blocks::<4>(cr, hidden);
        // Gate blocks as slices of one length, so the loops below index without bounds checks
        // and vectorize (indexing whole rows at `hidden + j`, with the bias test inside the
        // loop, kept them scalar, several times slower).
        let [xr, xz, xn] = gate_slices::<3>(gxr, hidden);
        let [gh_r, gh_z, gh_n] = gate_slices::<3>(ghr, hidden);
        let hpr = &hpr[..hidden];
        // One unit: (r, z, n, gh_n, h) from the input-side sums x_* and the recurrent gh_*.
        #[inline(always)]
        fn unit(x: [f32; 3], gh: [f32; 3], h_prev: f32) -> [f32; 5] {
            let r = sigmoid(x[0] + gh[0]);
            let z = sigmoid(x[1] + gh[1]);
            let nv = tanh(x[2] + r * gh[2]);
            [r, z, nv, gh[2], (1.0 - z) * nv + z * h_prev]
        }
        // The bias test stays outside the loops, which then vectorize.
        match b_ih.map(|b| gate_slices::<3>(b, hidden)) {
            Some([br, bz, bn]) => {
                for j in 0..hidden {
                    let x = [xr[j] + br[j], xz[j] + bz[j], xn[j] + bn[j]];
                    let [r, z, nv, ghn, h] = unit(x, [gh_r[j], gh_z[j], gh_n[j]], hpr[j]);
                    (cr_r[j], cr_z[j], cr_n[j], cr_ghn[j], hr[j]) = (r, z, nv, ghn, h);
                }
            }
            None => {
                for j in 0..hidden {
                    let x = [xr[j], xz[j], xn[j]];
                    let [r, z, nv, ghn, h] = unit(x, [gh_r[j], gh_z[j], gh_n[j]], hpr[j]);
                    (cr_r[j], cr_z[j], cr_n[j], cr_ghn[j], hr[j]) = (r, z, nv, ghn, h);
                }
            }
        }
    }
}

/// The GRU backward over `rows` rows: from `cache`, `h_prev` and `dh` (the whole gradient
/// reaching `h`), writes `dgx`, `dgh` (`rows x 3*hidden`) and `dh_prev = dh * z` (the direct
/// part of the gradient reaching `h_prev`).
#[allow(clippy::too_many_arguments)]
pub(super) fn gru_backward_rows(
    cache: &[f32],
    hp: &[f32],
    dh: &[f32],
    dgx: &mut [f32],
    dgh: &mut [f32],
    dhp: &mut [f32],
    hidden: usize,
    split: Split,
) {
    dgx.par_chunks_mut(3 * hidden)
        .zip(dgh.par_chunks_mut(3 * hidden))
        .zip(dhp.par_chunks_mut(hidden))
        .zip(cache.par_chunks(4 * hidden))
        .zip(hp.par_chunks(hidden))
        .zip(dh.par_chunks(hidden))
        .with_min_len(split.min_rows(14 * hidden))
        .for_each(|(((((dxr, dhr_g), dhpr), cr), hpr), dhr)| {
            vectorized(GruBackwardRow(dxr, dhr_g, dhpr, cr, hpr, dhr))
        });
}

/// One row of [`gru_backward_rows`].
struct GruBackwardRow<'a>(Out<'a>, Out<'a>, Out<'a>, In<'a>, In<'a>, In<'a>);

impl Lanes for GruBackwardRow<'_> {
    #[inline(always)]
    fn run(self) {
        let GruBackwardRow(dxr, dhr_g, dhpr, cr, hpr, dhr) = self;
        let hidden = dhpr.len();
        let [dx_r, dx_z, dx_n] = gate_blocks::<3>(dxr, hidden);
        let [dh_r, dh_z, dh_n] = gate_blocks::<3>(dhr_g, hidden);
        let [c_r, c_z, c_n, c_ghn] = gate_slices::<4>(cr, hidden);
        for j in 0..hidden {
            let (r, z, nv, ghn) = (c_r[j], c_z[j], c_n[j], c_ghn[j]);
            let d = dhr[j];
            let dn = d * (1.0 - z) * (1.0 - nv * nv);
            let dz = d * (hpr[j] - nv) * z * (1.0 - z);
            let dr = dn * ghn * r * (1.0 - r);
            dx_r[j] = dr;
            dh_r[j] = dr;
            dx_z[j] = dz;
            dh_z[j] = dz;
            dx_n[j] = dn;
            dh_n[j] = dn * r;
            dhpr[j] = d * z;
        }
    }
}

impl GatedCellOps for CpuOps {
    fn lstm_cell_forward(&self, a: LstmCellForward<'_>) -> Result<()> {
        if a.check(self.context)? == 0 {
            return Ok(());
        }
        let (outs, hidden) = ([a.gates, a.c, a.h], a.shape.hidden);
        lock(
            LstmCellForward::OP,
            self.context,
            [a.c_prev],
            outs,
            |[cp], [g, c, h]| lstm_forward_rows(g, None, cp, c, h, hidden, Split::Pool),
        )
    }

    fn lstm_cell_backward(&self, a: LstmCellBackward<'_>) -> Result<()> {
        if a.check(self.context)? == 0 {
            return Ok(());
        }
        let (ins, outs) = ([a.gates, a.c_prev, a.c, a.dh], [a.dc, a.dgates]);
        let hidden = a.shape.hidden;
        lock(
            LstmCellBackward::OP,
            self.context,
            ins,
            outs,
            |[g, cp, c, dh], [dc, dg]| {
                lstm_backward_rows(g, cp, c, dh, dc, dg, hidden, Split::Pool)
            },
        )
    }

    fn gru_cell_forward(&self, a: GruCellForward<'_>) -> Result<()> {
        if a.check(self.context)? == 0 {
            return Ok(());
        }
        let (ins, outs) = ([a.gx, a.gh, a.h_prev], [a.h, a.cache]);
        let hidden = a.shape.hidden;
        lock(
            GruCellForward::OP,
            self.context,
            ins,
            outs,
            |[gx, gh, hp], [h, cache]| {
                gru_forward_rows(gx, None, gh, hp, h, cache, hidden, Split::Pool)
            },
        )
    }

    fn gru_cell_backward(&self, a: GruCellBackward<'_>) -> Result<()> {
        if a.check(self.context)? == 0 {
            return Ok(());
        }
        let GruGateGrads { dgx, dgh } = a.grads;
        let (ins, outs) = ([a.cache, a.h_prev, a.dh], [dgx, dgh, a.dh_prev]);
        let hidden = a.shape.hidden;
        lock(
            GruCellBackward::OP,
            self.context,
            ins,
            outs,
            |[cache, hp, dh], [dgx, dgh, dhp]| {
                gru_backward_rows(cache, hp, dh, dgx, dgh, dhp, hidden, Split::Pool)
            },
        )
    }
}
