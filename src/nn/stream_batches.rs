//! The host side of a stream: two threads that turn shuffle plans into this rank's batches,
//! written straight into host blocks the device copies from (pinned on CUDA).
//!
//! A reading thread reads each plan's windows in order (a window's shards in parallel, each
//! straight into its part of one reused buffer, then checked) and hands each to a cutting
//! thread, which gathers this rank's rows of every batch into a free block of the
//! [`BlockPool`] and queues the full blocks in step order. Up to [`GATHER_AHEAD`] batches are
//! gathered at once, each by a rayon task of its own that splits further across idle workers.
//! The reader works one window ahead of the cutter; plans queue up, so the next epoch's first
//! window and batches are read while the current epoch ends, and the first epoch's while the
//! run sets up (`stream_feed.rs`). Host memory: two windows and the pool's blocks
//! ([`host_blocks`]), all reused. The training thread only takes full blocks and queues their
//! copies.

use std::collections::VecDeque;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::time::Instant;

use parking_lot::{Condvar, Mutex};
use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::ops::HostBlock;

use super::embedding::Embedding;
use super::source::{DataSource, InputsMut, SampleSpec, TargetSpec, TargetsMut};
use super::stream_plan::ShufflePlan;
use super::workspace::token_ids_need_an_embedding;

/// Bytes of window rows one gathering task copies (rounded up to 16 rows).
const GATHER_TASK_BYTES: usize = 64 << 10;

/// Batches gathered at once, each by a rayon task of its own: one batch's gathering is not
/// enough to keep up with a fast device (a large batch's rows are read from all over the
/// window, and one fork-join per batch leaves workers idle at its end).
pub(crate) const GATHER_AHEAD: usize = 3;

/// Host blocks a stream of `prefetch` batches allocates: `prefetch` queued for the training
/// thread, one whose copy it is queueing, [`GATHER_AHEAD`] being gathered. The cutter takes a
/// block only while fewer than [`GATHER_AHEAD`] are being gathered, so one is always free or
/// on its way back.
pub(crate) fn host_blocks(prefetch: usize) -> usize {
    prefetch + 1 + GATHER_AHEAD
}

/// How an epoch's samples fall into steps: `used` samples in global batches of `global`
/// (the last may be smaller when `world` is 1), rank `rank` of `world` taking an equal share.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StepLayout {
    pub used: usize,
    pub global: usize,
    pub world: usize,
    pub rank: usize,
}

impl StepLayout {
    /// The epoch's steps.
    pub(crate) fn steps(&self) -> usize {
        self.used.div_ceil(self.global)
    }

    /// This rank's share of a step: the most rows a batch holds.
    pub(crate) fn local(&self) -> usize {
        self.global / self.world
    }

    /// The epoch positions of step `step`: all of it, and this rank's share.
    fn step(&self, step: usize) -> (Range<usize>, Range<usize>) {
        let start = step * self.global;
        let size = self.global.min(self.used - start);
        let share = size / self.world;
        let mine = start + self.rank * share;
        (start..start + size, mine..mine + share)
    }
}

/// What the reading threads need from the network: how a shard becomes device values.
pub(crate) struct Convert {
    pub spec: SampleSpec,
    /// The first layer, when it is an embedding (inputs become checked u32 ids).
    pub embedding: Option<Embedding>,
}

impl Convert {
    /// 4-byte values per sample of inputs and of targets.
    pub(crate) fn sample_values(&self) -> (usize, usize) {
        let tw = match self.spec.targets {
            TargetSpec::Classes { per_sample, .. } => per_sample,
            TargetSpec::Values { width } => width,
        };
        (self.spec.width, tw)
    }

    /// Reads shard `s` into `x` and `y` (sized for its samples) and checks the values as
    /// [`super::Dataset::new`] and the network do; features for an embedding become ids.
    fn read_shard(
        &self,
        source: &dyn DataSource,
        s: usize,
        x: &mut [u32],
        y: &mut [u32],
    ) -> Result<()> {
        let name = source.shard_name(s);
        let named = |e: Error| match e {
            Error::InvalidData(m) if !m.starts_with(&name) => {
                Error::InvalidData(format!("{name}: {m}"))
            }
            e => e,
        };
        let width = self.spec.width;
        let inputs = match self.spec.token_ids {
            true => InputsMut::Ids(&mut *x),
            false => InputsMut::Features(bytemuck::cast_slice_mut(&mut *x)),
        };
        let targets = match self.spec.targets {
            TargetSpec::Classes { .. } => TargetsMut::Labels(&mut *y),
            TargetSpec::Values { .. } => TargetsMut::Values(bytemuck::cast_slice_mut(&mut *y)),
        };
        source.read_shard_into(s, inputs, targets).map_err(named)?;
        let (_, tw) = self.sample_values();
        let checked = match self.spec.targets {
            TargetSpec::Classes { classes, .. } => check_labels(y, classes, tw),
            TargetSpec::Values { .. } => check_finite(bytemuck::cast_slice(y), tw, "target"),
        };
        checked
            .and_then(|()| match (self.spec.token_ids, &self.embedding) {
                (true, Some(e)) => e.check_u32_ids(x, width),
                (true, None) => Err(token_ids_need_an_embedding()),
                (false, e) => {
                    check_finite(bytemuck::cast_slice(x), width, "feature")?;
                    match e {
                        Some(e) => ids_in_place(e, x, width),
                        None => Ok(()),
                    }
                }
            })
            .map_err(named)
    }
}

/// Turns f32 features that hold token ids into the u32 ids, in place, checked as
/// [`Embedding::ids_of`] checks them.
fn ids_in_place(e: &Embedding, x: &mut [u32], width: usize) -> Result<()> {
    let ids = e.ids_of(bytemuck::cast_slice(x), width)?;
    x.copy_from_slice(&ids);
    Ok(())
}

/// [`Error::InvalidData`] naming the first label outside `0..classes`.
fn check_labels(labels: &[u32], classes: usize, per_sample: usize) -> Result<()> {
    let limit = u32::try_from(classes).unwrap_or(u32::MAX);
    let all_fit = labels
        .chunks(1024)
        .all(|c| c.iter().fold(true, |ok, &l| ok & (l < limit)));
    if all_fit && classes <= u32::MAX as usize {
        return Ok(());
    }
    match labels.iter().position(|&l| l as usize >= classes) {
        Some(i) => Err(Error::InvalidData(format!(
            "row {}: label {} outside 0..{classes}",
            i / per_sample,
            labels[i]
        ))),
        None => Ok(()),
    }
}

/// [`Error::InvalidData`] naming the first value that is not finite; a branch-free pass over
/// blocks first (which vectorizes), the search only when one fails.
fn check_finite(values: &[f32], width: usize, what: &str) -> Result<()> {
    // In parallel: a shard's values are checked right after it is read, on its reading thread.
    let all_finite = values.par_chunks(1 << 16).all(|c| {
        c.chunks(1024)
            .all(|c| c.iter().fold(true, |ok, v| ok & v.is_finite()))
    });
    if all_finite {
        return Ok(());
    }
    match values.iter().position(|v| !v.is_finite()) {
        Some(i) => Err(Error::InvalidData(format!(
            "row {}: {what} column {} is {} (values must be finite)",
            i / width,
            i % width,
            values[i]
        ))),
        None => Ok(()),
    }
}

/// One window's samples as the device takes them, its shards one after another in the
/// plan's order.
#[derive(Default)]
struct Window {
    x: Vec<u32>,
    y: Vec<u32>,
}

/// Makes `v` `len` values long for a window to be read into. A buffer with room for them is
/// reused (only an extension past its length is written); a new one comes zeroed from the
/// allocator with its pages not yet touched, so that the reading threads fault them in as they
/// write their parts, in parallel, rather than this thread all of them first with a fill pass.
fn fit(v: &mut Vec<u32>, len: usize) {
    if v.capacity() < len {
        *v = vec![0; len];
    } else {
        v.resize(len, 0);
    }
}

/// A read window and where it lies: window `index` of `plan`.
struct Piece {
    plan: Arc<ShufflePlan>,
    index: usize,
    window: Window,
}

/// Host blocks for this rank's batches, allocated once and used in turn (oldest returned
/// first, so its copy has most likely finished).
pub(crate) struct BlockPool {
    free: Mutex<(VecDeque<Box<dyn HostBlock>>, bool)>,
    returned: Condvar,
}

impl BlockPool {
    /// A pool of no blocks yet ([`BlockPool::add`]).
    pub(crate) fn new() -> Self {
        BlockPool {
            free: Mutex::new((VecDeque::new(), false)),
            returned: Condvar::new(),
        }
    }

    /// One more block, free.
    pub(crate) fn add(&self, block: Box<dyn HostBlock>) {
        self.free.lock().0.push_back(block);
        self.returned.notify_one();
    }

    /// The oldest free block, waiting for one; `None` once the pool is closed.
    pub(crate) fn take(self: &Arc<Self>) -> Option<Pooled> {
        let mut free = self.free.lock();
        loop {
            if free.1 {
                return None;
            }
            if let Some(b) = free.0.pop_front() {
                return Some(Pooled {
                    block: Some(b),
                    pool: self.clone(),
                });
            }
            self.returned.wait(&mut free);
        }
    }

    /// Ends (`true`) or resumes waiting takers.
    pub(crate) fn set_closed(&self, closed: bool) {
        self.free.lock().1 = closed;
        self.returned.notify_all();
    }
}

/// A block out of its pool; back in the pool when dropped.
pub(crate) struct Pooled {
    block: Option<Box<dyn HostBlock>>,
    pool: Arc<BlockPool>,
}

impl Pooled {
    pub(crate) fn block(&mut self) -> &mut dyn HostBlock {
        match self.block.as_mut() {
            Some(b) => &mut **b,
            None => unreachable!("a pooled block is taken only by its drop"),
        }
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        if let Some(b) = self.block.take() {
            self.pool.add(b);
        }
    }
}

/// A batch's block: its inputs at byte 0, its targets at `targets_at`, `rows` rows of each.
pub(crate) struct Filled {
    pub block: Pooled,
    pub rows: usize,
}

/// Where the host side's time goes, since the last [`HostTimes::take`]: nanoseconds and
/// bytes of window reading (wall time per window, its shards read in parallel) and of
/// gathering (wall time per batch segment, its rows gathered in parallel).
#[derive(Default)]
pub(crate) struct HostTimes {
    read: [AtomicU64; 2],
    gather: [AtomicU64; 2],
}

impl HostTimes {
    fn add(pair: &[AtomicU64; 2], since: Instant, bytes: usize) {
        pair[0].fetch_add(since.elapsed().as_nanos() as u64, Ordering::Relaxed);
        pair[1].fetch_add(bytes as u64, Ordering::Relaxed);
    }

    /// `(read ns, read bytes, gather ns, gather bytes)`, reset to zero.
    pub(crate) fn take(&self) -> [u64; 4] {
        let t = |a: &AtomicU64| a.swap(0, Ordering::Relaxed);
        [
            t(&self.read[0]),
            t(&self.read[1]),
            t(&self.gather[0]),
            t(&self.gather[1]),
        ]
    }
}

/// What both threads share with the feed.
pub(crate) struct Producer {
    pub source: Arc<dyn DataSource>,
    pub convert: Convert,
    pub layout: StepLayout,
    pub pool: Arc<BlockPool>,
    pub times: HostTimes,
    /// Windows handed back for reuse, so that a steady run allocates (and page-faults) none.
    spare_windows: Mutex<Vec<Window>>,
}

impl Producer {
    pub(crate) fn new(
        source: Arc<dyn DataSource>,
        convert: Convert,
        layout: StepLayout,
        pool: Arc<BlockPool>,
    ) -> Self {
        Producer {
            source,
            convert,
            layout,
            pool,
            times: HostTimes::default(),
            spare_windows: Mutex::default(),
        }
    }

    /// Byte offset of a block's targets: after the inputs of a full share of a step.
    pub(crate) fn targets_at(&self) -> usize {
        self.layout.local() * self.convert.sample_values().0 * 4
    }

    /// Bytes of one batch block.
    pub(crate) fn block_bytes(&self) -> usize {
        let (xv, yv) = self.convert.sample_values();
        self.layout.local() * (xv + yv) * 4
    }

    /// Reads the window of `shards` into `into`, its shards in parallel (on threads of their
    /// own, so that waiting on the file system holds no worker the gathering needs), each
    /// straight into its part of the one buffer.
    fn read_window(&self, shards: &[u32], into: &mut Window) -> Result<()> {
        let n = self.window_samples(shards);
        let (xv, yv) = self.convert.sample_values();
        fit(&mut into.x, n * xv);
        fit(&mut into.y, n * yv);
        self.read_window_into(shards, &mut into.x, &mut into.y)
    }

    /// Samples in the window of `shards`.
    pub(crate) fn window_samples(&self, shards: &[u32]) -> usize {
        let lens = self.source.shard_lens();
        shards.iter().map(|&s| lens[s as usize]).sum()
    }

    /// As [`Producer::read_window`], into `x` and `y`, which hold exactly the window's values.
    pub(crate) fn read_window_into(
        &self,
        shards: &[u32],
        mut x: &mut [u32],
        mut y: &mut [u32],
    ) -> Result<()> {
        let t0 = Instant::now();
        let lens = self.source.shard_lens();
        let (xv, yv) = self.convert.sample_values();
        let n = self.window_samples(shards);
        debug_assert!(x.len() == n * xv && y.len() == n * yv);
        let mut parts = Vec::with_capacity(shards.len());
        for &s in shards {
            let len = lens[s as usize];
            let (xp, xr) = std::mem::take(&mut x).split_at_mut(len * xv);
            let (yp, yr) = std::mem::take(&mut y).split_at_mut(len * yv);
            (x, y) = (xr, yr);
            parts.push((s as usize, xp, yp));
        }
        let threads = super::shard_file::reading_cores().min(parts.len()).max(1);
        let mut shares: Vec<Vec<_>> = (0..threads).map(|_| Vec::new()).collect();
        for (i, part) in parts.into_iter().enumerate() {
            shares[i % threads].push(part);
        }
        let read = std::thread::scope(|scope| {
            let handles: Vec<_> = shares
                .into_iter()
                .map(|share| {
                    scope.spawn(move || {
                        share.into_iter().try_for_each(|(s, x, y)| {
                            self.convert.read_shard(&*self.source, s, x, y)
                        })
                    })
                })
                .collect();
            // Every thread is joined (one left unjoined would take its panic to the scope);
            // the first thread's error is the window's.
            let mut first = Ok(());
            for h in handles {
                let r = h.join().unwrap_or_else(|_| {
                    Err(Error::InvalidData("a shard reading thread panicked".into()))
                });
                if first.is_ok() {
                    first = r;
                }
            }
            first
        });
        HostTimes::add(&self.times.read, t0, (n * (xv + yv)) * 4);
        read
    }

    /// Reads each plan's windows in order, each handed on once read; a plan's windows past
    /// the epoch's `used` samples are not read. Stops at the first error (sent on), or when
    /// the plans end or the cutter hangs up.
    fn read_windows(&self, plans: &Receiver<Arc<ShufflePlan>>, tx: &SyncSender<Result<Piece>>) {
        for plan in plans.iter() {
            let mut start = 0;
            for (index, shards) in plan.shards.chunks(plan.window()).enumerate() {
                if start >= self.layout.used {
                    break;
                }
                start += plan.rows[index].len();
                let mut window = self.spare_windows.lock().pop().unwrap_or_default();
                let read = self.read_window(shards, &mut window).map(|()| Piece {
                    plan: plan.clone(),
                    index,
                    window,
                });
                let failed = read.is_err();
                if tx.send(read).is_err() || failed {
                    return;
                }
            }
        }
    }

    /// Gathers window rows `rows` into `block` from row `at` of the batch.
    fn gather(&self, window: &Window, rows: &[u32], block: &mut [u8], at: usize) {
        let t0 = Instant::now();
        let (xv, yv) = self.convert.sample_values();
        let (xs, ys) = (xv * 4, yv * 4);
        let (bx, by) = block.split_at_mut(self.targets_at());
        let bx = &mut bx[at * xs..(at + rows.len()) * xs];
        let by = &mut by[at * ys..(at + rows.len()) * ys];
        let (wx, wy): (&[u8], &[u8]) = (
            bytemuck::cast_slice(&window.x),
            bytemuck::cast_slice(&window.y),
        );
        // Pinned blocks are write-combined: a task writes its part of the block front to back,
        // inputs then targets, and takes a multiple of 16 rows so that its targets (4-byte
        // values) fill whole 64-byte lines, which no other task writes (a line written in
        // parts by two threads, or left half-written while the inputs stream past, is flushed
        // in pieces).
        let task = (GATHER_TASK_BYTES / (xs + ys)).max(1).next_multiple_of(16);
        bx.par_chunks_mut(task * xs)
            .zip(by.par_chunks_mut(task * ys))
            .zip(rows.par_chunks(task))
            .for_each(|((bx, by), rows)| {
                for (ox, &r) in bx.chunks_exact_mut(xs).zip(rows) {
                    let r = r as usize;
                    ox.copy_from_slice(&wx[r * xs..(r + 1) * xs]);
                }
                for (oy, &r) in by.chunks_exact_mut(ys).zip(rows) {
                    let r = r as usize;
                    oy.copy_from_slice(&wy[r * ys..(r + 1) * ys]);
                }
            });
        HostTimes::add(&self.times.gather, t0, rows.len() * (xs + ys));
    }

    /// Cuts the windows that a reading thread reads from `plans` into this rank's batches,
    /// sent on `tx`; stops at the first error (sent on), when the plans end, when the pool
    /// closes or when the feed hangs up.
    pub(crate) fn run(&self, plans: Receiver<Arc<ShufflePlan>>, tx: &SyncSender<Result<Filled>>) {
        std::thread::scope(|scope| {
            // A rendezvous: the reader holds at most the next window while this thread cuts
            // the current one. Made in here so that its send fails once this thread returns.
            let (wtx, wrx) = sync_channel(0);
            scope.spawn(move || self.read_windows(&plans, &wtx));
            let _ = self.cut(&wrx, tx);
        })
    }

    /// The cutting loop of [`Producer::run`]; `None` when it stopped early.
    ///
    /// Each batch's rows of a window are gathered by a rayon task of its own (split further
    /// across idle workers), up to [`GATHER_AHEAD`] batches at once; this thread takes their
    /// blocks back in step order and sends them on, so that a batch that straddles two
    /// windows is finished in the next one.
    fn cut(
        &self,
        windows: &Receiver<Result<Piece>>,
        tx: &SyncSender<Result<Filled>>,
    ) -> Option<()> {
        let layout = self.layout;
        let steps = layout.steps();
        let (mut step, mut start) = (0, 0);
        // The block of a batch whose rows continue in the next window.
        let mut carried: Option<Pooled> = None;
        for piece in windows.iter() {
            let piece = match piece {
                Ok(p) => p,
                Err(e) => {
                    let _ = tx.send(Err(e));
                    return None;
                }
            };
            if piece.index == 0 {
                (step, start) = (0, 0);
            }
            let rows = &piece.plan.rows[piece.index];
            let end = start + rows.len();
            let window = &piece.window;
            let mut pending = VecDeque::with_capacity(GATHER_AHEAD);
            rayon::in_place_scope(|scope| -> Option<()> {
                while step < steps {
                    let (whole, mine) = layout.step(step);
                    let complete = whole.end <= end;
                    let mut block = match carried.take() {
                        Some(b) => b,
                        None => {
                            while pending.len() >= GATHER_AHEAD {
                                let front = pending.pop_front()?;
                                self.finish(front, tx, &mut carried)?;
                            }
                            self.pool.take()?
                        }
                    };
                    let (a, b) = (mine.start.max(start), mine.end.min(end));
                    let segment = if a < b {
                        // Waits for the block's last copy here, not on a rayon worker.
                        if let Err(e) = block.block().bytes_mut() {
                            let _ = tx.send(Err(e));
                            return None;
                        }
                        let (done, gathered) = sync_channel(1);
                        let seg = &rows[a - start..b - start];
                        let at = a - mine.start;
                        scope.spawn(move |_| {
                            let r = block.block().bytes_mut().map(|bytes| {
                                self.gather(window, seg, bytes, at);
                            });
                            let _ = done.send(r.map(|()| block));
                        });
                        Segment::Gathering(gathered)
                    } else {
                        Segment::Ready(block)
                    };
                    pending.push_back(Pending {
                        segment,
                        rows: mine.len(),
                        complete,
                    });
                    if !complete {
                        break;
                    }
                    step += 1;
                }
                while let Some(front) = pending.pop_front() {
                    self.finish(front, tx, &mut carried)?;
                }
                Some(())
            })?;
            start = end;
            // Back before the next window is taken, so that the reader refills this one.
            self.spare_windows.lock().push(piece.window);
        }
        Some(())
    }

    /// Takes `pending`'s block once gathered: sent on `tx` when its batch is complete, else
    /// kept in `carried` for the next window. `None` (an error sent on) when its gathering
    /// failed, or when the feed hung up.
    fn finish(
        &self,
        pending: Pending,
        tx: &SyncSender<Result<Filled>>,
        carried: &mut Option<Pooled>,
    ) -> Option<()> {
        let block = match pending.segment {
            Segment::Ready(b) => Ok(b),
            Segment::Gathering(done) => done.recv().unwrap_or_else(|_| {
                Err(Error::InvalidData("a batch gathering task panicked".into()))
            }),
        };
        match block {
            Ok(block) if pending.complete => tx
                .send(Ok(Filled {
                    block,
                    rows: pending.rows,
                }))
                .ok(),
            Ok(block) => {
                *carried = Some(block);
                Some(())
            }
            Err(e) => {
                let _ = tx.send(Err(e));
                None
            }
        }
    }
}

/// A batch's block in the cutter's queue: being gathered (it comes back on the receiver), or
/// ready (no rows of this rank in the window).
enum Segment {
    Gathering(Receiver<Result<Pooled>>),
    Ready(Pooled),
}

/// A batch being cut from a window: its block, this rank's rows of it, and whether its last
/// rows were in this window.
struct Pending {
    segment: Segment,
    rows: usize,
    complete: bool,
}

#[cfg(test)]
mod tests {
    use super::StepLayout;

    #[test]
    fn each_rank_takes_its_share_of_every_step() {
        let layout = |used, world, rank| StepLayout {
            used,
            global: 4,
            world,
            rank,
        };
        let mine = |l: StepLayout| (0..l.steps()).flat_map(|s| l.step(s).1).collect::<Vec<_>>();
        let ends = |l: StepLayout| {
            (0..l.steps())
                .map(|s| l.step(s).0.end - 1)
                .collect::<Vec<_>>()
        };
        assert_eq!(mine(layout(8, 2, 0)), vec![0, 1, 4, 5]);
        assert_eq!(mine(layout(8, 2, 1)), vec![2, 3, 6, 7]);
        assert_eq!(ends(layout(8, 2, 1)), vec![3, 7]);
        // One device takes a smaller last batch.
        assert_eq!(mine(layout(10, 1, 0)), (0..10).collect::<Vec<_>>());
        assert_eq!(ends(layout(10, 1, 0)), vec![3, 7, 9]);
        assert_eq!(layout(10, 1, 0).steps(), 3);
    }
}
