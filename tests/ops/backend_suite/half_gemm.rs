//! bf16/f16 GEMM and dense-layer ops (issue 28's op layer) on every backend against the CPU:
//! random shapes, transposes, scalars and offsets, inputs of both 16-bit types, f32 and T
//! outputs, every output poisoned with NaN and guarded by NaN elements on both sides. The
//! shapes reach the portable kernels (`hgemm_*`, every dialect: odd sizes, k not a multiple of
//! 8, offsets of 3) and, on CUDA sm_80+ and NVIDIA's OpenCL on sm_80+, the tensor-core ones
//! (`hgemm_tc*`, `hgemm_lo_tc*`: leading dimensions multiples of 8 at aligned offsets, 64- and
//! 128-wide tiles, ragged edges, k split); then the type rules' errors.
//!
//! Tolerances, from the types' unit roundoff u (bf16 2^-8, f16 2^-11, f32 2^-24) and the sum's
//! length k: both backends sum the same T products in f32, in different orders, so an f32
//! output may differ by about k u_f32 of the terms' magnitudes; a T output is that sum rounded
//! once on each side, which adds up to one unit of T (u_T relative) where the two sums round to
//! neighbouring values. The bounds are 4 times those (relative, in the Euclidean norm).

use half::{bf16, f16};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use rnn::ops::prelude::*;
use rnn::ops::{
    Activated, BiasActBackwardProduct, BiasActGrads, DenseForward, DenseParamGrads, DenseParams,
    DenseShape, MatShape,
};
use rnn::{Activation, Buffer, Context, DType, Error, Gemm, View};

use super::{Values, prop};
use crate::support::{self, Target, rel_err};

/// Guard elements after every view (and the pad before it).
const GUARD: usize = 5;

/// The unit roundoff of a float type.
fn unit(t: DType) -> f64 {
    match t {
        DType::Bf16 => 2f64.powi(-8),
        DType::F16 => 2f64.powi(-11),
        _ => 2f64.powi(-24),
    }
}

/// The bound for an output of type `out` of sums of `k` products (module doc).
fn tolerance(out: DType, k: usize) -> f64 {
    let sum = (k.max(1) as f64) * unit(DType::F32);
    let rounding = if out == DType::F32 { 0.0 } else { unit(out) };
    4.0 * (sum + rounding)
}

/// The bits of a NaN of type `t` that no kernel produces (the guard value).
fn guard_bits(t: DType) -> u32 {
    match t {
        DType::Bf16 => 0x7fbe,
        DType::F16 => 0x7e5f,
        _ => 0x7fc0_beef,
    }
}

fn upload_typed(ops: &dyn Ops, v: View<'_>, vals: &[f32]) -> rnn::Result<()> {
    match v.dtype() {
        DType::Bf16 => ops.upload_as(
            v,
            &vals.iter().map(|&x| bf16::from_f32(x)).collect::<Vec<_>>(),
        ),
        DType::F16 => ops.upload_as(
            v,
            &vals.iter().map(|&x| f16::from_f32(x)).collect::<Vec<_>>(),
        ),
        _ => ops.upload(v, vals),
    }
}

/// The elements of `v` as f32, and each one's bits.
fn download_typed(ops: &dyn Ops, v: View<'_>) -> rnn::Result<Vec<(f32, u32)>> {
    let n = v.len();
    Ok(match v.dtype() {
        DType::Bf16 => {
            let mut h = vec![bf16::ZERO; n];
            ops.download_as(v, &mut h)?;
            h.iter()
                .map(|x| (x.to_f32(), u32::from(x.to_bits())))
                .collect()
        }
        DType::F16 => {
            let mut h = vec![f16::ZERO; n];
            ops.download_as(v, &mut h)?;
            h.iter()
                .map(|x| (x.to_f32(), u32::from(x.to_bits())))
                .collect()
        }
        _ => {
            let mut f = vec![0.0f32; n];
            ops.download(v, &mut f)?;
            f.iter().map(|x| (*x, x.to_bits())).collect()
        }
    })
}

/// One buffer of a case: its values (rounded to its type on upload) and its type.
type Typed = (Vec<f32>, DType);

type TypedOp<'f> = dyn Fn(&dyn Ops, &[View<'_>]) -> rnn::Result<()> + 'f;

/// Uploads `bufs` behind `pad` guard elements (and [`GUARD`] after), runs `f` on views of
/// them, checks the guards and returns every buffer's values.
fn run_typed(
    ctx: &Context,
    bufs: &[Typed],
    pad: usize,
    f: &TypedOp<'_>,
) -> rnn::Result<Vec<Vec<f32>>> {
    let ops = ctx.ops();
    let mut owned: Vec<Buffer> = Vec::new();
    for (vals, t) in bufs {
        let buf = ops.alloc_as(*t, pad + vals.len() + GUARD)?;
        let guard = guard_bits(*t);
        let bytes: Vec<u8> = (0..buf.len())
            .flat_map(|_| guard.to_ne_bytes()[..t.size()].to_vec())
            .collect();
        // Native-endian: the low bytes of a u32 are the 16-bit guard's on little-endian hosts.
        ops.upload_bytes(buf.view(), &bytes)?;
        upload_typed(ops, buf.slice(pad, vals.len())?, vals)?;
        owned.push(buf);
    }
    let views: Vec<View<'_>> = owned
        .iter()
        .zip(bufs)
        .map(|(b, (vals, _))| b.slice(pad, vals.len()))
        .collect::<rnn::Result<_>>()?;
    f(ops, &views)?;
    let mut out = Vec::new();
    for (i, (b, (vals, t))) in owned.iter().zip(bufs).enumerate() {
        let all = download_typed(ops, b.view())?;
        let n = vals.len();
        for (j, (_, bits)) in all.iter().enumerate() {
            if (j < pad || j >= pad + n) && *bits != guard_bits(*t) {
                panic!(
                    "{}: buffer {i} ({t}): element {j} outside the view written",
                    ctx.id()
                );
            }
        }
        out.push(all[pad..pad + n].iter().map(|(v, _)| *v).collect());
    }
    Ok(out)
}

/// Runs `f` on the CPU and on `gpu`; buffer `i` of `check` must agree within `tol`.
fn compare_typed(
    gpu: &Context,
    what: &str,
    (bufs, pad): (&[Typed], usize),
    check: &[(usize, f64)],
    f: &TypedOp<'_>,
) -> Result<(), TestCaseError> {
    let want = run_typed(&Context::cpu(), bufs, pad, f)
        .map_err(|e| TestCaseError::fail(format!("{what} on cpu: {e}")))?;
    let got = run_typed(gpu, bufs, pad, f)
        .map_err(|e| TestCaseError::fail(format!("{what} on {}: {e}", gpu.id())))?;
    for &(i, tol) in check {
        super::judge(gpu, what, (&got, &want), &[i], &[], tol)?;
    }
    Ok(())
}

/// `g` of random A and B of type `ty` into C of type `out` (random where beta is not zero, else
/// NaN), every view `pad` elements into its buffer, against the CPU.
fn compare_product(
    ctx: &Context,
    g: Gemm,
    (ty, out): (DType, DType),
    pad: usize,
    v: &mut Values,
) -> Result<(), TestCaseError> {
    let (m, n, k) = (g.m, g.n, g.k);
    let c0 = if g.beta == 0.0 {
        vec![f32::NAN; m * n]
    } else {
        v.vec(m * n, -1.0, 1.0)
    };
    let bufs = [
        (v.vec(m * k, -1.0, 1.0), ty),
        (v.vec(k * n, -1.0, 1.0), ty),
        (c0, out),
    ];
    let (ta, tb) = (g.trans_a, g.trans_b);
    let what = format!("{ty} gemm {m}x{n}x{k} ta {ta} tb {tb} into {out} at {pad}");
    compare_typed(
        ctx,
        &what,
        (&bufs, pad),
        &[(2, tolerance(out, k))],
        &|o, v| o.gemm(g, v[0], v[1], v[2]),
    )
}

/// A side: 1, odd sizes across the 64/128 tile edges, or a multiple of 8 (tensor-core sized).
fn side() -> impl Strategy<Value = usize> {
    prop_oneof![
        Just(1usize),
        1..=70usize,
        (1..=40usize).prop_map(|x| 8 * x),
        120..=140usize,
    ]
}

/// Products of random shapes, transposes, scalars and offsets in both types, into f32 and T.
pub fn half_gemm(t: Target) {
    let strategy = (
        (
            side(),
            side(),
            prop_oneof![Just(0usize), side(), 500..=700usize],
        ),
        (any::<bool>(), any::<bool>(), any::<bool>(), any::<bool>()),
        (
            prop_oneof![Just(0usize), Just(3usize), Just(8usize)],
            any::<u64>(),
        ),
    );
    prop(
        t,
        "half_gemm",
        24,
        strategy,
        |ctx, ((m, n, k), flags, (pad, seed))| {
            let (ta, tb, f16_in, low_out) = flags;
            let ty = if f16_in { DType::F16 } else { DType::Bf16 };
            let out = if low_out { ty } else { DType::F32 };
            let mut v = Values(seed);
            let beta = if seed % 3 == 0 { 0.0 } else { 0.5 };
            let g = Gemm {
                trans_a: ta,
                trans_b: tb,
                ..Gemm::new(m, n, k).scaled(1.5, beta)
            };
            compare_product(ctx, g, (ty, out), pad, &mut v)
        },
    );
}

/// Products the tensor-core kernels (CUDA sm_80+, NVIDIA's OpenCL on sm_80+) take on a GPU of
/// 132 SMs, every shape in every case, at element offsets 0 or 8 (aligned): 64-wide tiles (81
/// tiles of 128 fill too few SMs) over a shallow k; few 64-wide tiles with k split (the f32
/// output) over a deep one; 128-wide tiles (156 and 168 tiles of 128), the second with ragged
/// edges (m and n not multiples of the tile, n not of 8, k = 136 ending in a partial k-tile);
/// an odd n, which stores a T output one element at a time.
pub fn half_gemm_tensor_core_shapes(t: Target) {
    let shapes = [
        (1152, 1040, 264, false, true),
        (136, 200, 3000, true, false),
        (1664, 1536, 264, false, false),
        (1672, 1500, 136, true, true),
        (1000, 1003, 264, false, true),
    ];
    let strategy = (
        any::<bool>(),
        prop_oneof![Just(0usize), Just(8usize)],
        any::<u64>(),
    );
    prop(
        t,
        "half_gemm_tensor_core_shapes",
        2,
        strategy,
        |ctx, (f16_in, pad, seed)| {
            let ty = if f16_in { DType::F16 } else { DType::Bf16 };
            let mut v = Values(seed);
            for (m, n, k, ta, tb) in shapes {
                let g = Gemm {
                    trans_a: ta,
                    trans_b: tb,
                    ..Gemm::new(m, n, k)
                };
                for out in [DType::F32, ty] {
                    compare_product(ctx, g, (ty, out), pad, &mut v)?;
                }
            }
            Ok(())
        },
    );
}

const ACTS: [Activation; 6] = [
    Activation::Identity,
    Activation::Relu,
    Activation::Sigmoid,
    Activation::Tanh,
    Activation::Gelu,
    Activation::LeakyRelu { slope: 0.01 },
];

/// `dense_forward` (z kept and not), `dense_param_grads` and `bias_act_backward_product` of
/// T views, every activation.
pub fn half_dense(t: Target) {
    let strategy = (
        (side(), side(), side()),
        (0..ACTS.len(), any::<bool>(), any::<bool>()),
        (
            prop_oneof![Just(0usize), Just(3usize), Just(8usize)],
            any::<u64>(),
        ),
    );
    prop(
        t,
        "half_dense",
        16,
        strategy,
        |ctx, ((rows, inputs, outputs), (a, f16_in, in_place), (pad, seed))| {
            let ty = if f16_in { DType::F16 } else { DType::Bf16 };
            let case = DenseCase {
                shape: DenseShape::new(rows, inputs, outputs),
                act: ACTS[a],
                ty,
                in_place,
            };
            dense_checks(ctx, case, pad, seed)
        },
    );
}

/// The products cuBLAS takes where it is present (CUDA with `vendor_blas`; on CUDA again with
/// it off, the built-in kernels): layers past the size from which it takes a product with an
/// epilogue (`hgemm_epilogue_*` rounding its f32 sum), the 10-wide head, an output taller than
/// the epilogue's f32 scratch (4104 x 1024: two blocks of rows), views at odd offsets; and plain
/// products into T with beta and into f32.
pub fn half_vendor_routes(t: Target) {
    let test = "gpu_half_vendor_routes";
    let cases = [
        ((1024, 256, 512), Activation::Relu, DType::Bf16, false, 0),
        ((1024, 256, 512), Activation::Gelu, DType::F16, true, 3),
        ((1024, 256, 512), Activation::Sigmoid, DType::Bf16, false, 3),
        // cuBLAS's sum rounded four at a time from a view 4 elements in (hgemm_epilogue_*'s
        // vector path; pad 3 and the 10 outputs below take its scalar loop).
        ((1024, 256, 512), Activation::Relu, DType::F16, true, 4),
        ((1024, 512, 10), Activation::Identity, DType::F16, false, 0),
        ((1024, 512, 10), Activation::Tanh, DType::Bf16, true, 3),
        (
            (4104, 64, 1024),
            Activation::LeakyRelu { slope: 0.01 },
            DType::Bf16,
            false,
            0,
        ),
    ];
    let products = [(1000, 520, 264, false, true), (512, 10, 784, true, false)];
    // Elsewhere the option changes nothing: one pass.
    let vendor_settings: &[bool] = if t == Target::Cuda {
        &[true, false]
    } else {
        &[true]
    };
    for &vendor in vendor_settings {
        for ctx in support::contexts_with(t, test, |o| o.vendor_blas = vendor) {
            let fail = |e: TestCaseError| panic!("{test} (vendor_blas {vendor}): {e}");
            for (i, &((rows, inputs, outputs), act, ty, in_place, pad)) in cases.iter().enumerate()
            {
                let case = DenseCase {
                    shape: DenseShape::new(rows, inputs, outputs),
                    act,
                    ty,
                    in_place,
                };
                dense_checks(&ctx, case, pad, 0x0da7_a000 + i as u64).unwrap_or_else(fail);
            }
            for (i, &(m, n, k, ta, tb)) in products.iter().enumerate() {
                let ty = if i % 2 == 0 { DType::Bf16 } else { DType::F16 };
                let mut v = Values(0x0da7_b000 + i as u64);
                let g = Gemm {
                    trans_a: ta,
                    trans_b: tb,
                    ..Gemm::new(m, n, k).scaled(1.5, 0.5)
                };
                for out in [DType::F32, ty] {
                    let bufs = [
                        (v.vec(m * k, -1.0, 1.0), ty),
                        (v.vec(k * n, -1.0, 1.0), ty),
                        (v.vec(m * n, -1.0, 1.0), out),
                    ];
                    let what = format!("{ty} gemm {m}x{n}x{k} into {out}, beta 0.5");
                    compare_typed(
                        &ctx,
                        &what,
                        (&bufs, 3),
                        &[(2, tolerance(out, k))],
                        &|o, v| o.gemm(g, v[0], v[1], v[2]),
                    )
                    .unwrap_or_else(fail);
                }
            }
        }
    }
}

/// One layer of [`dense_checks`].
#[derive(Clone, Copy)]
struct DenseCase {
    shape: DenseShape,
    act: Activation,
    ty: DType,
    /// `dense_forward` with y = z (z not kept).
    in_place: bool,
}

/// `dense_forward`, `dense_param_grads` and `bias_act_backward_product` of one layer against
/// the CPU, views behind `pad` guard elements, values from `seed`.
fn dense_checks(
    ctx: &Context,
    case: DenseCase,
    pad: usize,
    seed: u64,
) -> Result<(), TestCaseError> {
    let DenseCase {
        shape,
        act,
        ty,
        in_place,
    } = case;
    let (rows, inputs, outputs) = (shape.rows, shape.inputs, shape.outputs);
    let mut v = Values(seed);
    let out_n = rows * outputs;
    let tol = tolerance(ty, inputs);
    let bufs = [
        (v.vec(rows * inputs, -1.0, 1.0), ty),
        (v.vec(outputs * inputs, -0.5, 0.5), ty),
        (v.vec(outputs, -0.5, 0.5), ty),
        (vec![f32::NAN; out_n], ty),
        (vec![f32::NAN; out_n], ty),
    ];
    let what = format!("{ty} dense_forward {rows}x{inputs}->{outputs} {act:?} in place {in_place}");
    let check: &[(usize, f64)] = if in_place {
        &[(3, tol)]
    } else {
        &[(3, tol), (4, tol)]
    };
    compare_typed(ctx, &what, (&bufs, pad), check, &|o, v| {
        let y = if in_place { v[3] } else { v[4] };
        let params = DenseParams::new(v[1], v[2]);
        o.dense_forward(DenseForward::new(v[0], params, v[3], y, act, shape))
    })?;

    // dz and x in T, dW and dbias in f32: sums of `rows` terms.
    let bufs = [
        (v.vec(out_n, -1.0, 1.0), ty),
        (v.vec(rows * inputs, -1.0, 1.0), ty),
        (vec![f32::NAN; outputs * inputs], DType::F32),
        (vec![f32::NAN; outputs], DType::F32),
    ];
    let what = format!("{ty} dense_param_grads {rows}x{inputs}->{outputs}");
    let tol = tolerance(DType::F32, rows);
    compare_typed(ctx, &what, (&bufs, pad), &[(2, tol), (3, tol)], &|o, v| {
        let grads = DenseParams::new(v[2], v[3]);
        o.dense_param_grads(DenseParamGrads::new(v[0], v[1], grads, shape))
    })?;

    // The backward of this layer from the next one's (`outputs` wide, weight k x outputs).
    let k = inputs;
    let z = v.vec(out_n, -2.0, 2.0);
    let y: Vec<f32> = z.iter().map(|&x| x.tanh()).collect();
    let bufs = [
        (v.vec(rows * k, -1.0, 1.0), ty),
        (v.vec(k * outputs, -0.5, 0.5), ty),
        (z, ty),
        (y, ty),
        (vec![f32::NAN; out_n], ty),
        (vec![f32::NAN; outputs], DType::F32),
    ];
    let what = format!("{ty} bias_act_backward_product {rows}x{k}->{outputs} {act:?}");
    // dbias sums `rows` rounded dz values that may differ by a unit of T each.
    let (tol_dz, tol_db) = (tolerance(ty, k), tolerance(ty, k) * (rows as f64).sqrt());
    compare_typed(
        ctx,
        &what,
        (&bufs, pad),
        &[(4, tol_dz), (5, tol_db)],
        &|o, v| {
            o.bias_act_backward_product(BiasActBackwardProduct::new(
                v[0],
                v[1],
                Activated::new(v[2], v[3], act),
                BiasActGrads::new(v[4], v[5]),
                MatShape::new(rows, outputs),
                k,
            ))
        },
    )
}

/// The type rules: A and B one float type, C f32 or that type; the dense ops' T views one
/// type and their gradients f32. Each mismatch is `DTypeMismatch` naming the argument, and
/// nothing is written.
pub fn half_type_errors(t: Target) {
    for ctx in super::contexts(t, "half_type_errors") {
        let ops = ctx.ops();
        let buf = |d: DType, n: usize| {
            let b = ops.alloc_as(d, n).unwrap();
            upload_typed(ops, b.view(), &vec![0.25; n]).unwrap();
            b
        };
        let (a16, b16, bh, c32, cu) = (
            buf(DType::Bf16, 6),
            buf(DType::Bf16, 6),
            buf(DType::F16, 6),
            buf(DType::F32, 4),
            ops.alloc_as(DType::U32, 4).unwrap(),
        );
        let ch = buf(DType::F16, 4);
        let g = Gemm::new(2, 2, 3);
        let want = |e: Error, op: &str, arg: &str, expected: DType, found: DType| match e {
            Error::DTypeMismatch {
                op: o,
                arg: a,
                expected: x,
                found: f,
            } => {
                assert_eq!(
                    (o.as_str(), a.as_str(), x, f),
                    (op, arg, expected, found),
                    "{t:?}"
                )
            }
            other => panic!("{t:?}: expected DTypeMismatch, got {other:?}"),
        };
        let e = ops.gemm(g, a16.view(), bh.view(), c32.view()).unwrap_err();
        want(e, "gemm", "B", DType::Bf16, DType::F16);
        let e = ops.gemm(g, a16.view(), b16.view(), ch.view()).unwrap_err();
        want(e, "gemm", "C", DType::Bf16, DType::F16);
        let e = ops.gemm(g, a16.view(), b16.view(), cu.view()).unwrap_err();
        want(e, "gemm", "C", DType::Bf16, DType::U32);
        let e = ops.gemm(g, c32.view(), b16.view(), c32.view()).unwrap_err();
        want(e, "gemm", "B", DType::F32, DType::Bf16);

        let shape = DenseShape::new(2, 3, 2);
        let (x, w, bias, z) = (
            buf(DType::Bf16, 6),
            buf(DType::F32, 6),
            buf(DType::Bf16, 2),
            buf(DType::Bf16, 4),
        );
        let params = DenseParams::new(w.view(), bias.view());
        let f = DenseForward::new(
            x.view(),
            params,
            z.view(),
            z.view(),
            Activation::Relu,
            shape,
        );
        want(
            ops.dense_forward(f).unwrap_err(),
            "dense_forward",
            "w",
            DType::Bf16,
            DType::F32,
        );
        let (dw16, db) = (buf(DType::Bf16, 6), buf(DType::F32, 2));
        let grads = DenseParams::new(dw16.view(), db.view());
        let e = ops
            .dense_param_grads(DenseParamGrads::new(z.view(), x.view(), grads, shape))
            .unwrap_err();
        want(e, "dense_param_grads", "dw", DType::F32, DType::Bf16);
        let (g16, w16, dz, dbias16) = (
            buf(DType::Bf16, 6),
            buf(DType::Bf16, 6),
            buf(DType::Bf16, 4),
            buf(DType::Bf16, 2),
        );
        let e = ops
            .bias_act_backward_product(BiasActBackwardProduct::new(
                g16.view(),
                w16.view(),
                Activated::new(z.view(), z.view(), Activation::Tanh),
                BiasActGrads::new(dz.view(), dbias16.view()),
                MatShape::new(2, 2),
                3,
            ))
            .unwrap_err();
        want(
            e,
            "bias_act_backward_product",
            "dbias",
            DType::F32,
            DType::Bf16,
        );
        // Nothing was written.
        for (b, n) in [(&c32, 4), (&ch, 4), (&z, 4), (&db, 2), (&dz, 4), (&dw16, 6)] {
            let vals = download_typed(ops, b.view()).unwrap();
            assert!(
                vals.iter().all(|(v, _)| *v == 0.25),
                "{t:?}: {} of {n} written",
                b.dtype()
            );
        }
    }
}

#[test]
fn cpu_half_type_errors() {
    half_type_errors(Target::Cpu)
}

/// The CPU backend against plain f64 loops over the rounded inputs: a T-output product with
/// alpha and beta, and a dense forward (z rounded, y = tanh of the rounded z, rounded).
#[test]
fn cpu_half_ops_match_f64_loops() {
    let ctx = Context::cpu();
    for (ty, (m, n, k)) in [(DType::Bf16, (7, 9, 300)), (DType::F16, (33, 5, 70))] {
        let round = |x: f32| match ty {
            DType::Bf16 => bf16::from_f32(x).to_f32(),
            _ => f16::from_f32(x).to_f32(),
        };
        let mut v = Values(k as u64);
        let (a, b, c) = (
            v.vec(m * k, -1.0, 1.0),
            v.vec(n * k, -1.0, 1.0),
            v.vec(m * n, -1.0, 1.0),
        );
        let (ar, br, cr): (Vec<f32>, Vec<f32>, Vec<f32>) = (
            a.iter().map(|&x| round(x)).collect(),
            b.iter().map(|&x| round(x)).collect(),
            c.iter().map(|&x| round(x)).collect(),
        );
        // C = 0.5 A B^T + 2 C.
        let dot = |i: usize, j: usize| -> f64 {
            (0..k)
                .map(|p| ar[i * k + p] as f64 * br[j * k + p] as f64)
                .sum()
        };
        let want: Vec<f32> = (0..m * n)
            .map(|e| (0.5 * dot(e / n, e % n) + 2.0 * cr[e] as f64) as f32)
            .collect();
        let g = Gemm::new(m, n, k).tb().scaled(0.5, 2.0);
        let bufs = [(a.clone(), ty), (b.clone(), ty), (c, ty)];
        let got = run_typed(&ctx, &bufs, 3, &|o, v| o.gemm(g, v[0], v[1], v[2])).unwrap();
        let err = rel_err(&got[2], &want);
        assert!(err <= tolerance(ty, k), "{ty} gemm: {err:e}");

        let bias = v.vec(n, -0.5, 0.5);
        let want: Vec<f32> = (0..m * n)
            .map(|e| round(round((dot(e / n, e % n) + round(bias[e % n]) as f64) as f32).tanh()))
            .collect();
        let shape = DenseShape::new(m, k, n);
        let bufs = [(a, ty), (b, ty), (bias, ty), (vec![f32::NAN; m * n], ty)];
        let got = run_typed(&ctx, &bufs, 0, &|o, v| {
            let params = DenseParams::new(v[1], v[2]);
            o.dense_forward(DenseForward::new(
                v[0],
                params,
                v[3],
                v[3],
                Activation::Tanh,
                shape,
            ))
        })
        .unwrap();
        let err = rel_err(&got[3], &want);
        assert!(err <= tolerance(ty, k), "{ty} dense_forward: {err:e}");
    }
}
