//! Whole training steps as device graphs: the first step of a batch size runs op by op (it
//! compiles kernels, fills the memory pool and allocates scratch), the second is recorded and
//! replayed, and every later one is a single graph launch. What changes between steps lives in
//! device memory (the batch, which is gathered outside the graph; the learning rate and step
//! count, in the optimizer's device state), so the recording stays valid. A device that cannot
//! record, or a recording that fails, runs the step op by op from then on, with one warning.
//!
//! Evaluation and prediction batches go the same way (one [`StepGraphs`] per workspace and
//! kind of batch, see `EvalGraphs`), so their recordings die with the workspace they refer to.

use std::collections::HashMap;

use crate::context::Context;
use crate::env_switch::Switch;
use crate::error::Result;
use crate::graph::Graph;

enum Slot {
    /// One step ran op by op; the next is recorded.
    Warm,
    Ready(Graph),
    /// No graph for this size: the device has none, or recording failed.
    OpByOp,
}

/// How [`StepGraphs::run`] ran the step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ran {
    OpByOp,
    /// Recorded now, then launched once.
    Recorded,
    Replayed,
}

/// The recorded steps of one training run (or one workspace's evaluation batches), by batch
/// size. The graphs refer to the network's buffers, the workspace of their batch size and the
/// optimizer state or metric accumulator: the owner keeps those alive (and the workspaces
/// pinned) for as long as this lives.
pub(crate) struct StepGraphs {
    enabled: bool,
    /// What a step is, for the logs ("training step").
    what: &'static str,
    slots: HashMap<usize, Slot>,
}

/// Whether `RNN_GRAPHS` allows graphs: unset, empty, `1`, `on`, `true`, `yes` do; `0`, `off`,
/// `false`, `no` do not. Any other value warns and leaves graphs on (a network is built
/// without a way to report it).
fn env_allows() -> bool {
    let switch = Switch {
        name: "RNN_GRAPHS",
        unset: true,
        empty: true,
        yes_no: true,
    };
    switch.read_env().unwrap_or_else(|e| {
        log::warn!("{e}; recording graphs");
        true
    })
}

impl StepGraphs {
    /// Training steps, as graphs when `enabled` and the environment allows.
    pub(crate) fn new(enabled: bool) -> Self {
        Self::named(enabled, "training step")
    }

    /// Steps called `what` in the logs, as graphs when `enabled` and the environment allows.
    pub(crate) fn named(enabled: bool, what: &'static str) -> Self {
        StepGraphs {
            enabled: enabled && env_allows(),
            what,
            slots: HashMap::new(),
        }
    }

    /// True when the next step of batch size `key` is known to run op by op (graphs are off,
    /// or this device or size records none), so it may read buffers that change between
    /// steps.
    pub(crate) fn runs_op_by_op(&self, key: usize) -> bool {
        !self.enabled || matches!(self.slots.get(&key), Some(Slot::OpByOp))
    }

    /// Queues one run of `step` (which queues the same work with the same buffers every call)
    /// for batch size `key`: op by op, recorded then launched, or replayed.
    pub(crate) fn run(
        &mut self,
        ctx: &Context,
        key: usize,
        step: impl Fn() -> Result<()>,
    ) -> Result<Ran> {
        if !self.enabled {
            return step().map(|()| Ran::OpByOp);
        }
        match self.slots.get(&key) {
            Some(Slot::Ready(g)) => return ctx.graph_launch(g).map(|()| Ran::Replayed),
            Some(Slot::OpByOp) => return step().map(|()| Ran::OpByOp),
            None => {
                self.slots.insert(key, Slot::Warm);
                return step().map(|()| Ran::OpByOp);
            }
            // A cold start's tier-0 stand-ins are still running: record once they are not.
            Some(Slot::Warm) if !ctx.kernels_final() => return step().map(|()| Ran::OpByOp),
            Some(Slot::Warm) => {}
        }
        if !ctx.capture_begin()? {
            self.slots.insert(key, Slot::OpByOp);
            return step().map(|()| Ran::OpByOp);
        }
        let recorded = step();
        let ended = ctx.capture_end();
        match (recorded, ended) {
            (Ok(()), Ok(graph)) => {
                log::debug!(
                    "{}: {} of batch {key} recorded as a graph of {} launches",
                    ctx.id(),
                    self.what,
                    graph.kernels()
                );
                let launched = ctx.graph_launch(&graph);
                self.slots.insert(key, Slot::Ready(graph));
                launched.map(|()| Ran::Recorded)
            }
            (recorded, ended) => {
                let why = recorded.err().or(ended.err()).map(|e| e.to_string());
                log::warn!(
                    "{}: could not record the {} of batch {key} as a graph ({}); running it \
                     op by op",
                    ctx.id(),
                    self.what,
                    why.unwrap_or_default()
                );
                self.slots.insert(key, Slot::OpByOp);
                step().map(|()| Ran::OpByOp)
            }
        }
    }
}

/// Which evaluation-mode work (dropout off) a batch runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EvalKind {
    /// Forward and loss, the sums added to the network's evaluation accumulator.
    Loss,
    /// Forward and the batch-major output, for prediction.
    Forward,
}

/// The recorded evaluation and prediction batches of one workspace (one batch size): at most
/// one recording per [`EvalKind`]. The workspace owns them, so they go when it is evicted or
/// rebuilt and are never replayed against another workspace's buffers. Training-mode steps
/// are never recorded here (the training loop keeps its own [`StepGraphs`]).
pub(crate) struct EvalGraphs {
    loss: StepGraphs,
    forward: StepGraphs,
}

impl EvalGraphs {
    pub(crate) fn new() -> Self {
        EvalGraphs {
            loss: StepGraphs::named(true, "evaluation batch"),
            forward: StepGraphs::named(true, "forward batch"),
        }
    }

    /// [`StepGraphs::runs_op_by_op`] for a `kind` batch of `batch` rows, `enabled` as
    /// [`EvalGraphs::run`] takes it.
    pub(crate) fn runs_op_by_op(&self, kind: EvalKind, batch: usize, enabled: bool) -> bool {
        !enabled || self.graphs(kind).runs_op_by_op(batch)
    }

    fn graphs(&self, kind: EvalKind) -> &StepGraphs {
        match kind {
            EvalKind::Loss => &self.loss,
            EvalKind::Forward => &self.forward,
        }
    }

    /// Queues one `kind` batch of `batch` rows: op by op when `enabled` is false, else as
    /// [`StepGraphs::run`] does.
    pub(crate) fn run(
        &mut self,
        ctx: &Context,
        kind: EvalKind,
        batch: usize,
        enabled: bool,
        step: impl Fn() -> Result<()>,
    ) -> Result<Ran> {
        if !enabled {
            return step().map(|()| Ran::OpByOp);
        }
        let graphs = match kind {
            EvalKind::Loss => &mut self.loss,
            EvalKind::Forward => &mut self.forward,
        };
        graphs.run(ctx, batch, step)
    }
}
