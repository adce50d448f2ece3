//! The all-reduce of CPU replicas: the replicas of one process are threads, and their
//! gradients and metrics already live in host memory, so they meet here instead of in a
//! collective library (NCCL has no CPU backend).
//!
//! Every rank leaves its slice in its slot; the last to arrive sums the slots in rank order, so
//! the result does not depend on which thread came first (a run and its resumed copy agree bit
//! for bit) and every rank reads the same values.

use std::sync::{Condvar, Mutex, MutexGuard};

use crate::error::{Error, Result};

#[derive(Default)]
struct Round {
    /// Each rank's contribution to the round in progress.
    slots: Vec<Option<Vec<f32>>>,
    /// The finished round's sum, until every rank has read it.
    result: Option<Vec<f32>>,
    /// Ranks that have read `result`.
    taken: usize,
    /// A rank failed: every wait ends with an error instead of hanging.
    aborted: bool,
}

/// `world` CPU replicas' meeting point (see the module docs).
pub(crate) struct HostGroup {
    world: usize,
    round: Mutex<Round>,
    changed: Condvar,
}

fn aborted() -> Error {
    Error::Collective {
        library: "host".into(),
        call: "all_reduce".into(),
        code: -1,
        message: "another replica failed".into(),
    }
}

impl HostGroup {
    pub(crate) fn new(world: usize) -> Self {
        HostGroup {
            world,
            round: Mutex::new(Round {
                slots: vec![None; world],
                ..Round::default()
            }),
            changed: Condvar::new(),
        }
    }

    pub(crate) fn world(&self) -> usize {
        self.world
    }

    fn lock(&self) -> Result<MutexGuard<'_, Round>> {
        self.round.lock().map_err(|_| aborted())
    }

    fn wait<'a>(&self, g: MutexGuard<'a, Round>) -> Result<MutexGuard<'a, Round>> {
        self.changed.wait(g).map_err(|_| aborted())
    }

    /// Replaces `x` by the sum over all ranks of their `x` (every rank calls this with the same
    /// length, in the same order of calls).
    pub(crate) fn all_reduce_sum(&self, rank: usize, x: &mut [f32]) -> Result<()> {
        let mut g = self.lock()?;
        // The previous round's result must be read by everyone before its slots refill.
        while g.result.is_some() && !g.aborted {
            g = self.wait(g)?;
        }
        if g.aborted {
            return Err(aborted());
        }
        g.slots[rank] = Some(x.to_vec());
        if g.slots.iter().all(Option::is_some) {
            let mut sum = vec![0.0f32; x.len()];
            for slot in g.slots.iter_mut() {
                let part = slot.take().unwrap_or_default();
                if part.len() != sum.len() {
                    g.aborted = true;
                    self.changed.notify_all();
                    return Err(Error::InvalidArgument(
                        "replicas all-reduced slices of different lengths".into(),
                    ));
                }
                sum.iter_mut().zip(&part).for_each(|(s, p)| *s += p);
            }
            g.result = Some(sum);
            g.taken = 0;
            self.changed.notify_all();
        } else {
            while g.result.is_none() && !g.aborted {
                g = self.wait(g)?;
            }
            if g.aborted {
                return Err(aborted());
            }
        }
        x.copy_from_slice(g.result.as_deref().unwrap_or_default());
        g.taken += 1;
        if g.taken == self.world {
            g.result = None;
            self.changed.notify_all();
        }
        Ok(())
    }

    /// Ends every wait, now and later, with an error: a rank failed and will not come.
    pub(crate) fn abort(&self) {
        let mut g = match self.round.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        g.aborted = true;
        self.changed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::HostGroup;

    #[test]
    fn every_rank_gets_the_sum_round_after_round() {
        let group = HostGroup::new(3);
        let sums: Vec<Vec<f32>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..3)
                .map(|rank| {
                    let group = &group;
                    s.spawn(move || {
                        let mut seen = Vec::new();
                        for round in 0..50 {
                            let mut x = [rank as f32 + round as f32, 1.0];
                            group.all_reduce_sum(rank, &mut x).unwrap();
                            seen.extend(x);
                        }
                        seen
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let want: Vec<f32> = (0..50).flat_map(|r| [3.0 + 3.0 * r as f32, 3.0]).collect();
        for s in sums {
            assert_eq!(s, want);
        }
    }

    #[test]
    fn abort_ends_a_wait_with_an_error() {
        let group = HostGroup::new(2);
        std::thread::scope(|s| {
            let waiting = s.spawn(|| group.all_reduce_sum(0, &mut [1.0]));
            std::thread::sleep(std::time::Duration::from_millis(20));
            group.abort();
            assert!(waiting.join().unwrap().is_err());
        });
        assert!(group.all_reduce_sum(1, &mut [1.0]).is_err());
    }
}
