//! The counter-based random numbers of dropout: a state of seed and step counter that lives in
//! device memory, and the hash every backend's kernel computes from it, written once here as
//! the reference (kernels-cu/random.cu and kernels-cl/random.cl follow it bit for bit).

use super::MemoryOps;
use crate::buffer::{Buffer, View};
use crate::error::Result;

/// Length of the device-side random state read by [`RandomOps::dropout`] and advanced by
/// [`RandomOps::rng_advance`]: the 64-bit seed as four 16-bit limbs (least significant first), then
/// the 32-bit step counter as two 16-bit limbs. Every element is an exact integer in
/// `0..65536`, so the state survives any f32 copy. Make one with [`rng_state`].
pub const RNG_STATE_LEN: usize = 6;

/// What decides a dropout mask ([`RandomOps::dropout`]): the device-side random `state`, the
/// `stream` of the dropout site and the drop probability `p`.
#[derive(Clone, Copy)]
pub struct DropoutMask<'a> {
    /// The random state (see [`RNG_STATE_LEN`]): seed and step counter.
    pub state: View<'a>,
    /// Tells apart the dropout sites of one step.
    pub stream: u32,
    /// The probability of dropping an element, in `0..=1`.
    pub p: f32,
}

impl<'a> DropoutMask<'a> {
    /// The mask of `stream` under `state`, dropping with probability `p`.
    pub const fn new(state: View<'a>, stream: u32, p: f32) -> Self {
        DropoutMask { state, stream, p }
    }
}

/// Random masks (dropout) from a device-side counter-based state.
pub trait RandomOps: MemoryOps {
    /// Inverted dropout with a counter-based mask: `y[i] = x[i] * m[i]`, where
    /// `m[i] = 1 / (1 - p)` when element `i` is kept and 0 when it is dropped (probability
    /// `p`, in `0..=1`). Whether `i` is kept is a hash of (the seed and the step counter in
    /// `state`, `stream`, `i`) — see [`RNG_STATE_LEN`] and [`dropout_keeps`] — so the same
    /// state, stream and index give the same mask on every backend, bit for bit, and nothing
    /// is uploaded per step (a captured training step replays with fresh masks once the
    /// counter has moved on). `stream` tells apart the dropout sites of one step (a layer
    /// uses `(layer index << 8) | site`). The backward pass is the same call on the gradient,
    /// with the same state and stream. `y` may be the same view as `x`.
    fn dropout(&self, x: View<'_>, y: View<'_>, mask: DropoutMask<'_>) -> Result<()>;

    /// Advances the step counter of a random state (see [`RNG_STATE_LEN`]) by one, on the
    /// device (one tiny launch, no host traffic).
    fn rng_advance(&self, state: View<'_>) -> Result<()>;
}

/// A fresh random state for `seed`, counter 0 (see [`RNG_STATE_LEN`]).
pub fn rng_state(ops: &(impl MemoryOps + ?Sized), seed: u64) -> Result<Buffer> {
    let b = ops.alloc(RNG_STATE_LEN)?;
    ops.upload(b.view(), &rng_state_values(seed, 0))?;
    Ok(b)
}

/// The host values of a random state (see [`RNG_STATE_LEN`]).
pub fn rng_state_values(seed: u64, counter: u32) -> [f32; RNG_STATE_LEN] {
    let limb = |v: u64, i: u32| ((v >> (16 * i)) & 0xffff) as f32;
    [
        limb(seed, 0),
        limb(seed, 1),
        limb(seed, 2),
        limb(seed, 3),
        limb(counter as u64, 0),
        limb(counter as u64, 1),
    ]
}

/// The keep threshold and scale [`RandomOps::dropout`] uses for drop probability `p`: element `i`
/// is kept iff the top 24 bits of its hash are `>= threshold`; kept elements are multiplied by
/// `scale`.
pub fn dropout_params(p: f32) -> (u32, f32) {
    let p = p.clamp(0.0, 1.0);
    ((p * 16_777_216.0) as u32, 1.0 / (1.0 - p))
}

/// The reference mask of [`RandomOps::dropout`]: whether element `index` is kept, for the seed and
/// counter held in `state` (the values of a [`RNG_STATE_LEN`] state), `stream` and drop
/// probability `p`. Every backend's kernel computes exactly this.
pub fn dropout_keeps(state: &[f32; RNG_STATE_LEN], stream: u32, index: u32, p: f32) -> bool {
    let (threshold, _) = dropout_params(p);
    let key = rng_key(state, stream);
    rng_hash(key, index) >> 8 >= threshold
}

/// The "lowbias32" integer hash (Chris Wellons' hash-prospector): a bijection on u32 with
/// good avalanche, cheap in every kernel dialect.
fn mix32(mut x: u32) -> u32 {
    x ^= x >> 16;
    x = x.wrapping_mul(0x7feb_352d);
    x ^= x >> 15;
    x = x.wrapping_mul(0x846c_a68b);
    x ^ (x >> 16)
}

/// The per-launch keys of one (state, stream): computed once per kernel thread.
pub(crate) fn rng_key(state: &[f32; RNG_STATE_LEN], stream: u32) -> (u32, u32) {
    let w = |i: usize| state[i] as u32 & 0xffff;
    let seed_lo = w(0) | (w(1) << 16);
    let seed_hi = w(2) | (w(3) << 16);
    let counter = w(4) | (w(5) << 16);
    let k0 = mix32(seed_lo ^ mix32(seed_hi ^ mix32(counter ^ mix32(stream ^ 0x9e37_79b9))));
    let k1 = mix32(k0 ^ 0x85eb_ca6b);
    (k0, k1)
}

/// The hash of element `index` under the keys of [`rng_key`].
pub(crate) fn rng_hash(key: (u32, u32), index: u32) -> u32 {
    mix32(mix32(index ^ key.0).wrapping_add(key.1))
}
