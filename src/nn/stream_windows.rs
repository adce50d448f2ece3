//! Device windows: a stream's whole shuffle window copied to the device in one piece, and each
//! step's batch gathered there through the window's order, as the in-memory path gathers
//! through the epoch's permutation.
//!
//! The batch path (`stream_batches.rs`) gathers every batch on the host and copies it: on a
//! fast GPU the host then has to read the shards and gather their rows at the step's pace
//! (about 10 GB/s each for a 784-wide MLP at batch 1024 on an H100), and the training thread
//! queues two copies and two stream orderings a step. With device windows the host only
//! reads (a window straight into a pinned block, checked there) and the training thread
//! queues one copy a window; the step reads its rows with one gather, on the device, where
//! the in-memory path reads them with the same gather. The cost is device memory for two
//! windows, so [`StreamGather::Auto`] takes this path only where two windows take at most a
//! quarter of the device's memory (or of the context's cap), on devices with side-stream
//! uploads, and only on OpenCL, where it measured faster ([`DeviceWindows::chosen`]).
//!
//! Two device slots: window `k` is trained on from one while window `k + 1` is copied into
//! the other on the side stream (after the main stream's last reader of that slot); the first
//! step that reads a freshly copied window orders the main stream after the copy. A batch
//! that straddles two windows gathers its two parts from both slots. Across an epoch's end the
//! next epoch's first window is copied during this epoch's last window, as the reading
//! threads have it ready.

use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender, TryRecvError};
use std::time::{Duration, Instant};

use crate::backend_kind::BackendKind;
use crate::buffer::Buffer;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::ops::IndexedRows;

use super::network::Network;
use super::source::{DataStream, StreamGather};
use super::stream_batches::{Pooled, Producer, StepLayout};
use super::stream_plan::ShufflePlan;
use super::workspace::{Batch, Rows, Workspace};

/// Host blocks of a stream with device windows: one being read while the other's copy runs
/// (its next read waits for that copy).
pub(crate) const WINDOW_BLOCKS: usize = 2;

/// One window read into a host block: its inputs at byte 0, then its targets, then its
/// order (`plan.rows[index]`, u32), `samples` rows of each.
pub(crate) struct ReadWindow {
    pub block: Pooled,
    pub samples: usize,
    pub plan: Arc<ShufflePlan>,
    pub index: usize,
}

/// Byte ranges of a window block of `samples` rows: inputs, targets, order.
fn window_parts(samples: usize, (xv, yv): (usize, usize)) -> [std::ops::Range<usize>; 3] {
    let (x, y) = (samples * xv * 4, samples * yv * 4);
    [0..x, x..x + y, x + y..x + y + samples * 4]
}

impl Producer {
    /// Bytes of a host block that holds a window of `samples` rows with its order.
    pub(crate) fn window_block_bytes(&self, samples: usize) -> usize {
        window_parts(samples, self.convert.sample_values())[2].end
    }

    /// Reads each plan's windows in order into free blocks of the pool and sends them on
    /// `tx`, with their orders; a plan's windows past the epoch's `used` samples, and windows
    /// of no samples, are not read. Stops at the first error (sent on), when the plans end,
    /// when the pool closes or when the feed hangs up.
    pub(crate) fn run_windows(
        &self,
        plans: Receiver<Arc<ShufflePlan>>,
        tx: &SyncSender<Result<ReadWindow>>,
    ) {
        for plan in plans.iter() {
            let mut start = 0;
            for (index, shards) in plan.shards.chunks(plan.window()).enumerate() {
                if start >= self.layout.used {
                    break;
                }
                let order = &plan.rows[index];
                start += order.len();
                if order.is_empty() {
                    continue;
                }
                let Some(mut block) = self.pool.take() else {
                    return;
                };
                let samples = order.len();
                let read = self.read_window_block(shards, order, &mut block);
                let failed = read.is_err();
                let sent = read.map(|()| ReadWindow {
                    block,
                    samples,
                    plan: plan.clone(),
                    index,
                });
                if tx.send(sent).is_err() || failed {
                    return;
                }
            }
        }
    }

    /// Reads the window of `shards` into `block` (waiting for the block's last copy first),
    /// followed by its order.
    fn read_window_block(&self, shards: &[u32], order: &[u32], block: &mut Pooled) -> Result<()> {
        let samples = order.len();
        let [x, y, o] = window_parts(samples, self.convert.sample_values());
        let bytes = block.block().bytes_mut()?;
        let have = bytes.len();
        let bytes = bytes.get_mut(..o.end).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "a window of {samples} samples takes {} bytes, its host block {have}",
                o.end
            ))
        })?;
        let words = bytemuck::try_cast_slice_mut::<u8, u32>(bytes).map_err(|e| {
            Error::InvalidArgument(format!("a host block is not u32-aligned: {e:?}"))
        })?;
        let (xs, rest) = words.split_at_mut(x.len() / 4);
        let (ys, os) = rest.split_at_mut(y.len() / 4);
        os.copy_from_slice(order);
        self.read_window_into(shards, xs, ys)
    }
}

/// The window a device slot holds: window `index` of `plan`.
struct Held {
    plan: Arc<ShufflePlan>,
    index: usize,
}

/// A device slot: a window's inputs, targets and order.
struct Slot {
    x: Buffer,
    y: Buffer,
    order: Buffer,
    held: Option<Held>,
    /// Copied on the side stream, and the main stream not yet ordered after the copy.
    fresh: bool,
}

impl Slot {
    fn holds(&self, plan: &Arc<ShufflePlan>, index: usize) -> bool {
        self.held
            .as_ref()
            .is_some_and(|h| Arc::ptr_eq(&h.plan, plan) && h.index == index)
    }
}

/// The device side of a stream with device windows: two slots and the window read ahead.
pub(crate) struct DeviceWindows {
    slots: [Slot; 2],
    /// A window received from the reading threads and not yet copied (no slot was free), or
    /// the error they stopped on, raised at the step that needs the window.
    ahead: Option<Result<ReadWindow>>,
    /// Values per sample of inputs and of targets.
    values: (usize, usize),
}

/// The epoch a step belongs to, as [`DeviceWindows::load`] needs it: the reading threads'
/// windows, the epoch's plan, the epoch positions its windows start at, and the next epoch's
/// plan when one is queued.
pub(crate) struct Epoch<'p> {
    pub windows: &'p Receiver<Result<ReadWindow>>,
    pub plan: &'p Arc<ShufflePlan>,
    pub starts: &'p [usize],
    pub next: Option<&'p Arc<ShufflePlan>>,
}

/// Where a step's rows lie: epoch positions `start..end`, all in window `index`.
#[derive(Clone, Copy, Default)]
struct Segment {
    index: usize,
    start: usize,
    end: usize,
}

/// A step's one or two segments, kept without an allocation (one set a step).
#[derive(Default)]
struct Segments {
    parts: [Segment; 2],
    len: usize,
}

impl Segments {
    fn as_slice(&self) -> &[Segment] {
        &self.parts[..self.len]
    }
}

impl DeviceWindows {
    /// Whether the batches of `stream` for steps of `layout` are gathered on the device, by
    /// [`DataStream::gather`](super::DataStream::gather); windows of up to `window_bytes` on
    /// the host. [`StreamGather::Device`] with a batch that can be larger than a window is an
    /// error (a batch would span more windows than the two slots hold).
    pub(crate) fn chosen(
        net: &Network,
        stream: &DataStream,
        layout: &StepLayout,
        window_bytes: usize,
    ) -> Result<bool> {
        let (lens, window) = (stream.source.shard_lens(), stream.shuffle_window);
        let smallest = smallest_window(lens, window);
        let batch_fits = smallest >= layout.global;
        Ok(match stream.gather {
            StreamGather::Auto => {
                prefers_windows(net.ctx.info().backend)
                    && net.ctx.execution().side_uploads()
                    && batch_fits
                    && DeviceWindows::fit(net, window_bytes)
            }
            StreamGather::Device if !batch_fits => {
                return Err(Error::InvalidArgument(format!(
                    "StreamGather::Device: a batch of {} samples can be larger than a shuffle \
                     window of {window} shards ({smallest} samples in the smallest); use a \
                     larger shuffle_window or StreamGather::Auto",
                    layout.global
                )));
            }
            StreamGather::Device => true,
            StreamGather::Host => false,
        })
    }

    /// Whether two slots of windows of up to `samples` rows (`bytes` in all each) fit: at
    /// most a quarter of the context's memory cap, or of the device's memory.
    pub(crate) fn fit(net: &Network, bytes: usize) -> bool {
        let device = usize::try_from(net.ctx.info().memory).unwrap_or(usize::MAX);
        let budget = net.ctx.memory_limit().map_or(device, |cap| cap.min(device));
        bytes.saturating_mul(2) <= budget / 4
    }

    /// Two slots for windows of up to `samples` rows.
    pub(crate) fn new(net: &Network, samples: usize) -> Result<Self> {
        let ops = net.ctx.ops();
        let values = (net.input_width(), net.target_width());
        let slot = || -> Result<Slot> {
            Ok(Slot {
                x: ops.alloc_as(net.input_dtype(), samples * values.0)?,
                y: ops.alloc_as(net.target_dtype(), samples * values.1)?,
                order: ops.alloc_as(DType::U32, samples)?,
                held: None,
                fresh: false,
            })
        };
        Ok(DeviceWindows {
            slots: [slot()?, slot()?],
            ahead: None,
            values,
        })
    }

    /// Forgets the windows held and read ahead (the host side is starting afresh).
    pub(crate) fn reset(&mut self) {
        self.ahead = None;
        for s in &mut self.slots {
            s.held = None;
        }
    }

    /// Copies `w` into slot `slot` on the side stream, after the main stream's work so far
    /// (which holds the last step that read the slot).
    /// Without a side stream the copies are made now, in order with the main stream.
    fn copy_in(&mut self, net: &Network, mut w: ReadWindow, slot: usize) -> Result<()> {
        let (ops, exec) = (net.ctx.ops(), net.ctx.execution());
        let s = &mut self.slots[slot];
        s.held = None;
        let (xv, yv) = self.values;
        let parts = window_parts(w.samples, self.values);
        let dst = [
            s.x.slice(0, w.samples * xv)?,
            s.y.slice(0, w.samples * yv)?,
            s.order.slice(0, w.samples)?,
        ];
        let block = w.block.block();
        let side = exec.side_uploads();
        if side {
            exec.order_streams(true)?;
        }
        for (dst, range) in dst.into_iter().zip(parts) {
            // One copy a part: in 4 MB pieces NVIDIA's OpenCL took 16-18% longer a step on the
            // H100 (many writes, each ordered by events) and CUDA no shorter.
            match side {
                true => exec.upload_block_on_side(dst, block, range)?,
                false => ops.upload_bytes(dst, &block.bytes_mut()?[range])?,
            }
        }
        s.held = Some(Held {
            plan: w.plan,
            index: w.index,
        });
        s.fresh = side;
        Ok(())
    }

    /// The slot that holds window `index` of `plan`, copying it in when it is not there yet
    /// (into the slot other than `keep`); waits for the reading threads when they have not
    /// read it yet. The time waited is added to `waited`.
    fn ensure(
        &mut self,
        net: &Network,
        windows: &Receiver<Result<ReadWindow>>,
        (plan, index): (&Arc<ShufflePlan>, usize),
        keep: Option<usize>,
        waited: &mut Duration,
    ) -> Result<usize> {
        if let Some(s) = (0..2).find(|&s| self.slots[s].holds(plan, index)) {
            return Ok(s);
        }
        let w = match self.ahead.take() {
            Some(w) => w?,
            None => {
                let t0 = Instant::now();
                let got = windows.recv();
                *waited += t0.elapsed();
                got.map_err(|_| stopped())??
            }
        };
        if !(Arc::ptr_eq(&w.plan, plan) && w.index == index) {
            return Err(Error::InvalidData(format!(
                "the data stream read window {} of an epoch where window {index} was due",
                w.index
            )));
        }
        // Never the slot the step reads its first rows from; else an empty one, else one
        // holding a window the epoch is past.
        let stale = |s: &Slot| {
            s.held
                .as_ref()
                .is_none_or(|h| !Arc::ptr_eq(&h.plan, plan) || h.index < index)
        };
        let candidates = (0..2).filter(|&s| Some(s) != keep);
        let slot = candidates
            .clone()
            .find(|&s| self.slots[s].held.is_none())
            .or_else(|| candidates.clone().find(|&s| stale(&self.slots[s])))
            .or_else(|| candidates.clone().next())
            .unwrap_or(0);
        self.copy_in(net, w, slot)?;
        Ok(slot)
    }

    /// The batch of the epoch positions `offset..offset + ws.batch` of the epoch `from`
    /// describes, gathered into `ws` from the slots; then the window after it (or the next
    /// epoch's first) starts copying when the reading threads have it and a slot is free.
    pub(crate) fn load<'a>(
        &'a mut self,
        net: &'a Network,
        ws: &'a Workspace,
        from: Epoch<'_>,
        offset: usize,
        waited: &mut Duration,
    ) -> Result<Batch<'a>> {
        let Epoch {
            windows,
            plan,
            starts,
            next,
        } = from;
        let (ops, exec) = (net.ctx.ops(), net.ctx.execution());
        let end = offset + ws.batch;
        let segments = segments(plan, starts, offset..end)?;
        let segments = segments.as_slice();
        let mut used = [None, None];
        for (i, seg) in segments.iter().enumerate() {
            let keep = if i == 0 { None } else { used[0] };
            used[i] = Some(self.ensure(net, windows, (plan, seg.index), keep, waited)?);
        }
        if used.iter().flatten().any(|&s| self.slots[s].fresh) {
            exec.order_streams(false)?;
            self.slots.iter_mut().for_each(|s| s.fresh = false);
        }
        let last = segments[segments.len() - 1].index;
        self.copy_ahead(net, windows, plan, next, last, used)?;
        let (w, tw) = self.values;
        let order = |seg: &Segment, slot: usize| {
            let at = seg.start - starts[seg.index];
            self.slots[slot].order.slice(at, seg.end - seg.start)
        };
        match (segments, used) {
            ([seg], [Some(s), _]) => {
                let slot = &self.slots[s];
                let rows = Rows::Gather(order(seg, s)?);
                net.load_rows(ws, slot.x.view(), Some(slot.y.view()), &rows, false)
            }
            (segs, _) => {
                let mut at = 0;
                for (seg, s) in segs.iter().zip(used.iter().flatten()) {
                    let (slot, n) = (&self.slots[*s], seg.end - seg.start);
                    let idx = order(seg, *s)?;
                    let xb = ws.xb.slice(at * w, n * w)?;
                    ops.gather_rows(IndexedRows::new(slot.x.view(), idx, xb, w))?;
                    let yb = ws.yb.slice(at * tw, n * tw)?;
                    ops.gather_rows(IndexedRows::new(slot.y.view(), idx, yb, tw))?;
                    at += n;
                }
                // The rows are in the workspace's own buffers, where a recorded step reads
                // them too.
                net.load_rows(ws, ws.xb.view(), Some(ws.yb.view()), &Rows::Range(0), true)
            }
        }
    }

    /// Starts copying the window after window `last` of `plan` (or `next`'s first) into the
    /// slot this step does not read, if the reading threads have it ready.
    fn copy_ahead(
        &mut self,
        net: &Network,
        windows: &Receiver<Result<ReadWindow>>,
        plan: &Arc<ShufflePlan>,
        next: Option<&Arc<ShufflePlan>>,
        last: usize,
        used: [Option<usize>; 2],
    ) -> Result<()> {
        let Some(free) = (0..2).find(|s| !used.contains(&Some(*s))) else {
            return Ok(());
        };
        let held_after = |s: &Slot| {
            s.held.as_ref().is_some_and(|h| {
                (Arc::ptr_eq(&h.plan, plan) && h.index > last)
                    || next.is_some_and(|n| Arc::ptr_eq(&h.plan, n))
            })
        };
        if held_after(&self.slots[free]) {
            return Ok(());
        }
        if self.ahead.is_none() {
            match windows.try_recv() {
                Ok(w) => self.ahead = Some(w),
                Err(TryRecvError::Empty) => return Ok(()),
                Err(TryRecvError::Disconnected) => {
                    self.ahead = Some(Err(stopped()));
                    return Ok(());
                }
            }
        }
        // A window is taken in order only; an error waits for the step that needs the window.
        if let Some(Ok(w)) = self.ahead.take_if(|w| w.is_ok()) {
            self.copy_in(net, w, free)?;
        }
        Ok(())
    }
}

/// The windows a step's epoch positions `range` fall in (one, or two for a batch that
/// straddles a window's end), given the epoch positions `starts` each window starts at.
fn segments(
    plan: &ShufflePlan,
    starts: &[usize],
    range: std::ops::Range<usize>,
) -> Result<Segments> {
    let mut out = Segments::default();
    let mut at = range.start;
    while at < range.end {
        if out.len == 2 {
            return Err(Error::InvalidArgument(format!(
                "a step of {} samples spans more than two shuffle windows; device windows take \
                 at most two (a batch larger than a window)",
                range.len()
            )));
        }
        // The last window starting at or before `at` that holds samples past it.
        let index = starts.partition_point(|&s| s <= at).saturating_sub(1);
        let window_end = starts[index] + plan.rows[index].len();
        if window_end <= at {
            // Windows of no samples start where the next one does: skip them.
            return Err(Error::InvalidData(format!(
                "epoch position {at} lies in no window of the data stream"
            )));
        }
        let end = window_end.min(range.end);
        out.parts[out.len] = Segment {
            index,
            start: at,
            end,
        };
        out.len += 1;
        at = end;
    }
    if out.len == 0 {
        return Err(Error::InvalidArgument("a step of no samples".into()));
    }
    Ok(out)
}

/// The epoch positions each of `plan`'s windows starts at.
pub(crate) fn window_starts(plan: &ShufflePlan) -> Vec<usize> {
    plan.rows
        .iter()
        .scan(0, |at, r| {
            *at += r.len();
            Some(*at - r.len())
        })
        .collect()
}

/// Samples in the largest window `window` shards of `lens` can make.
pub(crate) fn largest_window(lens: &[usize], window: usize) -> usize {
    let mut sorted = lens.to_vec();
    sorted.sort_unstable_by(|a, b| b.cmp(a));
    sorted.iter().take(window.max(1)).sum()
}

/// Samples in the smallest window of any epoch's shard order: `window` shards of `lens`, or
/// the remainder that makes the last window.
fn smallest_window(lens: &[usize], window: usize) -> usize {
    let mut sorted = lens.to_vec();
    sorted.sort_unstable();
    let window = window.max(1);
    let full = sorted.iter().take(window).sum::<usize>();
    match lens.len() % window {
        0 => full,
        r => full.min(sorted.iter().take(r).sum()),
    }
}

/// Where [`StreamGather::Auto`] gathers on the device: OpenCL, whose per-batch copy calls
/// cost the training thread 20 us and more a step. On CUDA the host batches stayed ahead on
/// the H100 (2026-12-07, the `stream` bench's MLP at batch 1024: 1.06 of the in-memory step
/// against 1.09-1.10 with device windows, steady over three runs, nothing waited for on the
/// host: a device-side cost of the window copies not yet explained).
fn prefers_windows(backend: BackendKind) -> bool {
    backend == BackendKind::OpenCl
}

fn stopped() -> Error {
    Error::InvalidData(
        "the data stream's reading thread stopped before the epoch's last batch".into(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_sizes_bound_every_epochs_windows() {
        // Shards of 5, 3, 0, 7 and 4 samples, two a window: the largest window holds the two
        // largest shards, the smallest the two smallest, or the last shard of an odd count.
        let lens = [5, 3, 0, 7, 4];
        assert_eq!(largest_window(&lens, 2), 12);
        assert_eq!(smallest_window(&lens, 2), 0);
        assert_eq!(smallest_window(&[5, 3, 7, 4], 2), 7);
        assert_eq!(smallest_window(&[5, 3, 7, 4, 6], 2), 3);
        assert_eq!(largest_window(&[5, 3], 4), 8);
    }

    #[test]
    fn a_step_falls_in_one_window_or_straddles_two() {
        let mut plan = ShufflePlan::new(&[4, 0, 6, 3], 1).unwrap();
        plan.advance(&mut crate::nn::Rng::new(1));
        let starts = window_starts(&plan);
        let lens: Vec<usize> = plan.rows.iter().map(Vec::len).collect();
        let total: usize = lens.iter().sum();
        for batch in 1..=3 {
            for start in 0..total - batch {
                let segs = segments(&plan, &starts, start..start + batch).unwrap();
                let segs = segs.as_slice();
                // Contiguous, covering the step, each inside its window, never an empty one.
                assert_eq!(segs[0].start, start);
                assert_eq!(segs[segs.len() - 1].end, start + batch);
                for (i, s) in segs.iter().enumerate() {
                    assert!(lens[s.index] > 0);
                    assert!(starts[s.index] <= s.start && s.end <= starts[s.index] + lens[s.index]);
                    if i > 0 {
                        assert_eq!(segs[i - 1].end, s.start);
                    }
                }
            }
        }
        // A step past the epoch's samples, and one over more than two windows, are errors.
        assert!(segments(&plan, &starts, total..total + 1).is_err());
        assert!(segments(&plan, &starts, 0..total).is_err());
    }
}
