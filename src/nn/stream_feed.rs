//! Feeding a [`DataStream`] to the training loop: a background thread reads each epoch's
//! windows in the [`ShufflePlan`]'s order (a window's shards in parallel, each straight into
//! its part of one buffer), one window ahead of a second thread that cuts this rank's share
//! of every batch out of the current window into a bounded queue; at the end of an epoch the
//! next epoch's first window is read ahead. Host memory: two shuffle windows and `prefetch`
//! batches, all reused from epoch to epoch. The loop uploads each batch into one of two
//! device slots and gathers it into the step's workspace.
//!
//! On a device with side-stream uploads (CUDA: pinned staging and a copy stream; OpenCL: a
//! second queue with non-blocking writes), batch `k + 1` is copied while step `k` runs: the
//! copy waits for the step that last read its slot (`k - 1`), and step `k + 1` waits for the
//! copy, both on the device, not the host. Elsewhere each batch is uploaded just before its
//! step: on the CPU that is a plain copy; on HIP a copy on the one stream (the HIP binding has
//! no events or pinned allocations yet). The reading, shuffling and conversion overlap the
//! device's work everywhere.

use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::JoinHandle;

use parking_lot::Mutex;
use rayon::prelude::*;

use crate::buffer::Buffer;
use crate::dtype::Element;
use crate::error::{Error, Result};
use crate::ops::{MemoryOps, TypedMemory};

use super::data::{Dataset, Targets};
use super::embedding::Embedding;
use super::layer::Layer;
use super::network::Network;
use super::padding::Buckets;
use super::rng::Rng;
use super::source::{DataSource, DataStream, SampleSpec, TargetSpec, TrainData};
use super::stream_plan::ShufflePlan;
use super::train_state::RunState;
use super::workspace::{Batch, DeviceData, Rows, Workspace, token_ids_need_an_embedding};

/// This rank's rows of one step, as the device takes them (native-endian bytes).
#[derive(Default)]
struct HostBatch {
    x: Vec<u8>,
    y: Vec<u8>,
}

/// One window's samples as the device takes them (native-endian bytes), its shards one
/// after another in the plan's order.
#[derive(Default)]
struct Window {
    x: Vec<u8>,
    y: Vec<u8>,
}

/// Buffers handed back for reuse, so that a steady epoch allocates (and page-faults) nothing:
/// the spent windows and the uploaded batches.
#[derive(Default)]
struct Spares {
    windows: Mutex<Vec<Window>>,
    batches: Mutex<Vec<HostBatch>>,
    /// The next epoch's first window, read at the end of this one, with its shards (taken
    /// only when the next epoch's plan starts with the same shards).
    ahead: Mutex<Option<(Vec<u32>, Window)>>,
}

/// Writes `values`' native-endian bytes into `out` (`values.len() * 4` bytes).
fn write_ne<T: Element>(values: &[T], out: &mut [u8]) {
    for (v, chunk) in values.iter().zip(out.chunks_exact_mut(T::DTYPE.size())) {
        v.write_ne(chunk);
    }
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

    /// Whether epoch position `pos` is this rank's, and whether it ends its step.
    fn place(&self, pos: usize) -> (bool, bool) {
        let start = pos / self.global * self.global;
        let size = self.global.min(self.used - start);
        let share = size / self.world;
        let o = pos - start;
        (
            o / share == self.rank && o < share * self.world,
            o + 1 == size,
        )
    }
}

/// What the reading thread needs from the network: how to turn a shard into device bytes.
struct Convert {
    spec: SampleSpec,
    /// The first layer, when it is an embedding (inputs become checked u32 ids).
    embedding: Option<Embedding>,
}

impl Convert {
    /// Writes `data`'s inputs and targets as the device holds them into `x` and `y` (sized
    /// for its samples).
    fn rows_into(&self, data: &Dataset, x: &mut [u8], y: &mut [u8]) -> Result<()> {
        let w = data.width();
        match (data.token_ids(), &self.embedding) {
            (Some(ids), Some(e)) => {
                e.check_u32_ids(ids, w)?;
                write_ne(ids, x);
            }
            (None, Some(e)) => write_ne(&e.ids_of(data.features(), w)?, x),
            (None, None) => write_ne(data.features(), x),
            (Some(_), None) => return Err(token_ids_need_an_embedding()),
        }
        match data.targets() {
            Targets::Classes { labels, .. } => write_ne(labels, y),
            Targets::Values { values, .. } => write_ne(values, y),
        }
        Ok(())
    }

    /// Bytes per sample of inputs and of targets.
    fn sample_bytes(&self) -> (usize, usize) {
        let tw = match self.spec.targets {
            TargetSpec::Classes { per_sample, .. } => per_sample,
            TargetSpec::Values { width } => width,
        };
        (self.spec.width * 4, tw * 4)
    }
}

/// Reads shard `s` (of `len` samples) into its part of a window.
fn read_shard_into(
    source: &dyn DataSource,
    convert: &Convert,
    (s, len): (usize, usize),
    x: &mut [u8],
    y: &mut [u8],
) -> Result<()> {
    let name = source.shard_name(s);
    let named = |e: Error| match e {
        Error::InvalidData(m) if !m.starts_with(&name) => {
            Error::InvalidData(format!("{name}: {m}"))
        }
        e => e,
    };
    let data = source.read_shard(s).map_err(named)?;
    convert.spec.check(&data, len, &name)?;
    convert.rows_into(&data, x, y).map_err(named)
}

/// Reads the window of `shards` into `into`, its shards in parallel, each straight into its
/// part of the one buffer.
fn read_window(
    source: &dyn DataSource,
    convert: &Convert,
    shards: &[u32],
    into: &mut Window,
) -> Result<()> {
    let lens = source.shard_lens();
    let (xs, ys) = convert.sample_bytes();
    let n: usize = shards.iter().map(|&s| lens[s as usize]).sum();
    into.x.resize(n * xs, 0);
    into.y.resize(n * ys, 0);
    let (mut x, mut y) = (into.x.as_mut_slice(), into.y.as_mut_slice());
    let mut parts = Vec::with_capacity(shards.len());
    for &s in shards {
        let len = lens[s as usize];
        let (xp, xr) = std::mem::take(&mut x).split_at_mut(len * xs);
        let (yp, yr) = std::mem::take(&mut y).split_at_mut(len * ys);
        (x, y) = (xr, yr);
        parts.push(((s as usize, len), xp, yp));
    }
    parts
        .into_par_iter()
        .try_for_each(|(shard, x, y)| read_shard_into(source, convert, shard, x, y))
}

/// Reads the epoch's windows in `plan`'s order, one ahead of the one being cut into
/// batches, and sends them on; then reads the window of `next` shards (the next epoch's
/// first, when known) for that epoch. Stops at the first error (sent on) or when `tx` hangs
/// up.
fn read_windows(
    (source, convert): (&dyn DataSource, &Convert),
    plan: &ShufflePlan,
    next: Option<&[u32]>,
    spares: &Spares,
    tx: &SyncSender<Result<Window>>,
) {
    let read = |shards: &[u32]| {
        let mut window = spares.windows.lock().pop().unwrap_or_default();
        read_window(source, convert, shards, &mut window).map(|()| window)
    };
    let mut ahead = spares.ahead.lock().take();
    for shards in plan.shards.chunks(plan.window()) {
        let window = match ahead.take() {
            Some((read_for, w)) if read_for == shards => Ok(w),
            Some((_, w)) => {
                spares.windows.lock().push(w);
                read(shards)
            }
            None => read(shards),
        };
        let failed = window.is_err();
        if tx.send(window).is_err() || failed {
            return;
        }
    }
    if let Some((shards, Ok(w))) = next.map(|s| (s, read(s))) {
        *spares.ahead.lock() = Some((shards.to_vec(), w));
    }
}

/// Cuts the epoch's windows (read by a second thread, one window ahead) into this rank's
/// batches and sends them; stops at the first error (sent on) or when the loop hangs up.
fn produce(
    (source, convert): (&dyn DataSource, &Convert),
    (plan, next): (&ShufflePlan, Option<&[u32]>),
    layout: StepLayout,
    spares: &Spares,
    tx: &SyncSender<Result<HostBatch>>,
) -> Result<()> {
    let (xs, ys) = convert.sample_bytes();
    let local = layout.global / layout.world;
    let fresh = || {
        let mut b = spares.batches.lock().pop().unwrap_or_default();
        b.x.clear();
        b.y.clear();
        b.x.reserve(local * xs);
        b.y.reserve(local * ys);
        b
    };
    // A rendezvous: the reader holds at most the next window while this thread cuts the
    // current one, and reads the one after only once this thread has taken it.
    std::thread::scope(|scope| {
        // Made in here so that the reader's send fails once this thread returns early.
        let (wtx, wrx) = sync_channel(0);
        scope.spawn(move || read_windows((source, convert), plan, next, spares, &wtx));
        let mut batch = fresh();
        let mut pos = 0;
        for rows in &plan.rows {
            if pos >= layout.used {
                break;
            }
            let window = match wrx.recv() {
                Ok(w) => w?,
                Err(_) => return Ok(()),
            };
            for &r in rows {
                if pos >= layout.used {
                    break;
                }
                let r = r as usize;
                let (mine, ends) = layout.place(pos);
                if mine {
                    batch.x.extend_from_slice(&window.x[r * xs..(r + 1) * xs]);
                    batch.y.extend_from_slice(&window.y[r * ys..(r + 1) * ys]);
                }
                if ends {
                    let full = std::mem::replace(&mut batch, fresh());
                    if tx.send(Ok(full)).is_err() {
                        return Ok(());
                    }
                }
                pos += 1;
            }
            // Back before the next window is taken, so that the reader refills this one.
            spares.windows.lock().push(window);
        }
        Ok(())
    })
}

/// The device side of a stream: two batch slots, and the current epoch's reading thread.
pub(crate) struct StreamFeed {
    source: Arc<dyn DataSource>,
    convert: Arc<Convert>,
    prefetch: usize,
    spares: Arc<Spares>,
    layout: StepLayout,
    slots: [(Buffer, Buffer); 2],
    /// Batch `k + 1` is copied on the side stream while step `k` runs.
    side: bool,
    step: usize,
    rx: Option<Receiver<Result<HostBatch>>>,
    reader: Option<JoinHandle<()>>,
}

impl Network {
    /// A feed of `stream` for steps of `layout`: checks the stream's samples against this
    /// network and allocates the two batch slots.
    pub(crate) fn stream_feed(
        &self,
        stream: &DataStream,
        layout: StepLayout,
    ) -> Result<StreamFeed> {
        let spec = stream.source.spec();
        self.check_data(&spec.probe()?)?;
        let local = layout.global / layout.world;
        let ops = self.ctx.ops();
        let x_len = local * self.input_width();
        let y_len = local * self.target_width();
        let slot = || -> Result<(Buffer, Buffer)> {
            Ok((
                ops.alloc_as(self.input_dtype(), x_len)?,
                ops.alloc_as(self.target_dtype(), y_len)?,
            ))
        };
        let slots = [slot()?, slot()?];
        let embedding = match &self.layers[0] {
            Layer::Embedding(e) => Some(e.clone()),
            _ => None,
        };
        Ok(StreamFeed {
            source: stream.source.clone(),
            convert: Arc::new(Convert { spec, embedding }),
            prefetch: stream.prefetch,
            spares: Arc::default(),
            layout,
            slots,
            side: self.ctx.execution().side_uploads(),
            step: 0,
            rx: None,
            reader: None,
        })
    }
}

impl StreamFeed {
    /// Starts reading the epoch whose order `plan` holds; `next` is the next epoch's first
    /// window, when there is one, read ahead at the end of this epoch.
    pub(crate) fn begin_epoch(&mut self, plan: &ShufflePlan, next: Option<Vec<u32>>) {
        self.stop();
        let (tx, rx) = sync_channel(self.prefetch);
        let (source, convert, plan, layout, spares) = (
            self.source.clone(),
            self.convert.clone(),
            plan.clone(),
            self.layout,
            self.spares.clone(),
        );
        self.reader = Some(std::thread::spawn(move || {
            let order = (&plan, next.as_deref());
            if let Err(e) = produce((&*source, &convert), order, layout, &spares, &tx) {
                let _ = tx.send(Err(e));
            }
        }));
        self.rx = Some(rx);
        self.step = 0;
    }

    /// Ends the reading thread (it stops at its next send once the queue is dropped).
    fn stop(&mut self) {
        self.rx = None;
        if let Some(h) = self.reader.take()
            && h.join().is_err()
        {
            log::error!("the data stream's reading thread panicked");
        }
    }

    fn recv(&mut self) -> Result<HostBatch> {
        let rx = self.rx.as_ref().ok_or_else(|| {
            Error::InvalidArgument("a stream batch asked for outside an epoch".into())
        })?;
        match rx.recv() {
            Ok(r) => r,
            Err(_) => Err(Error::InvalidData(
                "the data stream's reading thread stopped before the epoch's last batch".into(),
            )),
        }
    }

    /// Uploads `b` into slot `slot`, on the side stream when `side`, and hands `b` back for
    /// reuse (every upload copies it out before returning).
    fn upload(
        &self,
        ops: &dyn MemoryOps,
        exec: &dyn crate::ops::Execution,
        slot: usize,
        b: HostBatch,
        side: bool,
    ) -> Result<()> {
        self.upload_rows(ops, exec, slot, &b, side)?;
        self.spares.batches.lock().push(b);
        Ok(())
    }

    fn upload_rows(
        &self,
        ops: &dyn MemoryOps,
        exec: &dyn crate::ops::Execution,
        slot: usize,
        b: &HostBatch,
        side: bool,
    ) -> Result<()> {
        let (x, y) = &self.slots[slot];
        let xs = x.dtype().size();
        let ys = y.dtype().size();
        let xv = x.slice(0, b.x.len() / xs)?;
        let yv = y.slice(0, b.y.len() / ys)?;
        if side {
            exec.upload_bytes_on_side(xv, &b.x)?;
            exec.upload_bytes_on_side(yv, &b.y)
        } else {
            ops.upload_bytes(xv, &b.x)?;
            ops.upload_bytes(yv, &b.y)
        }
    }

    /// The next step's batch, loaded into `ws` (whose batch size is this rank's share of the
    /// step); with side uploads, the one after it starts copying.
    pub(crate) fn next<'a>(&'a mut self, net: &'a Network, ws: &'a Workspace) -> Result<Batch<'a>> {
        let (ops, exec) = (net.ctx.ops(), net.ctx.execution());
        let k = self.step;
        let slot = k % 2;
        if k == 0 || !self.side {
            let b = self.recv()?;
            self.upload(ops, exec, slot, b, false)?;
        }
        if self.side {
            // Step k waits for its copy; the next copy waits for step k - 1, the last reader
            // of its slot, and runs while step k does.
            exec.order_streams(false)?;
            if k + 1 < self.layout.steps() {
                let b = self.recv()?;
                exec.order_streams(true)?;
                self.upload(ops, exec, 1 - slot, b, true)?;
            }
        }
        self.step += 1;
        let (x, y) = &self.slots[slot];
        net.load_rows(ws, x.view(), Some(y.view()), &Rows::Range(0), false)
    }
}

/// Where the loop's batches come from: an uploaded data set gathered through the epoch's
/// permutation on the device, or a stream.
pub(crate) enum Feed {
    Memory {
        /// Boxed: the lengths made it much larger than the stream variant.
        data: Box<DeviceData>,
        /// The epoch's sample order (u32).
        perm: Buffer,
        /// Batches of similar lengths ([`super::TrainingConfig::bucket_by_length`]).
        buckets: Option<Buckets>,
    },
    Stream {
        feed: Box<StreamFeed>,
        plan: ShufflePlan,
    },
}

impl Feed {
    /// Takes a training checkpoint's order.
    pub(crate) fn restore(&mut self, state: &RunState) -> Result<()> {
        match self {
            Feed::Memory { .. } if !state.shards.is_empty() => Err(Error::InvalidArgument(
                "the training checkpoint was written by a run on a stream, this run's data is \
                 in memory"
                    .into(),
            )),
            Feed::Memory { .. } => Ok(()),
            Feed::Stream { feed, plan } => {
                *plan = ShufflePlan::restore(
                    feed.source.shard_lens(),
                    plan.window(),
                    state.shards.clone(),
                    &state.order,
                )?;
                Ok(())
            }
        }
    }

    /// Puts the current order into `state`, for a training checkpoint.
    pub(crate) fn save(&self, state: &mut RunState) {
        if let Feed::Stream { plan, .. } = self {
            state.order = plan.flat_rows();
            state.shards = plan.shards.clone();
        }
    }

    /// Starts an epoch: the next order (shuffled by `rng` when given), then its upload or the
    /// stream's reading thread; `more` when another epoch follows (a stream reads its first
    /// window ahead, from the order that `rng` gives it next).
    pub(crate) fn begin_epoch(
        &mut self,
        net: &Network,
        state: &mut RunState,
        mut rng: Option<&mut Rng>,
        more: bool,
    ) -> Result<()> {
        match self {
            Feed::Memory { perm, buckets, .. } => {
                if let Some(rng) = rng {
                    rng.shuffle(&mut state.order);
                    if let Some(b) = buckets {
                        b.apply(&mut state.order, rng);
                    }
                }
                net.ctx.ops().upload_as(perm.view(), &state.order)
            }
            Feed::Stream { feed, plan } => {
                if let Some(rng) = rng.as_deref_mut() {
                    plan.advance(rng);
                }
                // Nothing else draws from `rng` before the next epoch's shuffle, so a copy of
                // it gives that order (a window read for another order is not used).
                let next = more.then(|| {
                    let mut next = plan.clone();
                    if let Some(rng) = rng {
                        next.advance(&mut rng.clone());
                    }
                    next.shards
                        .chunks(next.window())
                        .next()
                        .unwrap_or(&[])
                        .to_vec()
                });
                feed.begin_epoch(plan, next);
                Ok(())
            }
        }
    }

    /// The step's batch, loaded into `ws`; `offset` is this rank's first position of the step
    /// in the epoch's order.
    pub(crate) fn load<'a>(
        &'a mut self,
        net: &'a Network,
        ws: &'a Workspace,
        offset: usize,
    ) -> Result<Batch<'a>> {
        match self {
            Feed::Memory { data, perm, .. } => {
                let rows = Rows::Gather(perm.slice(offset, ws.batch)?);
                net.load_lengths(ws, data, &rows)?;
                net.load_rows(ws, data.x.view(), Some(data.y.view()), &rows, false)
            }
            Feed::Stream { feed, .. } => feed.next(net, ws),
        }
    }
}

impl Network {
    /// Checks that `data` fits this network: [`Network::check_data`] for a data set; for a
    /// stream, its sample spec and validation samples (each shard is checked as it is read).
    pub(crate) fn check_train_data(&self, data: TrainData<'_>) -> Result<()> {
        match data {
            TrainData::Memory(d) => self.check_data(d),
            TrainData::Stream(s) => {
                if s.is_empty() {
                    return Err(Error::InvalidData("the data stream has no samples".into()));
                }
                self.check_data(&s.source.spec().probe()?)?;
                s.validation.as_ref().map_or(Ok(()), |v| self.check_data(v))
            }
        }
    }
}

impl Drop for StreamFeed {
    fn drop(&mut self) {
        self.stop();
    }
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
        let mine = |l: StepLayout| (0..l.used).filter(|&p| l.place(p).0).collect::<Vec<_>>();
        let ends = |l: StepLayout| (0..l.used).filter(|&p| l.place(p).1).collect::<Vec<_>>();
        assert_eq!(mine(layout(8, 2, 0)), vec![0, 1, 4, 5]);
        assert_eq!(mine(layout(8, 2, 1)), vec![2, 3, 6, 7]);
        assert_eq!(ends(layout(8, 2, 1)), vec![3, 7]);
        // One device takes a smaller last batch.
        assert_eq!(mine(layout(10, 1, 0)), (0..10).collect::<Vec<_>>());
        assert_eq!(ends(layout(10, 1, 0)), vec![3, 7, 9]);
        assert_eq!(layout(10, 1, 0).steps(), 3);
    }
}
