//! [`Trainer`]: one training step at a time on data uploaded once, for custom loops and
//! benchmarks. Each step is forward, loss, backward, optional clipping and one optimizer
//! launch: no allocation and no host read.

use crate::buffer::Buffer;
use crate::error::{Error, Result};

use super::config::TrainingConfig;
use super::data::Dataset;
use super::network::Network;
use super::optim::OptimizerState;
use super::padding::Padding;
use super::step_graph::{Ran, StepGraphs};
use super::workspace::{DeviceData, Rows};
use super::workspace_cache::WorkspacePin;

/// Step-by-step training state for one network on its current device.
pub struct Trainer {
    context: u64,
    data: DeviceData,
    opt: OptimizerState,
    acc: Buffer,
    norm: Buffer,
    graphs: StepGraphs,
    batch: usize,
    clip: Option<f32>,
    /// [`TrainingConfig::carry_state`]: each step starts from the last one's final state,
    /// from zeros whenever the data wraps around.
    carry: bool,
    next: usize,
    since: u64,
    /// The padding of its data set, which the network's workspaces must be built for.
    padding: Padding,
    /// [`StepGraphs::new`]'s switch, to record again after the workspaces were rebuilt.
    graphs_on: bool,
    /// The workspaces' generation the step graphs were recorded against.
    generation: u64,
    /// Keeps this batch size's workspace from being evicted by predictions of other sizes.
    _pin: WorkspacePin,
    /// Steps recorded as a graph, and replayed from one.
    recorded: u64,
    replayed: u64,
}

impl std::fmt::Debug for Trainer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Trainer({} samples, batch {}, {:?})",
            self.data.n, self.batch, self.opt
        )
    }
}

impl Network {
    /// Uploads `data` and prepares stepwise training with `config`'s batch size, learning
    /// rate, optimizer and clipping, on the device the network is on now (`config`'s device
    /// fields are not consulted).
    pub fn trainer(&mut self, data: &Dataset, config: &TrainingConfig) -> Result<Trainer> {
        config.validate()?;
        self.check_data(data)?;
        if config.carry_state {
            self.check_carry(data)?;
        }
        self.adopt_padding(data)?;
        self.set_precision(config.precision)?;
        let padding = self.padding;
        let data = self.upload(data)?;
        let batch = config.batch_size.min(data.n);
        let pin = self.pin_workspace(batch)?;
        let ops = self.ctx.ops();
        // Dropout masks follow the training seed (uploaded once, before any step).
        ops.upload(
            self.rng.view(),
            &crate::ops::rng_state_values(config.seed, 0),
        )?;
        let acc = ops.alloc(2)?;
        ops.fill(acc.view(), 0.0)?;
        Ok(Trainer {
            context: ops.context_id(),
            opt: OptimizerState::new(
                ops,
                config.optimizer,
                self.layout.total,
                config.learning_rate,
            )?
            .for_precision(ops, config.precision)?,
            norm: ops.alloc(1)?,
            graphs: StepGraphs::new(config.graphs),
            acc,
            data,
            batch,
            clip: config.clip_grad_norm,
            carry: config.carry_state,
            next: 0,
            since: 0,
            padding,
            graphs_on: config.graphs,
            generation: self.workspaces.generation(),
            _pin: pin,
            recorded: 0,
            replayed: 0,
        })
    }
}

impl Trainer {
    /// One step on the next `batch` samples (in data order, wrapping around; a trailing
    /// partial batch is skipped so every step has the same shape).
    pub fn step(&mut self, net: &mut Network) -> Result<()> {
        if net.ctx.ops().context_id() != self.context {
            return Err(Error::ForeignBuffer(
                "this trainer was created for the network on another context".into(),
            ));
        }
        if self.next + self.batch > self.data.n {
            self.next = 0;
        }
        // Another data set may have changed the network's padding since; rebuilt workspaces
        // need the step recorded again.
        net.use_padding(self.padding);
        if net.workspaces.generation() != self.generation {
            self.graphs = StepGraphs::new(self.graphs_on);
            self.generation = net.workspaces.generation();
        }
        let (net, ws) = net.workspace(self.batch)?;
        if self.carry && self.next == 0 {
            net.zero_initial(ws)?;
        }
        let rows = Rows::Range(self.next);
        net.load_lengths(ws, &self.data, &rows)?;
        let in_place = self.graphs.runs_op_by_op(self.batch);
        let (x, y) = (self.data.x.view(), Some(self.data.y.view()));
        let batch = net.load_rows(ws, x, y, &rows, in_place)?;
        let clip = self.clip.map(|max| (max, self.norm.view()));
        let (acc, opt) = (self.acc.view(), &self.opt);
        let carry = self.carry;
        let ran = self.graphs.run(&net.ctx, self.batch, || {
            net.train_step_ws(ws, &batch, acc, clip, opt)?;
            if carry {
                net.carry_state_ws(ws)?;
            }
            Ok(())
        })?;
        match ran {
            Ran::Recorded => self.recorded += 1,
            Ran::Replayed => self.replayed += 1,
            Ran::OpByOp => {}
        }
        self.opt.count_step();
        self.next += self.batch;
        self.since += 1;
        Ok(())
    }

    /// `(recorded, replayed)`: how many steps were recorded as a graph and how many replayed
    /// one. For tests.
    #[cfg(feature = "testing")]
    #[doc(hidden)]
    pub fn graph_counts(&self) -> (u64, u64) {
        (self.recorded, self.replayed)
    }

    /// Mean loss of the steps since the last call (one device read), then resets the sum.
    pub fn take_mean_loss(&mut self, net: &Network) -> Result<f32> {
        let ops = net.ctx.ops();
        let mut sums = [0.0f32; 2];
        ops.download(self.acc.view(), &mut sums)?;
        ops.fill(self.acc.view(), 0.0)?;
        let steps = self.since.max(1) as f32;
        self.since = 0;
        Ok(sums[0] / (steps * (self.batch * net.out_steps) as f32))
    }
}
