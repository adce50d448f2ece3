//! Elementwise loops compiled for the widest vector instructions the CPU has (AVX-512, AVX2),
//! chosen at run time through `pulp`: the crate is built for baseline x86-64 (SSE2), where the
//! branch-free `fastmath` functions vectorize only four lanes wide.
//!
//! Each loop is the `#[inline(always)]` body of a `pulp::WithSimd` implementation, so it is
//! compiled inside pulp's `#[target_feature]` entry point; the per-element function passed in is
//! small and inlines there too. (A plain closure handed to `dispatch` would be called from one
//! entry per instruction set and stay an out-of-line baseline function.)

use std::sync::LazyLock;

use pulp::{Arch, Simd, WithSimd};

/// The detected instruction set, looked up once.
static ARCH: LazyLock<Arch> = LazyLock::new(Arch::new);

/// A loop to compile for the widest vector instructions: implement `run` as
/// `#[inline(always)]` so that it is compiled inside the dispatching entry point.
pub(super) trait Lanes {
    /// The loop.
    fn run(self);
}

struct Go<K>(K);

impl<K: Lanes> WithSimd for Go<K> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, _: S) {
        self.0.run()
    }
}

/// Runs `k` vectorized.
pub(super) fn vectorized(k: impl Lanes) {
    ARCH.dispatch(Go(k))
}

/// `y[i] = f(y[i])`.
struct Map<'a, F> {
    y: &'a mut [f32],
    f: F,
}

impl<F: Fn(f32) -> f32> WithSimd for Map<'_, F> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, _: S) {
        let f = self.f;
        for y in self.y.iter_mut() {
            *y = f(*y);
        }
    }
}

/// `y[i] = f(y[i], a[i])`.
struct Zip1<'a, F> {
    y: &'a mut [f32],
    a: &'a [f32],
    f: F,
}

impl<F: Fn(f32, f32) -> f32> WithSimd for Zip1<'_, F> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, _: S) {
        let f = self.f;
        for (y, &a) in self.y.iter_mut().zip(self.a) {
            *y = f(*y, a);
        }
    }
}

/// `y[i] = f(y[i], a[i], b[i])`.
struct Zip2<'a, F> {
    y: &'a mut [f32],
    a: &'a [f32],
    b: &'a [f32],
    f: F,
}

impl<F: Fn(f32, f32, f32) -> f32> WithSimd for Zip2<'_, F> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, _: S) {
        let f = self.f;
        for ((y, &a), &b) in self.y.iter_mut().zip(self.a).zip(self.b) {
            *y = f(*y, a, b);
        }
    }
}

/// `y[i] = f(y[i])`, vectorized.
pub(super) fn map(y: &mut [f32], f: impl Fn(f32) -> f32) {
    ARCH.dispatch(Map { y, f })
}

/// `y[i] = f(y[i], a[i])` over the common length, vectorized.
pub(super) fn zip1(y: &mut [f32], a: &[f32], f: impl Fn(f32, f32) -> f32) {
    ARCH.dispatch(Zip1 { y, a, f })
}

/// `y[i] = f(y[i], a[i], b[i])` over the common length, vectorized.
pub(super) fn zip2(y: &mut [f32], a: &[f32], b: &[f32], f: impl Fn(f32, f32, f32) -> f32) {
    ARCH.dispatch(Zip2 { y, a, b, f })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zips_match_the_scalar_loop() {
        let a: Vec<f32> = (0..203).map(|i| i as f32 * 0.37 - 30.0).collect();
        let b: Vec<f32> = (0..203).map(|i| (i as f32 * 0.11).sin()).collect();
        let mut y: Vec<f32> = (0..203).map(|i| i as f32 * -0.05).collect();
        let want: Vec<f32> = y
            .iter()
            .zip(&a)
            .zip(&b)
            .map(|((&y, &a), &b)| super::super::fastmath::tanh(y + a * b))
            .collect();
        zip2(&mut y, &a, &b, |y, a, b| {
            super::super::fastmath::tanh(y + a * b)
        });
        for (g, w) in y.iter().zip(&want) {
            assert!((g - w).abs() <= 1e-6 * w.abs().max(1.0), "{g} vs {w}");
        }
        let mut z = a.clone();
        zip1(&mut z, &b, |z, b| z - b);
        assert!(z.iter().zip(&a).zip(&b).all(|((&z, &a), &b)| z == a - b));
        map(&mut z, |z| z * 2.0);
        assert!(
            z.iter()
                .zip(&a)
                .zip(&b)
                .all(|((&z, &a), &b)| z == (a - b) * 2.0)
        );
    }
}
