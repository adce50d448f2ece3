//! Feeding a [`DataStream`] to the training loop, in one of two ways ([`StreamGather`]):
//! - **host batches** (`stream_batches.rs`): background threads read and gather this rank's
//!   batches into host blocks; the loop takes each full block, copies it into one of two
//!   device batch slots and gathers the step's workspace from it;
//! - **device windows** (`stream_windows.rs`): background threads read whole shuffle windows
//!   into host blocks; the loop copies each window into one of two device window slots and
//!   gathers every step's batch there, as the in-memory path does.
//!
//! On a device with side-stream uploads (CUDA: pinned blocks and a copy stream; OpenCL:
//! mapped host-allocated blocks and a second queue), batch (or window) `k + 1` is copied while
//! the steps of `k` run: the copy waits for the last step that read its slot, and the first
//! step that reads it waits for the copy, both on the device, not the host; the loop's thread
//! only queues them. Across an epoch's end too: the next epoch's plan is queued at the start of
//! an epoch, so its first window is read while this epoch's last window is trained on, and its
//! first batch (or window) copied during this epoch's last steps. The first epoch's plan is
//! known before the run sets up ([`Feed::stream`]), and its reading starts then. Elsewhere
//! each batch is uploaded just before its step: on the CPU that is a plain copy; on HIP a copy
//! on the one stream (the HIP binding has no events or pinned allocations yet). The reading,
//! shuffling and gathering overlap the device's work everywhere.

use std::sync::Arc;
use std::sync::mpsc::{Receiver, Sender, channel, sync_channel};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::buffer::Buffer;
use crate::context::Context;
use crate::error::{Error, Result};
use crate::ops::TypedMemory;

use super::layer::Layer;
use super::network::Network;
use super::padding::Buckets;
use super::rng::Rng;
use super::source::{DataStream, TrainData};
pub(crate) use super::stream_batches::StepLayout;
use super::stream_batches::{BlockPool, Convert, Filled, Producer, host_blocks};
use super::stream_plan::ShufflePlan;
use super::stream_windows::{
    DeviceWindows, Epoch, ReadWindow, WINDOW_BLOCKS, largest_window, window_starts,
};
use super::train_state::RunState;
use super::workspace::{Batch, DeviceData, Rows, Workspace};

/// The running host side: where plans go in and full blocks (or windows) come out.
struct Pipe {
    plans: Sender<Arc<ShufflePlan>>,
    out: Out,
    thread: JoinHandle<()>,
}

/// What the host side sends the loop.
enum Out {
    Batches(Receiver<Result<Filled>>),
    Windows(Receiver<Result<ReadWindow>>),
}

/// How batches reach the device.
enum Mode {
    /// Gathered on the host, each copied into one of two batch slots.
    Batches {
        slots: Box<[(Buffer, Buffer); 2]>,
        /// The slot a batch was copied into ahead of its step, and its rows; or why it could
        /// not be (raised at its step, not at the one before: the next epoch's first batch is
        /// read during this epoch's last step).
        ahead: Option<Result<(usize, usize)>>,
    },
    /// Whole windows copied to the device and gathered there (`stream_windows.rs`).
    Windows(Box<DeviceWindows>),
}

/// The device side of a stream: two batch slots or two window slots, and the host side's
/// threads.
pub(crate) struct StreamFeed {
    producer: Arc<Producer>,
    prefetch: usize,
    mode: Mode,
    /// Batch `k + 1` is copied on the side stream while step `k` runs.
    side: bool,
    pipe: Option<Pipe>,
    /// The current epoch's plan and the epoch positions its windows start at.
    current: Option<(Arc<ShufflePlan>, Vec<usize>)>,
    /// The next epoch's plan, sent to the host side at the start of this epoch.
    queued: Option<Arc<ShufflePlan>>,
    /// The step of the current epoch the next batch is for.
    step: usize,
    /// This epoch's time on the loop's thread: waiting for full blocks, and queueing or
    /// making their copies (logged at debug level at the end of an epoch).
    waited: Duration,
    copying: Duration,
    /// The device the slots live on: its main stream waits for the last side copies before
    /// the slots go back to its memory pool.
    ctx: Context,
}

impl Network {
    /// A feed of `stream` for steps of `layout`: checks the stream's samples against this
    /// network and allocates the two batch slots and the host blocks (the batches in flight,
    /// [`host_blocks`]). With `first`, the host side starts reading and gathering that order
    /// before the host blocks are allocated, so that the first window is read while the run
    /// sets up (pinned allocations, workspaces, kernels, graphs).
    pub(crate) fn stream_feed(
        &self,
        stream: &DataStream,
        layout: StepLayout,
        first: Option<ShufflePlan>,
    ) -> Result<StreamFeed> {
        let spec = stream.source.spec();
        self.check_data(&spec.probe()?)?;
        let embedding = match &self.layers[0] {
            Layer::Embedding(e) => Some(e.clone()),
            _ => None,
        };
        let exec = self.ctx.execution();
        let convert = Convert { spec, embedding };
        let pool = Arc::new(BlockPool::new());
        let producer = Producer::new(stream.source.clone(), convert, layout, pool);
        let side = exec.side_uploads();
        let window = largest_window(stream.source.shard_lens(), stream.shuffle_window);
        let window_bytes = producer.window_block_bytes(window);
        let windows = DeviceWindows::chosen(self, stream, &layout, window_bytes)?;
        let (mode, blocks, bytes) = if windows {
            let mode = Mode::Windows(Box::new(DeviceWindows::new(self, window)?));
            (mode, WINDOW_BLOCKS, window_bytes)
        } else {
            let ops = self.ctx.ops();
            let local = layout.local();
            let x_len = local * self.input_width();
            let y_len = local * self.target_width();
            let slot = || -> Result<(Buffer, Buffer)> {
                Ok((
                    ops.alloc_as(self.input_dtype(), x_len)?,
                    ops.alloc_as(self.target_dtype(), y_len)?,
                ))
            };
            let mode = Mode::Batches {
                slots: Box::new([slot()?, slot()?]),
                ahead: None,
            };
            (mode, host_blocks(stream.prefetch), producer.block_bytes())
        };
        log::debug!(
            "stream: {}",
            match mode {
                Mode::Windows(_) =>
                    "device windows (whole windows copied, batches gathered on the device)",
                Mode::Batches { .. } => "host batches (gathered on the host, each copied)",
            }
        );
        let mut feed = StreamFeed {
            producer: Arc::new(producer),
            prefetch: stream.prefetch,
            mode,
            side,
            pipe: None,
            current: None,
            queued: None,
            step: 0,
            waited: Duration::ZERO,
            copying: Duration::ZERO,
            ctx: self.ctx.clone(),
        };
        if let Some(plan) = first {
            // The first epoch's `begin_epoch` finds its order queued and carries on.
            let plan = Arc::new(plan);
            feed.start(plan.clone());
            feed.queued = Some(plan);
        }
        // The cutter waits for the first of these; dropping `feed` on an error stops it.
        for _ in 0..blocks {
            feed.producer.pool.add(exec.host_block(bytes, windows)?);
        }
        Ok(feed)
    }
}

impl StreamFeed {
    /// Starts an epoch on `plan`'s order; `next` is the next epoch's, when there is one, read
    /// and gathered once this epoch's batches are. An epoch whose plan was queued by the last
    /// one continues the running host side (its first batch may already be on the device).
    pub(crate) fn begin_epoch(&mut self, plan: &ShufflePlan, next: Option<ShufflePlan>) {
        self.log_times();
        let continues = self.pipe.is_some() && self.queued.as_deref() == Some(plan);
        let current = match self.queued.take() {
            Some(queued) if continues => queued,
            _ => {
                self.stop();
                let plan = Arc::new(plan.clone());
                self.start(plan.clone());
                plan
            }
        };
        let starts = window_starts(&current);
        self.current = Some((current, starts));
        self.queued = next.map(Arc::new);
        if let (Some(pipe), Some(next)) = (&self.pipe, &self.queued) {
            // A host side that already stopped (on an error) says so at the next batch.
            let _ = pipe.plans.send(next.clone());
        }
        self.step = 0;
    }

    /// Starts the host side's threads on `plan`.
    fn start(&mut self, plan: Arc<ShufflePlan>) {
        let (plans, plan_rx) = channel();
        let producer = self.producer.clone();
        producer.pool.set_closed(false);
        let (out, thread) = match self.mode {
            Mode::Batches { .. } => {
                let (tx, rx) = sync_channel(self.prefetch);
                let thread = std::thread::spawn(move || producer.run(plan_rx, &tx));
                (Out::Batches(rx), thread)
            }
            Mode::Windows(_) => {
                // The loop holds at most one window read ahead, so the reading threads wait
                // for a free block rather than on this queue.
                let (tx, rx) = sync_channel(WINDOW_BLOCKS);
                let thread = std::thread::spawn(move || producer.run_windows(plan_rx, &tx));
                (Out::Windows(rx), thread)
            }
        };
        let _ = plans.send(plan);
        self.pipe = Some(Pipe { plans, out, thread });
    }

    /// Ends the host side's threads: each stops at its next wait (the pool is closed, the
    /// queues dropped); blocks still queued go back to the pool.
    fn stop(&mut self) {
        match &mut self.mode {
            Mode::Batches { ahead, .. } => *ahead = None,
            Mode::Windows(w) => w.reset(),
        }
        self.queued = None;
        self.current = None;
        let Some(pipe) = self.pipe.take() else {
            return;
        };
        self.producer.pool.set_closed(true);
        drop((pipe.plans, pipe.out));
        if pipe.thread.join().is_err() {
            log::error!("the data stream's reading thread panicked");
        }
    }

    /// Logs (debug) where the last epoch's feeding time went, and starts counting afresh.
    fn log_times(&mut self) {
        // Before the first step, the times so far (a primed first window) go to this epoch.
        if self.step == 0 {
            return;
        }
        let [read_ns, read_bytes, gather_ns, gather_bytes] = self.producer.times.take();
        let (waited, copying) = (self.waited, self.copying);
        (self.waited, self.copying) = (Duration::ZERO, Duration::ZERO);
        let rate = |bytes: u64, ns: u64| bytes as f64 / ns.max(1) as f64;
        // Device windows gather on the device: no host gathering to report.
        let gathering = match self.mode {
            Mode::Batches { .. } => format!(
                "; gathering: {:.1} MB in {:.2} ms ({:.2} GB/s)",
                gather_bytes as f64 / 1e6,
                gather_ns as f64 / 1e6,
                rate(gather_bytes, gather_ns)
            ),
            Mode::Windows(_) => String::new(),
        };
        log::debug!(
            "stream: {} steps; the loop waited {:.2} ms for data and spent {:.2} ms on its \
             copies; reading threads: {:.1} MB in {:.2} ms ({:.2} GB/s){gathering}",
            self.step,
            waited.as_secs_f64() * 1e3,
            copying.as_secs_f64() * 1e3,
            read_bytes as f64 / 1e6,
            read_ns as f64 / 1e6,
            rate(read_bytes, read_ns),
        );
    }

    fn recv(&mut self) -> Result<Filled> {
        let batches = match self.pipe.as_ref().map(|p| &p.out) {
            Some(Out::Batches(b)) => b,
            _ => return Err(outside_an_epoch()),
        };
        let t0 = Instant::now();
        let got = batches.recv();
        self.waited += t0.elapsed();
        match got {
            Ok(r) => r,
            Err(_) => Err(Error::InvalidData(
                "the data stream's reading thread stopped before the epoch's last batch".into(),
            )),
        }
    }

    /// Copies the next batch into batch slot `slot`: on the side stream (after the main
    /// stream's work so far, which includes the last step that read the slot) when there is
    /// one, else now. Returns the batch's rows.
    fn upload_next(&mut self, net: &Network, slot: usize) -> Result<usize> {
        let (ops, exec) = (net.ctx.ops(), net.ctx.execution());
        let mut filled = self.recv()?;
        let t0 = Instant::now();
        let Mode::Batches { slots, .. } = &self.mode else {
            return Err(outside_an_epoch());
        };
        let (x, y) = &slots[slot];
        let (xb, yb) = (x.dtype().size(), y.dtype().size());
        let (xv, yv) = (net.input_width(), net.target_width());
        let rows = filled.rows;
        let xv_rows = x.slice(0, rows * xv)?;
        let yv_rows = y.slice(0, rows * yv)?;
        let at = self.producer.targets_at();
        let (xr, yr) = (0..rows * xv * xb, at..at + rows * yv * yb);
        let block = filled.block.block();
        if self.side {
            exec.order_streams(true)?;
            exec.upload_block_on_side(xv_rows, block, xr)?;
            exec.upload_block_on_side(yv_rows, block, yr)?;
        } else {
            let bytes = block.bytes_mut()?;
            ops.upload_bytes(xv_rows, &bytes[xr])?;
            ops.upload_bytes(yv_rows, &bytes[yr])?;
        }
        self.copying += t0.elapsed();
        Ok(rows)
    }

    /// The next step's batch, loaded into `ws` (whose batch size is this rank's share of the
    /// step, starting at epoch position `offset`); with side uploads, the one after it
    /// (possibly the next epoch's first) starts copying.
    pub(crate) fn next<'a>(
        &'a mut self,
        net: &'a Network,
        ws: &'a Workspace,
        offset: usize,
    ) -> Result<Batch<'a>> {
        if matches!(self.mode, Mode::Windows(_)) {
            return self.next_from_windows(net, ws, offset);
        }
        let ahead = match &mut self.mode {
            Mode::Batches { ahead, .. } => ahead.take(),
            Mode::Windows(_) => None,
        };
        let (slot, rows) = match ahead {
            Some(ahead) => ahead?,
            None => (0, self.upload_next(net, 0)?),
        };
        if rows != ws.batch {
            return Err(Error::InvalidData(format!(
                "the data stream gave a batch of {rows} rows for a step of {}",
                ws.batch
            )));
        }
        if self.side {
            // Step k waits for its copy; the next copy waits for step k - 1, the last reader
            // of its slot, and runs while step k does.
            net.ctx.execution().order_streams(false)?;
            if self.step + 1 < self.producer.layout.steps() || self.queued.is_some() {
                let next = self.upload_next(net, 1 - slot).map(|rows| (1 - slot, rows));
                if let Mode::Batches { ahead, .. } = &mut self.mode {
                    *ahead = Some(next);
                }
            }
        }
        self.step += 1;
        let Mode::Batches { slots, .. } = &self.mode else {
            return Err(outside_an_epoch());
        };
        let (x, y) = &slots[slot];
        net.load_rows(ws, x.view(), Some(y.view()), &Rows::Range(0), false)
    }
}

impl StreamFeed {
    /// [`StreamFeed::next`] with device windows.
    fn next_from_windows<'a>(
        &'a mut self,
        net: &'a Network,
        ws: &'a Workspace,
        offset: usize,
    ) -> Result<Batch<'a>> {
        let (Mode::Windows(windows), Some(pipe), Some((plan, starts))) =
            (&mut self.mode, &self.pipe, &self.current)
        else {
            return Err(outside_an_epoch());
        };
        let Out::Windows(rx) = &pipe.out else {
            return Err(outside_an_epoch());
        };
        self.step += 1;
        let t0 = Instant::now();
        let waited = self.waited;
        let epoch = Epoch {
            windows: rx,
            plan,
            starts,
            next: self.queued.as_ref(),
        };
        let batch = windows.load(net, ws, epoch, offset, &mut self.waited);
        // Time not spent waiting for windows went to queueing their copies and gathers.
        self.copying += t0.elapsed().saturating_sub(self.waited - waited);
        batch
    }
}

fn outside_an_epoch() -> Error {
    Error::InvalidArgument("a stream batch asked for outside an epoch".into())
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
    /// The feed of `stream`, in the order of the training checkpoint `resume` when given.
    /// When `first_epoch` (another epoch is to run), the host side starts on the next epoch's
    /// order at once: `rng` is the run's generator as that epoch's shuffle will find it
    /// (`None` without shuffling). Nothing else draws from it before then, so the order is
    /// the one [`Feed::begin_epoch`] makes (which checks it, and starts afresh if not).
    pub(crate) fn stream(
        net: &Network,
        stream: &DataStream,
        layout: StepLayout,
        resume: Option<&RunState>,
        rng: Option<&Rng>,
        first_epoch: bool,
    ) -> Result<Feed> {
        let lens = stream.source.shard_lens();
        let mut plan = ShufflePlan::new(lens, stream.shuffle_window)?;
        if let Some(state) = resume {
            plan = ShufflePlan::restore(lens, plan.window(), state.shards.clone(), &state.order)?;
        }
        let first = first_epoch.then(|| {
            let mut first = plan.clone();
            if let Some(rng) = rng {
                first.advance(&mut rng.clone());
            }
            first
        });
        Ok(Feed::Stream {
            feed: Box::new(net.stream_feed(stream, layout, first)?),
            plan,
        })
    }

    /// Takes a training checkpoint's order (a stream's was taken when it was made).
    pub(crate) fn restore(&mut self, state: &RunState) -> Result<()> {
        match self {
            Feed::Memory { .. } if !state.shards.is_empty() => Err(Error::InvalidArgument(
                "the training checkpoint was written by a run on a stream, this run's data is \
                 in memory"
                    .into(),
            )),
            Feed::Memory { .. } | Feed::Stream { .. } => Ok(()),
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
    /// stream's host side; `more` when another epoch follows (a stream queues that epoch's
    /// order, which `rng` gives it next, to be read and gathered once this epoch's is).
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
                // it gives that order (batches read for another order are dropped).
                let next = more.then(|| {
                    let mut next = plan.clone();
                    if let Some(rng) = rng {
                        next.advance(&mut rng.clone());
                    }
                    next
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
            Feed::Stream { feed, .. } => feed.next(net, ws, offset),
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
        self.log_times();
        self.stop();
        // The pool orders a freed block's reuse after the main stream's work only; a copy
        // queued ahead into a slot (the next epoch's first batch, say) may still be running.
        if self.side
            && let Err(e) = self.ctx.execution().order_streams(false)
        {
            log::warn!("a data stream's last copies could not be ordered: {e}");
        }
    }
}
