//! The layer ops (dropout and the random state) against references written here.

use super::*;
use rnn::ops::{RNG_STATE_LEN, dropout_keeps, rng_state_values};

/// The documented mask, transcribed from docs/kernel-abi.md independently of the crate.
fn keep_ref(seed: u64, counter: u32, stream: u32, i: u32, p: f32) -> bool {
    fn mix(mut x: u32) -> u32 {
        x ^= x >> 16;
        x = x.wrapping_mul(0x7feb352d);
        x ^= x >> 15;
        x = x.wrapping_mul(0x846ca68b);
        x ^ (x >> 16)
    }
    let (lo, hi) = (seed as u32, (seed >> 32) as u32);
    let k0 = mix(lo ^ mix(hi ^ mix(counter ^ mix(stream ^ 0x9e3779b9))));
    let k1 = mix(k0 ^ 0x85ebca6b);
    let h = mix(mix(i ^ k0).wrapping_add(k1));
    (h >> 8) >= (p * 16_777_216.0) as u32
}

proptest! {
    #![proptest_config(cfg())]

    #[test]
    fn cpu_dropout_mask_scale_and_statistics(
        n in length(),
        p in prop_oneof![Just(0.0f32), Just(1.0f32), 0.05f32..0.95],
        seed in any::<u64>(),
        counter in prop_oneof![Just(0u32), any::<u32>()],
        stream in any::<u32>(),
        in_place in any::<bool>(),
    ) {
        let ctx = Context::cpu();
        let ops = ctx.ops();
        let mut r = rng(seed);
        let x = r.vec(n, 0.5, 2.0);
        let state = rng_state_values(seed, counter);
        let bs = upload(&ctx, &state);
        let bx = upload(&ctx, &x);
        let out = if in_place {
            ops.dropout(bx.view(), bx.view(), bs.view(), p, stream).unwrap();
            read(&ctx, &bx)
        } else {
            let by = poisoned(&ctx, n);
            ops.dropout(bx.view(), by.view(), bs.view(), p, stream).unwrap();
            read(&ctx, &by)
        };
        let scale = 1.0 / (1.0 - p);
        let mut dropped = 0usize;
        for i in 0..n {
            let keep = keep_ref(seed, counter, stream, i as u32, p);
            prop_assert_eq!(keep, dropout_keeps(&state, stream, i as u32, p));
            let want = if keep { x[i] * scale } else { 0.0 };
            prop_assert_eq!(out[i].to_bits(), want.to_bits(), "element {}", i);
            dropped += !keep as usize;
        }
        // The drop rate is p within 6 binomial standard deviations (or exactly 0 / all).
        let sd = (n as f64 * p as f64 * (1.0 - p as f64)).sqrt();
        prop_assert!((dropped as f64 - n as f64 * p as f64).abs() <= 6.0 * sd + 1e-9,
            "{} of {} dropped at p {}", dropped, n, p);
        // The state is only read.
        prop_assert_eq!(read(&ctx, &bs), state.to_vec());
    }
}

#[test]
fn cpu_dropout_masks_differ_by_step_and_stream() {
    let ctx = Context::cpu();
    let ops = ctx.ops();
    let n = 4096;
    let x = vec![1.0f32; n];
    let bx = upload(&ctx, &x);
    let mask = |counter: u32, stream: u32| {
        let bs = upload(&ctx, &rng_state_values(7, counter));
        let by = poisoned(&ctx, n);
        ops.dropout(bx.view(), by.view(), bs.view(), 0.5, stream)
            .unwrap();
        read(&ctx, &by)
    };
    let a = mask(0, 0);
    assert_eq!(a, mask(0, 0), "same state and stream, same mask");
    for other in [mask(1, 0), mask(0, 1), mask(0, 256)] {
        let same = a.iter().zip(&other).filter(|(x, y)| x == y).count();
        // Independent masks at p = 0.5 agree on about half of the elements.
        assert!((1700..2400).contains(&same), "{same} of {n} equal");
    }
}

#[test]
fn cpu_rng_advance_carries_and_dropout_rejects_bad_arguments() {
    let ctx = Context::cpu();
    let ops = ctx.ops();
    for (counter, want) in [
        (0u32, 1u32),
        (0xffff, 0x1_0000),
        (0x1_ffff, 0x2_0000),
        (u32::MAX, 0),
    ] {
        let b = upload(&ctx, &rng_state_values(0x0123_4567_89ab_cdef, counter));
        ops.rng_advance(b.view()).unwrap();
        assert_eq!(
            read(&ctx, &b),
            rng_state_values(0x0123_4567_89ab_cdef, want).to_vec()
        );
    }
    let s = upload(&ctx, &[0.0; RNG_STATE_LEN]);
    let x = upload(&ctx, &[1.0; 8]);
    let y = poisoned(&ctx, 8);
    for p in [-0.1, 1.1, f32::NAN] {
        let err = ops.dropout(x.view(), y.view(), s.view(), p, 0).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    }
    let short = upload(&ctx, &[0.0; 5]);
    assert!(
        ops.dropout(x.view(), y.view(), short.view(), 0.5, 0)
            .is_err()
    );
    assert!(ops.rng_advance(short.view()).is_err());
    let y7 = poisoned(&ctx, 7);
    assert!(matches!(
        ops.dropout(x.view(), y7.view(), s.view(), 0.5, 0),
        Err(Error::Shape { .. })
    ));
}
