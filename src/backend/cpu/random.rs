//! Counter-based random masks (dropout) and the advance of the device-side random state; the
//! hash is the crate's one definition in [`crate::ops`], which every kernel dialect mirrors.

use super::CpuOps;
use super::access::{Src, lock, lock_inplace};
use super::par::chunks;
use crate::buffer::View;
use crate::error::Result;
use crate::ops::prelude::*;
use crate::ops::{DropoutMask, RNG_STATE_LEN, check, dropout_params, rng_hash, rng_key};

/// The state as an array (its length is checked by the caller).
fn state_array(s: &[f32]) -> [f32; RNG_STATE_LEN] {
    std::array::from_fn(|i| s[i])
}

impl RandomOps for CpuOps {
    fn dropout(&self, x: View<'_>, y: View<'_>, mask: DropoutMask<'_>) -> Result<()> {
        let DropoutMask { state, stream, p } = mask;
        let ctx = self.context;
        check::dropout(&x, &y, &state, p)?;
        let (threshold, scale) = dropout_params(p);
        lock_inplace("dropout", ctx, [x, state], [y], 0b01, |[x, state], [y]| {
            let Src::Slice(state) = state else {
                unreachable!("the state never aliases the output (checked)")
            };
            let key = rng_key(&state_array(state), stream);
            // `x * m` rather than a select, so a NaN input stays NaN where it is dropped (as
            // PyTorch's multiply by the mask does).
            let m = |i: usize| {
                if rng_hash(key, i as u32) >> 8 >= threshold {
                    scale
                } else {
                    0.0
                }
            };
            match x {
                Src::Slice(x) => chunks(y, |s, y| {
                    for (k, (y, &x)) in y.iter_mut().zip(&x[s..]).enumerate() {
                        *y = x * m(s + k);
                    }
                }),
                Src::Out => chunks(y, |s, y| {
                    for (k, y) in y.iter_mut().enumerate() {
                        *y *= m(s + k);
                    }
                }),
            }
        })
    }

    fn rng_advance(&self, state: View<'_>) -> Result<()> {
        let ctx = self.context;
        check::rng_state("rng_advance", &state)?;
        lock("rng_advance", ctx, [], [state], |[], [s]| {
            let lo = s[4] as u32 + 1;
            if lo == 0x1_0000 {
                s[4] = 0.0;
                s[5] = ((s[5] as u32 + 1) & 0xffff) as f32;
            } else {
                s[4] = lo as f32;
            }
        })
    }
}
