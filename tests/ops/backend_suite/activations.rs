//! The activations (fused bias + activation, elementwise, their backward passes) on every GPU
//! target against the CPU backend.

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use rnn::ops::BiasActBackward;
use rnn::ops::{Activated, BiasActGrads, MatShape};
use rnn::{Activation, Context, Ops, View};

use super::{Values, compare_checked, compare_padded, dim, nan, prop, run_on};
use crate::support::Target;

pub(super) const ACTIVATIONS: [Activation; 6] = crate::support::activations(0.01);

pub fn activations(t: Target) {
    let s = (dim(), prop_oneof![1..=5usize, 1..=300usize], any::<u64>());
    prop(t, "gpu_activations", 8, s, |ctx, (rows, cols, seed)| {
        let mut r = Values(seed);
        let n = rows * cols;
        let z = r.vec(n, -4.0, 4.0);
        let bias = r.vec(cols, -1.0, 1.0);
        let dy = r.vec(n, -1.0, 1.0);
        let pads = r.pads(4);
        for act in ACTIVATIONS {
            let tol = 1e-5;
            let what = format!("bias_act_forward {act:?} {rows}x{cols}");
            // Into a separate output, then in place (y = z).
            for in_place in [false, true] {
                let (name, bufs, check) = if in_place {
                    (
                        format!("{what} in place"),
                        vec![z.clone(), bias.clone()],
                        &[0][..],
                    )
                } else {
                    (
                        what.clone(),
                        vec![z.clone(), bias.clone(), nan(n)],
                        &[0, 2][..],
                    )
                };
                compare_padded(ctx, &name, &bufs, &pads, check, tol, &|o, v| {
                    let y = if in_place { v[0] } else { v[2] };
                    o.bias_act_forward(
                        Activated::new(v[0], y, act),
                        v[1],
                        MatShape::new(rows, cols),
                    )
                })?;
            }
            compare_padded(
                ctx,
                &format!("activation {act:?}"),
                &[z.clone(), nan(n)],
                &pads,
                &[1],
                tol,
                &|o, v| o.activation(v[0], v[1], act),
            )?;
            // y = act(z) from the CPU backend, so both sides differentiate the same point.
            let y = run_on(&Context::cpu(), &[z.clone(), nan(n)], &|o, v| {
                o.activation(v[0], v[1], act)
            })
            .map_err(|e| TestCaseError::fail(e.to_string()))?
            .remove(1);
            let bufs = [dy.clone(), z.clone(), y, nan(n)];
            compare_padded(
                ctx,
                &format!("act_backward {act:?}"),
                &bufs,
                &pads,
                &[3],
                // tanh' = 1 - y^2 cancels for |z| near 4 (y^2 ~ 0.9987): one rounding of y^2,
                // fused into an fma on one side and not the other, moves it by ~5e-5 relative.
                if act == Activation::Tanh { 1e-4 } else { tol },
                &|o, v| o.act_backward(v[0], Activated::new(v[1], v[2], act), v[3]),
            )?;
            // The fused backward with the bias gradient, out of place and in place (dz = dy);
            // the column sums are held to their terms' magnitudes (they may cancel).
            let dz = run_on(&Context::cpu(), &bufs, &|o, v| {
                o.act_backward(v[0], Activated::new(v[1], v[2], act), v[3])
            })
            .map_err(|e| TestCaseError::fail(e.to_string()))?
            .remove(3);
            let mut scale = vec![0.0f32; cols];
            for (i, g) in dz.iter().enumerate() {
                scale[i % cols] += g.abs();
            }
            let tol = if act == Activation::Tanh { 1e-4 } else { tol };
            let what = format!("bias_act_backward {act:?} {rows}x{cols}");
            let mut fused = bufs.to_vec();
            fused.push(nan(cols));
            // The bias gradient is buffer 4; the input gradient buffer 3, or buffer 0 (`dy`)
            // in place.
            let backward = |o: &dyn Ops, v: &[View<'_>], dx: usize, db: usize| {
                o.bias_act_backward(BiasActBackward::new(
                    v[0],
                    Activated::new(v[1], v[2], act),
                    BiasActGrads::new(v[dx], v[db]),
                    MatShape::new(rows, cols),
                ))
            };
            let check = |what: &str, bufs: &[Vec<f32>], pads: &[usize], dx: usize, db: usize| {
                let scales = [(db, scale.clone())];
                compare_checked(ctx, what, bufs, pads, &[dx], &scales, tol, &|o, v| {
                    backward(o, v, dx, db)
                })
            };
            check(
                &what,
                &fused,
                &[pads[0], pads[1], pads[2], pads[3], pads[0]],
                3,
                4,
            )?;
            fused.remove(3);
            check(&format!("{what} in place"), &fused, &pads, 0, 3)?;
        }
        Ok(())
    });
}
