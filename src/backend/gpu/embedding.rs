//! The index family on the GPU: row gathers (of f32 or u32 rows), one-hot rows, and the row
//! scatter-add, the backward pass of a row gather (kernels-cu/embedding.cu,
//! kernels-cl/embedding.cl): one launch over `indices.len() x cols`, atomic float adds. Indices
//! are u32 views.

use super::GpuOps;
use super::launch::{self, Args};
use crate::backend::Device;
use crate::buffer::View;
use crate::dtype::DType::{self, F32, U32};
use crate::error::{Error, Result};
use crate::ops::check;
use crate::ops::prelude::*;

impl<D: Device> IndexOps for GpuOps<D> {
    fn gather_rows(
        &self,
        src: View<'_>,
        indices: View<'_>,
        dst: View<'_>,
        cols: usize,
    ) -> Result<()> {
        let op = "gather_rows";
        let rows = check::gather_rows_types(self.context, &src, &indices, &dst)?;
        let nrows = indices.len();
        let n = check::area(op, nrows, cols)?;
        check::len(op, "dst", &dst, n)?;
        if cols == 0 || src.len() % cols != 0 {
            if n == 0 {
                return Ok(());
            }
            return Err(Error::shape(
                op,
                format!("src of {} elements is not rows of {cols}", src.len()),
            ));
        }
        check::no_overlap(op, &dst, &src, false)?;
        check::no_overlap(op, &dst, &indices, false)?;
        check::fits_u32(op, n)?;
        check::fits_u32(op, src.len())?;
        if n == 0 {
            return Ok(());
        }
        // The kernel checks every index against `src_rows` (a NaN row for an invalid one), so
        // no index can make it read outside `src`.
        let src_rows = src.len() / cols;
        let args = Args::new()
            .buf_of(&src, rows)?
            .buf_u32(&indices)?
            .buf_of(&dst, rows)?
            .dims(&[nrows, cols, src_rows]);
        let entry = if rows == DType::U32 {
            "gather_rows_u32"
        } else {
            op
        };
        self.run(entry, launch::elementwise(n), args)
    }

    fn scatter_add_rows(
        &self,
        src: View<'_>,
        indices: View<'_>,
        dst: View<'_>,
        cols: usize,
    ) -> Result<()> {
        let op = "scatter_add_rows";
        let views = [
            ("src", &src, F32),
            ("indices", &indices, U32),
            ("dst", &dst, F32),
        ];
        check::typed(op, self.context, &views)?;
        let dst_rows = check::scatter_add_rows(&src, &indices, &dst, cols)?;
        if src.is_empty() {
            return Ok(());
        }
        // The kernel checks every index against `dst_rows` and skips an invalid one, so no
        // index can make it write outside `dst`.
        let args = Args::new().buf(&src)?.buf_u32(&indices)?.buf(&dst)?.dims(&[
            indices.len(),
            cols,
            dst_rows,
        ]);
        self.run(op, launch::elementwise(src.len()), args)
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
