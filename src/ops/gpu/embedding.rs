//! Row scatter-add, the backward pass of a row gather (kernels-cu/embedding.cu,
//! kernels-cl/embedding.cl): one launch over `indices.len() x cols`, atomic float adds.

use super::GpuOps;
use super::launch::{self, Args};
use crate::backend::Device;
use crate::buffer::View;
use crate::error::Result;
use crate::ops::check;

impl<D: Device> GpuOps<D> {
    pub(super) fn scatter_add_rows_impl(
        &self,
        src: View<'_>,
        indices: View<'_>,
        dst: View<'_>,
        cols: usize,
    ) -> Result<()> {
        let op = "scatter_add_rows";
        self.mine(op, &[&src, &indices, &dst])?;
        let dst_rows = check::scatter_add_rows(&src, &indices, &dst, cols)?;
        if src.is_empty() {
            return Ok(());
        }
        // The kernel checks every index against `dst_rows` and skips an invalid one, so no
        // index can make it write outside `dst`.
        let args = Args::new()
            .buf(&src)?
            .buf(&indices)?
            .buf(&dst)?
            .u32(indices.len() as u32)
            .u32(cols as u32)
            .u32(dst_rows as u32);
        self.run(op, launch::elementwise(src.len()), args)
    }
}
