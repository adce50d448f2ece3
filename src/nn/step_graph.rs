//! Whole training steps as device graphs: the first step of a batch size runs op by op (it
//! compiles kernels, fills the memory pool and allocates scratch), the second is recorded and
//! replayed, and every later one is a single graph launch. What changes between steps lives in
//! device memory (the batch, which is gathered outside the graph; the learning rate and step
//! count, in the optimizer's device state), so the recording stays valid. A device that cannot
//! record, or a recording that fails, runs the step op by op from then on, with one warning.

use std::collections::HashMap;

use crate::error::Result;
use crate::graph::Graph;
use crate::ops::Ops;

enum Slot {
    /// One step ran op by op; the next is recorded.
    Warm,
    Ready(Graph),
    /// No graph for this size: the device has none, or recording failed.
    OpByOp,
}

/// The recorded steps of one training run, by batch size. The graphs refer to the network's
/// buffers, the workspace of their batch size and the optimizer state: the owner keeps those
/// alive (and the workspaces pinned) for as long as this lives.
pub(crate) struct StepGraphs {
    enabled: bool,
    slots: HashMap<usize, Slot>,
}

/// Whether `RNN_GRAPHS` allows graphs (anything but `0`, `off`, `false` or `no`).
fn env_allows() -> bool {
    match std::env::var("RNN_GRAPHS") {
        Ok(v) => !matches!(
            v.trim().to_ascii_lowercase().as_str(),
            "0" | "off" | "false" | "no"
        ),
        Err(_) => true,
    }
}

impl StepGraphs {
    /// Graphs when `enabled` and the environment allows.
    pub(crate) fn new(enabled: bool) -> Self {
        StepGraphs {
            enabled: enabled && env_allows(),
            slots: HashMap::new(),
        }
    }

    /// Queues one run of `step` (which queues the same work with the same buffers every call)
    /// for batch size `key`: op by op, recorded then launched, or replayed.
    pub(crate) fn run(
        &mut self,
        ops: &dyn Ops,
        key: usize,
        step: impl Fn() -> Result<()>,
    ) -> Result<()> {
        if !self.enabled {
            return step();
        }
        match self.slots.get(&key) {
            Some(Slot::Ready(g)) => return ops.graph_launch(g),
            Some(Slot::OpByOp) => return step(),
            None => {
                self.slots.insert(key, Slot::Warm);
                return step();
            }
            Some(Slot::Warm) => {}
        }
        if !ops.capture_begin()? {
            self.slots.insert(key, Slot::OpByOp);
            return step();
        }
        let recorded = step();
        let ended = ops.capture_end();
        match (recorded, ended) {
            (Ok(()), Ok(graph)) => {
                log::debug!(
                    "{}: training step of batch {key} recorded as a graph of {} launches",
                    ops.info().id,
                    graph.kernels()
                );
                let launched = ops.graph_launch(&graph);
                self.slots.insert(key, Slot::Ready(graph));
                launched
            }
            (recorded, ended) => {
                let why = recorded.err().or(ended.err()).map(|e| e.to_string());
                log::warn!(
                    "{}: could not record the training step of batch {key} as a graph ({}); \
                     running it op by op",
                    ops.info().id,
                    why.unwrap_or_default()
                );
                self.slots.insert(key, Slot::OpByOp);
                step()
            }
        }
    }
}
