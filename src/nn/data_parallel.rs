//! Data-parallel training: one replica of the network per device, each on its own thread (one
//! process, several GPUs: `TrainingConfig::devices`) or in its own process
//! ([`Network::train_distributed`], launched the way torchrun launches).
//!
//! Every rank holds the whole training set and shuffles it with the same seed, so the ranks
//! agree on each global batch without talking; rank `r` takes rows `r * local ..` of it, with
//! `local = global / ranks`. A step is:
//!
//! 1. forward, loss and backward on the local rows (a recorded graph after the first steps);
//! 2. one in-place all-reduce (mean) of the flat gradient buffer, queued on the same stream;
//! 3. clipping and the optimizer launch (a second recorded graph).
//!
//! Every rank then holds the same mean gradient of the global batch, and applies the same
//! update to the same parameters (broadcast from rank 0 at the start), so the replicas stay
//! identical. The all-reduce is deliberately not recorded into the graphs: each rank decides
//! on its own whether its step could be recorded (a failed recording falls back to op by op),
//! and a collective that is part of a graph on one rank but launched directly on another is
//! not something NCCL promises to match (graph-captured collectives may register buffers and
//! choose other algorithms). Kept outside, it is launched identically on every rank; the
//! price is two graph launches instead of one per step, a few microseconds.
//!
//! Loss, accuracy and validation metrics are summed across ranks, so every rank returns the
//! same history; only rank 0 logs.

use std::time::Instant;

use crate::context::Context;
use crate::device::DeviceId;
use crate::dist::{self, Communicator, DistEnv, UniqueId, rendezvous};
use crate::error::{Error, Result};
use crate::manager::GpuManager;

use super::config::TrainingConfig;
use super::data::Dataset;
use super::history::{EpochStats, TrainingHistory};
use super::network::Network;
use super::optim::OptimizerState;
use super::rng::Rng;
use super::schedule::LrSchedule;
use super::size;
use super::step_graph::StepGraphs;
use super::train::format_epoch;
use super::workspace::Rows;
use super::workspace_cache::Workspaces;

/// The training samples and the held-out validation samples `config` asks for.
fn split(data: &Dataset, config: &TrainingConfig) -> Result<(Dataset, Option<Dataset>)> {
    let n_val = (data.len() as f64 * config.validation_split as f64).floor() as usize;
    if n_val == 0 {
        return Ok((data.clone(), None));
    }
    let (t, v) = data.split_at(data.len() - n_val).map_err(|_| {
        Error::InvalidArgument(format!(
            "validation_split {} leaves no training samples of {}",
            config.validation_split,
            data.len()
        ))
    })?;
    Ok((t, Some(v)))
}

/// Rank `rank`'s contiguous share of `data` (`None` when it is empty).
fn shard(data: &Dataset, rank: usize, world: usize) -> Result<Option<Dataset>> {
    let n = data.len();
    let chunk = n.div_ceil(world);
    let (start, end) = ((rank * chunk).min(n), ((rank + 1) * chunk).min(n));
    if start == end {
        return Ok(None);
    }
    let tail = if start == 0 {
        data.clone()
    } else {
        data.split_at(start)?.1
    };
    Ok(Some(if end - start == tail.len() {
        tail
    } else {
        tail.split_at(end - start)?.0
    }))
}

impl Network {
    /// Each layer's range of the flat gradient buffer, by layer index (parameters are named
    /// `<layer>.<name>` and laid out layer by layer); `None` when the layout is not that.
    fn layer_ranges(&self) -> Option<Vec<(usize, usize)>> {
        let mut ranges = vec![(usize::MAX, 0usize, 0usize); self.layers.len()];
        for t in &self.layout.tensors {
            let layer: usize = t.name.split('.').next()?.parse().ok()?;
            let r = ranges.get_mut(layer)?;
            r.0 = r.0.min(t.offset);
            r.1 = r.1.max(t.offset + t.len());
            r.2 += t.len();
        }
        let mut covered = 0;
        let out = ranges
            .into_iter()
            .map(|(start, end, len)| {
                covered += len;
                if len == 0 {
                    Some((0, 0))
                } else {
                    (end - start == len).then_some((start, len))
                }
            })
            .collect::<Option<Vec<_>>>()?;
        (covered == self.layout.total).then_some(out)
    }

    /// A copy of this network (same layers and parameters) on `ctx`.
    fn replica_on(&self, ctx: &Context) -> Result<Network> {
        let values = self.parameters()?;
        let ops = ctx.ops();
        let params = ops.alloc(values.len())?;
        ops.upload(params.view(), &values)?;
        let grads = ops.alloc(values.len())?;
        ops.fill(grads.view(), 0.0)?;
        // The dropout state of rank 0: every replica draws the same masks at the same step.
        let mut state = vec![0.0f32; self.rng.len()];
        self.ctx.ops().download(self.rng.view(), &mut state)?;
        let rng = ops.alloc(state.len())?;
        ops.upload(rng.view(), &state)?;
        Ok(Network {
            ctx: ctx.clone(),
            layers: self.layers.clone(),
            loss: self.loss,
            layout: self.layout.clone(),
            params,
            grads,
            in_steps: self.in_steps,
            layer_steps: self.layer_steps.clone(),
            out_steps: self.out_steps,
            workspaces: Workspaces::default(),
            rng,
        })
    }

    /// `Network::train` with two or more `devices`: one replica per device, each on its own
    /// thread; this network is rank 0 and ends on `devices[0]` with the trained parameters.
    pub(crate) fn train_replicated(
        &mut self,
        data: &Dataset,
        config: &TrainingConfig,
        devices: &[DeviceId],
    ) -> Result<TrainingHistory> {
        // The single-device loop's schedules, early stopping and training checkpoints are not
        // wired into the replicated loop yet: refuse them rather than ignore them.
        let unsupported = [
            (
                config.schedule != LrSchedule::Constant,
                "a learning-rate schedule",
            ),
            (config.early_stopping.is_some(), "early stopping"),
            (config.checkpoint_path.is_some(), "training checkpoints"),
        ];
        if let Some((_, what)) = unsupported.iter().find(|(set, _)| *set) {
            return Err(Error::InvalidArgument(format!(
                "{what} is not supported with data-parallel training (several devices) yet"
            )));
        }
        let library = dist::library_for(devices[0])?;
        for &d in devices {
            if dist::library_for(d)? != library {
                return Err(Error::InvalidArgument(format!(
                    "data-parallel devices must share a backend: {} and {d}",
                    devices[0]
                )));
            }
        }
        // Missing NCCL/RCCL is the first thing a user without it should hear, before any
        // device work.
        let found = dist::probe(library)?;
        log::info!(
            "data-parallel training on {} devices with {} {} ({})",
            devices.len(),
            library.name(),
            found.version,
            found.path
        );
        let manager = GpuManager::new()?;
        let contexts = devices
            .iter()
            .map(|&d| {
                if d == self.ctx.id() {
                    Ok(self.ctx.clone())
                } else {
                    manager.create_context(d)
                }
            })
            .collect::<Result<Vec<_>>>()?;
        if self.ctx.id() != devices[0] {
            log::info!(
                "moving the network from {} to {}",
                self.ctx.id(),
                devices[0]
            );
            self.to_context(&contexts[0])?;
        }
        let mut replicas = contexts[1..]
            .iter()
            .map(|c| self.replica_on(c))
            .collect::<Result<Vec<_>>>()?;
        let comms = Communicator::for_contexts(&contexts)?;
        let (train, val) = split(data, config)?;
        let comms = &comms;
        let (train, val) = (&train, val.as_ref());
        let results: Vec<Result<TrainingHistory>> = std::thread::scope(|s| {
            let mut nets: Vec<&mut Network> = vec![self];
            nets.extend(replicas.iter_mut());
            let handles: Vec<_> = nets
                .into_iter()
                .zip(comms)
                .map(|(net, comm)| {
                    s.spawn(move || {
                        let r = net.train_rank(comm, train, val, config);
                        match &r {
                            // Peers blocked in a collective this rank will never join must
                            // not hang: abort every communicator.
                            Err(e) => {
                                log::error!("rank {} on {} failed: {e}", comm.rank(), net.ctx.id());
                                comms.iter().for_each(Communicator::abort);
                            }
                            // Each rank closes its own communicator, on its own thread:
                            // closing all of them from one thread may wait on each other.
                            Ok(_) => comm.close(),
                        }
                        r
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join().unwrap_or_else(|_| {
                        Err(Error::InvalidArgument("a training thread panicked".into()))
                    })
                })
                .collect()
        });
        let mut first_error = None;
        let mut history = None;
        for (rank, r) in results.into_iter().enumerate() {
            match r {
                Ok(h) if rank == 0 => history = Some(h),
                Ok(_) => {}
                // The failing rank's own error, not the aborts it caused elsewhere.
                Err(e)
                    if first_error.is_none()
                        || matches!(first_error, Some(Error::Collective { .. })) =>
                {
                    first_error = Some(e)
                }
                Err(_) => {}
            }
        }
        match (first_error, history) {
            (Some(e), _) => Err(e),
            (None, Some(h)) => Ok(h),
            (None, None) => unreachable!("rank 0 returned neither a history nor an error"),
        }
    }

    /// Trains this process's replica of a multi-process data-parallel run launched with
    /// torchrun's environment (`RANK`, `WORLD_SIZE`, `LOCAL_RANK`, `MASTER_ADDR`,
    /// `MASTER_PORT`; see [`DistEnv`]): one process per GPU, on `config.device` or else
    /// `cuda:<LOCAL_RANK>`. Rank 0 creates the NCCL id and hands it to the others over TCP
    /// ([`rendezvous::exchange`]), parameters are broadcast from rank 0, and training runs as
    /// in [`Network::train`] with `devices`: `config.batch_size` is the global batch, divided
    /// evenly among the processes. Every rank returns the same history; only rank 0 logs.
    ///
    /// Without the variables this is an [`Error::Rendezvous`]; without NCCL an
    /// [`Error::CollectiveUnavailable`] that says how to install it.
    pub fn train_distributed(
        &mut self,
        data: &Dataset,
        config: &TrainingConfig,
    ) -> Result<TrainingHistory> {
        config.validate()?;
        self.check_data(data)?;
        let env = DistEnv::from_env()?.ok_or_else(|| {
            Error::Rendezvous(
                "RANK and WORLD_SIZE are not set: launch one process per GPU with torchrun \
                 (or set RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT yourself)"
                    .into(),
            )
        })?;
        if config.batch_size % env.world_size != 0 {
            return Err(Error::InvalidArgument(format!(
                "batch_size {} (the global batch) must divide evenly by WORLD_SIZE={}",
                config.batch_size, env.world_size
            )));
        }
        let device = config.device.unwrap_or(DeviceId::Cuda(env.local_rank));
        let library = dist::library_for(device)?;
        dist::probe(library)?;
        if self.ctx.id() != device {
            let ctx = GpuManager::new()?.create_context(device)?;
            self.to_context(&ctx)?;
        }
        let id = rendezvous::exchange(&env, || UniqueId::new(library))?;
        let comm = Communicator::join(&self.ctx, &id, env.rank, env.world_size)?;
        if env.rank == 0 {
            log::info!(
                "rank 0 of {}: NCCL communicator ready on {}",
                env.world_size,
                device
            );
        }
        let (train, val) = split(data, config)?;
        let r = self.train_rank(&comm, &train, val.as_ref(), config);
        if r.is_err() {
            comm.abort();
        }
        r
    }

    /// One rank's training loop (see the module docs).
    fn train_rank(
        &mut self,
        comm: &Communicator,
        train: &Dataset,
        val: Option<&Dataset>,
        config: &TrainingConfig,
    ) -> Result<TrainingHistory> {
        let started = Instant::now();
        let (rank, world) = (comm.rank(), comm.world_size());
        let logs = rank == 0;
        let n = train.len();
        size::check_indexed_rows(n, "training samples")?;
        let global = config.batch_size.min(n - n % world);
        if global == 0 {
            return Err(Error::InvalidArgument(format!(
                "{n} training samples cannot be shared by {world} devices"
            )));
        }
        let local = global / world;
        let steps = n / global;
        if logs && n % global != 0 {
            log::info!(
                "data-parallel: the last {} samples of each (shuffled) epoch are skipped so every \
                 step has a full global batch of {global}",
                n % global
            );
        }
        let ctx = self.ctx.clone();
        comm.broadcast(&ctx, self.params.view(), 0)?;
        let dd = self.upload(train)?;
        let vd = match val {
            Some(v) => shard(v, rank, world)?
                .map(|s| self.upload(&s))
                .transpose()?,
            None => None,
        };
        let ops = ctx.ops();
        let perm = ops.alloc(n)?;
        let acc = ops.alloc(2)?;
        let norm = ops.alloc(1)?;
        let vacc = ops.alloc(2)?;
        let mut opt = OptimizerState::new(
            ops,
            config.optimizer,
            self.layout.total,
            config.learning_rate,
        )?;
        // Every rank must take the same decision (the collectives it issues differ), so it
        // rests on facts every rank shares; a side stream that then fails is an error, not a
        // quiet fallback.
        let cuda = ctx.id().backend() == crate::device::BackendKind::Cuda;
        let overlap = match (config.overlap_allreduce, self.layer_ranges()) {
            (false, _) => None,
            (true, Some(r)) if cuda && comm.has_mean() => {
                ctx.execution().order_streams(true)?;
                Some(r)
            }
            (true, _) => {
                if logs {
                    log::info!(
                        "overlap_allreduce ignored: needs CUDA, ncclAvg (NCCL 2.10+) and a \
                         layer-by-layer parameter layout"
                    );
                }
                None
            }
        };
        let mut grad_graphs = StepGraphs::new(config.graphs);
        let mut update_graphs = StepGraphs::new(config.graphs);
        let _pin = self.pin_workspace(local)?;

        let mut rng = Rng::new(config.seed);
        let mut order: Vec<u32> = (0..n as u32).collect();
        let mut host_perm = vec![0.0f32; n];
        let mut history = TrainingHistory {
            epochs: Vec::with_capacity(config.epochs),
            device: ctx.id(),
            device_name: ctx.info().name.clone(),
            total_seconds: 0.0,
            stopped: None,
            best_epoch: None,
        };
        if logs {
            log::info!(
                "training {} parameters on {world} ranks ({} for rank 0): {n} samples, global \
                 batch {global} ({local} per rank), {} epochs",
                self.layout.total,
                history.device,
                config.epochs
            );
        }
        for epoch in 1..=config.epochs {
            let t0 = Instant::now();
            if config.shuffle {
                rng.shuffle(&mut order);
            }
            for (p, &o) in host_perm.iter_mut().zip(&order) {
                *p = o as f32;
            }
            ops.upload(perm.view(), &host_perm)?;
            ops.fill(acc.view(), 0.0)?;
            for step in 0..steps {
                let (net, ws) = self.workspace(local)?;
                let idx = perm.slice(step * global + rank * local, local)?;
                let rows = Rows::Gather(idx);
                let batch = net.load_rows(ws, dd.x.view(), Some(dd.y.view()), &rows, false)?;
                match &overlap {
                    None => {
                        grad_graphs.run(&ctx, local, || {
                            net.forward_train_ws(ws, &batch)?;
                            net.loss_ws(ws, &batch, Some(acc.view()))?;
                            net.backward_ws(ws, &batch)
                        })?;
                        comm.all_reduce_mean(&ctx, net.grads.view())?;
                    }
                    Some(ranges) => {
                        // Layer i's gradients are final once its backward is queued; earlier
                        // layers write only their own ranges, so the side stream may reduce
                        // them meanwhile. The main stream waits for all of it before the
                        // update.
                        net.forward_train_ws(ws, &batch)?;
                        net.loss_ws(ws, &batch, Some(acc.view()))?;
                        net.backward_ws_then(ws, &batch, &mut |i| {
                            let (start, len) = ranges[i];
                            if len == 0 {
                                return Ok(());
                            }
                            ctx.execution().order_streams(true)?;
                            comm.all_reduce_mean_on_side(&ctx, net.grads.slice(start, len)?)
                        })?;
                        ctx.execution().order_streams(false)?;
                    }
                }
                update_graphs.run(&ctx, local, || {
                    if let Some(max) = config.clip_grad_norm {
                        ops.clip_grad_norm(net.grads.view(), max, norm.view())?;
                    }
                    opt.queue(ops, net.params.view(), net.grads.view())?;
                    // Fresh dropout masks next step, as Network::train_step_ws does.
                    if net.uses_rng() {
                        ops.rng_advance(net.rng.view())?;
                    }
                    Ok(())
                })?;
                opt.count_step();
            }
            comm.all_reduce_sum(&ctx, acc.view())?;
            let mut sums = [0.0f32; 2];
            ops.download(acc.view(), &mut sums)?;
            let train_secs = t0.elapsed().as_secs_f64();
            let rows = (steps * global * self.out_steps) as f32;
            let classify = self.loss.is_classification();
            let (val_loss, val_accuracy) = match val {
                Some(v) => {
                    let mut local_sums = [0.0f32; 2];
                    if let Some(vd) = &vd {
                        let e = self.evaluate_device(vd, config.graphs)?;
                        let r = (vd.n * self.out_steps) as f32;
                        local_sums = [e.loss * r, e.accuracy.unwrap_or(0.0) * r];
                    }
                    ops.upload(vacc.view(), &local_sums)?;
                    comm.all_reduce_sum(&ctx, vacc.view())?;
                    let mut total = [0.0f32; 2];
                    ops.download(vacc.view(), &mut total)?;
                    let r = (v.len() * self.out_steps) as f32;
                    (Some(total[0] / r), classify.then(|| total[1] / r))
                }
                None => (None, None),
            };
            let stats = EpochStats {
                epoch,
                loss: sums[0] / rows,
                accuracy: classify.then(|| sums[1] / rows),
                val_loss,
                val_accuracy,
                seconds: t0.elapsed().as_secs_f64(),
                samples_per_sec: (steps * global) as f64 / train_secs.max(1e-9),
                learning_rate: config.learning_rate,
                peak_memory_bytes: None,
                utilization: None,
            };
            if logs && !stats.loss.is_finite() {
                log::warn!("epoch {epoch}: training loss is {}", stats.loss);
            }
            if logs && config.log_every > 0 && epoch % config.log_every == 0 {
                log::info!("{}", format_epoch(&stats, config.epochs));
            }
            history.epochs.push(stats);
        }
        comm.async_error()?;
        history.total_seconds = started.elapsed().as_secs_f64();
        Ok(history)
    }
}

#[cfg(test)]
mod tests {
    use super::shard;
    use crate::nn::Dataset;

    #[test]
    fn shards_cover_the_data_once_in_order() {
        let x: Vec<f32> = (0..7).map(|i| i as f32).collect();
        let d = Dataset::regression(x, 1, vec![0.0; 7], 1).unwrap();
        for world in 1..=9 {
            let mut seen = Vec::new();
            for r in 0..world {
                if let Some(s) = shard(&d, r, world).unwrap() {
                    seen.extend(s.features().to_vec());
                }
            }
            assert_eq!(
                seen,
                (0..7).map(|i| i as f32).collect::<Vec<_>>(),
                "world {world}"
            );
        }
    }
}
