//! fill, copy, scale, axpy, add, mul.

use super::access::{Src, lock, lock_inplace};
use super::par::chunks;
use super::{CpuOps, access, float_views, host_memory};
use crate::buffer::View;
use crate::buffer::{Buffer, Storage};
use crate::device::DeviceInfo;
use crate::dtype::DType;
use crate::error::Error;
use crate::error::Result;
use crate::ops::check;
use crate::ops::prelude::*;
use parking_lot::RwLock;

/// `y[i] = f(x[i])`, or in place when `x` is the output itself.
pub(super) fn unary(x: Src<'_>, y: &mut [f32], f: impl Fn(f32) -> f32 + Sync + Send) {
    match x {
        Src::Slice(x) => chunks(y, |s, y| {
            let n = y.len();
            for (y, &x) in y.iter_mut().zip(&x[s..s + n]) {
                *y = f(x);
            }
        }),
        Src::Out => chunks(y, |_, y| {
            for y in y {
                *y = f(*y);
            }
        }),
    }
}

/// `out[i] = f(a[i], b[i])`; either input may be the output itself.
fn binary(a: Src<'_>, b: Src<'_>, out: &mut [f32], f: impl Fn(f32, f32) -> f32 + Sync + Send) {
    match (a, b) {
        (Src::Slice(a), Src::Slice(b)) => chunks(out, |s, o| {
            let n = o.len();
            for ((o, &a), &b) in o.iter_mut().zip(&a[s..s + n]).zip(&b[s..s + n]) {
                *o = f(a, b);
            }
        }),
        (Src::Out, Src::Slice(b)) => chunks(out, |s, o| {
            let n = o.len();
            for (o, &b) in o.iter_mut().zip(&b[s..s + n]) {
                *o = f(*o, b);
            }
        }),
        (Src::Slice(a), Src::Out) => chunks(out, |s, o| {
            let n = o.len();
            for (o, &a) in o.iter_mut().zip(&a[s..s + n]) {
                *o = f(a, *o);
            }
        }),
        (Src::Out, Src::Out) => chunks(out, |_, o| {
            for o in o {
                *o = f(*o, *o);
            }
        }),
    }
}

fn binary_op(
    op: &str,
    ctx: u64,
    a: View<'_>,
    b: View<'_>,
    out: View<'_>,
    f: impl Fn(f32, f32) -> f32 + Sync + Send,
) -> Result<()> {
    check::len(op, "b", &b, a.len())?;
    check::len(op, "out", &out, a.len())?;
    let t = [("a", &a), ("b", &b), ("out", &out)];
    if check::float_t(op, ctx, &t, &[])? != DType::F32 {
        return float_views::staged(op, ctx, [a, b], [out], |[a, b], [out]| {
            binary(Src::Slice(a), Src::Slice(b), out, f)
        });
    }
    lock_inplace(op, ctx, [a, b], [out], 0b11, |[a, b], [out]| {
        binary(a, b, out, f)
    })
}

impl MemoryOps for CpuOps {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn context_id(&self) -> u64 {
        self.context
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

    fn alloc(&self, len: usize) -> Result<Buffer> {
        let charge = self
            .limit
            .charge(len.saturating_mul(std::mem::size_of::<f32>()), "cpu")?;
        // The host's available and total memory; both 0 (and left out of the message) where
        // the platform does not say.
        let oom = || {
            let (free, total) = host_memory().unwrap_or((0, 0));
            Error::OutOfMemory {
                device: "cpu".into(),
                requested: len.saturating_mul(std::mem::size_of::<f32>()),
                free: free as usize,
                total: total as usize,
            }
        };
        let mut data = Vec::new();
        data.try_reserve_exact(len).map_err(|_| oom())?;
        data.resize(len, 0.0);
        Ok(Buffer::new(len, self.context, Storage::Host(RwLock::new(data))).charged(charge))
    }

    fn alloc_as(&self, dtype: DType, len: usize) -> Result<Buffer> {
        if dtype == DType::F32 {
            return self.alloc(len);
        }
        let bytes = len.checked_mul(dtype.size()).ok_or_else(|| {
            Error::InvalidArgument(format!("{len} {dtype} overflow the address space"))
        })?;
        let charge = self.limit.charge(bytes, "cpu")?;
        let mut data = Vec::new();
        data.try_reserve_exact(bytes).map_err(|_| {
            let (free, total) = host_memory().unwrap_or((0, 0));
            Error::OutOfMemory {
                device: "cpu".into(),
                requested: bytes,
                free: free as usize,
                total: total as usize,
            }
        })?;
        data.resize(bytes, 0);
        Ok(Buffer::typed(
            dtype,
            len,
            self.context,
            Storage::HostBytes(RwLock::new(data)),
        )
        .charged(charge))
    }

    fn upload_bytes(&self, dst: View<'_>, src: &[u8]) -> Result<()> {
        check::transfer("upload_bytes", self.context, &dst, src.len())?;
        access::write_bytes("upload_bytes", &dst, src)
    }

    fn download_bytes(&self, src: View<'_>, dst: &mut [u8]) -> Result<()> {
        check::transfer("download_bytes", self.context, &src, dst.len())?;
        access::read_bytes("download_bytes", &src, dst)
    }

    fn upload(&self, dst: View<'_>, src: &[f32]) -> Result<()> {
        if src.len() != dst.len() {
            return Err(Error::shape(
                "upload",
                format!("{} host elements into a view of {}", src.len(), dst.len()),
            ));
        }
        access::lock("upload", self.context, [], [dst], |[], [d]| {
            d.copy_from_slice(src)
        })
    }

    fn download(&self, src: View<'_>, dst: &mut [f32]) -> Result<()> {
        if src.len() != dst.len() {
            return Err(Error::shape(
                "download",
                format!(
                    "a view of {} elements into {} host elements",
                    src.len(),
                    dst.len()
                ),
            ));
        }
        access::lock("download", self.context, [src], [], |[s], []| {
            dst.copy_from_slice(s)
        })
    }

    fn synchronize(&self) -> Result<()> {
        // Ops run to completion before returning, so nothing is ever queued.
        Ok(())
    }

    fn warm_up(&self) -> Result<()> {
        Ok(())
    }

    fn fill(&self, x: View<'_>, value: f32) -> Result<()> {
        let ctx = self.context;
        lock("fill", ctx, [], [x], |[], [x]| {
            chunks(x, |_, x| x.fill(value))
        })
    }

    fn copy(&self, src: View<'_>, dst: View<'_>) -> Result<()> {
        let ctx = self.context;
        // Type-independent: any element type, the same on both sides.
        check::context_only("copy", ctx, &[&src, &dst])?;
        check::dtype("copy", "dst", &dst, src.dtype())?;
        check::len("copy", "dst", &dst, src.len())?;
        if src.dtype() != DType::F32 {
            if dst.same_as(&src) || src.is_empty() {
                return Ok(());
            }
            check::no_overlap("copy", &dst, &src, false)?;
            return access::copy_bytes("copy", &src, &dst);
        }
        lock("copy", ctx, [src], [dst], |[src], [dst]| {
            chunks(dst, |s, d| d.copy_from_slice(&src[s..s + d.len()]))
        })
    }
}

impl ElementwiseOps for CpuOps {
    fn cast(&self, src: View<'_>, dst: View<'_>) -> Result<()> {
        check::cast(self.context, &src, &dst)?;
        if src.dtype() == dst.dtype() {
            return self.copy(src, dst);
        }
        float_views::write("cast", &dst, &float_views::read("cast", &src)?)
    }

    fn scale(&self, x: View<'_>, alpha: f32) -> Result<()> {
        let ctx = self.context;
        if check::float_t("scale", ctx, &[("x", &x)], &[])? != DType::F32 {
            return float_views::staged("scale", ctx, [], [x], |[], [x]| {
                unary(Src::Out, x, |v| v * alpha)
            });
        }
        lock("scale", ctx, [], [x], |[], [x]| {
            chunks(x, |_, x| {
                for v in x {
                    *v *= alpha;
                }
            })
        })
    }

    fn axpy(&self, alpha: f32, x: View<'_>, y: View<'_>) -> Result<()> {
        let ctx = self.context;
        check::len("axpy", "y", &y, x.len())?;
        if check::float_t("axpy", ctx, &[("x", &x), ("y", &y)], &[])? != DType::F32 {
            check::no_overlap("axpy", &y, &x, false)?;
            return float_views::staged("axpy", ctx, [x], [y], |[x], [y]| {
                binary(Src::Slice(x), Src::Out, y, |x, y| y + alpha * x)
            });
        }
        lock("axpy", ctx, [x], [y], |[x], [y]| {
            chunks(y, |s, y| {
                let n = y.len();
                for (y, &x) in y.iter_mut().zip(&x[s..s + n]) {
                    *y += alpha * x;
                }
            })
        })
    }

    fn add(&self, a: View<'_>, b: View<'_>, out: View<'_>) -> Result<()> {
        let ctx = self.context;
        binary_op("add", ctx, a, b, out, |a, b| a + b)
    }

    fn mul(&self, a: View<'_>, b: View<'_>, out: View<'_>) -> Result<()> {
        let ctx = self.context;
        binary_op("mul", ctx, a, b, out, |a, b| a * b)
    }
}
