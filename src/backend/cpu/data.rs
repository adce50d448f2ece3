//! Data movement: gathering rows by index (embedding lookups, batch assembly) and one-hot rows.
//! Indices are u32 views, copied out before the f32 views are locked.

use super::CpuOps;
use crate::ops::prelude::*;
use rayon::prelude::*;

use super::access::{lock, read_u32, valid_index, with_bytes};
use super::par::{PAR_MIN, min_rows};
use crate::buffer::View;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::ops::{IndexedRows, check};

/// The row indices of `indices`, every one checked to name one of `rows` rows of the `what`
/// (before anything is written, so a bad one leaves the output untouched).
fn read_rows(
    op: &str,
    ctx: u64,
    indices: &View<'_>,
    (rows, what): (usize, &str),
) -> Result<Vec<u32>> {
    let idx = read_u32(op, ctx, "indices", indices)?;
    match idx.iter().position(|&v| valid_index(v, rows).is_none()) {
        Some(i) => Err(Error::InvalidArgument(format!(
            "{op}: index {} at position {i} is not a row of a {rows}-row {what}",
            idx[i]
        ))),
        None => Ok(idx),
    }
}

impl IndexOps for CpuOps {
    fn gather_rows(&self, a: IndexedRows<'_>) -> Result<()> {
        let (ctx, op) = (self.context, "gather_rows");
        let (rows_type, n) = a.check_gather(ctx)?;
        if n == 0 {
            return Ok(());
        }
        let (src, dst, cols) = (a.src, a.dst, a.cols);
        let src_rows = src.len() / cols;
        let idx = read_rows(op, ctx, &a.indices, (src_rows, "source"))?;
        if rows_type == DType::U32 {
            // Straight from the source's bytes: a batch's labels come out of the whole data
            // set's, which is not copied for it.
            let row = cols * 4;
            return with_bytes(op, &src, &dst, |src, dst| {
                for (d, &r) in dst.chunks_exact_mut(row).zip(&idx) {
                    let r = r as usize * row;
                    d.copy_from_slice(&src[r..r + row]);
                }
            });
        }
        lock(op, ctx, [src], [dst], |[src], [dst]| {
            let body = |(d, &v): (&mut [f32], &u32)| {
                let r = v as usize;
                d.copy_from_slice(&src[r * cols..(r + 1) * cols]);
            };
            if n < PAR_MIN {
                dst.chunks_mut(cols).zip(&idx).for_each(body);
            } else {
                dst.par_chunks_mut(cols)
                    .zip(idx.par_iter())
                    .with_min_len(min_rows(cols))
                    .for_each(body);
            }
        })
    }

    fn scatter_add_rows(&self, a: IndexedRows<'_>) -> Result<()> {
        let (ctx, op) = (self.context, "scatter_add_rows");
        let dst_rows = a.check_scatter(ctx)?;
        let idx = read_rows(op, ctx, &a.indices, (dst_rows, "destination"))?;
        let cols = a.cols;
        lock(op, ctx, [a.src], [a.dst], |[src], [dst]| {
            // One pass in index order: every destination element sums its sources in the same
            // order on every run.
            for (i, &v) in idx.iter().enumerate() {
                let r = v as usize;
                let d = &mut dst[r * cols..(r + 1) * cols];
                for (d, &s) in d.iter_mut().zip(&src[i * cols..(i + 1) * cols]) {
                    *d += s;
                }
            }
        })
    }

    fn one_hot(&self, indices: View<'_>, out: View<'_>, classes: usize) -> Result<()> {
        let ctx = self.context;
        let op = "one_hot";
        let n = check::area(op, indices.len(), classes)?;
        check::len(op, "out", &out, n)?;
        let idx = read_u32(op, ctx, "indices", &indices)?;
        if classes == 0 {
            return lock(op, ctx, [], [out], |_, _| ());
        }
        lock(op, ctx, [], [out], |[], [out]| {
            // An index outside 0..classes gives an all-zero row, as the GPU kernels' comparison does.
            let body = |(o, &v): (&mut [f32], &u32)| {
                o.fill(0.0);
                if let Some(c) = valid_index(v, classes) {
                    o[c] = 1.0;
                }
            };
            if n < PAR_MIN {
                out.chunks_mut(classes).zip(&idx).for_each(body);
            } else {
                out.par_chunks_mut(classes)
                    .zip(idx.par_iter())
                    .with_min_len(min_rows(classes))
                    .for_each(body);
            }
        })
    }
}
