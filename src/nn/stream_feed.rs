//! Feeding a [`DataStream`] to the training loop: a background thread reads each epoch's
//! shards in the [`ShufflePlan`]'s order and cuts this rank's share of every batch into a
//! bounded queue (host memory: one shuffle window and `prefetch` batches); the loop uploads
//! each batch into one of two device slots and gathers it into the step's workspace.
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

use crate::buffer::Buffer;
use crate::dtype::to_bytes;
use crate::error::{Error, Result};
use crate::ops::{MemoryOps, TypedMemory};

use super::data::{Dataset, Targets};
use super::embedding::Embedding;
use super::layer::Layer;
use super::network::Network;
use super::rng::Rng;
use super::source::{DataSource, DataStream, SampleSpec, TargetSpec, TrainData};
use super::stream_plan::ShufflePlan;
use super::train_state::RunState;
use super::workspace::{Batch, DeviceData, Rows, Workspace, token_ids_need_an_embedding};

/// This rank's rows of one step, as the device takes them (native-endian bytes).
struct HostBatch {
    x: Vec<u8>,
    y: Vec<u8>,
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
    /// `data`'s inputs and targets as the device holds them, with the bytes per sample.
    fn rows(&self, data: &Dataset) -> Result<(Vec<u8>, Vec<u8>)> {
        let w = data.width();
        let x = match (data.token_ids(), &self.embedding) {
            (Some(ids), Some(e)) => {
                e.check_u32_ids(ids, w)?;
                to_bytes(ids)
            }
            (None, Some(e)) => to_bytes(&e.ids_of(data.features(), w)?),
            (None, None) => to_bytes(data.features()),
            (Some(_), None) => return Err(token_ids_need_an_embedding()),
        };
        let y = match data.targets() {
            Targets::Classes { labels, .. } => to_bytes(labels),
            Targets::Values { values, .. } => to_bytes(values),
        };
        Ok((x, y))
    }
}

/// Reads the epoch's windows in `plan`'s order and sends this rank's batches; stops at the
/// first error (sent on) or when the loop hangs up.
fn produce(
    source: &dyn DataSource,
    convert: &Convert,
    plan: &ShufflePlan,
    layout: StepLayout,
    tx: &SyncSender<Result<HostBatch>>,
) -> Result<()> {
    let lens = source.shard_lens();
    let spec = convert.spec;
    let tw = match spec.targets {
        TargetSpec::Classes { per_sample, .. } => per_sample,
        TargetSpec::Values { width } => width,
    };
    let (xs, ys) = (spec.width * 4, tw * 4);
    let mut batch = HostBatch {
        x: Vec::new(),
        y: Vec::new(),
    };
    let mut pos = 0;
    for (w, shards) in plan.shards.chunks(plan.window()).enumerate() {
        if pos >= layout.used {
            break;
        }
        let (mut wx, mut wy) = (Vec::new(), Vec::new());
        for &s in shards {
            let s = s as usize;
            let name = source.shard_name(s);
            let named = |e: Error| match e {
                Error::InvalidData(m) if !m.starts_with(&name) => {
                    Error::InvalidData(format!("{name}: {m}"))
                }
                e => e,
            };
            let data = source.read_shard(s).map_err(named)?;
            spec.check(&data, lens[s], &name)?;
            let (x, y) = convert.rows(&data).map_err(named)?;
            wx.extend_from_slice(&x);
            wy.extend_from_slice(&y);
        }
        for &r in &plan.rows[w] {
            if pos >= layout.used {
                break;
            }
            let r = r as usize;
            let (mine, ends) = layout.place(pos);
            if mine {
                batch.x.extend_from_slice(&wx[r * xs..(r + 1) * xs]);
                batch.y.extend_from_slice(&wy[r * ys..(r + 1) * ys]);
            }
            if ends {
                let full = std::mem::replace(
                    &mut batch,
                    HostBatch {
                        x: Vec::new(),
                        y: Vec::new(),
                    },
                );
                if tx.send(Ok(full)).is_err() {
                    return Ok(());
                }
            }
            pos += 1;
        }
    }
    Ok(())
}

/// The device side of a stream: two batch slots, and the current epoch's reading thread.
pub(crate) struct StreamFeed {
    source: Arc<dyn DataSource>,
    convert: Arc<Convert>,
    prefetch: usize,
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
    /// Starts reading the epoch whose order `plan` holds.
    pub(crate) fn begin_epoch(&mut self, plan: &ShufflePlan) {
        self.stop();
        let (tx, rx) = sync_channel(self.prefetch);
        let (source, convert, plan, layout) = (
            self.source.clone(),
            self.convert.clone(),
            plan.clone(),
            self.layout,
        );
        self.reader = Some(std::thread::spawn(move || {
            if let Err(e) = produce(&*source, &convert, &plan, layout, &tx) {
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

    /// Uploads `batch` into slot `slot`, on the side stream when `side`.
    fn upload(
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
            self.upload(ops, exec, slot, &b, false)?;
        }
        if self.side {
            // Step k waits for its copy; the next copy waits for step k - 1, the last reader
            // of its slot, and runs while step k does.
            exec.order_streams(false)?;
            if k + 1 < self.layout.steps() {
                let b = self.recv()?;
                exec.order_streams(true)?;
                self.upload(ops, exec, 1 - slot, &b, true)?;
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
        data: DeviceData,
        /// The epoch's sample order (u32).
        perm: Buffer,
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
    /// stream's reading thread.
    pub(crate) fn begin_epoch(
        &mut self,
        net: &Network,
        state: &mut RunState,
        rng: Option<&mut Rng>,
    ) -> Result<()> {
        match self {
            Feed::Memory { perm, .. } => {
                if let Some(rng) = rng {
                    rng.shuffle(&mut state.order);
                }
                net.ctx.ops().upload_as(perm.view(), &state.order)
            }
            Feed::Stream { feed, plan } => {
                if let Some(rng) = rng {
                    plan.advance(rng);
                }
                feed.begin_epoch(plan);
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
            Feed::Memory { data, perm } => {
                let rows = Rows::Gather(perm.slice(offset, ws.batch)?);
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
