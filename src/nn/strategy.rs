//! Where one run of the training loop (`Network::run_loop`) executes, and the little that
//! differs between the places: one device, one replica per device in one process, or one
//! process per device (burn-train's single / multi-device / DDP strategies).
//!
//! The loop itself is the same for all three. A [`Strategy`] says how a step's gradients are
//! combined (nothing to combine; an NCCL/RCCL all-reduce on the device's stream; a host
//! all-reduce for CPU replicas), how host-side figures (loss sums, validation metrics, the
//! callback's decision) are gathered, and which rank leads (prints progress, calls the
//! callback, writes checkpoints). Replicas stay identical because they start from the same
//! parameters and optimizer state and every rank applies the same mean gradient.

use crate::buffer::View;
use crate::device::BackendKind;
use crate::dist::Communicator;
use crate::error::Result;

use super::config::TrainingConfig;
use super::host_reduce::HostGroup;
use super::network::Network;
use super::optim::OptimizerState;
use super::step_graph::StepGraphs;
use super::workspace::{Batch, Workspace};

/// One rank's view of where training runs (see the module docs).
pub(crate) enum Strategy<'a> {
    /// One device, no replicas.
    Single,
    /// One rank of replicas on CUDA/HIP devices that meet through NCCL/RCCL (threads of one
    /// process, or one process per device).
    Collective(&'a Communicator),
    /// Rank `rank` of CPU replicas, threads of one process that meet in host memory.
    Host {
        /// The replicas' meeting point.
        group: &'a HostGroup,
        /// This replica's rank.
        rank: usize,
    },
}

impl Strategy<'_> {
    pub(crate) fn rank(&self) -> usize {
        match self {
            Strategy::Single => 0,
            Strategy::Collective(c) => c.rank(),
            Strategy::Host { rank, .. } => *rank,
        }
    }

    pub(crate) fn world(&self) -> usize {
        match self {
            Strategy::Single => 1,
            Strategy::Collective(c) => c.world_size(),
            Strategy::Host { group, .. } => group.world(),
        }
    }

    /// Rank 0 prints, calls the epoch callback and writes training checkpoints.
    pub(crate) fn leads(&self) -> bool {
        self.rank() == 0
    }

    /// Gives every rank rank 0's parameters (replicas of one process are made as copies
    /// already; processes are not).
    pub(crate) fn share_parameters(&self, net: &Network) -> Result<()> {
        match self {
            Strategy::Collective(c) => c.broadcast(&net.ctx, net.params.view(), 0),
            _ => Ok(()),
        }
    }

    /// Replaces the host values `x` by their sum over the ranks.
    pub(crate) fn sum(&self, net: &Network, x: &mut [f32]) -> Result<()> {
        match self {
            Strategy::Single => Ok(()),
            Strategy::Host { group, rank } => group.all_reduce_sum(*rank, x),
            Strategy::Collective(c) => {
                let ops = net.ctx.ops();
                let buf = ops.alloc(x.len())?;
                ops.upload(buf.view(), x)?;
                c.all_reduce_sum(&net.ctx, buf.view())?;
                ops.download(buf.view(), x)
            }
        }
    }

    /// Replaces every rank's gradients by their mean over the ranks.
    fn mean_gradients(&self, net: &Network) -> Result<()> {
        match self {
            Strategy::Single => Ok(()),
            Strategy::Collective(c) => c.all_reduce_mean(&net.ctx, net.grads.view()),
            Strategy::Host { group, rank } => {
                let ops = net.ctx.ops();
                let mut g = vec![0.0f32; net.layout.total];
                ops.download(net.grads.view(), &mut g)?;
                group.all_reduce_sum(*rank, &mut g)?;
                let world = group.world() as f32;
                g.iter_mut().for_each(|v| *v /= world);
                ops.upload(net.grads.view(), &g)
            }
        }
    }

    /// At the end of a successful run: errors the collective library reported
    /// asynchronously, then the communicator is closed on this rank's own thread (closing all
    /// of a process's communicators from one thread may wait on each other).
    pub(crate) fn finish(&self) -> Result<()> {
        if let Strategy::Collective(c) = self {
            c.async_error()?;
            c.close();
        }
        Ok(())
    }
}

/// Runs training steps the way a strategy needs them. One device: the whole step (forward,
/// loss, backward, clipping, update) as one recorded graph. Replicas: the gradients as one
/// graph, the all-reduce, then the update as a second graph. The all-reduce stays outside the
/// graphs: each rank decides on its own whether its step could be recorded (a failed recording
/// falls back to op by op), and a collective that is part of a graph on one rank but launched
/// directly on another is not something NCCL promises to match. Kept outside, it is launched
/// identically on every rank.
pub(crate) struct Stepper<'s> {
    strategy: &'s Strategy<'s>,
    first: StepGraphs,
    update: StepGraphs,
    /// Each layer's range of the gradient buffer, when each layer's all-reduce starts on a
    /// second stream as soon as its backward is queued (`overlap_allreduce`).
    overlap: Option<Vec<(usize, usize)>>,
    /// Hand each cell's final state to the next step as its initial state
    /// ([`TrainingConfig::carry_state`]).
    carry: bool,
}

impl<'s> Stepper<'s> {
    pub(crate) fn new(
        net: &Network,
        strategy: &'s Strategy<'s>,
        config: &TrainingConfig,
    ) -> Result<Self> {
        // Every rank must take the same decision (the collectives it issues differ), so it
        // rests on facts every rank shares; a side stream that then fails is an error, not a
        // quiet fallback.
        let overlap = match strategy {
            Strategy::Collective(comm) if config.overlap_allreduce => {
                let cuda = net.ctx.id().backend() == BackendKind::Cuda;
                match net.layer_ranges() {
                    Some(r) if cuda && comm.has_mean() => {
                        net.ctx.execution().order_streams(true)?;
                        Some(r)
                    }
                    _ => None,
                }
            }
            _ => None,
        };
        if config.overlap_allreduce && overlap.is_none() && strategy.world() > 1 && strategy.leads()
        {
            log::info!(
                "overlap_allreduce ignored: needs CUDA, ncclAvg (NCCL 2.10+) and a \
                 layer-by-layer parameter layout"
            );
        }
        Ok(Stepper {
            strategy,
            first: StepGraphs::new(config.graphs),
            update: StepGraphs::new(config.graphs),
            overlap,
            carry: config.carry_state,
        })
    }

    /// One step on the batch loaded into `ws`; its loss sums are added to `acc`.
    pub(crate) fn step(
        &mut self,
        net: &Network,
        ws: &Workspace,
        batch: &Batch<'_>,
        acc: View<'_>,
        clip: Option<(f32, View<'_>)>,
        opt: &OptimizerState,
    ) -> Result<()> {
        let (ctx, rows, strategy) = (&net.ctx, ws.batch, self.strategy);
        let carry = self.carry;
        // After the backward pass, which still reads this step's initial state.
        let carry_state = || {
            if carry {
                net.carry_state_ws(ws)
            } else {
                Ok(())
            }
        };
        if strategy.world() == 1 {
            self.first.run(ctx, rows, || {
                net.train_step_ws(ws, batch, acc, clip, opt)?;
                carry_state()
            })?;
            return Ok(());
        }
        match (&self.overlap, strategy) {
            (Some(ranges), Strategy::Collective(comm)) => {
                // Layer i's gradients are final once its backward is queued; earlier layers
                // write only their own ranges, so the side stream may reduce them meanwhile.
                // The main stream waits for all of it before the update.
                net.forward_train_ws(ws, batch)?;
                net.scaled_loss_ws(ws, batch, Some(acc), opt.loss_scale())?;
                net.backward_ws_then(ws, batch, &mut |i| {
                    let (start, len) = ranges[i];
                    if len == 0 {
                        return Ok(());
                    }
                    ctx.execution().order_streams(true)?;
                    comm.all_reduce_mean_on_side(&net.ctx, net.grads.slice(start, len)?)
                })?;
                carry_state()?;
                ctx.execution().order_streams(false)?;
            }
            _ => {
                self.first.run(ctx, rows, || {
                    net.forward_train_ws(ws, batch)?;
                    net.scaled_loss_ws(ws, batch, Some(acc), opt.loss_scale())?;
                    net.backward_ws(ws, batch)?;
                    carry_state()
                })?;
                strategy.mean_gradients(net)?;
            }
        }
        self.update.run(ctx, rows, || net.update_ws(clip, opt))?;
        Ok(())
    }
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
}
