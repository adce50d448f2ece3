//! The layer ops (dropout, the random state's advance) on every GPU target against the CPU
//! backend. Dropout masks must agree bit for bit: the hash is integer arithmetic and the kept
//! values one multiplication by the same host-computed scale.

use proptest::prelude::*;
use rnn::ops::rng_state_values;

use super::{Values, compare_padded, nan, prop};
use crate::support::Target;

pub fn dropout(t: Target) {
    let s = (
        prop_oneof![1..=300usize, 1000..=70_000usize],
        prop_oneof![Just(0.0f32), Just(1.0f32), 0.05f32..0.95],
        prop_oneof![Just(0u32), Just(0xffffu32), any::<u32>()],
        any::<u32>(),
        any::<u64>(),
    );
    prop(
        t,
        "gpu_dropout",
        10,
        s,
        |ctx, (n, p, counter, stream, seed)| {
            let mut r = Values(seed);
            let state = rng_state_values(seed, counter).to_vec();
            let x = r.vec(n, -3.0, 3.0);
            let pads = r.pads(3);
            let what = format!("dropout p {p} counter {counter} stream {stream}");
            compare_padded(
                ctx,
                &what,
                &[x.clone(), nan(n), state.clone()],
                &pads,
                &[1, 2],
                0.0,
                &|o, v| o.dropout(v[0], v[1], v[2], p, stream),
            )?;
            compare_padded(
                ctx,
                &format!("{what} in place"),
                &[x, state.clone()],
                &pads,
                &[0, 1],
                0.0,
                &|o, v| o.dropout(v[0], v[0], v[1], p, stream),
            )?;
            compare_padded(
                ctx,
                &format!("rng_advance from {counter}"),
                &[state],
                &pads,
                &[0],
                0.0,
                &|o, v| o.rng_advance(v[0]),
            )
        },
    );
}
