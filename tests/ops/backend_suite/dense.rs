//! The dense-layer ops against the CPU: `dense_forward` (the GPU backends fuse the bias and
//! activation into the thin GEMM of a layer with at most 16 outputs) and `dense_param_grads`
//! (they sum the bias gradient inside the thin weight-gradient GEMM, with a k split where the
//! bias directly follows the weight, as in a network's flat gradient buffer). Random shapes on
//! both sides of 16 outputs and 16 inputs, every activation, in place (`y` = `z`) and not; and
//! [`TILE_LAYERS`], whose products NVIDIA's OpenCL runs on its tensor-core kernels (`sgemm_wg64`
//! on an H100/H200), and [`HEAD_LAYERS`].

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use rnn::ops::BiasActBackwardProduct;
use rnn::ops::DenseForward;
use rnn::ops::DenseParamGrads;
use rnn::ops::{Activated, BiasActGrads, MatShape};
use rnn::ops::{DenseParams, DenseShape};
use rnn::{Activation, Context, Ops, View};

use super::activations::ACTIVATIONS;
use super::{Values, compare_checked, contexts, nan, prop, run_on};
use crate::support::{self, Target};

/// `(rows, inputs, outputs)` of layers whose forward product the tile GEMMs take (outputs >= 128
/// over inputs >= 256): on NVIDIA's OpenCL the tensor-core kernels, unsplit (the first, whose
/// weight gradient, over 1100 rows, is theirs too) and with k split (the second).
const TILE_LAYERS: [(usize, usize, usize); 2] = [(1100, 300, 257), (130, 1030, 136)];

/// Classifier heads (at most 16 outputs) whose forward the thin kernel takes: W1's at batch 256,
/// unsplit with its epilogue over two k pieces though the grid is small; one over five pieces,
/// split with the separate bias and activation pass.
const HEAD_LAYERS: [(usize, usize, usize); 2] = [(256, 512, 10), (300, 1100, 10)];

pub fn dense_ops(t: Target) {
    for ctx in &contexts(t, "gpu_dense_ops") {
        // Every module built first: on a cold context the portable kernels would carry the
        // tile layers' tensor-core products (`OpSet::carried`).
        ctx.ops().warm_up().unwrap();
        for (case, &(rows, inputs, outputs)) in TILE_LAYERS.iter().chain(&HEAD_LAYERS).enumerate() {
            for act in 0..ACTIVATIONS.len() {
                let seed = 0x0de5_e000 + (case * ACTIVATIONS.len() + act) as u64;
                dense_case(ctx, (rows, inputs, outputs, act, seed))
                    .unwrap_or_else(|e| panic!("gpu_dense_ops: {e}"));
            }
        }
    }
    let s = (
        prop_oneof![1..=40usize, 200..=1300usize],
        prop_oneof![1..=16usize, 17..=300usize],
        prop_oneof![1..=16usize, 17..=40usize],
        0..ACTIVATIONS.len(),
        any::<u64>(),
    );
    prop(t, "gpu_dense_ops", 10, s, dense_case);
}

/// The dense ops while the tier-0 stand-in takes the products (`ContextOptions::force_tier0`):
/// the fused thin paths give way to the product and a separate bias and activation pass.
pub fn dense_ops_tier0(t: Target) {
    let test = "gpu_dense_ops_tier0";
    for ctx in &support::contexts_with(t, test, |o| o.force_tier0 = true) {
        for (case, &(rows, inputs, outputs)) in TILE_LAYERS.iter().chain(&HEAD_LAYERS).enumerate() {
            for act in 0..ACTIVATIONS.len() {
                let seed = 0x0de5_e700 + (case * ACTIVATIONS.len() + act) as u64;
                dense_case(ctx, (rows, inputs, outputs, act, seed))
                    .unwrap_or_else(|e| panic!("{test}: {e}"));
            }
        }
    }
}

/// Both dense ops of one random layer against the CPU.
fn dense_case(
    ctx: &Context,
    (rows, inputs, outputs, act, seed): (usize, usize, usize, usize, u64),
) -> Result<(), TestCaseError> {
    let act: Activation = ACTIVATIONS[act];
    let mut r = Values(seed);
    let pads = r.pads(6);
    let x = r.vec(rows * inputs, -1.0, 1.0);
    let w = r.vec(outputs * inputs, -1.0, 1.0);
    let bias = r.vec(outputs, -1.0, 1.0);
    let tol = 2e-5 * (inputs as f64).sqrt();
    let what = format!("dense_forward {act:?} {rows}x{inputs}->{outputs}");
    let bufs = [x.clone(), w, bias, nan(rows * outputs), nan(rows * outputs)];
    // `y` is buffer 4, or buffer 3 (`z`) in place.
    let forward = |o: &dyn Ops, v: &[View<'_>], y: usize| {
        o.dense_forward(DenseForward::new(
            v[0],
            DenseParams::new(v[1], v[2]),
            v[3],
            v[y],
            act,
            DenseShape::new(rows, inputs, outputs),
        ))
    };
    compare_checked(ctx, &what, &bufs, &pads, &[3, 4], &[], tol, &|o, v| {
        forward(o, v, 4)
    })?;
    if act.derivative_from_output() {
        compare_checked(
            ctx,
            &format!("{what} in place"),
            &bufs[..4],
            &pads[..4],
            &[3],
            &[],
            tol,
            &|o, v| forward(o, v, 3),
        )?;
    }

    // Parameter gradients: the weight and bias gradients as one flat buffer (the bias
    // right after the weight) and as two buffers. Both are sums over the rows.
    let dz = r.vec(rows * outputs, -1.0, 1.0);
    let (wn, what) = (
        outputs * inputs,
        format!("dense_param_grads {rows}x{inputs}->{outputs}"),
    );
    let mut scale = vec![0.0f32; wn + outputs];
    for row in 0..rows {
        for o in 0..outputs {
            let g = dz[row * outputs + o].abs();
            for i in 0..inputs {
                scale[o * inputs + i] += g * x[row * inputs + i].abs();
            }
            scale[wn + o] += g;
        }
    }
    compare_checked(
        ctx,
        &format!("{what}, flat"),
        &[dz.clone(), x.clone(), nan(wn + outputs)],
        &pads[..3],
        &[],
        &[(2, scale.clone())],
        tol,
        &|o, v| {
            let (dw, db) = (v[2].slice(0, wn)?, v[2].slice(wn, outputs)?);
            o.dense_param_grads(DenseParamGrads::new(
                v[0],
                v[1],
                DenseParams::new(dw, db),
                DenseShape::new(rows, inputs, outputs),
            ))
        },
    )?;
    compare_checked(
        ctx,
        &format!("{what}, apart"),
        &[dz.clone(), x, nan(wn), nan(outputs)],
        &pads[..4],
        &[],
        &[(2, scale[..wn].to_vec()), (3, scale[wn..].to_vec())],
        tol,
        &|o, v| {
            o.dense_param_grads(DenseParamGrads::new(
                v[0],
                v[1],
                DenseParams::new(v[2], v[3]),
                DenseShape::new(rows, inputs, outputs),
            ))
        },
    )?;

    // The backward of a hidden layer of `inputs` units under this one: its output gradient is
    // dz W (k = outputs; the GPUs form it inside the column-sum pass up to 16). Both sums are
    // held to their terms' magnitudes (|act'| <= 1.2 for every activation).
    let (k, cols) = (outputs, inputs);
    let z = r.vec(rows * cols, -3.0, 3.0);
    let y = run_on(&Context::cpu(), &[z.clone(), nan(rows * cols)], &|o, v| {
        o.activation(v[0], v[1], act)
    })
    .map_err(|e| TestCaseError::fail(e.to_string()))?
    .remove(1);
    let w = r.vec(k * cols, -1.0, 1.0);
    let mut dz_scale = vec![0.0f32; rows * cols];
    let mut db_scale = vec![0.0f32; cols];
    for row in 0..rows {
        for c in 0..cols {
            let t: f32 = (0..k)
                .map(|j| 1.2 * (dz[row * k + j] * w[j * cols + c]).abs())
                .sum();
            dz_scale[row * cols + c] = t;
            db_scale[c] += t;
        }
    }
    compare_checked(
        ctx,
        &format!("bias_act_backward_product {act:?} {rows}x{k} x {k}x{cols}"),
        &[dz, w, z, y, nan(rows * cols), nan(cols)],
        &pads[..],
        &[],
        &[(4, dz_scale), (5, db_scale)],
        tol,
        &|o, v| {
            o.bias_act_backward_product(BiasActBackwardProduct::new(
                v[0],
                v[1],
                Activated::new(v[2], v[3], act),
                BiasActGrads::new(v[4], v[5]),
                MatShape::new(rows, cols),
                k,
            ))
        },
    )
}
