//! Every op of every GPU target against the CPU backend: property tests with fresh random
//! shapes and values, outputs poisoned with NaN before the op, relative-error bounds. One suite,
//! instantiated per target by `backend_suite!`; absent targets SKIP through `support::contexts`.

use std::ops::RangeInclusive;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use rnn::ops::{SeqShape, TypedMemory};
use rnn::{Context, DType, Ops, RecurrentAlgorithm, View};

use crate::support::{self, Target, rel_err};

mod activations;
mod cells;
mod data;
mod dense;
pub(crate) mod dtypes;
mod edges;
mod elementwise;
mod gated_graph;
mod gated_low;
mod gated_seq;
mod gemm;
mod graphs;
mod half_gemm;
pub(crate) mod indices;
mod kernel_times;
mod layers;
mod losses;
mod memory;
pub(crate) mod mixed;
mod optim;
mod reductions;
mod rnn_seq;
mod rnn_step;
mod seq_pair;
mod side_copies;
mod varlen;

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
    /// `W_hh` of a recurrent cell with `gates` gates: `gates * hidden x hidden`, in PyTorch's
    /// `±1/sqrt(hidden)`.
    fn recurrent_w(&mut self, gates: usize, hidden: usize) -> Vec<f32> {
        let bound = 1.0 / (hidden as f32).sqrt();
        self.vec(gates * hidden * hidden, -bound, bound)
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
    run_ids(ctx, bufs, &[], f)
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

/// The outputs of `f` on the CPU backend, every buffer behind `pad` guard elements: the state a
/// recurrent forward leaves, for the backward to start from.
fn cpu_outputs(
    bufs: &[Vec<f32>],
    pad: usize,
    f: &OpFn<'_>,
) -> Result<Vec<Vec<f32>>, TestCaseError> {
    run_padded_ids(&Context::cpu(), (bufs, &[]), &vec![pad; bufs.len()], f)
        .map_err(|e| TestCaseError::fail(e.to_string()))
}

/// [`run_ids`] with buffer `i` behind `pads[i]` guard elements (and [`GUARD`] after it). Panics
/// when an op changed a guard element: it wrote outside its views.
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
    let got = run_padded_ids(gpu, (bufs, &[]), pads, f)
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

/// Where a property runs: every device of a target (or nowhere, with a SKIP printed), or the
/// given contexts.
enum On {
    Target(Target),
    Contexts(Vec<Context>),
}

impl From<Target> for On {
    fn from(t: Target) -> On {
        On::Target(t)
    }
}

impl From<Vec<Context>> for On {
    fn from(ctxs: Vec<Context>) -> On {
        On::Contexts(ctxs)
    }
}

/// Runs a property on every context of `on` (nothing when there is none).
fn prop<S: Strategy>(
    on: impl Into<On>,
    test: &str,
    cases: u32,
    strategy: S,
    body: impl Fn(&Context, S::Value) -> Result<(), TestCaseError>,
) where
    S::Value: Clone,
{
    let ctxs = match on.into() {
        On::Target(t) => contexts(t, test),
        On::Contexts(ctxs) => ctxs,
    };
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

/// A recurrent sequence shape: `(steps, batch, hidden, pad, seed)`.
type SeqCase = (usize, usize, usize, usize, u64);

/// The hidden sizes [`block_local_sequences`] draws besides 1: small ones, ones up to the
/// largest whose W_hh fits a block's shared memory, and ones up to the largest the register
/// variant takes.
struct BlockLocalHidden {
    small: RangeInclusive<usize>,
    near_limit: RangeInclusive<usize>,
    near_regs_limit: RangeInclusive<usize>,
}

/// Runs `body` on random sequence shapes with the block-local recurrent kernels
/// (`ContextOptions::recurrent_block_local`) on, then off (the paths they replace, at the same
/// shapes), then forced to their L1 variant (`RecurrentAlgorithm::BlockLocalL1`: W_hh read from
/// global memory) and to their register variant (`BlockLocalRegisters`, W_hh in registers,
/// each product split along k); beyond a variant's limits the automatic choice runs: 1 to
/// `max_steps` steps; batch 1, a few rows, or more rows than a GPU has compute units; hidden as
/// [`BlockLocalHidden`] says; views aligned and not.
fn block_local_sequences(
    t: Target,
    test: &str,
    (max_steps, hidden): (usize, BlockLocalHidden),
    body: impl Fn(&Context, SeqCase) -> Result<(), TestCaseError>,
) {
    for how in ["on", "off", "l1", "regs"] {
        let test = format!("{test} ({how})");
        let ctxs = support::contexts_with(t, &test, |o| match how {
            "l1" => o.recurrent_algorithm = Some(RecurrentAlgorithm::BlockLocalL1),
            "regs" => o.recurrent_algorithm = Some(RecurrentAlgorithm::BlockLocalRegisters),
            _ => o.recurrent_block_local = Some(how == "on"),
        });
        let near = match how {
            "regs" => hidden.near_regs_limit.clone(),
            _ => hidden.near_limit.clone(),
        };
        let s = (
            1..=max_steps,
            prop_oneof![Just(1usize), 2..=9usize, 130..=300usize],
            prop_oneof![Just(1usize), hidden.small.clone(), near],
            prop_oneof![Just(0usize), Just(3usize)],
            any::<u64>(),
        );
        prop(ctxs, &test, 6, s, &body);
    }
}

/// Runs `body` on random sequence shapes with the per-step GEMM path forced
/// (`RecurrentAlgorithm::Gemm`) at small sizes, where the automatic choice never takes it: one
/// step (no later product reaches the backward's cell) or several, batch 1 or a few rows,
/// hidden 1, small or around the 64-wide tiles; views aligned and not.
fn gemm_step_sequences(
    t: Target,
    test: &str,
    body: impl Fn(&Context, SeqCase) -> Result<(), TestCaseError>,
) {
    let ctxs = support::contexts_with(t, test, |o| {
        o.recurrent_algorithm = Some(RecurrentAlgorithm::Gemm);
    });
    let s = (
        prop_oneof![Just(1usize), 2..=7usize],
        prop_oneof![Just(1usize), 2..=19usize],
        prop_oneof![Just(1usize), 2..=40usize, 60..=70usize],
        prop_oneof![Just(0usize), Just(3usize)],
        any::<u64>(),
    );
    prop(ctxs, test, 6, s, &body);
}

/// [`gemm_step_sequences`] with the recurrent products in bf16, then in f16
/// ([`SeqShape::product_type`]): `body` gets the case's shape with that type, its pad and its
/// random values.
fn low_product_sequences(
    t: Target,
    test: &str,
    body: impl Fn(&Context, SeqShape, usize, &mut Values) -> Result<(), TestCaseError>,
) {
    for low in [DType::Bf16, DType::F16] {
        let test = format!("{test} ({low})");
        gemm_step_sequences(t, &test, |ctx, (steps, batch, hidden, pad, seed)| {
            let shape = SeqShape::new(steps, batch, hidden).with_product_type(Some(low));
            body(ctx, shape, pad, &mut Values(seed))
        });
    }
}

/// A dimension: 1, small odd sizes, sizes around the 64-wide tiles, and a few large ones.
fn dim() -> impl Strategy<Value = usize> {
    prop_oneof![Just(1usize), 2..=17usize, 50..=80usize, 120..=300usize]
}

/// One `#[test]` per `name => module::case`, running `case` on the suite's target `T`.
macro_rules! suite_tests {
    ($($test:ident => $module:ident::$case:ident),* $(,)?) => {
        $(
            #[test]
            fn $test() {
                super::$module::$case(T)
            }
        )*
    };
}

macro_rules! backend_suite {
    ($name:ident, $target:expr $(, $extra:item)*) => {
        mod $name {
            use crate::support::Target;
            const T: Target = $target;
            $($extra)*
            suite_tests! {
                gpu_gemm => gemm::gemm,
                gpu_gemm_thin => gemm::gemm_thin,
                gpu_gemm_tier0 => gemm::gemm_tier0,
                gpu_dense_ops_tier0 => dense::dense_ops_tier0,
                gpu_elementwise => elementwise::elementwise,
                gpu_activations => activations::activations,
                gpu_dense_ops => dense::dense_ops,
                gpu_softmax_losses => losses::softmax_losses,
                gpu_graphs_across_threads => graphs::graphs_across_threads,
                gpu_reductions => reductions::reductions,
                gpu_data => data::data,
                gpu_invalid_indices => indices::invalid_indices,
                gpu_indices_beyond_2_24 => indices::beyond_2_24,
                gpu_cells => cells::cells,
                gpu_rnn_steps => rnn_step::rnn_steps,
                gpu_rnn_sequence => rnn_seq::rnn_sequence,
                gpu_rnn_sequence_cooperative => rnn_seq::rnn_sequence_cooperative,
                gpu_rnn_sequence_fallback => rnn_seq::rnn_sequence_fallback,
                gpu_rnn_sequence_block_local => rnn_seq::rnn_sequence_block_local,
                gpu_rnn_sequence_gemm_steps => rnn_seq::rnn_sequence_gemm_steps,
                gpu_gated_sequence => gated_seq::gated_sequence,
                gpu_gated_sequence_fallback => gated_seq::gated_sequence_fallback,
                gpu_gated_sequence_block_local => gated_seq::gated_sequence_block_local,
                gpu_gated_sequence_gemm_steps => gated_seq::gated_sequence_gemm_steps,
                gpu_sequence_pair => seq_pair::sequence_pair,
                gpu_sequence_pair_overlap => seq_pair::overlapping_pairs,
                gpu_gated_sequence_low_products => gated_seq::gated_sequence_low_products,
                gpu_rnn_sequence_low_products => rnn_seq::rnn_sequence_low_products,
                gpu_gated_sequence_graph => gated_graph::gated_sequence_graph,
                gpu_gated_sequence_low => gated_low::gated_sequence_low,
                gpu_dropout => layers::dropout,
                gpu_layer_norm => layers::layer_norm,
                gpu_scatter_add_rows => layers::scatter_add_rows,
                gpu_optimizers => optim::optimizers,
                gpu_graphs => graphs::graphs,
                gpu_user_kernel => edges::user_kernel,
                gpu_compile_error => edges::compile_error,
                gpu_foreign_and_edge_cases => edges::foreign_and_edge_cases,
                gpu_kernel_cache => memory::kernel_cache,
                gpu_typed_round_trips => dtypes::typed_round_trips,
                gpu_rejects_other_types => dtypes::rejects_other_types,
                gpu_kernel_times => kernel_times::kernel_times,
                gpu_sequence_masks => varlen::sequence_masks,
                gpu_half_gemm => half_gemm::half_gemm,
                gpu_half_gemm_tensor_core_shapes => half_gemm::half_gemm_tensor_core_shapes,
                gpu_half_dense => half_gemm::half_dense,
                gpu_half_type_errors => half_gemm::half_type_errors,
                gpu_half_vendor_routes => half_gemm::half_vendor_routes,
                gpu_conversions => mixed::conversions,
                gpu_cast_errors => mixed::cast_errors,
                gpu_loss_scaling => mixed::loss_scaling,
                gpu_elementwise_t => mixed::elementwise_t,
                gpu_mixed_optimizers => mixed::mixed_optimizers,
                gpu_side_copies => side_copies::side_copies,
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
    suite_tests! {
        gpu_gemm_tiles => gemm::gemm_tiles,
        gpu_gemm_bad_tile => gemm::bad_tile_is_an_error,
        // The per-launch choice: the tensor-core kernels on NVIDIA's OpenCL (sm_80+).
        gpu_gemm_own_kernel => gemm::gemm_own_kernel,
        gpu_sequence_launches => kernel_times::sequence_launches,
        gpu_gemm_launches => kernel_times::gemm_launches,
        // The bf16/f16 tensor-core kernels on NVIDIA's OpenCL (kernels-cl/hgemm_tc.cl).
        gpu_half_gemm_launches => kernel_times::half_gemm_launches,
    }
);
backend_suite!(
    cuda,
    Target::Cuda,
    suite_tests! { gpu_gemm_own_kernel => gemm::gemm_own_kernel },
    oom_test!();
);
backend_suite!(hip, Target::Hip, oom_test!(););
backend_suite!(hip_on_cuda, Target::HipOnCuda, oom_test!(););
