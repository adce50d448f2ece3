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

/// The entry of a T-typed op for T = `t` (checked to be a float type): the f32 kernel or its
/// `_bf16` / `_f16` variant.
pub(super) fn typed_entry(t: DType, [f32, bf16, f16]: [&'static str; 3]) -> &'static str {
    match t {
        DType::Bf16 => bf16,
        DType::F16 => f16,
        _ => f32,
    }
}

impl<D: Device> GpuOps<D> {
    /// The launch of a T-typed op over `n` elements: the f32 kernels stream (geometry V), the
    /// bf16/f16 ones loop grid-stride (E).
    pub(super) fn typed_geometry(&self, t: DType, n: usize) -> crate::kernel::LaunchConfig {
        if t == DType::F32 {
            self.streaming(n)
        } else {
            launch::elementwise(n)
        }
    }

    /// Each view packed as a view of T ([`Args::buf_as`]).
    pub(super) fn typed_args(t: DType, views: &[&View<'_>]) -> Result<Args> {
        let mut args = Args::new();
        for v in views {
            args = args.buf_as(v, t)?;
        }
        Ok(args)
    }

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
        self.run(entry, self.streaming(n as usize), args)
    }
}
