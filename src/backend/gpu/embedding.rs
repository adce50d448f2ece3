//! The index family on the GPU: row gathers (of f32 or u32 rows), one-hot rows, and the row
//! scatter-add, the backward pass of a row gather (kernels-cu/embedding.cu,
//! kernels-cl/embedding.cl): one launch over `indices.len() x cols`, atomic float adds. Indices
//! are u32 views.

use super::GpuOps;
use super::launch::{self, Args};
use crate::backend::Device;
use crate::buffer::View;
use crate::dtype::DType::{self, F32, U32};
use crate::error::Result;
use crate::ops::prelude::*;
use crate::ops::{IndexedRows, check};

impl<D: Device> IndexOps for GpuOps<D> {
    fn gather_rows(&self, a: IndexedRows<'_>) -> Result<()> {
        let op = "gather_rows";
        let (rows, n) = a.check_gather(self.context)?;
        check::fits_u32(op, n)?;
        check::fits_u32(op, a.src.len())?;
        if n == 0 {
            return Ok(());
        }
        // The kernel checks every index against `src_rows` (a NaN row for an invalid one), so
        // no index can make it read outside `src`.
        let src_rows = a.src.len() / a.cols;
        let args = Args::new()
            .buf_of(&a.src, rows)?
            .buf_u32(&a.indices)?
            .buf_of(&a.dst, rows)?
            .dims(&[a.indices.len(), a.cols, src_rows]);
        let entry = if rows == DType::U32 {
            "gather_rows_u32"
        } else {
            op
        };
        self.run(entry, launch::elementwise(n), args)
    }

    fn scatter_add_rows(&self, a: IndexedRows<'_>) -> Result<()> {
        let op = "scatter_add_rows";
        let dst_rows = a.check_scatter(self.context)?;
        if a.src.is_empty() {
            return Ok(());
        }
        // The kernel checks every index against `dst_rows` and skips an invalid one, so no
        // index can make it write outside `dst`.
        let args = Args::new()
            .buf(&a.src)?
            .buf_u32(&a.indices)?
            .buf(&a.dst)?
            .dims(&[a.indices.len(), a.cols, dst_rows]);
        self.run(op, launch::elementwise(a.src.len()), args)
    }

    fn one_hot(&self, indices: View<'_>, out: View<'_>, classes: usize) -> Result<()> {
        let op = "one_hot";
        check::typed(
            op,
            self.context,
            &[("indices", &indices, U32), ("out", &out, F32)],
        )?;
        let n = check::area(op, indices.len(), classes)?;
        check::len(op, "out", &out, n)?;
        check::no_overlap(op, &out, &indices, false)?;
        check::fits_u32(op, n)?;
        if n == 0 {
            return Ok(());
        }
        let args = Args::new()
            .buf_u32(&indices)?
            .buf(&out)?
            .u32(indices.len() as u32)
            .u32(classes as u32);
        self.run(op, launch::elementwise(n), args)
    }
}
