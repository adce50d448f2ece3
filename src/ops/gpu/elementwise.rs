//! Transfers and the elementwise ops (fill, copy, scale, axpy, add, mul, activations).

use super::GpuOps;
use super::launch::{self, Args, device_ptr};
use crate::backend::Device;
use crate::buffer::View;
use crate::error::{Error, Result};
use crate::ops::{Activation, check};

impl<D: Device> GpuOps<D> {
    /// Geometry `V` of the streaming kernels for this device.
    pub(super) fn streaming(&self, n: usize) -> crate::kernel::LaunchConfig {
        launch::streaming(n, self.info.compute_units)
    }

    pub(super) fn upload_impl(&self, dst: View<'_>, src: &[f32]) -> Result<()> {
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

    pub(super) fn download_impl(&self, src: View<'_>, dst: &mut [f32]) -> Result<()> {
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

    pub(super) fn fill_impl(&self, x: View<'_>, value: f32) -> Result<()> {
        self.mine("fill", &[&x])?;
        let n = check::fits_u32("fill", x.len())?;
        if n == 0 {
            return Ok(());
        }
        let args = Args::new().buf(&x)?.u32(n).f32(value);
        self.run("fill", self.streaming(x.len()), args)
    }

    pub(super) fn copy_impl(&self, src: View<'_>, dst: View<'_>) -> Result<()> {
        self.mine("copy", &[&src, &dst])?;
        check::len("copy", "dst", &dst, src.len())?;
        if dst.same_as(&src) || src.is_empty() {
            return Ok(());
        }
        check::no_overlap("copy", &dst, &src, false)?;
        self.device.copy(
            device_ptr(&src)?,
            src.offset() * 4,
            device_ptr(&dst)?,
            dst.offset() * 4,
            src.len() * 4,
        )
    }

    pub(super) fn scale_impl(&self, x: View<'_>, alpha: f32) -> Result<()> {
        self.mine("scale", &[&x])?;
        let n = check::fits_u32("scale", x.len())?;
        if n == 0 {
            return Ok(());
        }
        let args = Args::new().buf(&x)?.u32(n).f32(alpha);
        self.run("scale", self.streaming(x.len()), args)
    }

    pub(super) fn axpy_impl(&self, alpha: f32, x: View<'_>, y: View<'_>) -> Result<()> {
        self.mine("axpy", &[&x, &y])?;
        check::len("axpy", "y", &y, x.len())?;
        check::no_overlap("axpy", &y, &x, false)?;
        let n = check::fits_u32("axpy", x.len())?;
        if n == 0 {
            return Ok(());
        }
        let args = Args::new().buf(&x)?.buf(&y)?.u32(n).f32(alpha);
        self.run("axpy", self.streaming(x.len()), args)
    }

    /// `add` and `mul`: same arguments, `out` may be exactly `a` or `b`.
    pub(super) fn binary(&self, op: &str, a: View<'_>, b: View<'_>, out: View<'_>) -> Result<()> {
        self.mine(op, &[&a, &b, &out])?;
        check::len(op, "b", &b, a.len())?;
        check::len(op, "out", &out, a.len())?;
        check::no_overlap(op, &out, &a, true)?;
        check::no_overlap(op, &out, &b, true)?;
        let n = check::fits_u32(op, a.len())?;
        if n == 0 {
            return Ok(());
        }
        let args = Args::new().buf(&a)?.buf(&b)?.buf(&out)?.u32(n);
        self.run(op, self.streaming(a.len()), args)
    }

    pub(super) fn bias_act_forward_impl(
        &self,
        z: View<'_>,
        bias: View<'_>,
        y: View<'_>,
        act: Activation,
        rows: usize,
        cols: usize,
    ) -> Result<()> {
        let op = "bias_act_forward";
        self.mine(op, &[&z, &bias, &y])?;
        let n = check::area(op, rows, cols)?;
        check::len(op, "z", &z, n)?;
        check::len(op, "bias", &bias, cols)?;
        check::len(op, "y", &y, n)?;
        check::no_overlap(op, &y, &z, true)?;
        check::no_overlap(op, &z, &bias, false)?;
        check::no_overlap(op, &y, &bias, false)?;
        check::fits_u32(op, n)?;
        if n == 0 {
            return Ok(());
        }
        let args = Args::new()
            .buf(&z)?
            .buf(&bias)?
            .buf(&y)?
            .u32(rows as u32)
            .u32(cols as u32)
            .u32(act.code())
            .f32(act.param());
        self.run(op, self.streaming(n), args)
    }

    pub(super) fn activation_impl(&self, x: View<'_>, y: View<'_>, act: Activation) -> Result<()> {
        let op = "activation";
        self.mine(op, &[&x, &y])?;
        check::len(op, "y", &y, x.len())?;
        check::no_overlap(op, &y, &x, true)?;
        let n = check::fits_u32(op, x.len())?;
        if n == 0 {
            return Ok(());
        }
        let args = Args::new()
            .buf(&x)?
            .buf(&y)?
            .u32(n)
            .u32(act.code())
            .f32(act.param());
        self.run(op, self.streaming(x.len()), args)
    }

    pub(super) fn act_backward_impl(
        &self,
        dy: View<'_>,
        z: View<'_>,
        y: View<'_>,
        dz: View<'_>,
        act: Activation,
    ) -> Result<()> {
        let op = "act_backward";
        self.mine(op, &[&dy, &z, &y, &dz])?;
        let n = dy.len();
        check::len(op, "z", &z, n)?;
        check::len(op, "y", &y, n)?;
        check::len(op, "dz", &dz, n)?;
        check::no_overlap(op, &dz, &dy, true)?;
        check::no_overlap(op, &dz, &y, false)?;
        if !act.derivative_from_output() {
            check::no_overlap(op, &dz, &z, false)?;
        }
        let n32 = check::fits_u32(op, n)?;
        if n == 0 {
            return Ok(());
        }
        let args = Args::new()
            .buf(&dy)?
            .buf(&z)?
            .buf(&y)?
            .buf(&dz)?
            .u32(n32)
            .u32(act.code())
            .f32(act.param());
        self.run(op, self.streaming(n), args)
    }
}
