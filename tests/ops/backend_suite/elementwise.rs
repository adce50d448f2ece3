//! The elementwise ops (fill, copy, scale, axpy, add, mul) on every GPU target against the CPU
//! backend, at sizes that make the streaming kernels' grid-stride rounds run more than once.

use proptest::prelude::*;

use super::{Values, compare_padded, nan, prop};
use crate::support::Target;

pub fn elementwise(t: Target) {
    // The largest sizes outgrow the capped streaming grid on small devices (PoCL), so the
    // kernels' grid-stride rounds run more than once.
    let s = (
        prop_oneof![
            3 => 1..=300usize,
            3 => 1000..=70_000usize,
            1 => 1_000_000..=1_300_000usize
        ],
        any::<u64>(),
    );
    prop(t, "gpu_elementwise", 12, s, |ctx, (n, seed)| {
        let mut r = Values(seed);
        let (a, b) = (r.vec(n, -3.0, 3.0), r.vec(n, -3.0, 3.0));
        let alpha = r.uniform(-2.0, 2.0);
        let tol = 1e-6;
        let pads = r.pads(3);
        compare_padded(ctx, "fill", &[nan(n)], &pads, &[0], 0.0, &|o, v| {
            o.fill(v[0], alpha)
        })?;
        compare_padded(
            ctx,
            "copy",
            &[a.clone(), nan(n)],
            &pads,
            &[1],
            0.0,
            &|o, v| o.copy(v[0], v[1]),
        )?;
        compare_padded(
            ctx,
            "scale",
            std::slice::from_ref(&a),
            &pads,
            &[0],
            tol,
            &|o, v| o.scale(v[0], alpha),
        )?;
        compare_padded(
            ctx,
            "axpy",
            &[a.clone(), b.clone()],
            &pads,
            &[1],
            tol,
            &|o, v| o.axpy(alpha, v[0], v[1]),
        )?;
        let bufs = [a.clone(), b.clone(), nan(n)];
        compare_padded(ctx, "add", &bufs, &pads, &[2], tol, &|o, v| {
            o.add(v[0], v[1], v[2])
        })?;
        compare_padded(ctx, "mul", &bufs, &pads, &[2], tol, &|o, v| {
            o.mul(v[0], v[1], v[2])
        })?;
        compare_padded(
            ctx,
            "add in place",
            &[a.clone(), b.clone()],
            &pads,
            &[0],
            tol,
            &|o, v| o.add(v[0], v[1], v[0]),
        )?;
        compare_padded(ctx, "mul in place", &[a, b], &pads, &[1], tol, &|o, v| {
            o.mul(v[0], v[1], v[1])
        })
    });
}
