//! Data-parallel training: one replica of the network per device, each on its own thread (one
//! process: `TrainingConfig::devices`) or in its own process ([`Network::train_distributed`],
//! launched the way torchrun launches). Both run the one training loop
//! (`Network::run_loop`, src/nn/train.rs) with a [`Strategy`] per rank; this file makes the
//! replicas and the ranks' means of meeting, and gathers their results.
//!
//! Every rank holds the whole training set (or reads the whole stream: each rank's reading
//! thread keeps only its share of each batch) and shuffles it with the same seed, so the ranks
//! agree on each global batch without talking; rank `r` takes rows `r * local ..` of it, with
//! `local = global / ranks`. After each step's backward the gradients are averaged across the
//! ranks (NCCL/RCCL on CUDA/HIP devices, a host all-reduce for CPU replicas), so every rank
//! applies the same update to the same parameters and the replicas stay identical. Loss,
//! accuracy and validation metrics are summed across ranks, so every rank returns the same
//! history; rank 0 prints, calls the epoch callback and writes training checkpoints.

use std::ops::ControlFlow;

use crate::context::Context;
use crate::device::DeviceId;
use crate::dist::{self, Communicator, DistEnv, UniqueId, rendezvous};
use crate::error::{Error, Result};
use crate::manager::GpuManager;

use super::config::TrainingConfig;
use super::data::Dataset;
use super::history::TrainingHistory;
use super::host_reduce::HostGroup;
use super::network::Network;
use super::source::TrainData;
use super::strategy::Strategy;
use super::train::EpochCallback;
use super::train_state::RunState;
use super::workspace_cache::Workspaces;

/// Held by an in-process data-parallel run on GPUs while its communicators live. NCCL kernels of
/// two communicators that share a device wait on each other's peers, so two such runs at once
/// in one process (two threads, or two tests) can each hold a GPU the other needs and hang for
/// good; they take turns instead.
static GPU_COLLECTIVE_RUN: parking_lot::Mutex<()> = parking_lot::Mutex::new(());

/// What one run of the training loop trains on, and how.
pub(crate) struct Run<'a> {
    /// The training samples (every rank holds all of them, or reads all of a stream).
    pub train: TrainData<'a>,
    /// The validation samples: held out by `validation_split`, or a stream's own.
    pub val: Option<&'a Dataset>,
    pub config: &'a TrainingConfig,
}

/// Training data as runs take it: an in-memory data set split into training and validation
/// samples, or a stream with its own validation samples.
pub(crate) struct Prepared<'a> {
    data: TrainData<'a>,
    train: Option<Dataset>,
    val: Option<Dataset>,
    config: &'a TrainingConfig,
}

impl<'a> Prepared<'a> {
    pub(crate) fn new(data: TrainData<'a>, config: &'a TrainingConfig) -> Result<Self> {
        let (train, val) = match data {
            TrainData::Memory(d) => {
                let (t, v) = split(d, config)?;
                (Some(t), v)
            }
            TrainData::Stream(_) if config.validation_split > 0.0 => {
                return Err(Error::InvalidArgument(
                    "validation_split holds out part of an in-memory data set; give a stream \
                     its validation samples with DataStream::validation"
                        .into(),
                ));
            }
            TrainData::Stream(s) => (None, s.validation.clone()),
        };
        Ok(Prepared {
            data,
            train,
            val,
            config,
        })
    }

    /// The run over these samples.
    pub(crate) fn run(&self) -> Run<'_> {
        Run {
            train: match &self.train {
                Some(t) => TrainData::Memory(t),
                None => self.data,
            },
            val: self.val.as_ref(),
            config: self.config,
        }
    }
}

/// The training samples and the held-out validation samples `config` asks for.
pub(crate) fn split(data: &Dataset, config: &TrainingConfig) -> Result<(Dataset, Option<Dataset>)> {
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
pub(crate) fn shard(data: &Dataset, rank: usize, world: usize) -> Result<Option<Dataset>> {
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

/// Calls the abort it holds when a panicking thread drops it: a rank that panics must not
/// leave its peers waiting in a collective, nor the scope that joins them.
struct AbortOnPanic<'a>(&'a (dyn Fn() + Sync));

impl Drop for AbortOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            (self.0)();
        }
    }
}

impl Network {
    /// A copy of this network (same layers and parameters) on `ctx`.
    fn replica_on(&self, ctx: &Context) -> Result<Network> {
        // The dropout state of rank 0 goes along: every replica draws the same masks at the
        // same step.
        let (params, grads, rng) = self.buffers_on(ctx)?;
        let replica = Network {
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
            padding: self.padding,
            precision: self.precision,
            low: self.low_on(ctx.ops())?,
        };
        replica.refresh_low()?;
        Ok(replica)
    }

    /// `Network::train` with two or more `devices`: one replica per device, each on its own
    /// thread; this network is rank 0 (on the calling thread, where `on_epoch` is called) and
    /// ends on `devices[0]` with the trained parameters. CPU replicas meet in host memory; GPU
    /// replicas need NCCL (CUDA) or RCCL (HIP).
    pub(crate) fn train_replicated(
        &mut self,
        data: TrainData<'_>,
        config: &TrainingConfig,
        devices: &[DeviceId],
        resume: Option<RunState>,
        on_epoch: &mut EpochCallback<'_>,
    ) -> Result<TrainingHistory> {
        let prepared = Prepared::new(data, config)?;
        let run = prepared.run();
        // CPU replicas meet in host memory, GPU replicas through NCCL/RCCL.
        let cpu = devices.iter().all(|&d| d == DeviceId::Cpu);
        let manager = if cpu {
            log::info!("data-parallel training on {} CPU replicas", devices.len());
            None
        } else {
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
            Some(GpuManager::new()?)
        };
        let contexts = devices
            .iter()
            .enumerate()
            .map(|(i, &d)| match &manager {
                // Each CPU replica gets a context of its own, as each GPU replica does.
                None if i > 0 => Ok(Context::cpu()),
                _ if d == self.ctx.id() => Ok(self.ctx.clone()),
                None => Ok(Context::cpu()),
                Some(m) => m.create_context(d),
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
        let group = cpu.then(|| HostGroup::new(devices.len()));
        let _turn = (!cpu).then(|| {
            GPU_COLLECTIVE_RUN.try_lock().unwrap_or_else(|| {
                log::info!(
                    "waiting for another data-parallel run of this process to finish \
                     (concurrent NCCL/RCCL runs can deadlock on shared devices)"
                );
                GPU_COLLECTIVE_RUN.lock()
            })
        });
        let comms = match cpu {
            true => Vec::new(),
            false => Communicator::for_contexts(&contexts)?,
        };
        let ranks: Vec<Strategy> = match &group {
            Some(group) => (0..devices.len())
                .map(|rank| Strategy::Host { group, rank })
                .collect(),
            None => comms.iter().map(Strategy::Collective).collect(),
        };
        // Peers blocked in a collective a failed rank will never join must not hang.
        let abort = || {
            group.iter().for_each(HostGroup::abort);
            comms.iter().for_each(Communicator::abort);
        };
        self.run_ranks(&mut replicas, &ranks, &abort, &run, resume, on_epoch)
    }

    /// Runs the loop on every rank: this network as rank 0 on the calling thread, `replicas`
    /// as ranks 1.. on threads of their own. A failing rank calls `abort` so that its peers
    /// stop waiting for it; the error returned is the failing rank's own, not the aborts it
    /// caused elsewhere.
    fn run_ranks(
        &mut self,
        replicas: &mut [Network],
        ranks: &[Strategy<'_>],
        abort: &(dyn Fn() + Sync),
        run: &Run<'_>,
        resume: Option<RunState>,
        on_epoch: &mut EpochCallback<'_>,
    ) -> Result<TrainingHistory> {
        let finish = |net: &Network, rank: &Strategy, r: Result<TrainingHistory>| {
            if let Err(e) = &r {
                log::error!("rank {} on {} failed: {e}", rank.rank(), net.ctx.id());
                abort();
            }
            r
        };
        let mut results: Vec<Result<TrainingHistory>> = std::thread::scope(|s| {
            let handles: Vec<_> = replicas
                .iter_mut()
                .zip(&ranks[1..])
                .map(|(net, rank)| {
                    let state = resume.clone();
                    let finish = &finish;
                    s.spawn(move || {
                        let _guard = AbortOnPanic(abort);
                        let r = net.run_loop(run, state, &mut |_| ControlFlow::Continue(()), rank);
                        finish(net, rank, r)
                    })
                })
                .collect();
            let _guard = AbortOnPanic(abort);
            let first = self.run_loop(run, resume, on_epoch, &ranks[0]);
            let mut results = vec![finish(self, &ranks[0], first)];
            results.extend(handles.into_iter().map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(Error::InvalidArgument("a training thread panicked".into()))
                })
            }));
            results
        });
        // The failing rank's own error, not the aborts it caused elsewhere; else rank 0's
        // history.
        let failed = results
            .iter()
            .enumerate()
            .filter(|(_, r)| r.is_err())
            .min_by_key(|(_, r)| matches!(r, Err(Error::Collective { .. })))
            .map(|(i, _)| i);
        results.swap_remove(failed.unwrap_or(0))
    }

    /// Trains this process's replica of a multi-process data-parallel run launched with
    /// torchrun's environment (`RANK`, `WORLD_SIZE`, `LOCAL_RANK`, `MASTER_ADDR`,
    /// `MASTER_PORT`; see [`DistEnv`]): one process per GPU, on `config.device` or else
    /// `cuda:<LOCAL_RANK>`. Rank 0 creates the NCCL id and hands it to the others over TCP
    /// ([`rendezvous::exchange`]), parameters are broadcast from rank 0, and training runs as
    /// in [`Network::train`] with `devices`: `config.batch_size` is the global batch, divided
    /// evenly among the processes. Schedules, early stopping, validation and training
    /// checkpoints (written by rank 0) work as on one device. Every rank returns the same
    /// history; only rank 0 logs.
    ///
    /// Without the variables this is an [`Error::Rendezvous`]; without NCCL an
    /// [`Error::CollectiveUnavailable`] that says how to install it.
    pub fn train_distributed<'d>(
        &mut self,
        data: impl Into<TrainData<'d>>,
        config: &TrainingConfig,
    ) -> Result<TrainingHistory> {
        let data = data.into();
        config.validate()?;
        self.check_train_data(data)?;
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
        let prepared = Prepared::new(data, config)?;
        let run = prepared.run();
        let rank = Strategy::Collective(&comm);
        let r = self.run_loop(&run, None, &mut |_| ControlFlow::Continue(()), &rank);
        if r.is_err() {
            comm.abort();
        }
        r
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
