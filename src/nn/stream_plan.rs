//! The order a stream's samples are trained in, epoch by epoch: the shards in a seeded random
//! order, taken `window` shards at a time; each window's samples in a seeded random order.
//!
//! Guarantees, for a given seed, shard lengths and window:
//! - every sample is visited exactly once per epoch;
//! - the order is the same on every run, every rank and after resuming from a training
//!   checkpoint (the plan is part of it);
//! - samples of the same window are uniformly mixed with each other; samples of shards in
//!   different windows are never mixed (a window of all shards gives a uniform permutation of
//!   the whole data set);
//! - like the in-memory path's order, each window's order is shuffled from the previous
//!   epoch's order of that window (from the data order when its sample count changed), and a
//!   stream of one shard takes exactly the in-memory path's order for the same seed.

use crate::error::{Error, Result};

use super::rng::Rng;

/// The shard order and each window's sample order of the current epoch.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ShufflePlan {
    lens: Vec<usize>,
    window: usize,
    /// Shard indices in the epoch's order.
    pub shards: Vec<u32>,
    /// Per window: the order of its samples, numbered through its shards in `shards` order.
    pub rows: Vec<Vec<u32>>,
}

impl ShufflePlan {
    /// The data order: shards in index order, each window's samples in read order.
    pub(crate) fn new(lens: &[usize], window: usize) -> Result<Self> {
        if lens.iter().sum::<usize>() == 0 {
            return Err(Error::InvalidData("the data source has no samples".into()));
        }
        let shards = (0..lens.len())
            .map(|i| u32::try_from(i).map_err(|_| too_many(lens.len())))
            .collect::<Result<Vec<_>>>()?;
        let mut plan = ShufflePlan {
            lens: lens.to_vec(),
            window: window.max(1),
            shards,
            rows: Vec::new(),
        };
        plan.rows = plan.window_lens().map(identity).collect();
        Ok(plan)
    }

    /// A plan saved by [`ShufflePlan::flat_rows`] with its `shards`; an error when it does not
    /// fit these shard lengths.
    pub(crate) fn restore(
        lens: &[usize],
        window: usize,
        shards: Vec<u32>,
        flat: &[u32],
    ) -> Result<Self> {
        let mut sorted = shards.clone();
        sorted.sort_unstable();
        if !sorted.iter().copied().eq(0..lens.len() as u32) {
            return Err(Error::InvalidArgument(format!(
                "the training checkpoint's shard order is not one of this source's {} shards",
                lens.len()
            )));
        }
        let mut plan = ShufflePlan::new(lens, window)?;
        plan.shards = shards;
        let wl: Vec<usize> = plan.window_lens().collect();
        if wl.iter().sum::<usize>() != flat.len() {
            return Err(Error::InvalidArgument(format!(
                "the training checkpoint's order holds {} samples, this source {}",
                flat.len(),
                wl.iter().sum::<usize>()
            )));
        }
        let mut at = 0;
        for (w, &l) in wl.iter().enumerate() {
            let rows = &flat[at..at + l];
            at += l;
            let mut seen = vec![false; l];
            for &r in rows {
                match seen.get_mut(r as usize) {
                    Some(s) if !*s => *s = true,
                    _ => {
                        return Err(Error::InvalidArgument(format!(
                            "the training checkpoint's order does not fit window {w} of {l} \
                             samples (was it written with another shuffle window?)"
                        )));
                    }
                }
            }
            plan.rows[w] = rows.to_vec();
        }
        Ok(plan)
    }

    /// Samples per window, in the current shard order.
    fn window_lens(&self) -> impl Iterator<Item = usize> + '_ {
        self.shards
            .chunks(self.window)
            .map(|w| w.iter().map(|&s| self.lens[s as usize]).sum())
    }

    /// The next epoch's order: the shards shuffled, then each window's samples (from its
    /// previous order when the window holds as many samples as before, else from read order).
    pub(crate) fn advance(&mut self, rng: &mut Rng) {
        rng.shuffle(&mut self.shards);
        let lens: Vec<usize> = self.window_lens().collect();
        for (w, len) in lens.into_iter().enumerate() {
            if self.rows[w].len() != len {
                self.rows[w] = identity(len);
            }
            rng.shuffle(&mut self.rows[w]);
        }
    }

    /// Shards per window.
    pub(crate) fn window(&self) -> usize {
        self.window
    }

    /// Every window's order, one after another (a training checkpoint's `rnn.order`).
    pub(crate) fn flat_rows(&self) -> Vec<u32> {
        self.rows.concat()
    }
}

fn identity(len: usize) -> Vec<u32> {
    (0..len as u32).collect()
}

fn too_many(shards: usize) -> Error {
    Error::InvalidArgument(format!("{shards} shards; at most u32::MAX are supported"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Global sample ids of the epoch, in training order.
    fn epoch_samples(plan: &ShufflePlan, lens: &[usize]) -> Vec<usize> {
        let starts: Vec<usize> = lens
            .iter()
            .scan(0, |s, &l| {
                *s += l;
                Some(*s - l)
            })
            .collect();
        let mut out = Vec::new();
        for (w, shards) in plan.shards.chunks(plan.window).enumerate() {
            let ids: Vec<usize> = shards
                .iter()
                .flat_map(|&s| starts[s as usize]..starts[s as usize] + lens[s as usize])
                .collect();
            out.extend(plan.rows[w].iter().map(|&r| ids[r as usize]));
        }
        out
    }

    #[test]
    fn every_sample_once_per_epoch_and_seeded() {
        let lens = [5, 3, 0, 7, 4];
        for window in 1..=6 {
            let mut a = ShufflePlan::new(&lens, window).unwrap();
            let mut b = a.clone();
            let (mut ra, mut rb) = (Rng::new(9), Rng::new(9));
            for _ in 0..4 {
                a.advance(&mut ra);
                b.advance(&mut rb);
                assert_eq!(a, b);
                let mut seen = epoch_samples(&a, &lens);
                seen.sort_unstable();
                assert_eq!(seen, (0..19).collect::<Vec<_>>(), "window {window}");
                let back = ShufflePlan::restore(&lens, window, a.shards.clone(), &a.flat_rows());
                assert_eq!(back.unwrap(), a);
            }
        }
    }

    #[test]
    fn one_shard_takes_the_in_memory_order() {
        let mut plan = ShufflePlan::new(&[10], 3).unwrap();
        let (mut rng, mut mem_rng) = (Rng::new(4), Rng::new(4));
        let mut order: Vec<u32> = (0..10).collect();
        for _ in 0..3 {
            plan.advance(&mut rng);
            mem_rng.shuffle(&mut order);
            assert_eq!(plan.rows[0], order);
        }
    }

    #[test]
    fn an_empty_source_and_a_foreign_order_are_errors() {
        assert!(ShufflePlan::new(&[0, 0], 1).is_err());
        assert!(ShufflePlan::restore(&[2, 2], 1, vec![0, 0], &[0, 1, 0, 1]).is_err());
        assert!(ShufflePlan::restore(&[2, 2], 1, vec![1, 0], &[0, 1, 0]).is_err());
        // Another window: the saved order is not a permutation of each window's samples.
        assert!(ShufflePlan::restore(&[1, 3], 2, vec![0, 1], &[2, 0, 1, 0]).is_err());
    }
}
