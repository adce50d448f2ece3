//! `Network::train`: the data set is uploaded once; each epoch uploads only a permutation,
//! gathers batches on the device, accumulates loss and correct counts on the device and reads
//! them back once (and, while a progress bar is drawn, at most a few times a second). A step
//! neither allocates (after the first) nor reads from the device.
//!
//! Between steps the loop writes the scheduled learning rate into the optimizer's device state
//! and copies the running loss sum into a per-step trace, both outside any recorded step graph;
//! the trace is read only when the loss turned out not finite, to name the step where it did.

use std::ops::ControlFlow;
use std::time::Instant;

use crate::context::Context;
use crate::device::DeviceId;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::manager::GpuManager;
use crate::monitor::EpochSampler;

use super::config::TrainingConfig;
use super::data_parallel::{Prepared, Run, shard};
use super::history::{EpochStats, StopReason, TrainingHistory};
use super::network::Network;
use super::optim::OptimizerState;
use super::padding::Buckets;
use super::progress::Progress;
use super::progress::Reporter;
use super::rng::Rng;
use super::schedule::EarlyState;
use super::size;
use super::source::TrainData;
use super::strategy::{Stepper, Strategy};
use super::stream_feed::{Feed, StepLayout};
use super::train_state::{self, RunState};
use super::workspace::DeviceData;

/// Called after every epoch; `ControlFlow::Break(())` ends training there.
pub type EpochCallback<'a> = dyn FnMut(&EpochStats) -> ControlFlow<()> + 'a;

impl Network {
    /// Moves the network to the device `config` selects, when it is not already there.
    fn move_to_configured_device(&mut self, config: &TrainingConfig) -> Result<()> {
        let current = self.ctx.id();
        if !config.use_gpu {
            if current != DeviceId::Cpu {
                log::info!("use_gpu is false: moving the network from {current} to the CPU");
                self.to_context(&Context::cpu())?;
            }
            return Ok(());
        }
        if config.device == Some(current) {
            return Ok(());
        }
        let manager = GpuManager::new()?;
        let env = std::env::var("RNN_DEVICE").ok();
        let target = config.resolve_device(&manager, env.as_deref())?;
        if target != current {
            log::info!("moving the network from {current} to {target}");
            let ctx = if target == DeviceId::Cpu {
                Context::cpu()
            } else {
                manager.create_context_with(target, config.context_options())?
            };
            self.to_context(&ctx)?;
        }
        Ok(())
    }

    /// Trains on `data` as `config` says and returns per-epoch metrics. The last
    /// `validation_split` of the samples (in data-set order) is held out and evaluated after
    /// every epoch.
    ///
    /// A step whose loss is NaN or infinite ends training with [`Error::NonFiniteLoss`], which
    /// names the epoch and the step.
    ///
    /// With two or more `config.devices` (or an `RNN_DEVICE` list), training is data-parallel:
    /// one replica per device on its own thread, `batch_size` is the global batch split evenly
    /// among them, gradients are averaged with one NCCL (RCCL on HIP) all-reduce per step (a
    /// host all-reduce for CPU replicas, [`crate::DeviceId::Cpu`] listed several times), and
    /// the trailing samples that do not fill a global batch are skipped each epoch. Schedules,
    /// early stopping, `on_epoch` (called on this thread), validation and training checkpoints
    /// work as on one device. The network ends on the first device. GPU devices without NCCL
    /// (RCCL), or devices of other backends, are a clear error; see `src/nn/data_parallel.rs`.
    ///
    /// `data` is a [`Dataset`](super::Dataset) (uploaded once) or a [`super::DataStream`] (data larger than the
    /// device: read in shards by a background thread, two batches on the device at a time;
    /// see `src/nn/source.rs`), the one loop training either. A stream's validation samples
    /// are its own ([`super::DataStream::validation`]), not `validation_split`'s.
    ///
    /// Limits: the training samples, and `batch_size * steps` of a sequence model, must not
    /// exceed [`super::MAX_INDEXED_ROWS`] (`u32::MAX`), because the device gathers rows
    /// through u32 indices; larger values are an [`Error::InvalidArgument`].
    pub fn train<'d>(
        &mut self,
        data: impl Into<TrainData<'d>>,
        config: &TrainingConfig,
    ) -> Result<TrainingHistory> {
        self.train_with(data, config, |_| ControlFlow::Continue(()))
    }

    /// [`Network::train`] with `on_epoch` called after every epoch (after its checkpoint was
    /// written); returning `ControlFlow::Break(())` ends training there
    /// ([`StopReason::Callback`]).
    pub fn train_with<'d>(
        &mut self,
        data: impl Into<TrainData<'d>>,
        config: &TrainingConfig,
        mut on_epoch: impl FnMut(&EpochStats) -> ControlFlow<()>,
    ) -> Result<TrainingHistory> {
        self.run_training(data.into(), config, None, &mut on_epoch)
    }

    /// Training from the start or from a training checkpoint's state: picks where it runs
    /// (one device, or replicas on `config.devices`) and runs [`Self::run_loop`] there.
    pub(crate) fn run_training(
        &mut self,
        data: TrainData<'_>,
        config: &TrainingConfig,
        resume: Option<RunState>,
        on_epoch: &mut EpochCallback<'_>,
    ) -> Result<TrainingHistory> {
        config.validate()?;
        self.check_train_data(data)?;
        self.adopt_train_padding(data)?;
        let env = std::env::var("RNN_DEVICE").ok();
        let devices = config.data_parallel_devices(env.as_deref())?;
        if devices.len() > 1 {
            return self.train_replicated(data, config, &devices, resume, on_epoch);
        }
        match devices.first() {
            Some(&one) => self.move_to_configured_device(&TrainingConfig {
                device: Some(one),
                devices: Vec::new(),
                ..config.clone()
            })?,
            None => self.move_to_configured_device(config)?,
        }
        let prepared = Prepared::new(data, config)?;
        self.run_loop(&prepared.run(), resume, on_epoch, &Strategy::Single)
    }

    /// The epoch/step loop, the same wherever it runs: `strategy` says how this rank's
    /// gradients and figures meet the other ranks' and whether it leads (prints, calls
    /// `on_epoch`, writes checkpoints). Each rank takes its share of every global batch of the
    /// same shuffled order, so the ranks agree on the batches without talking.
    pub(crate) fn run_loop(
        &mut self,
        run: &Run<'_>,
        resume: Option<RunState>,
        on_epoch: &mut EpochCallback<'_>,
        strategy: &Strategy<'_>,
    ) -> Result<TrainingHistory> {
        let started = Instant::now();
        let config = run.config;
        let (rank, world, leads) = (strategy.rank(), strategy.world(), strategy.leads());
        let n = run.train.len();
        size::check_indexed_rows(n, "training samples")?;
        // One device takes every sample (the last batch may be smaller); replicas take equal
        // shares of full global batches, so the samples that do not fill one are skipped.
        let global = config.batch_size.min(n - n % world);
        if global == 0 {
            return Err(Error::InvalidArgument(format!(
                "{n} training samples cannot be shared by {world} devices"
            )));
        }
        // Carried states continue sample by sample, so a partial batch has no place either.
        let steps_per_epoch = if world == 1 && !config.carry_state {
            n.div_ceil(global)
        } else {
            n / global
        };
        let used = n.min(steps_per_epoch * global);
        if leads && used < n {
            log::info!(
                "the last {} samples of each (shuffled) epoch are skipped so every step has a \
                 full global batch of {global} (data-parallel or carry_state)",
                n - used
            );
        }
        if config.carry_state {
            let TrainData::Memory(d) = run.train else {
                return Err(Error::InvalidArgument(
                    "carry_state needs an in-memory Dataset laid out as streams".into(),
                ));
            };
            self.check_carry(d)?;
        }
        let total_steps = (steps_per_epoch * config.epochs) as u64;
        strategy.share_parameters(self)?;
        self.set_precision(config.precision)?;
        let layout = StepLayout {
            used,
            global,
            world,
            rank,
        };
        if let Some(s) = &resume {
            train_state::check_run(s, config, n)?;
        }
        let mut feed = match run.train {
            TrainData::Memory(d) => Feed::Memory {
                buckets: Buckets::of(d, config, global)?,
                data: Box::new(self.upload(d)?),
                perm: self.ctx.ops().alloc_as(DType::U32, n)?,
            },
            // First of all: the stream starts reading the first epoch while the rest is set up.
            TrainData::Stream(s) => {
                let first_rng = Rng::new(resume.as_ref().map_or(config.seed, |s| s.rng));
                let first_epoch = resume.as_ref().map_or(0, |s| s.epoch) < config.epochs;
                let shuffle = config.shuffle.then_some(&first_rng);
                Feed::stream(self, s, layout, resume.as_ref(), shuffle, first_epoch)?
            }
        };
        let vd = match run.val {
            Some(v) => shard(v, rank, world)?
                .map(|s| self.upload(&s))
                .transpose()?,
            None => None,
        };

        let ops = self.ctx.ops();
        let acc = ops.alloc(2)?;
        let norm = ops.alloc(1)?;
        let trace = ops.alloc(steps_per_epoch)?;
        let mut opt = OptimizerState::new(
            ops,
            config.optimizer,
            self.layout.total,
            config.learning_rate,
        )?
        .for_precision(ops, config.precision)?;
        // Dropout masks follow the training seed (uploaded once, before any step).
        ops.upload(
            self.rng.view(),
            &crate::ops::rng_state_values(config.seed, 0),
        )?;
        let mut stepper = Stepper::new(self, strategy, config)?;
        // The per-epoch validation creates workspaces of other sizes; the step sizes must
        // survive it.
        let local = global / world;
        let _pins = (
            self.pin_workspace(local)?,
            self.pin_workspace((used - (steps_per_epoch - 1) * global) / world)?,
        );

        let mut state = match resume {
            Some(s) => {
                feed.restore(&s)?;
                opt.restore(self.ctx.ops(), &s.optimizer)?;
                s
            }
            None => RunState {
                epoch: 0,
                rng: Rng::new(config.seed).state(),
                // A stream's order is its plan's (saved into the state with each checkpoint).
                order: match run.train {
                    TrainData::Memory(_) => (0..n as u32).collect(),
                    TrainData::Stream(_) => Vec::new(),
                },
                shards: Vec::new(),
                epochs: Vec::with_capacity(config.epochs),
                early: EarlyState::default(),
                optimizer: opt.snapshot(self.ctx.ops())?,
            },
        };
        let mut rng = Rng::new(state.rng);
        let mut history = TrainingHistory {
            epochs: std::mem::take(&mut state.epochs),
            device: self.ctx.id(),
            device_name: self.ctx.info().name.clone(),
            total_seconds: 0.0,
            stopped: None,
            best_epoch: state.early.best.map(|(_, e)| e),
        };
        if leads {
            log::info!(
                "training {} parameters on {} ({}), {world} rank(s): {n} samples, batch \
                 {global}, epochs {}..={}",
                self.layout.total,
                history.device,
                history.device_name,
                state.epoch + 1,
                config.epochs
            );
        }
        let mut reporter = Reporter::new(if leads {
            config.progress
        } else {
            Progress::Off
        });
        let sampler = EpochSampler::new(self.ctx.info());
        // Skipped steps before this run's epochs (a resumed run's scaler counts from its start).
        let mut skipped_before = opt.scaler_report(self.ctx.ops())?.map_or(0, |(_, k)| k);
        for epoch in state.epoch + 1..=config.epochs {
            let t0 = Instant::now();
            sampler.start();
            reporter.start_epoch(epoch, config.epochs, used);
            let more = epoch < config.epochs;
            feed.begin_epoch(self, &mut state, config.shuffle.then_some(&mut rng), more)?;
            self.ctx.ops().fill(acc.view(), 0.0)?;
            if config.carry_state {
                let (net, ws) = self.workspace(local)?;
                net.zero_initial(ws)?;
            }
            let mut start = 0;
            let mut step = 0;
            while start < used {
                let b = global.min(used - start) / world;
                let lr = config.schedule.learning_rate(
                    config.learning_rate,
                    opt.steps(),
                    total_steps,
                    steps_per_epoch as u64,
                );
                opt.set_learning_rate(self.ctx.ops(), lr)?;
                let (net, ws) = self.workspace(b)?;
                let ops = net.ctx.ops();
                let batch = feed.load(net, ws, start + rank * b)?;
                let clip = config.clip_grad_norm.map(|max| (max, norm.view()));
                stepper.step(net, ws, &batch, acc.view(), clip, &opt)?;
                opt.count_step();
                ops.copy(acc.slice(0, 1)?, trace.slice(step, 1)?)?;
                start += b * world;
                step += 1;
                reporter.advance(start);
                if reporter.wants_read() {
                    let mut sums = [0.0f32; 2];
                    ops.download(acc.view(), &mut sums)?;
                    let loss = sums[0] / (start / world * net.out_steps) as f32;
                    // Replicas find a non-finite loss together, at the end of the epoch.
                    if !loss.is_finite() && world == 1 {
                        return Err(net.locate_non_finite(strategy, &trace, step, epoch, &opt));
                    }
                    reporter.show(progress_message(loss, lr, &sampler));
                }
            }
            if config.carry_state {
                // The validation below may run on this workspace; it starts from zeros.
                let (net, ws) = self.workspace(local)?;
                net.zero_initial(ws)?;
            }
            let mut sums = [0.0f32; 2];
            self.ctx.ops().download(acc.view(), &mut sums)?;
            strategy.sum(self, &mut sums)?;
            if !sums[0].is_finite() {
                return Err(self.locate_non_finite(strategy, &trace, step, epoch, &opt));
            }
            let train_secs = t0.elapsed().as_secs_f64();
            let (peak_memory_bytes, utilization) = sampler.finish();
            let rows = (used * self.out_steps) as f32;
            let classify = self.loss.is_classification();
            let scaler = opt.scaler_report(self.ctx.ops())?;
            let (loss_scale, skipped_steps) = match scaler {
                Some((scale, skipped)) => {
                    let epoch_skips = skipped - skipped_before.min(skipped);
                    skipped_before = skipped;
                    (Some(scale), Some(epoch_skips))
                }
                None => (None, None),
            };
            let (val_loss, val_accuracy) = match run.val {
                Some(v) => self.validation_metrics(vd.as_ref(), v.len(), config, strategy)?,
                None => (None, None),
            };
            let stats = EpochStats {
                epoch,
                loss: sums[0] / rows,
                accuracy: classify.then(|| sums[1] / rows),
                val_loss,
                val_accuracy,
                seconds: t0.elapsed().as_secs_f64(),
                samples_per_sec: used as f64 / train_secs.max(1e-9),
                learning_rate: opt.learning_rate(),
                peak_memory_bytes,
                utilization,
                loss_scale,
                skipped_steps,
            };
            // Every rank sees the same validation loss, so every rank decides the same.
            let mut stop = None;
            if let (Some(rule), Some(vl)) = (&config.early_stopping, stats.val_loss) {
                let (improved, exhausted) = state.early.observe(rule, epoch, vl);
                if improved && rule.restore_best {
                    state.early.best_params = Some(self.parameters()?);
                }
                if exhausted {
                    stop = Some(StopReason::EarlyStopping);
                }
                history.best_epoch = state.early.best.map(|(_, e)| e);
            }
            let line = format_epoch(&stats, config.epochs);
            reporter.finish_epoch(&line);
            if leads
                && !reporter.shows_epochs()
                && config.log_every > 0
                && epoch % config.log_every == 0
            {
                log::info!("{line}");
            }
            history.epochs.push(stats);
            if leads
                && let Some(path) = &config.checkpoint_path
                && (epoch % config.checkpoint_every == 0
                    || epoch == config.epochs
                    || stop.is_some())
            {
                state.epoch = epoch;
                state.rng = rng.state();
                feed.save(&mut state);
                state.optimizer = opt.snapshot(self.ctx.ops())?;
                train_state::save(self, path, config, n, global, &state, &history.epochs)?;
            }
            if stop.is_none() {
                // The leader's callback decides for every rank.
                let mut asked = [0.0f32];
                if leads
                    && history
                        .epochs
                        .last()
                        .is_some_and(|e| on_epoch(e).is_break())
                {
                    asked[0] = 1.0;
                }
                strategy.sum(self, &mut asked)?;
                if asked[0] > 0.0 {
                    stop = Some(StopReason::Callback);
                }
            }
            if let Some(reason) = stop {
                if leads {
                    log::info!("training stopped after epoch {epoch}: {reason:?}");
                }
                history.stopped = Some(reason);
                break;
            }
        }
        if let (Some(rule), Some(best)) = (&config.early_stopping, &state.early.best_params)
            && rule.restore_best
            && state.early.best.map(|(_, e)| e) != history.epochs.last().map(|e| e.epoch)
        {
            if leads {
                log::info!(
                    "restoring the parameters of epoch {}, the best validation loss",
                    history.best_epoch.unwrap_or(0)
                );
            }
            self.set_parameters(best)?;
        }
        strategy.finish()?;
        history.total_seconds = started.elapsed().as_secs_f64();
        Ok(history)
    }

    /// Validation loss and accuracy over all ranks' shares of the validation samples (`total`
    /// of them; this rank holds `vd`, or none when the share is empty).
    fn validation_metrics(
        &mut self,
        vd: Option<&DeviceData>,
        total: usize,
        config: &TrainingConfig,
        strategy: &Strategy<'_>,
    ) -> Result<(Option<f32>, Option<f32>)> {
        let local = vd
            .map(|d| self.evaluate_device(d, config.graphs).map(|e| (e, d.n)))
            .transpose()?;
        if let (1, Some((e, _))) = (strategy.world(), &local) {
            return Ok((Some(e.loss), e.accuracy));
        }
        let mut sums = [0.0f32; 2];
        if let Some((e, rows)) = local {
            let r = (rows * self.out_steps) as f32;
            sums = [e.loss * r, e.accuracy.unwrap_or(0.0) * r];
        }
        strategy.sum(self, &mut sums)?;
        let r = (total * self.out_steps) as f32;
        let classify = self.loss.is_classification();
        Ok((Some(sums[0] / r), classify.then(|| sums[1] / r)))
    }

    /// The error for an epoch whose loss sum is not finite after `steps` steps: finds the first
    /// step whose running sum (over all ranks) was not finite in the trace (one read, only on
    /// this path).
    fn locate_non_finite(
        &self,
        strategy: &Strategy<'_>,
        trace: &crate::buffer::Buffer,
        steps: usize,
        epoch: usize,
        opt: &OptimizerState,
    ) -> Error {
        let mut sums = vec![0.0f32; steps];
        let found = trace
            .slice(0, steps)
            .and_then(|v| self.ctx.ops().download(v, &mut sums))
            .and_then(|()| strategy.sum(self, &mut sums));
        if let Err(e) = found {
            return e;
        }
        let first = sums
            .iter()
            .position(|v| !v.is_finite())
            .unwrap_or(steps - 1);
        Error::NonFiniteLoss {
            epoch,
            step: first + 1,
            global_step: opt.steps() - (steps - first - 1) as u64,
            loss: sums[first],
        }
    }
}

/// The bar's message: running loss, learning rate, and the device's figures when known.
fn progress_message(loss: f32, lr: f32, sampler: &EpochSampler) -> String {
    let mut m = format!("loss {loss:.4} lr {lr:.1e}");
    if let Some(now) = sampler.now() {
        m += &format!(" | {now}");
    }
    m
}

/// One human-readable line per epoch.
pub fn format_epoch(s: &EpochStats, epochs: usize) -> String {
    let mut line = format!("epoch {}/{epochs}: loss {:.4}", s.epoch, s.loss);
    if let Some(a) = s.accuracy {
        line += &format!(" acc {:.4}", a);
    }
    if let Some(l) = s.val_loss {
        line += &format!(" val_loss {:.4}", l);
    }
    if let Some(a) = s.val_accuracy {
        line += &format!(" val_acc {:.4}", a);
    }
    if let (Some(scale), Some(skipped)) = (s.loss_scale, s.skipped_steps) {
        line += &format!(" loss_scale {scale} skipped {skipped}");
    }
    line += &format!(" ({:.2} s, {:.0} samples/s", s.seconds, s.samples_per_sec);
    if let Some(b) = s.peak_memory_bytes {
        line += &format!(", peak mem {:.0} MiB", b as f64 / (1u64 << 20) as f64);
    }
    if let Some(u) = s.utilization {
        line += &format!(", util {u:.0}%");
    }
    line + ")"
}
