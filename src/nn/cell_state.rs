//! The state of one recurrent cell (one layer, one direction) at one batch size, as views into
//! its workspace: where its forward pass reads the initial state (block 0 of the state
//! buffers) and leaves the final one (block `steps`), and where a backward pass that asks for
//! state gradients ([`super::layer::Flat::state_grads`]) takes the gradient for the final
//! state and leaves the gradient for the initial one.
//!
//! Block 0 is zero unless a caller writes it: every state-aware entry point (the public state
//! API, carried-state training) writes it before its passes and zeroes it again when done, so
//! the plain passes keep PyTorch's zero initial state without a fill of their own.

use crate::buffer::{Buffer, View};
use crate::error::Result;
use crate::ops::{Ops, zeros};

/// The state views of one cell, each `batch x hidden`. A cell's "final" state is the one after
/// its own last step: for the reverse direction of a bidirectional layer (which runs on the
/// time-reversed sequence) that is the state after original step 0, PyTorch's `h_n` for it.
#[derive(Clone, Copy)]
pub(crate) struct StateViews<'a> {
    /// The initial hidden state `h_0` the forward pass reads.
    pub h0: View<'a>,
    /// The final hidden state `h_n` the forward pass writes.
    pub h_n: View<'a>,
    /// The LSTM's initial cell state `c_0` (`None` for the other cells).
    pub c0: Option<View<'a>>,
    /// The LSTM's final cell state `c_n`.
    pub c_n: Option<View<'a>>,
}

/// The state-gradient views of one cell, each `batch x hidden`: the gradients for the final
/// state that a state-aware backward pass reads, and those for the initial state it writes.
#[derive(Clone, Copy)]
pub(crate) struct StateGradViews<'a> {
    /// Read: the gradient reaching `h_n` from outside the layer (added to what the next layer
    /// sends to the last step).
    pub dh_n: View<'a>,
    /// Written: the gradient for `h_0`.
    pub dh0: View<'a>,
    /// Read: the gradient reaching `c_n` (LSTM).
    pub dc_n: Option<View<'a>>,
    /// Written: the gradient for `c_0` (LSTM).
    pub dc0: Option<View<'a>>,
}

/// The buffers behind [`StateGradViews`], zero when made (a zero gradient for the final state
/// until a caller writes one).
pub(crate) struct StateGradBufs {
    dh_n: Buffer,
    dh0: Buffer,
    dc_n: Option<Buffer>,
    dc0: Option<Buffer>,
}

impl StateGradBufs {
    /// `block` is `batch * hidden`; `cell_state` for the LSTM.
    pub fn new(ops: &dyn Ops, block: usize, cell_state: bool) -> Result<Self> {
        let cell = |_| zeros(ops, block);
        Ok(StateGradBufs {
            dh_n: zeros(ops, block)?,
            dh0: zeros(ops, block)?,
            dc_n: cell_state.then_some(()).map(cell).transpose()?,
            dc0: cell_state.then_some(()).map(cell).transpose()?,
        })
    }

    pub fn views(&self) -> StateGradViews<'_> {
        StateGradViews {
            dh_n: self.dh_n.view(),
            dh0: self.dh0.view(),
            dc_n: self.dc_n.as_ref().map(Buffer::view),
            dc0: self.dc0.as_ref().map(Buffer::view),
        }
    }
}

/// Block 0 and block `steps` of a `(steps + 1) * block` state buffer.
pub(crate) fn first_and_last(states: &Buffer, steps: usize, block: usize) -> Result<[View<'_>; 2]> {
    Ok([states.slice(0, block)?, states.slice(steps * block, block)?])
}
