//! fill, copy, scale, axpy, add, mul.

use super::access::{Src, lock, lock_inplace};
use super::par::chunks;
use crate::buffer::View;
use crate::error::Result;
use crate::ops::check;

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

pub(super) fn fill(ctx: u64, x: View<'_>, value: f32) -> Result<()> {
    lock("fill", ctx, [], [x], |[], [x]| {
        chunks(x, |_, x| x.fill(value))
    })
}

pub(super) fn copy(ctx: u64, src: View<'_>, dst: View<'_>) -> Result<()> {
    check::len("copy", "dst", &dst, src.len())?;
    lock("copy", ctx, [src], [dst], |[src], [dst]| {
        chunks(dst, |s, d| d.copy_from_slice(&src[s..s + d.len()]))
    })
}

pub(super) fn scale(ctx: u64, x: View<'_>, alpha: f32) -> Result<()> {
    lock("scale", ctx, [], [x], |[], [x]| {
        chunks(x, |_, x| {
            for v in x {
                *v *= alpha;
            }
        })
    })
}

pub(super) fn axpy(ctx: u64, alpha: f32, x: View<'_>, y: View<'_>) -> Result<()> {
    check::len("axpy", "y", &y, x.len())?;
    lock("axpy", ctx, [x], [y], |[x], [y]| {
        chunks(y, |s, y| {
            let n = y.len();
            for (y, &x) in y.iter_mut().zip(&x[s..s + n]) {
                *y += alpha * x;
            }
        })
    })
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
    lock_inplace(op, ctx, [a, b], [out], 0b11, |[a, b], [out]| {
        binary(a, b, out, f)
    })
}

pub(super) fn add(ctx: u64, a: View<'_>, b: View<'_>, out: View<'_>) -> Result<()> {
    binary_op("add", ctx, a, b, out, |a, b| a + b)
}

pub(super) fn mul(ctx: u64, a: View<'_>, b: View<'_>, out: View<'_>) -> Result<()> {
    binary_op("mul", ctx, a, b, out, |a, b| a * b)
}
