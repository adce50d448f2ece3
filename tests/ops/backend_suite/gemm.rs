//! GEMM on every backend against the CPU: random shapes, transposes and scalars (`gemm`), then
//! the built-in GEMM kernels at their edges: shapes on both sides of the tile edges and of the
//! k-steps, k = 0, every transpose, alpha/beta with beta = 0 on a NaN-poisoned C, views at
//! 16-byte-aligned and odd offsets (the float4 and scalar paths), then the random-shape property.
//! The thin kernels (a side of at most 16, every GPU backend, ahead of cuBLAS) have their own
//! shapes (`gemm_thin`); the tile tests turn them off (`ContextOptions::thin_gemm`) so that the
//! small shapes still reach the tile kernels.
//!
//! - OpenCL: both SIMT kernels (`sgemm_split`, the 128 x 128 tile, and `sgemm_tile64_split`),
//!   each forced for every launch through `ContextOptions::opencl_sgemm_tile` so that both run on
//!   every OpenCL device, PoCL included, whatever size the per-launch choice would give them;
//!   with the split-k shapes, which split k wherever the output has fewer tiles than the device
//!   has compute units (2 ranges on a 2-core PoCL device, up to 16 on an H100). Unforced
//!   (`gemm_own_kernel`), NVIDIA's OpenCL on sm_80+ takes the tensor-core kernels
//!   (kernels-cl/gemm_tc.cl) for outputs of sides >= 128 over k >= 256: [`TENSOR_CORE_SHAPES`]
//!   and the deep split-k shapes, `sgemm_tc64` with k split (the splits added in the launch) and
//!   `sgemm_tc128` (the first shape: 289 tiles of 128 on 132 compute units); PoCL runs them on
//!   the SIMT kernels. On an H100/H200 those products take the warpgroup kernel `sgemm_wg64`
//!   (kernels-cl/gemm_wg.cl) instead, unsplit, split 2 ways and (the second of
//!   [`WARPGROUP_SHAPES`]) 10 ways; a second set of contexts with `warpgroup_gemm` off runs
//!   [`TENSOR_CORE_SHAPES`] on `sgemm_tc*` there. Which kernel ran is checked by
//!   `gpu_gemm_launches` (kernel_times.rs).
//! - CUDA with `vendor_blas` off (else cuBLAS would take every GEMM): `sgemm`, or on sm_80+ the
//!   tensor-core kernels, whose per-shape choice of tile and k splits the shapes here cover
//!   (outputs of a few tiles with deep k are split into up to 16 ranges). On an H100/H200 (op
//!   set built for sm_90a) the warpgroup kernel `sgemm_wg128` takes the products whose grid fills
//!   three quarters of the SMs, cuBLAS or not: [`WARPGROUP_SHAPES`] are such products on 132 SMs
//!   (`warpgroup_gemm_fits`' unit test checks that), run with and without cuBLAS.
//! - Every GPU backend: the tier-0 stand-in `sgemm_tier0` for every shape (`gemm_tier0`).

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use rnn::{BackendKind, Context, ContextOptions, Error, Gemm, GpuManager};

use super::{Values, compare, compare_padded, contexts, dim, nan, prop};
use crate::support::{self, Target};

/// `(m, n, k)`: 1 and 0, one short of / at / one past the tile edges (64, 128) and the k-steps
/// (8, 16), several tiles in both directions, rows whose length is a multiple of 4 (float4
/// loads possible) and rows whose length is not.
const SHAPES: [(usize, usize, usize); 12] = [
    (1, 1, 1),
    (1, 1, 0),
    (3, 5, 2),
    (127, 129, 7),
    (128, 128, 8),
    (129, 131, 9),
    (64, 65, 16),
    (5, 260, 17),
    (257, 3, 33),
    (200, 136, 12),
    (128, 132, 0),
    (300, 292, 70),
];

/// Outputs of few tiles over deep k: the split-k kernels (CUDA tensor cores, OpenCL) split k (2
/// to 16 ranges, the last one short), in every transpose and at odd offsets.
const SPLIT_K_SHAPES: [(usize, usize, usize); 5] = [
    (1, 1, 5000),
    (100, 70, 2000),
    (130, 129, 1031),
    (64, 64, 4099),
    (200, 136, 3000),
];

/// Products the OpenCL tensor-core kernels take on an H100 (sides >= 128, k >= 256): 289 tiles
/// of 128 (`sgemm_tc128`, k not a multiple of 16); 25 tiles of 64 with k split (`sgemm_tc64`);
/// odd sides throughout.
const TENSOR_CORE_SHAPES: [(usize, usize, usize); 2] = [(2100, 2113, 260), (300, 257, 515)];

/// Products `sgemm_wg128` takes on a 132-SM H100: 121 tiles over a k of 40 (one k-tile, short);
/// 15 tiles with k split 8 ways (the last range short); 100 tiles over a k of 133 (a 4-wide
/// tail). No dimension is a multiple of 128 and some are not multiples of 4.
const WARPGROUP_SHAPES: [(usize, usize, usize); 3] =
    [(1300, 1290, 40), (384, 520, 3001), (1157, 1163, 133)];

/// Products the thin kernels take (a side of at most 16): `sgemm_thin` with a short n (k
/// contiguous in A and float4-loaded, or not; one and two k pieces; k split over the grid) and
/// with a short m (k split), both sides short, sides of 2 to 4 and of exactly 16; `sgemm_thin1`
/// (short side 1) with a short n and a short m, split and unsplit (a recurrent step at batch 1:
/// `1 x 1100 x 2050`); `sgemm_thin_k` with k of 16, 10 and 0, row lengths that are and are not
/// multiples of 4.
const THIN_SHAPES: [(usize, usize, usize); 15] = [
    (1000, 10, 512),
    (517, 16, 300),
    (10, 515, 1030),
    (16, 40, 700),
    (5, 3, 2000),
    (2100, 1, 33),
    (1, 700, 300),
    (4, 3000, 900),
    (1301, 2, 260),
    (1, 1100, 2050),
    (300, 260, 10),
    (301, 7, 16),
    (70, 1030, 3),
    (20, 9, 0),
    (40, 17, 17),
];

/// Leading elements before A, B and C: all 16-byte aligned, all odd, and mixed.
const PADS: [[usize; 3]; 4] = [[0, 4, 8], [3, 1, 5], [4, 3, 0], [1, 8, 4]];

/// The thin kernels on every backend (CPU: the reference itself), edge shapes and random
/// shapes with one side of 1 to 16.
pub fn gemm_thin(t: Target) {
    let test = "gpu_gemm_thin";
    let ctxs = contexts(t, test);
    for ctx in &ctxs {
        edge_shapes(ctx, &THIN_SHAPES).unwrap_or_else(|e| panic!("{test}: {e}"));
    }
    // A thin product: `short` (at most 16) is m, n or k, the other two any dimension.
    let shapes =
        (0..3usize, 1..=16usize, dim(), dim()).prop_map(|(side, short, d1, d2)| match side {
            0 => (d1, short, d2 * 7),
            1 => (short, d1, d2 * 7),
            _ => (d1, d2, short),
        });
    random_products(ctxs, test, 16, shapes);
}

pub fn gemm_tiles(t: Target) {
    for tile in [64, 128] {
        let test = format!("gpu_gemm_tile{tile}");
        // Thin products off, so the small shapes reach the tile kernels.
        let ctxs = support::contexts_with(t, &test, |o| {
            o.opencl_sgemm_tile = Some(tile);
            o.thin_gemm = false;
        });
        for ctx in &ctxs {
            for shapes in [&SHAPES[..], &SPLIT_K_SHAPES[..]] {
                edge_shapes(ctx, shapes).unwrap_or_else(|e| panic!("{test}: {e}"));
            }
        }
        gemm_on(ctxs, &test, 12);
    }
}

/// The tier-0 stand-in (`sgemm_tier0`, which a cold start launches until the GEMM families are
/// built), forced for every thin and tile product (`ContextOptions::force_tier0`; cuBLAS off
/// so that CUDA products reach it): the tile, split-k and thin edge shapes, then random ones.
pub fn gemm_tier0(t: Target) {
    let test = "gpu_gemm_tier0";
    let ctxs = support::contexts_with(t, test, |o| {
        o.force_tier0 = true;
        o.vendor_blas = false;
    });
    for ctx in &ctxs {
        for shapes in [&SHAPES[..], &SPLIT_K_SHAPES[..], &THIN_SHAPES[..]] {
            edge_shapes(ctx, shapes).unwrap_or_else(|e| panic!("{test}: {e}"));
        }
    }
    gemm_on(ctxs, test, 12);
}

/// GEMM with `vendor_blas` off, so a CUDA context runs the built-in kernels even where cuBLAS
/// exists (otherwise they would never be checked there), and thin products off, so the small
/// shapes reach the tile kernels. On OpenCL the per-launch choice of kernel (no tile forced).
pub fn gemm_own_kernel(t: Target) {
    let test = "gpu_gemm_own_kernel";
    let ctxs = support::contexts_with(t, test, |o| {
        o.vendor_blas = false;
        o.thin_gemm = false;
    });
    for ctx in &ctxs {
        for shapes in [&SHAPES[..], &SPLIT_K_SHAPES[..]] {
            edge_shapes(ctx, shapes).unwrap_or_else(|e| panic!("{test}: {e}"));
        }
        match t {
            Target::Cuda => {
                edge_shapes(ctx, &WARPGROUP_SHAPES).unwrap_or_else(|e| panic!("{test}: {e}"))
            }
            Target::OpenCl => {
                // The tensor-core module built first: a cold context's portable kernels would
                // carry these products (`OpSet::carried`).
                ctx.ops().warm_up().unwrap();
                for shapes in [&TENSOR_CORE_SHAPES[..], &WARPGROUP_SHAPES[..]] {
                    edge_shapes(ctx, shapes).unwrap_or_else(|e| panic!("{test}: {e}"));
                }
            }
            _ => {}
        }
    }
    gemm_on(ctxs, test, 12);
    if t == Target::OpenCl {
        // Where the warpgroup kernel took the tensor-core products above, the mma.sync ones.
        let test = "gpu_gemm_own_kernel_mma";
        for ctx in support::contexts_with(t, test, |o| {
            o.vendor_blas = false;
            o.thin_gemm = false;
            o.warpgroup_gemm = false;
        }) {
            ctx.ops().warm_up().unwrap();
            edge_shapes(&ctx, &TENSOR_CORE_SHAPES).unwrap_or_else(|e| panic!("{test}: {e}"));
        }
    }
}

fn edge_shapes(ctx: &Context, shapes: &[(usize, usize, usize)]) -> Result<(), TestCaseError> {
    let mut r = Values(0x5eed_0001);
    let mut case = 0usize;
    for &(m, n, k) in shapes {
        for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
            for beta0 in [true, false] {
                let (g, bufs, tol) = random_case(&mut r, Gemm::new(m, n, k), ta, tb, beta0);
                let pads = PADS[case % PADS.len()];
                case += 1;
                compare_padded(
                    ctx,
                    &format!("gemm {g:?}"),
                    &bufs,
                    &pads,
                    &[2],
                    tol,
                    &|o, v| o.gemm(g, v[0], v[1], v[2]),
                )?;
            }
        }
    }
    Ok(())
}

/// A tile other than 64 or 128 is refused when the context is created, not at the first GEMM.
pub fn bad_tile_is_an_error(t: Target) {
    assert_eq!(t, Target::OpenCl, "opencl_sgemm_tile is an OpenCL option");
    let m = GpuManager::new().expect("RNN_BACKENDS is valid");
    let devices: Vec<_> = m
        .devices()
        .iter()
        .filter(|d| d.backend == BackendKind::OpenCl && d.kind != rnn::DeviceKind::Accelerator)
        .map(|d| d.id)
        .collect();
    if devices.is_empty() {
        // Prints the SKIP, or fails when OpenCL is required.
        support::contexts(t, "gpu_gemm_bad_tile");
        return;
    }
    for id in devices {
        let mut options = ContextOptions::default();
        options.opencl_sgemm_tile = Some(96);
        match m.create_context_with(id, options) {
            Err(Error::InvalidArgument(msg)) => assert!(msg.contains("96"), "{id}: {msg}"),
            other => panic!("{id}: tile 96 should be refused, got {other:?}"),
        }
    }
}

pub fn gemm(t: Target) {
    let ctxs = contexts(t, "gpu_gemm");
    if t == Target::Cuda {
        // With cuBLAS present these still run sgemm_wg128 where it exists, once its module is
        // built (before, cuBLAS carries them: `OpSet::carried`).
        for ctx in &ctxs {
            ctx.ops().warm_up().unwrap();
            edge_shapes(ctx, &WARPGROUP_SHAPES).unwrap_or_else(|e| panic!("gpu_gemm: {e}"));
        }
    }
    gemm_on(ctxs, "gpu_gemm", 24);
}

fn gemm_on(ctxs: Vec<Context>, test: &str, cases: u32) {
    random_products(
        ctxs,
        test,
        cases,
        (dim(), dim(), prop_oneof![Just(0usize), dim()]),
    );
}

/// Products of the `(m, n, k)` shapes `shapes` draws, either operand transposed or not and beta
/// 0 or not, on `ctxs` against the CPU.
fn random_products(
    ctxs: Vec<Context>,
    test: &str,
    cases: u32,
    shapes: impl Strategy<Value = (usize, usize, usize)>,
) {
    let s = (
        shapes,
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        any::<u64>(),
    );
    prop(
        ctxs,
        test,
        cases,
        s,
        |ctx, ((m, n, k), ta, tb, beta0, seed)| {
            let mut r = Values(seed);
            one_random(ctx, &mut r, Gemm::new(m, n, k), ta, tb, beta0)
        },
    );
}

/// One product of shape `g` with random scalars and operands against the CPU.
fn one_random(
    ctx: &Context,
    r: &mut Values,
    g: Gemm,
    ta: bool,
    tb: bool,
    beta0: bool,
) -> Result<(), TestCaseError> {
    let (g, bufs, tol) = random_case(r, g, ta, tb, beta0);
    compare(ctx, &format!("gemm {g:?}"), &bufs, &[2], tol, &|o, v| {
        o.gemm(g, v[0], v[1], v[2])
    })
}

/// A product of shape `g` with random scalars (beta 0 when `beta0`, C then NaN-poisoned: it
/// must not be read) and operands, and its error bound.
fn random_case(
    r: &mut Values,
    g: Gemm,
    ta: bool,
    tb: bool,
    beta0: bool,
) -> (Gemm, [Vec<f32>; 3], f64) {
    let (m, n, k) = (g.m, g.n, g.k);
    let alpha = r.uniform(-2.0, 2.0);
    let beta = if beta0 { 0.0 } else { r.uniform(-1.5, 1.5) };
    let mut g = g.scaled(alpha, beta);
    g.trans_a = ta;
    g.trans_b = tb;
    // beta = 0: C is poisoned and must not be read.
    let c = if beta0 {
        nan(m * n)
    } else {
        r.vec(m * n, -1.0, 1.0)
    };
    let bufs = [r.vec(m * k, -1.0, 1.0), r.vec(k * n, -1.0, 1.0), c];
    // f32 rounding scales with the magnitude of the terms, not of the (possibly cancelling)
    // result: bound the error relative to |alpha| |A| |B| + |beta| |C|.
    let tol = (1e-6 * (k.max(1) as f64).sqrt() + 1e-6) * gemm_condition(&g, &bufs);
    (g, bufs, tol)
}

/// ‖|α||op(A)||op(B)| + |β||C|‖ / ‖αop(A)op(B) + βC‖ (at least 1), in f64: how much
/// cancellation inflates the relative error of a correct f32 GEMM.
fn gemm_condition(g: &Gemm, bufs: &[Vec<f32>; 3]) -> f64 {
    let (m, n, k) = (g.m, g.n, g.k);
    let a = |i: usize, p: usize| {
        f64::from(if g.trans_a {
            bufs[0][p * m + i]
        } else {
            bufs[0][i * k + p]
        })
    };
    let b = |p: usize, j: usize| {
        f64::from(if g.trans_b {
            bufs[1][j * k + p]
        } else {
            bufs[1][p * n + j]
        })
    };
    let (mut abs, mut exact) = (0.0f64, 0.0f64);
    for i in 0..m {
        for j in 0..n {
            let c = if g.beta == 0.0 {
                0.0
            } else {
                f64::from(bufs[2][i * n + j])
            };
            let (mut s, mut sa) = (0.0, 0.0);
            for p in 0..k {
                s += a(i, p) * b(p, j);
                sa += (a(i, p) * b(p, j)).abs();
            }
            let beta = f64::from(g.beta);
            let alpha = f64::from(g.alpha);
            exact += (alpha * s + beta * c).powi(2);
            abs += (alpha.abs() * sa + beta.abs() * c.abs()).powi(2);
        }
    }
    (abs.sqrt() / exact.sqrt().max(1e-30)).max(1.0)
}
