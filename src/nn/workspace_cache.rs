//! The per-batch-size workspaces a network keeps, and the one accessor every caller goes
//! through. Sizes are created on demand; when many accumulate (predictions of many sizes) the
//! least recently used one is dropped, except sizes pinned by a running `train` or a live
//! [`crate::nn::Trainer`], whose steps must not reallocate.
//!
//! Each workspace owns the graphs its evaluation and prediction batches were recorded as, so
//! an evicted or rebuilt workspace takes its recordings with it. Those recordings add their
//! metric sums into one accumulator kept here, at a fixed address for as long as they live.

use std::collections::HashMap;
use std::sync::{Arc, Weak};

use crate::buffer::Buffer;
use crate::error::Result;
use crate::ops::Ops;

use super::network::Network;
use super::step_graph::Ran;
use super::workspace::Workspace;

/// Sizes kept before the least recently used unpinned one is dropped.
const KEEP: usize = 8;

struct Slot {
    ws: Workspace,
    last_use: u64,
}

/// Keeps a workspace alive while held; dropping it lets the size be evicted again.
#[derive(Debug, Clone)]
pub(crate) struct WorkspacePin {
    _alive: Arc<()>,
}

#[derive(Default)]
pub(crate) struct Workspaces {
    slots: HashMap<usize, Slot>,
    clock: u64,
    /// Batch sizes with their pin; a size is pinned while one of its pins is alive.
    pins: Vec<(usize, Weak<()>)>,
    /// Evaluation's loss and correct-count sums (2 values), created on first use. Recorded
    /// evaluation batches refer to it, so it lives as long as the workspaces do.
    eval_acc: Option<Buffer>,
    /// [`Network::set_graphs`] turned evaluation and prediction graphs off.
    graphs_off: bool,
    /// Evaluation and prediction batches recorded as graphs, and replayed from one.
    recorded: u64,
    replayed: u64,
    /// How many times [`Workspaces::clear`] ran: recordings made against older workspaces
    /// (a [`crate::nn::Trainer`]'s) must be made again.
    generation: u64,
}

impl Workspaces {
    /// Drops every workspace and the recordings that refer to them (pins stay: the sizes are
    /// rebuilt on demand and kept).
    pub fn clear(&mut self) {
        self.slots.clear();
        self.eval_acc = None;
        self.generation += 1;
    }

    /// Changes with every [`Workspaces::clear`].
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Whether evaluation and prediction may record graphs.
    pub fn graphs_on(&self) -> bool {
        !self.graphs_off
    }

    pub fn set_graphs(&mut self, enabled: bool) {
        self.graphs_off = !enabled;
    }

    /// `(recorded, replayed)` evaluation and prediction batches.
    #[cfg(feature = "testing")]
    pub fn counts(&self) -> (u64, u64) {
        (self.recorded, self.replayed)
    }

    /// The evaluation accumulator, allocated on `ops` on first use and zeroed now (outside
    /// any recording).
    pub fn reset_eval_acc(&mut self, ops: &dyn Ops) -> Result<()> {
        if self.eval_acc.is_none() {
            self.eval_acc = Some(ops.alloc(2)?);
        }
        if let Some(acc) = &self.eval_acc {
            ops.fill(acc.view(), 0.0)?;
        }
        Ok(())
    }

    /// The evaluation accumulator ([`Self::reset_eval_acc`] creates it).
    pub fn eval_acc(&self) -> Option<&Buffer> {
        self.eval_acc.as_ref()
    }

    /// Counts how evaluation or prediction batches ran.
    pub fn count(&mut self, runs: &[Ran]) {
        for r in runs {
            match r {
                Ran::Recorded => self.recorded += 1,
                Ran::Replayed => self.replayed += 1,
                Ran::OpByOp => {}
            }
        }
    }

    fn pinned(&self, batch: usize) -> bool {
        self.pins
            .iter()
            .any(|(b, w)| *b == batch && w.strong_count() > 0)
    }

    /// Makes room for one more size: drops the least recently used unpinned workspace once
    /// [`KEEP`] exist. When every size is pinned nothing is dropped.
    fn make_room(&mut self) {
        self.pins.retain(|(_, w)| w.strong_count() > 0);
        if self.slots.len() < KEEP {
            return;
        }
        let victim = self
            .slots
            .iter()
            .filter(|(b, _)| !self.pinned(**b))
            .min_by_key(|(_, s)| s.last_use)
            .map(|(b, _)| *b);
        if let Some(b) = victim {
            log::debug!("dropping the workspace for batch size {b}");
            self.slots.remove(&b);
        }
    }

    #[cfg(test)]
    pub fn sizes(&self) -> Vec<usize> {
        let mut v: Vec<usize> = self.slots.keys().copied().collect();
        v.sort_unstable();
        v
    }
}

impl Network {
    /// The workspace for `batch` rows, created if missing. Returns the network as a shared
    /// reference next to it, so callers can run steps with both.
    pub(crate) fn workspace(&mut self, batch: usize) -> Result<(&Network, &Workspace)> {
        self.workspaces.clock += 1;
        let now = self.workspaces.clock;
        match self.workspaces.slots.get_mut(&batch) {
            Some(slot) => slot.last_use = now,
            None => {
                self.workspaces.make_room();
                let ws = self.build_workspace(batch)?;
                let slot = Slot { ws, last_use: now };
                self.workspaces.slots.insert(batch, slot);
            }
        }
        let this: &Network = self;
        let slot = this
            .workspaces
            .slots
            .get(&batch)
            .expect("the workspace exists or was inserted above");
        Ok((this, &slot.ws))
    }

    /// Keeps the workspace for `batch` (created now if missing) from being evicted while the
    /// returned pin lives.
    pub(crate) fn pin_workspace(&mut self, batch: usize) -> Result<WorkspacePin> {
        let pin = Arc::new(());
        self.workspaces.pins.retain(|(_, w)| w.strong_count() > 0);
        self.workspaces.pins.push((batch, Arc::downgrade(&pin)));
        self.workspace(batch)?;
        Ok(WorkspacePin { _alive: pin })
    }
}

#[cfg(test)]
mod tests {
    use crate::context::Context;
    use crate::error::Error;
    use crate::nn::{Loss, MAX_INDEXED_ROWS, Network, RnnOutput};
    use crate::ops::Activation;

    fn dense() -> Network {
        Network::builder(&Context::cpu())
            .dense(2, 2, Activation::Identity)
            .build(Loss::Mse)
            .unwrap()
    }

    #[test]
    fn least_recently_used_unpinned_size_goes_first() {
        let mut net = dense();
        let pin = net.pin_workspace(1).unwrap();
        for b in 2..=8 {
            net.workspace(b).unwrap();
        }
        net.workspace(2).unwrap();
        net.workspace(9).unwrap();
        // 3 was the least recently used; 1 is older but pinned.
        assert_eq!(net.workspaces.sizes(), vec![1, 2, 4, 5, 6, 7, 8, 9]);
        for b in 10..30 {
            net.workspace(b).unwrap();
        }
        assert!(net.workspaces.sizes().contains(&1));
        assert_eq!(net.workspaces.sizes().len(), super::KEEP);
        drop(pin);
        for b in 30..40 {
            net.workspace(b).unwrap();
        }
        assert!(!net.workspaces.sizes().contains(&1));
        assert!(net.workspaces.pins.is_empty());
    }

    #[test]
    fn every_size_pinned_grows_instead_of_evicting() {
        let mut net = dense();
        let pins: Vec<_> = (1..=10).map(|b| net.pin_workspace(b).unwrap()).collect();
        assert_eq!(net.workspaces.sizes(), (1..=10).collect::<Vec<_>>());
        drop(pins);
    }

    #[test]
    fn sequence_rows_beyond_u32_indices_are_rejected_before_allocating() {
        let mut net = Network::builder(&Context::cpu())
            .sequence_length(2)
            .rnn(1, 1, Activation::Tanh, RnnOutput::Last)
            .build(Loss::Mse)
            .unwrap();
        // 2^31 samples of 2 steps would need row 2^32, past the last u32 index.
        let err = net.workspace(MAX_INDEXED_ROWS / 2 + 1).err().unwrap();
        assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
        assert!(err.to_string().contains("u32"), "{err}");
        let err = net.workspace(usize::MAX / 2 + 1).err().unwrap();
        assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
        assert!(net.workspaces.sizes().is_empty());
        net.workspace(3).unwrap();
    }
}
