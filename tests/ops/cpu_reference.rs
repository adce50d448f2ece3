//! The CPU backend against plain reference loops (f64 accumulation) written here: every op,
//! random shapes (1, odd sizes, and sizes past the parallel thresholds), NaN-poisoned outputs,
//! in-place variants, and the error paths.

use proptest::prelude::*;
use rnn::ops::TypedMemory;
use rnn::ops::optimizer_state;
use rnn::{Activation, AdamStep, Buffer, Context, DType, Error, Gemm, SgdStep};

use crate::support::rel_err;

const TOL: f64 = 2e-5;

fn cfg() -> ProptestConfig {
    ProptestConfig {
        cases: 24,
        ..ProptestConfig::default()
    }
}

/// Deterministic values from a proptest-drawn seed (fresh every case).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
    fn vec(&mut self, n: usize, lo: f32, hi: f32) -> Vec<f32> {
        (0..n)
            .map(|_| lo + (hi - lo) * self.next() as f32)
            .collect()
    }
    fn below(&mut self, n: usize) -> usize {
        ((self.next() * n as f64) as usize).min(n - 1)
    }
}

fn rng(seed: u64) -> Rng {
    Rng(seed | 1)
}

fn upload(ctx: &Context, data: &[f32]) -> Buffer {
    let b = ctx.alloc(data.len()).unwrap();
    ctx.ops().upload(b.view(), data).unwrap();
    b
}

/// Index data (labels, row indices) as a u32 buffer: `data` holds exact small integers.
fn ids(ctx: &Context, data: &[f32]) -> Buffer {
    let b = ctx.ops().alloc_as(DType::U32, data.len()).unwrap();
    let v: Vec<u32> = data.iter().map(|&x| x as u32).collect();
    ctx.ops().upload_as(b.view(), &v).unwrap();
    b
}

fn poisoned(ctx: &Context, n: usize) -> Buffer {
    upload(ctx, &vec![f32::NAN; n])
}

fn read(ctx: &Context, b: &Buffer) -> Vec<f32> {
    let mut out = vec![0.0; b.len()];
    ctx.ops().download(b.view(), &mut out).unwrap();
    out
}

fn assert_close(what: &str, got: &[f32], want: &[f64]) {
    let want32: Vec<f32> = want.iter().map(|&v| v as f32).collect();
    let e = rel_err(got, &want32);
    assert!(e < TOL, "{what}: relative error {e}");
}

/// A length: 1, small odd, or past the 32K parallel threshold.
fn length() -> impl Strategy<Value = usize> {
    prop_oneof![Just(1usize), 1usize..200, 33_000usize..70_000]
}

/// A `rows x cols` shape, sometimes past the parallel threshold.
fn shape() -> impl Strategy<Value = (usize, usize)> {
    prop_oneof![
        (1usize..8, 1usize..40),
        (1usize..70, 1usize..130),
        // At least 33K elements and 165 columns: past every parallel threshold.
        (200usize..400, 165usize..200),
    ]
}

const ACTS: [Activation; 6] = crate::support::activations(0.07);

fn act_ref(act: Activation, z: f64) -> f64 {
    match act {
        Activation::Identity => z,
        Activation::Relu => z.max(0.0),
        Activation::Sigmoid => 1.0 / (1.0 + (-z).exp()),
        Activation::Tanh => z.tanh(),
        // erfc(-x), not 1 + erf(x): the sum loses every digit in f64 too below z = -8.
        Activation::Gelu => 0.5 * z * libm::erfc(-z / 2f64.sqrt()),
        Activation::LeakyRelu { slope } => {
            if z > 0.0 {
                z
            } else {
                slope as f64 * z
            }
        }
        other => unreachable!("no reference for {other:?}"),
    }
}

/// act'(z) by a central difference of the reference (away from the kinks).
fn act_grad_ref(act: Activation, z: f64) -> f64 {
    match act {
        Activation::Relu => (z > 0.0) as u8 as f64,
        Activation::LeakyRelu { slope } => {
            if z > 0.0 {
                1.0
            } else {
                slope as f64
            }
        }
        _ => {
            let h = 1e-5;
            (act_ref(act, z + h) - act_ref(act, z - h)) / (2.0 * h)
        }
    }
}

fn sig(z: f64) -> f64 {
    1.0 / (1.0 + (-z).exp())
}

/// `W_hh` (`±1/sqrt(hidden)`, PyTorch's range), `b_ih` and `b_hh` of a cell with `gates` gates.
fn params(r: &mut Rng, gates: usize, hidden: usize) -> [Vec<f32>; 3] {
    let bound = 1.0 / (hidden as f32).sqrt();
    let w = r.vec(gates * hidden * hidden, -bound, bound);
    [
        w,
        r.vec(gates * hidden, -1.0, 1.0),
        r.vec(gates * hidden, -1.0, 1.0),
    ]
}

/// A random initial block, then `steps` poisoned blocks.
fn states(r: &mut Rng, steps: usize, n: usize) -> Vec<f32> {
    let mut s = r.vec(n, -1.0, 1.0);
    s.extend(vec![f32::NAN; steps * n]);
    s
}

/// `(steps, batch, hidden, batch * hidden)` of a recurrent op's shape.
fn dims(shape: rnn::ops::SeqShape) -> (usize, usize, usize, usize) {
    (
        shape.steps,
        shape.batch,
        shape.hidden,
        shape.batch * shape.hidden,
    )
}

fn to64(v: &[f32]) -> Vec<f64> {
    v.iter().map(|&x| x as f64).collect()
}

mod activations_losses;
mod cells;
mod elementwise_gemm;
mod gated_seq;
mod layers;
mod optim_errors;
mod reductions_data;
mod rnn_seq;
mod varlen;

/// The element-type suite of the GPU targets, on the CPU backend.
#[test]
fn typed_round_trips() {
    crate::backend_suite::dtypes::typed_round_trips(crate::support::Target::Cpu)
}

/// Every op family rejects a view of another type than it takes with `DTypeMismatch`, on the
/// CPU backend.
#[test]
fn rejects_other_types() {
    crate::backend_suite::dtypes::rejects_other_types(crate::support::Target::Cpu)
}

/// Indices past 2^24 (u32 index data), on the CPU backend.
#[test]
fn indices_beyond_2_24() {
    crate::backend_suite::indices::beyond_2_24(crate::support::Target::Cpu)
}

/// Conversions between f32, bf16 and f16 against the `half` crate, on the CPU backend.
#[test]
fn conversions() {
    crate::backend_suite::mixed::conversions(crate::support::Target::Cpu)
}

/// `cast`'s argument checks, on the CPU backend.
#[test]
fn cast_errors() {
    crate::backend_suite::mixed::cast_errors(crate::support::Target::Cpu)
}

/// Loss scaling on the device state, on the CPU backend.
#[test]
fn loss_scaling() {
    crate::backend_suite::mixed::loss_scaling(crate::support::Target::Cpu)
}

/// The mixed-precision optimizer steps, on the CPU backend.
#[test]
fn mixed_optimizers() {
    crate::backend_suite::mixed::mixed_optimizers(crate::support::Target::Cpu)
}

/// The elementwise ops and activations over bf16/f16 views, on the CPU backend.
#[test]
fn elementwise_t() {
    crate::backend_suite::mixed::elementwise_t(crate::support::Target::Cpu)
}
