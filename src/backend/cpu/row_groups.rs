//! Row groups of a recurrent sequence. The rows of a batch are independent sequences, so the
//! whole-sequence ops (`gated_seq`) cut the batch into groups of consecutive rows, handed to the
//! pool threads, and each group runs every time step on its own: its slice of the recurrent
//! product and its row pass, with no synchronization between steps. Splitting every step over
//! the threads instead cost two fork-joins a step (the pool's threads yield and sleep between
//! them, and must be woken), and 64 rows of cell math parted unevenly over two threads. A
//! batch too small for two groups runs as one group whose steps spread their GEMM and row pass
//! over the pool.
//!
//! Buffers are time-major: `blocks` blocks of `batch` rows, so a group's rows are one slice per
//! block.

use std::ops::Range;

use super::par::Split;

/// Rows a group takes where the batch has enough: 16 gave W5's LSTM its fastest steps, against
/// groups of 32 and a single group (docs/performance.md, CPU).
const GROUP_ROWS: usize = 16;
/// Fewest rows a group takes to give each pool thread one: a thinner group leaves the GEMM
/// microkernels (up to 8 rows of C at a time) mostly empty for the `W_hh` it reads.
const MIN_GROUP_ROWS: usize = 8;

/// How a batch of `batch` rows is cut into groups.
pub(super) struct Groups {
    count: usize,
    batch: usize,
}

impl Groups {
    pub(super) fn new(batch: usize) -> Self {
        let per_thread = (batch / MIN_GROUP_ROWS).min(rayon::current_num_threads());
        let count = (batch / GROUP_ROWS).max(per_thread).max(1);
        Groups { count, batch }
    }

    /// How many groups there are.
    pub(super) fn count(&self) -> usize {
        self.count
    }

    /// The batch rows of group `p`.
    pub(super) fn rows(&self, p: usize) -> Range<usize> {
        (self.batch * p / self.count)..(self.batch * (p + 1) / self.count)
    }

    /// How a group spreads its own work: over the pool when it is the only one, else never (the
    /// other threads are busy with their own groups).
    pub(super) fn split(&self) -> Split {
        if self.count == 1 {
            Split::Pool
        } else {
            Split::Caller
        }
    }

    /// The rows of group `p` in block `t` of `x` (blocks of `batch` rows of `width`).
    pub(super) fn rows_of<'a>(&self, x: &'a [f32], width: usize, t: usize, p: usize) -> &'a [f32] {
        let r = self.rows(p);
        let block = t * self.batch;
        &x[(block + r.start) * width..(block + r.end) * width]
    }

    /// `x` (blocks of `batch` rows of `width`) cut by group: `out[p][t]` is the rows of group
    /// `p` in block `t`.
    pub(super) fn cut<'a>(&self, x: &'a mut [f32], width: usize) -> Vec<Vec<&'a mut [f32]>> {
        let mut out: Vec<Vec<&mut [f32]>> = (0..self.count).map(|_| Vec::new()).collect();
        for mut block in x.chunks_mut(self.batch * width) {
            for (p, o) in out.iter_mut().enumerate() {
                let (head, tail) =
                    std::mem::take(&mut block).split_at_mut(self.rows(p).len() * width);
                o.push(head);
                block = tail;
            }
        }
        out
    }

    /// Runs `f(p, work)` for every group's `work`: group 0 on the calling thread, the others on
    /// the pool (which takes them as its threads come free).
    pub(super) fn run<G: Send>(&self, work: Vec<G>, f: impl Fn(usize, G) + Sync) {
        let mut work = work.into_iter().enumerate();
        let first = work.next();
        rayon::in_place_scope(|s| {
            for (p, w) in work {
                let f = &f;
                s.spawn(move |_| f(p, w));
            }
            if let Some((p, w)) = first {
                f(p, w);
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_cover_the_batch_and_cut_every_block() {
        for batch in [1, 7, 8, 17, 64, 65] {
            let g = Groups::new(batch);
            let rows: Vec<_> = (0..g.count).flat_map(|p| g.rows(p)).collect();
            assert_eq!(rows, (0..batch).collect::<Vec<_>>());
            let width = 3;
            let mut x: Vec<f32> = (0..2 * batch * width).map(|i| i as f32).collect();
            let want = x.clone();
            let cut = g.cut(&mut x, width);
            for (p, blocks) in cut.iter().enumerate() {
                assert_eq!(blocks.len(), 2);
                for (t, b) in blocks.iter().enumerate() {
                    assert_eq!(&b[..], g.rows_of(&want, width, t, p));
                }
            }
        }
    }
}
