//! Transfers, filling and copying (the memory family), and the elementwise arithmetic.

use super::launch::{self, Args, device_ptr};
use super::mixed::typed_entry;
use super::{GpuOps, pool};
use crate::backend::Device;
use crate::buffer::Buffer;
use crate::buffer::View;
use crate::device::DeviceInfo;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::ops::check;
use crate::ops::prelude::*;

impl<D: Device> GpuOps<D> {
    /// Geometry `V` of the streaming kernels for this device.
    pub(super) fn streaming(&self, n: usize) -> crate::kernel::LaunchConfig {
        launch::streaming(n, self.info.compute_units)
    }

    /// `add` and `mul`: same arguments, `out` may be exactly `a` or `b`.
    pub(super) fn binary(
        &self,
        op: &str,
        entries: [&'static str; 3],
        a: View<'_>,
        b: View<'_>,
        out: View<'_>,
    ) -> Result<()> {
        let t = check::float_t(
            op,
            self.context,
            &[("a", &a), ("b", &b), ("out", &out)],
            &[],
        )?;
        check::len(op, "b", &b, a.len())?;
        check::len(op, "out", &out, a.len())?;
        check::no_overlap(op, &out, &a, true)?;
        check::no_overlap(op, &out, &b, true)?;
        let n = check::fits_u32(op, a.len())?;
        if n == 0 {
            return Ok(());
        }
        let args = Self::typed_args(t, &[&a, &b, &out])?.u32(n);
        self.run(
            typed_entry(t, entries),
            self.typed_geometry(t, a.len()),
            args,
        )
    }
}

impl<D: Device> MemoryOps for GpuOps<D> {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn context_id(&self) -> u64 {
        self.context
    }

    fn alloc(&self, len: usize) -> Result<Buffer> {
        self.alloc_as(DType::F32, len)
    }

    fn alloc_as(&self, dtype: DType, len: usize) -> Result<Buffer> {
        let bytes = len.saturating_mul(dtype.size());
        let charge = self.limit.charge(bytes, &self.info.id.to_string())?;
        Ok(pool::alloc(&self.pool, dtype, len, self.context)?.charged(charge))
    }

    fn set_memory_limit(&self, bytes: Option<usize>) {
        self.limit.set(bytes)
    }

    fn memory_limit(&self) -> Option<usize> {
        self.limit.get()
    }

    fn memory_in_use(&self) -> usize {
        self.limit.in_use()
    }

    fn upload_bytes(&self, dst: View<'_>, src: &[u8]) -> Result<()> {
        check::transfer("upload_bytes", self.context, &dst, src.len())?;
        if src.is_empty() {
            return Ok(());
        }
        let size = dst.dtype().size();
        self.device
            .write(device_ptr(&dst)?, dst.offset() * size, src)
    }

    fn download_bytes(&self, src: View<'_>, dst: &mut [u8]) -> Result<()> {
        check::transfer("download_bytes", self.context, &src, dst.len())?;
        if dst.is_empty() {
            return self.device.synchronize();
        }
        let size = src.dtype().size();
        self.device
            .read(device_ptr(&src)?, src.offset() * size, dst)
    }

    fn synchronize(&self) -> Result<()> {
        self.device.synchronize()
    }

    fn warm_up(&self) -> Result<()> {
        self.op_set.build_all(super::modules::build_threads())
    }

    fn upload(&self, dst: View<'_>, src: &[f32]) -> Result<()> {
        self.mine("upload", &[&dst])?;
        if src.len() != dst.len() {
            return Err(Error::shape(
                "upload",
                format!("{} values for a view of {}", src.len(), dst.len()),
            ));
        }
        if src.is_empty() {
            return Ok(());
        }
        let bytes: Vec<u8> = src.iter().flat_map(|x| x.to_ne_bytes()).collect();
        self.device
            .write(device_ptr(&dst)?, dst.offset() * 4, &bytes)
    }

    fn download(&self, src: View<'_>, dst: &mut [f32]) -> Result<()> {
        self.mine("download", &[&src])?;
        if src.len() != dst.len() {
            return Err(Error::shape(
                "download",
                format!("a view of {} into {} values", src.len(), dst.len()),
            ));
        }
        if dst.is_empty() {
            return self.device.synchronize();
        }
        let mut bytes = vec![0u8; dst.len() * 4];
        self.device
            .read(device_ptr(&src)?, src.offset() * 4, &mut bytes)?;
        for (d, chunk) in dst.iter_mut().zip(bytes.chunks_exact(4)) {
            *d = f32::from_ne_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        }
        Ok(())
    }

    fn fill(&self, x: View<'_>, value: f32) -> Result<()> {
        self.mine("fill", &[&x])?;
        let n = check::fits_u32("fill", x.len())?;
        if n == 0 {
            return Ok(());
        }
        let args = Args::new().buf(&x)?.u32(n).f32(value);
        self.run("fill", self.streaming(x.len()), args)
    }

    fn copy(&self, src: View<'_>, dst: View<'_>) -> Result<()> {
        // Type-independent: any element type, the same on both sides.
        check::context_only("copy", self.context, &[&src, &dst])?;
        check::dtype("copy", "dst", &dst, src.dtype())?;
        check::len("copy", "dst", &dst, src.len())?;
        if dst.same_as(&src) || src.is_empty() {
            return Ok(());
        }
        check::no_overlap("copy", &dst, &src, false)?;
        let size = src.dtype().size();
        self.device.copy(
            (device_ptr(&src)?, src.offset() * size),
            (device_ptr(&dst)?, dst.offset() * size),
            src.len() * size,
        )
    }
}

impl<D: Device> ElementwiseOps for GpuOps<D> {
    fn cast(&self, src: View<'_>, dst: View<'_>) -> Result<()> {
        self.cast_views(src, dst)
    }

    fn add(&self, a: View<'_>, b: View<'_>, out: View<'_>) -> Result<()> {
        self.binary("add", ["add", "add_bf16", "add_f16"], a, b, out)
    }

    fn mul(&self, a: View<'_>, b: View<'_>, out: View<'_>) -> Result<()> {
        self.binary("mul", ["mul", "mul_bf16", "mul_f16"], a, b, out)
    }

    fn scale(&self, x: View<'_>, alpha: f32) -> Result<()> {
        let t = check::float_t("scale", self.context, &[("x", &x)], &[])?;
        let n = check::fits_u32("scale", x.len())?;
        if n == 0 {
            return Ok(());
        }
        let args = Self::typed_args(t, &[&x])?.u32(n).f32(alpha);
        let entry = typed_entry(t, ["scale", "scale_bf16", "scale_f16"]);
        self.run(entry, self.typed_geometry(t, x.len()), args)
    }

    fn axpy(&self, alpha: f32, x: View<'_>, y: View<'_>) -> Result<()> {
        let t = check::float_t("axpy", self.context, &[("x", &x), ("y", &y)], &[])?;
        check::len("axpy", "y", &y, x.len())?;
        check::no_overlap("axpy", &y, &x, false)?;
        let n = check::fits_u32("axpy", x.len())?;
        if n == 0 {
            return Ok(());
        }
        let args = Self::typed_args(t, &[&x, &y])?.u32(n).f32(alpha);
        let entry = typed_entry(t, ["axpy", "axpy_bf16", "axpy_f16"]);
        self.run(entry, self.typed_geometry(t, x.len()), args)
    }
}
