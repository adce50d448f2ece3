//! The ops of the 16-bit float types (bf16, f16) on the GPU: their kernels are
//! kernels-{cu,cl}/mixed.*, one entry per type (docs/kernel-abi.md).

use super::GpuOps;
use super::launch::{self, Args};
use crate::backend::Device;
use crate::buffer::View;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::ops::check;

/// The kernel that casts `from` to `to` (two different float types).
fn cast_entry(from: DType, to: DType) -> Result<&'static str> {
    Ok(match (from, to) {
        (DType::F32, DType::Bf16) => "cast_f32_bf16",
        (DType::F32, DType::F16) => "cast_f32_f16",
        (DType::Bf16, DType::F32) => "cast_bf16_f32",
        (DType::F16, DType::F32) => "cast_f16_f32",
        (DType::Bf16, DType::F16) => "cast_bf16_f16",
        (DType::F16, DType::Bf16) => "cast_f16_bf16",
        _ => {
            return Err(Error::InvalidArgument(format!(
                "cast: no kernel casts {from} to {to}"
            )));
        }
    })
}

impl<D: Device> GpuOps<D> {
    /// [`crate::ops::ElementwiseOps::cast`].
    pub(super) fn cast_views(&self, src: View<'_>, dst: View<'_>) -> Result<()> {
        use crate::ops::MemoryOps;
        let n = check::cast(self.context, &src, &dst)?;
        if src.dtype() == dst.dtype() {
            return self.copy(src, dst);
        }
        if n == 0 {
            return Ok(());
        }
        let entry = cast_entry(src.dtype(), dst.dtype())?;
        let args = Args::new()
            .buf_as(&src, src.dtype())?
            .buf_as(&dst, dst.dtype())?
            .u32(n);
        self.run(entry, launch::elementwise(src.len()), args)
    }
}
