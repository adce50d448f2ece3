//! Recorded device work that replays with one launch: [`Graph`], made by
//! [`crate::Context::capture_begin`] / [`crate::Context::capture_end`].
//!
//! A training step is dozens of small kernels; each costs the host a few microseconds to launch
//! and the device a gap between kernels. Recorded once and replayed, the whole step is one
//! launch. `Network::train` and `Trainer::step` do this by themselves on devices that can
//! (CUDA, HIP), and so do `Network::evaluate`, `predict` and `forward` for each batch size;
//! users only need this for their own loops.

use crate::error::Result;

/// A backend's instantiated graph (what [`crate::backend::Device::capture_end`] returns).
pub trait GraphExec: Send + Sync {
    /// Queues one replay on the stream the graph was recorded from.
    fn launch(&self) -> Result<()>;
}

/// A recorded sequence of kernels of one context, replayed by
/// [`crate::Context::graph_launch`]. The kernels keep the buffers and scalar arguments they
/// were recorded with: the buffers must outlive the graph, and what changes between replays
/// must change in device memory (the optimizer's learning rate and step count do, see
/// [`crate::ops::OPTIMIZER_STATE_LEN`]).
pub struct Graph {
    // Field order is drop order: the executable graph goes before the temporaries it uses.
    exec: Box<dyn GraphExec>,
    /// Device memory the recorded kernels use as temporaries, released with the graph.
    _temporaries: Box<dyn Send + Sync>,
    context: u64,
    kernels: usize,
}

impl Graph {
    pub(crate) fn new(
        context: u64,
        kernels: usize,
        exec: Box<dyn GraphExec>,
        temporaries: Box<dyn Send + Sync>,
    ) -> Self {
        Graph {
            exec,
            _temporaries: temporaries,
            context,
            kernels,
        }
    }

    /// Id of the context that recorded it.
    pub fn context_id(&self) -> u64 {
        self.context
    }

    /// How many launches were recorded into it.
    pub fn kernels(&self) -> usize {
        self.kernels
    }

    pub(crate) fn exec(&self) -> &dyn GraphExec {
        self.exec.as_ref()
    }
}

impl std::fmt::Debug for Graph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Graph(context {}, {} kernels)",
            self.context, self.kernels
        )
    }
}
