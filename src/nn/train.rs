//! `Network::train`: the data set is uploaded once; each epoch uploads only a permutation,
//! gathers batches on the device, accumulates loss and correct counts on the device and reads
//! them back once. A step neither allocates (after the first) nor reads from the device.

use std::time::Instant;

use crate::context::Context;
use crate::device::DeviceId;
use crate::error::{Error, Result};
use crate::manager::GpuManager;

use super::config::TrainingConfig;
use super::data::Dataset;
use super::history::{EpochStats, TrainingHistory};
use super::network::Network;
use super::optim::OptimizerState;
use super::rng::Rng;
use super::size;
use super::step_graph::StepGraphs;
use super::workspace::Rows;

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
                manager.create_context(target)?
            };
            self.to_context(&ctx)?;
        }
        Ok(())
    }

    /// Trains on `data` as `config` says and returns per-epoch metrics. The last
    /// `validation_split` of the samples (in data-set order) is held out and evaluated after
    /// every epoch.
    ///
    /// With two or more `config.devices` (or an `RNN_DEVICE` list), training is data-parallel:
    /// one replica per device on its own thread, `batch_size` is the global batch split evenly
    /// among them, gradients are averaged with one NCCL (RCCL on HIP) all-reduce per step, and
    /// the trailing samples that do not fill a global batch are skipped each epoch. The network
    /// ends on the first device. Without NCCL, or with devices that are not CUDA (HIP), this
    /// is a clear error; see `src/nn/data_parallel.rs` for the step.
    ///
    /// Limits: the training samples, and `batch_size * steps` of a sequence model, must stay
    /// below [`super::MAX_INDEXED_ROWS`] (2^24), because the device gathers rows through f32
    /// indices; larger values are an [`Error::InvalidArgument`].
    pub fn train(&mut self, data: &Dataset, config: &TrainingConfig) -> Result<TrainingHistory> {
        let started = Instant::now();
        config.validate()?;
        self.check_data(data)?;
        let env = std::env::var("RNN_DEVICE").ok();
        let devices = config.data_parallel_devices(env.as_deref())?;
        if devices.len() > 1 {
            return self.train_replicated(data, config, &devices);
        }
        match devices.first() {
            Some(&one) => self.move_to_configured_device(&TrainingConfig {
                device: Some(one),
                devices: Vec::new(),
                ..config.clone()
            })?,
            None => self.move_to_configured_device(config)?,
        }

        let n_val = (data.len() as f64 * config.validation_split as f64).floor() as usize;
        let (train, val) = if n_val > 0 {
            let (t, v) = data.split_at(data.len() - n_val).map_err(|_| {
                Error::InvalidArgument(format!(
                    "validation_split {} leaves no training samples of {}",
                    config.validation_split,
                    data.len()
                ))
            })?;
            (t, Some(v))
        } else {
            (data.clone(), None)
        };
        size::check_indexed_rows(train.len(), "training samples")?;
        let dd = self.upload(&train)?;
        let vd = val.as_ref().map(|v| self.upload(v)).transpose()?;
        let n = dd.n;
        let batch = config.batch_size.min(n);

        let ops = self.ctx.ops();
        let perm = ops.alloc(n)?;
        let acc = ops.alloc(2)?;
        let norm = ops.alloc(1)?;
        let mut opt = OptimizerState::new(
            ops,
            config.optimizer,
            self.layout.total,
            config.learning_rate,
        )?;
        let mut graphs = StepGraphs::new(config.graphs);
        // The per-epoch validation creates workspaces of other sizes; the step sizes must
        // survive it.
        let _pins = (
            self.pin_workspace(batch)?,
            self.pin_workspace(if n % batch == 0 { batch } else { n % batch })?,
        );

        let mut rng = Rng::new(config.seed);
        let mut order: Vec<u32> = (0..n as u32).collect();
        let mut host_perm = vec![0.0f32; n];
        let mut history = TrainingHistory {
            epochs: Vec::with_capacity(config.epochs),
            device: self.ctx.id(),
            device_name: self.ctx.info().name.clone(),
            total_seconds: 0.0,
        };
        log::info!(
            "training {} parameters on {} ({}): {} samples, batch {}, {} epochs",
            self.layout.total,
            history.device,
            history.device_name,
            n,
            batch,
            config.epochs
        );
        for epoch in 1..=config.epochs {
            let t0 = Instant::now();
            if config.shuffle {
                rng.shuffle(&mut order);
            }
            for (p, &o) in host_perm.iter_mut().zip(&order) {
                *p = o as f32;
            }
            self.ctx.ops().upload(perm.view(), &host_perm)?;
            self.ctx.ops().fill(acc.view(), 0.0)?;
            let mut start = 0;
            while start < n {
                let b = batch.min(n - start);
                let (net, ws) = self.workspace(b)?;
                let ops = net.ctx.ops();
                let idx = perm.slice(start, b)?;
                net.load_rows(ws, dd.x.view(), Some(dd.y.view()), &Rows::Gather(idx))?;
                let clip = config.clip_grad_norm.map(|max| (max, norm.view()));
                graphs.run(ops, b, || net.train_step_ws(ws, acc.view(), clip, &opt))?;
                opt.count_step();
                start += b;
            }
            let mut sums = [0.0f32; 2];
            self.ctx.ops().download(acc.view(), &mut sums)?;
            let train_secs = t0.elapsed().as_secs_f64();
            let rows = (n * self.out_steps) as f32;
            let classify = self.loss.is_classification();
            let (val_loss, val_accuracy) = match &vd {
                Some(v) => {
                    let e = self.evaluate_device(v)?;
                    (Some(e.loss), e.accuracy)
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
                samples_per_sec: n as f64 / train_secs.max(1e-9),
            };
            if !stats.loss.is_finite() {
                log::warn!("epoch {epoch}: training loss is {}", stats.loss);
            }
            if config.log_every > 0 && epoch % config.log_every == 0 {
                log::info!("{}", format_epoch(&stats, config.epochs));
            }
            history.epochs.push(stats);
        }
        history.total_seconds = started.elapsed().as_secs_f64();
        Ok(history)
    }
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
    line + &format!(" ({:.2} s, {:.0} samples/s)", s.seconds, s.samples_per_sec)
}
