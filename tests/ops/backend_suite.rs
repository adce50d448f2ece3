//! Every op of every GPU target against the CPU backend: property tests with fresh random
//! shapes and values, outputs poisoned with NaN before the op, relative-error bounds. One suite,
//! instantiated per target by `backend_suite!`; absent targets SKIP through `support::contexts`.

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use rnn::ops::BiasActGrads;
use rnn::ops::TypedMemory;
use rnn::ops::{LossOutputs, MatShape};
use rnn::{Activation, AdamStep, Context, DType, Ops, SgdStep, View};

use crate::support::{self, Target, rel_err};

mod cells;
mod dense;
pub(crate) mod dtypes;
mod edges;
mod gated_graph;
mod gated_seq;
mod gemm;
mod graphs;
pub(crate) mod indices;
mod kernel_times;
mod layers;
mod memory;
mod rnn_seq;
mod rnn_step;

/// Fresh contexts of `target` for one test, dropped when it ends, so every device allocation is
/// released before the process exits (leak checkers see none). The disk kernel cache makes the
/// op set cheap to load again in each test.
fn contexts(target: Target, test: &str) -> Vec<Context> {
    support::contexts(target, test)
}

/// Leading elements before a view, one of these per case ([`pick_pad`]): 0 and 4 keep views
/// 16-byte aligned (the float4 fast paths), 3 never is (the scalar paths).
const PADS: [usize; 3] = [0, 3, 4];
/// Guard elements after every view; together with the leading pad they must be unchanged after
/// an op, which catches writes past either end of a view.
const GUARD: usize = 5;
/// The guard value: a NaN whose payload no kernel produces, so a stray write of a computed NaN
/// still shows.
const GUARD_BITS: u32 = 0x7fc0_beef;

/// The pad of a [`compare`] case, drawn from [`PADS`] by a hash of its inputs (so a failing
/// case reproduces with the same pad).
fn pick_pad(bufs: &[Vec<f32>]) -> usize {
    let mut h = bufs.len() as u64;
    for b in bufs {
        h = h.wrapping_mul(0x100_0000_01b3) ^ b.len() as u64;
        if let Some(x) = b.first() {
            h ^= u64::from(x.to_bits()) << 17;
        }
    }
    PADS[(Values(h).next() % PADS.len() as u64) as usize]
}

/// Deterministic values from a proptest-drawn seed (splitmix64).
struct Values(u64);

impl Values {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn uniform(&mut self, lo: f32, hi: f32) -> f32 {
        let u = (self.next() >> 40) as f32 / (1u64 << 24) as f32;
        lo + (hi - lo) * u
    }
    fn vec(&mut self, n: usize, lo: f32, hi: f32) -> Vec<f32> {
        (0..n).map(|_| self.uniform(lo, hi)).collect()
    }
    /// Leading elements for `k` views: half the time all multiples of 4 (the streaming kernels'
    /// float4 path), otherwise any small offsets (mostly their scalar path).
    fn pads(&mut self, k: usize) -> Vec<usize> {
        let aligned = self.next() % 2 == 0;
        (0..k)
            .map(|_| {
                let p = (self.next() % 9) as usize;
                if aligned { p / 4 * 4 } else { p }
            })
            .collect()
    }
    fn ints(&mut self, n: usize, below: usize) -> Vec<f32> {
        (0..n)
            .map(|_| (self.next() % below as u64) as f32)
            .collect()
    }
}

fn nan(n: usize) -> Vec<f32> {
    vec![f32::NAN; n]
}

type OpFn<'f> = dyn Fn(&dyn Ops, &[View<'_>]) -> rnn::Result<()> + 'f;

/// Uploads `bufs` (each behind a pad of guard elements), runs `f` on views of them, downloads.
fn run_on(ctx: &Context, bufs: &[Vec<f32>], f: &OpFn<'_>) -> rnn::Result<Vec<Vec<f32>>> {
    run_padded(ctx, bufs, &vec![pick_pad(bufs); bufs.len()], f)
}

/// [`run_on`] with the buffers at `ids` uploaded as u32 (index data: each value converted with
/// `as u32`, and converted back to f32 when downloaded).
fn run_ids(
    ctx: &Context,
    bufs: &[Vec<f32>],
    ids: &[usize],
    f: &OpFn<'_>,
) -> rnn::Result<Vec<Vec<f32>>> {
    run_padded_ids(ctx, (bufs, ids), &vec![pick_pad(bufs); bufs.len()], f)
}

/// [`run_on`] with buffer `i` behind `pads[i]` guard elements (and [`GUARD`] after it). Panics
/// when an op changed a guard element: it wrote outside its views.
fn run_padded(
    ctx: &Context,
    bufs: &[Vec<f32>],
    pads: &[usize],
    f: &OpFn<'_>,
) -> rnn::Result<Vec<Vec<f32>>> {
    run_padded_ids(ctx, (bufs, &[]), pads, f)
}

/// [`run_padded`] with the buffers at `ids` u32 (as [`run_ids`] uploads them).
fn run_padded_ids(
    ctx: &Context,
    (bufs, ids): (&[Vec<f32>], &[usize]),
    pads: &[usize],
    f: &OpFn<'_>,
) -> rnn::Result<Vec<Vec<f32>>> {
    assert!(pads.len() >= bufs.len(), "a pad per buffer");
    let ops = ctx.ops();
    let mut owned = Vec::new();
    let guard = f32::from_bits(GUARD_BITS);
    for (i, (b, &pad)) in bufs.iter().zip(pads).enumerate() {
        if ids.contains(&i) {
            let buf = ops.alloc_as(DType::U32, pad + b.len() + GUARD)?;
            let mut data = vec![GUARD_BITS; pad];
            data.extend(b.iter().map(|&v| v as u32));
            data.extend_from_slice(&[GUARD_BITS; GUARD]);
            ops.upload_as(buf.view(), &data)?;
            owned.push(buf);
            continue;
        }
        let buf = ops.alloc(pad + b.len() + GUARD)?;
        let mut data = vec![guard; pad];
        data.extend_from_slice(b);
        data.extend_from_slice(&[guard; GUARD]);
        ops.upload(buf.view(), &data)?;
        owned.push(buf);
    }
    let views: Vec<View<'_>> = owned
        .iter()
        .zip(bufs)
        .zip(pads)
        .map(|((o, b), &pad)| o.slice(pad, b.len()))
        .collect::<rnn::Result<_>>()?;
    f(ops, &views)?;
    let mut outs = Vec::with_capacity(views.len());
    for (i, ((buf, b), &pad)) in owned.iter().zip(bufs).zip(pads).enumerate() {
        // Bits of every element: u32 values as they are, f32 values as their bits.
        let all: Vec<u32> = if ids.contains(&i) {
            let mut all = vec![0u32; buf.len()];
            ops.download_as(buf.view(), &mut all)?;
            all
        } else {
            let mut all = vec![0.0f32; buf.len()];
            ops.download(buf.view(), &mut all)?;
            all.iter().map(|v| v.to_bits()).collect()
        };
        let (head, rest) = all.split_at(pad);
        let (body, tail) = rest.split_at(b.len());
        for (where_, guards) in [("before", head), ("after", tail)] {
            if let Some(j) = guards.iter().position(|&g| g != GUARD_BITS) {
                panic!(
                    "{}: buffer {i} (pad {pad}, {} elements): guard {j} {where_} the view was \
                     overwritten with bits {:#x}",
                    ctx.id(),
                    b.len(),
                    guards[j]
                );
            }
        }
        outs.push(if ids.contains(&i) {
            body.iter().map(|&v| v as f32).collect()
        } else {
            body.iter().map(|&v| f32::from_bits(v)).collect()
        });
    }
    Ok(outs)
}

/// Runs `f` on the CPU backend and on `gpu` with the same buffers and compares buffers `check`.
fn compare(
    gpu: &Context,
    what: &str,
    bufs: &[Vec<f32>],
    check: &[usize],
    tol: f64,
    f: &OpFn<'_>,
) -> Result<(), TestCaseError> {
    compare_ids(gpu, what, (bufs, &[]), check, tol, f)
}

/// [`compare`] with the buffers at `ids` u32 (index data, as [`run_ids`] uploads them):
/// `(bufs, ids)`.
fn compare_ids(
    gpu: &Context,
    what: &str,
    (bufs, ids): (&[Vec<f32>], &[usize]),
    check: &[usize],
    tol: f64,
    f: &OpFn<'_>,
) -> Result<(), TestCaseError> {
    compare_sums_ids(gpu, what, (bufs, ids), (check, &[]), tol, f)
}

/// [`compare_sums`] with the buffers at `ids` u32 (as [`run_ids`] uploads them): buffers
/// `(bufs, ids)`, `(check, sums)`.
fn compare_sums_ids(
    gpu: &Context,
    what: &str,
    (bufs, ids): (&[Vec<f32>], &[usize]),
    (check, sums): (&[usize], &[(usize, Vec<f32>)]),
    tol: f64,
    f: &OpFn<'_>,
) -> Result<(), TestCaseError> {
    let pads = vec![pick_pad(bufs); bufs.len()];
    let what = &format!("{what} (n {}, pads {pads:?})", bufs[0].len());
    let want = run_ids(&Context::cpu(), bufs, ids, f)
        .map_err(|e| TestCaseError::fail(format!("{what} on cpu: {e}")))?;
    let got = run_padded_ids(gpu, (bufs, ids), &pads, f)
        .map_err(|e| TestCaseError::fail(format!("{what} on {}: {e}", gpu.id())))?;
    judge(gpu, what, (&got, &want), check, sums, tol)
}

/// [`compare`] with every buffer behind `pad` elements on the GPU.
fn compare_at(
    gpu: &Context,
    what: &str,
    bufs: &[Vec<f32>],
    pad: usize,
    check: &[usize],
    tol: f64,
    f: &OpFn<'_>,
) -> Result<(), TestCaseError> {
    compare_padded(gpu, what, bufs, &vec![pad; bufs.len()], check, tol, f)
}

/// [`compare`] with buffer `i` behind `pads[i]` poisoned elements on the GPU.
fn compare_padded(
    gpu: &Context,
    what: &str,
    bufs: &[Vec<f32>],
    pads: &[usize],
    check: &[usize],
    tol: f64,
    f: &OpFn<'_>,
) -> Result<(), TestCaseError> {
    compare_checked(gpu, what, bufs, pads, check, &[], tol, f)
}

/// [`compare`] for outputs that are sums whose terms may cancel (column sums, colliding
/// scatter-adds): buffer `i` of `sums` is held to ‖got − want‖ ≤ `tol` ‖scale‖, where `scale`
/// holds each element's sum of its terms' magnitudes. That is what rounding in any order is
/// bounded by; a bound against the sum itself fails whenever a random draw nearly cancels.
fn compare_sums(
    gpu: &Context,
    what: &str,
    bufs: &[Vec<f32>],
    check: &[usize],
    sums: &[(usize, Vec<f32>)],
    tol: f64,
    f: &OpFn<'_>,
) -> Result<(), TestCaseError> {
    let pads = vec![pick_pad(bufs); bufs.len()];
    compare_checked(gpu, what, bufs, &pads, check, sums, tol, f)
}

#[allow(clippy::too_many_arguments)]
fn compare_checked(
    gpu: &Context,
    what: &str,
    bufs: &[Vec<f32>],
    pads: &[usize],
    check: &[usize],
    sums: &[(usize, Vec<f32>)],
    tol: f64,
    f: &OpFn<'_>,
) -> Result<(), TestCaseError> {
    let what = &format!("{what} (n {}, pads {pads:?})", bufs[0].len());
    let want = run_on(&Context::cpu(), bufs, f)
        .map_err(|e| TestCaseError::fail(format!("{what} on cpu: {e}")))?;
    let got = run_padded(gpu, bufs, pads, f)
        .map_err(|e| TestCaseError::fail(format!("{what} on {}: {e}", gpu.id())))?;
    judge(gpu, what, (&got, &want), check, sums, tol)
}

/// The checks of [`compare_checked`] on the outputs `(got, want)` of a case.
fn judge(
    gpu: &Context,
    what: &str,
    (got, want): (&[Vec<f32>], &[Vec<f32>]),
    check: &[usize],
    sums: &[(usize, Vec<f32>)],
    tol: f64,
) -> Result<(), TestCaseError> {
    for (i, scale) in sums {
        let (got, want) = (&got[*i], &want[*i]);
        assert_eq!(scale.len(), want.len(), "{what}: one magnitude per element");
        let diff: Vec<f32> = got.iter().zip(want).map(|(g, w)| g - w).collect();
        // A NaN or infinity in `got` makes `diff` non-finite, and the error with it.
        let err = norm(&diff) / norm(scale).max(1e-30);
        prop_assert!(
            err.is_finite() && err <= tol,
            "{what} on {}: buffer {i} error {err:e} > {tol:e} of its terms' magnitudes\n got \
             {:?}\nwant {:?}",
            gpu.id(),
            &got[..got.len().min(8)],
            &want[..want.len().min(8)]
        );
    }
    for &i in check {
        if want[i].iter().all(|x| *x == 0.0) && !want[i].is_empty() {
            // An all-zero reference cannot bound a relative error; demand exact zeros.
            prop_assert!(
                got[i].iter().all(|x| *x == 0.0),
                "{what} on {}: buffer {i} should be zero: {:?}",
                gpu.id(),
                &got[i]
            );
            continue;
        }
        let err = rel_err(&got[i], &want[i]);
        prop_assert!(
            err <= tol,
            "{what} on {}: buffer {i} rel err {err:e} > {tol:e}\n got {:?}\nwant {:?}",
            gpu.id(),
            &got[i][..got[i].len().min(8)],
            &want[i][..want[i].len().min(8)]
        );
    }
    Ok(())
}

/// The Euclidean norm, in f64.
fn norm(v: &[f32]) -> f64 {
    v.iter().map(|&x| (x as f64).powi(2)).sum::<f64>().sqrt()
}

/// Runs a property over every device of `target` (or prints SKIP).
fn prop<S: Strategy>(
    target: Target,
    test: &str,
    cases: u32,
    strategy: S,
    body: impl Fn(&Context, S::Value) -> Result<(), TestCaseError>,
) where
    S::Value: Clone,
{
    prop_on(contexts(target, test), test, cases, strategy, body)
}

/// Runs a property over `ctxs` (nothing when empty: `support::contexts` printed the SKIP).
fn prop_on<S: Strategy>(
    ctxs: Vec<Context>,
    test: &str,
    cases: u32,
    strategy: S,
    body: impl Fn(&Context, S::Value) -> Result<(), TestCaseError>,
) where
    S::Value: Clone,
{
    if ctxs.is_empty() {
        return;
    }
    let config = Config {
        cases,
        max_shrink_iters: 32,
        failure_persistence: None,
        ..Config::default()
    };
    let mut runner = TestRunner::new(config);
    let result = runner.run(&strategy, |v| {
        for ctx in &ctxs {
            body(ctx, v.clone())?;
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{test}: {e}");
    }
}

/// A dimension: 1, small odd sizes, sizes around the 64-wide tiles, and a few large ones.
fn dim() -> impl Strategy<Value = usize> {
    prop_oneof![Just(1usize), 2..=17usize, 50..=80usize, 120..=300usize]
}

const ACTIVATIONS: [Activation; 6] = [
    Activation::Identity,
    Activation::Relu,
    Activation::Sigmoid,
    Activation::Tanh,
    Activation::Gelu,
    Activation::LeakyRelu { slope: 0.01 },
];

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
            compare_padded(
                ctx,
                &what,
                &[z.clone(), bias.clone(), nan(n)],
                &pads,
                &[0, 2],
                tol,
                &|o, v| o.bias_act_forward(v[0], v[1], v[2], act, rows, cols),
            )?;
            compare_padded(
                ctx,
                &format!("{what} in place"),
                &[z.clone(), bias.clone()],
                &pads,
                &[0],
                tol,
                &|o, v| o.bias_act_forward(v[0], v[1], v[0], act, rows, cols),
            )?;
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
                &|o, v| o.act_backward(v[0], v[1], v[2], v[3], act),
            )?;
            // The fused backward with the bias gradient, out of place and in place (dz = dy);
            // the column sums are held to their terms' magnitudes (they may cancel).
            let dz = run_on(&Context::cpu(), &bufs, &|o, v| {
                o.act_backward(v[0], v[1], v[2], v[3], act)
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
            compare_checked(
                ctx,
                &what,
                &fused,
                &[pads[0], pads[1], pads[2], pads[3], pads[0]],
                &[3],
                &[(4, scale.clone())],
                tol,
                &|o, v| {
                    o.bias_act_backward(
                        v[0],
                        v[1],
                        v[2],
                        BiasActGrads::new(v[3], v[4]),
                        act,
                        MatShape::new(rows, cols),
                    )
                },
            )?;
            fused.remove(3);
            compare_checked(
                ctx,
                &format!("{what} in place"),
                &fused,
                &pads,
                &[0],
                &[(3, scale)],
                tol,
                &|o, v| {
                    o.bias_act_backward(
                        v[0],
                        v[1],
                        v[2],
                        BiasActGrads::new(v[0], v[3]),
                        act,
                        MatShape::new(rows, cols),
                    )
                },
            )?;
        }
        Ok(())
    });
}

pub fn softmax_losses(t: Target) {
    let s = (
        prop_oneof![Just(1usize), 2..=70usize],
        prop_oneof![Just(1usize), 2..=40usize, 250..=700usize],
        any::<u64>(),
    );
    prop(t, "gpu_softmax_losses", 10, s, |ctx, (rows, cols, seed)| {
        let mut r = Values(seed);
        let n = rows * cols;
        let x = r.vec(n, -8.0, 8.0);
        let tol = 1e-5;
        compare(ctx, "softmax", &[x.clone(), nan(n)], &[1], tol, &|o, v| {
            o.softmax(v[0], v[1], rows, cols)
        })?;
        compare(
            ctx,
            "softmax in place",
            std::slice::from_ref(&x),
            &[0],
            tol,
            &|o, v| o.softmax(v[0], v[0], rows, cols),
        )?;
        compare(
            ctx,
            "log_softmax",
            &[x.clone(), nan(n)],
            &[1],
            tol,
            &|o, v| o.log_softmax(v[0], v[1], rows, cols),
        )?;
        let labels = r.ints(rows, cols);
        let scale = r.uniform(0.1, 2.0);
        let bufs = [x.clone(), labels.clone(), nan(n), nan(rows), nan(rows)];
        compare_ids(
            ctx,
            &format!("softmax_cross_entropy {rows}x{cols}"),
            (&bufs, &[1]),
            &[2, 3, 4],
            1e-5,
            &|o, v| {
                o.softmax_cross_entropy(
                    v[0],
                    v[1],
                    LossOutputs::new(v[2], v[3], None),
                    v[4],
                    MatShape::new(rows, cols),
                    scale,
                )
            },
        )?;
        // With totals: the loss sum and correct count added to what the buffer held (a third
        // element past them stays untouched).
        let totals = vec![
            r.uniform(-3.0, 3.0),
            r.uniform(0.0, 5.0),
            r.uniform(-1.0, 1.0),
        ];
        let bufs = [
            x.clone(),
            labels,
            nan(n),
            nan(rows),
            nan(rows),
            totals.clone(),
        ];
        compare_ids(
            ctx,
            &format!("softmax_cross_entropy {rows}x{cols} with totals"),
            (&bufs, &[1]),
            &[2, 3, 4, 5],
            1e-5,
            &|o, v| {
                o.softmax_cross_entropy(
                    v[0],
                    v[1],
                    LossOutputs::new(v[2], v[3], Some(v[5])),
                    v[4],
                    MatShape::new(rows, cols),
                    scale,
                )
            },
        )?;
        let bufs = [x.clone(), r.vec(n, -8.0, 8.0), nan(n), nan(rows)];
        compare(ctx, "mse", &bufs, &[2, 3], tol, &|o, v| {
            o.mse(
                v[0],
                v[1],
                LossOutputs::new(v[2], v[3], None),
                MatShape::new(rows, cols),
                scale,
            )
        })?;
        let bufs = [x, r.vec(n, -8.0, 8.0), nan(n), nan(rows), totals];
        compare(ctx, "mse with totals", &bufs, &[2, 3, 4], tol, &|o, v| {
            o.mse(
                v[0],
                v[1],
                LossOutputs::new(v[2], v[3], Some(v[4])),
                MatShape::new(rows, cols),
                scale,
            )
        })
    });
}

pub fn reductions(t: Target) {
    let s = (
        dim(),
        prop_oneof![Just(1usize), 2..=100usize, 200..=600usize],
        prop_oneof![1..=1000usize, 60_000..=300_000usize],
        any::<u64>(),
    );
    prop(
        t,
        "gpu_reductions",
        10,
        s,
        |ctx, (rows, cols, len, seed)| {
            let mut r = Values(seed);
            let n = rows * cols;
            let x = r.vec(n, -1.0, 1.0);
            let beta = r.uniform(0.5, 1.5);
            let tol = 1e-5;
            // Sums of mixed signs cancel: held to the magnitudes of their terms.
            let magnitudes = |by_rows: bool, prior: &[f32]| {
                let mut scale = vec![0.0f32; if by_rows { cols } else { rows }];
                for (i, v) in x.iter().enumerate() {
                    scale[if by_rows { i % cols } else { i / cols }] += v.abs();
                }
                for (s, p) in scale.iter_mut().zip(prior) {
                    *s += (beta * p).abs();
                }
                scale
            };
            compare_sums(
                ctx,
                "sum_rows beta=0",
                &[x.clone(), nan(cols)],
                &[],
                &[(1, magnitudes(true, &[]))],
                tol,
                &|o, v| o.sum_rows(v[0], v[1], rows, cols, 0.0),
            )?;
            let prior = r.vec(cols, -1.0, 1.0);
            compare_sums(
                ctx,
                "sum_rows",
                &[x.clone(), prior.clone()],
                &[],
                &[(1, magnitudes(true, &prior))],
                tol,
                &|o, v| o.sum_rows(v[0], v[1], rows, cols, beta),
            )?;
            compare_sums(
                ctx,
                "sum_cols beta=0",
                &[x.clone(), nan(rows)],
                &[],
                &[(1, magnitudes(false, &[]))],
                tol,
                &|o, v| o.sum_cols(v[0], v[1], rows, cols, 0.0),
            )?;
            let prior = r.vec(rows, -1.0, 1.0);
            compare_sums(
                ctx,
                "sum_cols",
                &[x.clone(), prior.clone()],
                &[],
                &[(1, magnitudes(false, &prior))],
                tol,
                &|o, v| o.sum_cols(v[0], v[1], rows, cols, beta),
            )?;
            let big = r.vec(len, 0.0, 1.0);
            compare(
                ctx,
                "sum_all beta=0",
                &[big.clone(), nan(1)],
                &[1],
                tol,
                &|o, v| o.sum_all(v[0], v[1], 0.0),
            )?;
            compare(
                ctx,
                "sum_all",
                &[big.clone(), vec![3.0]],
                &[1],
                tol,
                &|o, v| o.sum_all(v[0], v[1], beta),
            )?;
            let norm: f64 = big.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
            for max_norm in [(norm * 0.5) as f32, (norm * 2.0) as f32] {
                compare(
                    ctx,
                    &format!("clip_grad_norm {max_norm}"),
                    &[big.clone(), nan(1)],
                    &[0, 1],
                    tol,
                    &|o, v| o.clip_grad_norm(v[0], max_norm, v[1]),
                )?;
            }
            Ok(())
        },
    );
}

pub fn data(t: Target) {
    let s = (1..=50usize, 1..=40usize, 1..=300usize, any::<u64>());
    prop(t, "gpu_data", 10, s, |ctx, (src_rows, nidx, cols, seed)| {
        let mut r = Values(seed);
        let src = r.vec(src_rows * cols, -1.0, 1.0);
        let idx = r.ints(nidx, src_rows);
        compare_ids(
            ctx,
            "gather_rows",
            (&[src, idx.clone(), nan(nidx * cols)], &[1]),
            &[2],
            0.0,
            &|o, v| o.gather_rows(v[0], v[1], v[2], cols),
        )?;
        // u32 rows (labels moved with their samples): ids up to 2^24 survive the f32 harness.
        let ids = r.ints(src_rows * cols, 1 << 24);
        compare_ids(
            ctx,
            "gather_rows of u32 rows",
            (&[ids, idx.clone(), vec![0.0; nidx * cols]], &[0, 1, 2]),
            &[2],
            0.0,
            &|o, v| o.gather_rows(v[0], v[1], v[2], cols),
        )?;
        let classes = src_rows;
        compare_ids(
            ctx,
            "one_hot",
            (&[idx, nan(nidx * classes)], &[0]),
            &[1],
            0.0,
            &|o, v| o.one_hot(v[0], v[1], classes),
        )
    });
}

pub fn optimizers(t: Target) {
    let s = (
        prop_oneof![1..=300usize, 5000..=70_000usize],
        1..=50u64,
        any::<u64>(),
    );
    prop(t, "gpu_optimizers", 8, s, |ctx, (n, step, seed)| {
        let mut r = Values(seed);
        let (p, g, m) = (
            r.vec(n, -1.0, 1.0),
            r.vec(n, -1.0, 1.0),
            r.vec(n, -0.1, 0.1),
        );
        let v = r.vec(n, 0.0, 0.01);
        let tol = 1e-5;
        // The device-side state: learning rate, steps already taken (this op takes `step`),
        // stale bias corrections the op must overwrite.
        let state = |lr: f32| vec![lr, (step - 1) as f32, -1.0, -1.0];
        for (momentum, nesterov) in [(0.0, false), (0.9, false), (0.9, true)] {
            let s = SgdStep {
                momentum,
                weight_decay: 0.01,
                nesterov,
            };
            let check: &[usize] = if momentum == 0.0 { &[0, 3] } else { &[0, 2, 3] };
            compare(
                ctx,
                &format!("sgd_step {s:?} step {step}"),
                &[p.clone(), g.clone(), m.clone(), state(0.1)],
                check,
                tol,
                &|o, b| o.sgd_step(b[0], b[1], b[2], b[3], s),
            )?;
        }
        for decoupled in [false, true] {
            let s = AdamStep {
                beta1: 0.9,
                beta2: 0.999,
                eps: 1e-8,
                weight_decay: 0.01,
                decoupled,
            };
            let bufs = [p.clone(), g.clone(), m.clone(), v.clone(), state(1e-3)];
            compare(
                ctx,
                &format!("adam_step {s:?} step {step}"),
                &bufs,
                &[0, 2, 3, 4],
                tol,
                &|o, b| o.adam_step(b[0], b[1], b[2], b[3], b[4], s),
            )?;
        }
        Ok(())
    });
}

macro_rules! backend_suite {
    ($name:ident, $target:expr $(, $extra:item)*) => {
        mod $name {
            use crate::support::Target;
            const T: Target = $target;
            $($extra)*
            #[test]
            fn gpu_gemm() {
                super::gemm::gemm(T)
            }
            #[test]
            fn gpu_gemm_thin() {
                super::gemm::gemm_thin(T)
            }
            #[test]
            fn gpu_elementwise() {
                super::elementwise(T)
            }
            #[test]
            fn gpu_activations() {
                super::activations(T)
            }
            #[test]
            fn gpu_dense_ops() {
                super::dense::dense_ops(T)
            }
            #[test]
            fn gpu_softmax_losses() {
                super::softmax_losses(T)
            }
            #[test]
            fn gpu_graphs_across_threads() {
                super::graphs::graphs_across_threads(T)
            }
            #[test]
            fn gpu_reductions() {
                super::reductions(T)
            }
            #[test]
            fn gpu_data() {
                super::data(T)
            }
            #[test]
            fn gpu_invalid_indices() {
                super::indices::invalid_indices(T)
            }
            #[test]
            fn gpu_indices_beyond_2_24() {
                super::indices::beyond_2_24(T)
            }
            #[test]
            fn gpu_cells() {
                super::cells::cells(T)
            }
            #[test]
            fn gpu_rnn_steps() {
                super::rnn_step::rnn_steps(T)
            }
            #[test]
            fn gpu_rnn_sequence() {
                super::rnn_seq::rnn_sequence(T)
            }
            #[test]
            fn gpu_rnn_sequence_cooperative() {
                super::rnn_seq::rnn_sequence_cooperative(T)
            }
            #[test]
            fn gpu_rnn_sequence_fallback() {
                super::rnn_seq::rnn_sequence_fallback(T)
            }
            #[test]
            fn gpu_gated_sequence() {
                super::gated_seq::gated_sequence(T)
            }
            #[test]
            fn gpu_gated_sequence_fallback() {
                super::gated_seq::gated_sequence_fallback(T)
            }
            #[test]
            fn gpu_gated_sequence_graph() {
                super::gated_graph::gated_sequence_graph(T)
            }
            #[test]
            fn gpu_dropout() {
                super::layers::dropout(T)
            }
            #[test]
            fn gpu_layer_norm() {
                super::layers::layer_norm(T)
            }
            #[test]
            fn gpu_scatter_add_rows() {
                super::layers::scatter_add_rows(T)
            }
            #[test]
            fn gpu_optimizers() {
                super::optimizers(T)
            }
            #[test]
            fn gpu_graphs() {
                super::graphs::graphs(T)
            }
            #[test]
            fn gpu_user_kernel() {
                super::edges::user_kernel(T)
            }
            #[test]
            fn gpu_compile_error() {
                super::edges::compile_error(T)
            }
            #[test]
            fn gpu_foreign_and_edge_cases() {
                super::edges::foreign_and_edge_cases(T)
            }
            #[test]
            fn gpu_kernel_cache() {
                super::memory::kernel_cache(T)
            }
            #[test]
            fn gpu_typed_round_trips() {
                super::dtypes::typed_round_trips(T)
            }
            #[test]
            fn gpu_rejects_other_types() {
                super::dtypes::rejects_other_types(T)
            }
            #[test]
            fn gpu_kernel_times() {
                super::kernel_times::kernel_times(T)
            }
        }
    };
}

/// Runs alone (it takes all device memory): `--ignored gpu_oom --test-threads=1`, as
/// scripts/gpu-machine.sh does; OpenCL allocates lazily, so it has no instance there.
macro_rules! oom_test {
    () => {
        #[test]
        #[ignore = "exhausts device memory; run alone: --ignored gpu_oom --test-threads=1"]
        fn gpu_oom_recovery() {
            super::memory::oom_recovery(T)
        }
    };
}

backend_suite!(
    opencl,
    Target::OpenCl,
    #[test]
    fn gpu_gemm_tiles() {
        super::gemm::gemm_tiles(T)
    },
    #[test]
    fn gpu_gemm_bad_tile() {
        super::gemm::bad_tile_is_an_error(T)
    },
    // The per-launch choice: the tensor-core kernels on NVIDIA's OpenCL (sm_80+).
    #[test]
    fn gpu_gemm_own_kernel() {
        super::gemm::gemm_own_kernel(T)
    },
    #[test]
    fn gpu_sequence_launches() {
        super::kernel_times::sequence_launches(T)
    },
    #[test]
    fn gpu_gemm_launches() {
        super::kernel_times::gemm_launches(T)
    }
);
backend_suite!(
    cuda,
    Target::Cuda,
    #[test]
    fn gpu_gemm_own_kernel() {
        super::gemm::gemm_own_kernel(T)
    },
    oom_test!();
);
backend_suite!(hip, Target::Hip, oom_test!(););
backend_suite!(hip_on_cuda, Target::HipOnCuda, oom_test!(););
