//! `Gru`: PyTorch's GRU (one direction, one layer, zero initial state), gates stacked r, z, n
//! in `weight_ih_l0 [3H, I]`, `weight_hh_l0 [3H, H]`, `bias_ih_l0 [3H]`, `bias_hh_l0 [3H]`:
//!
//! ```text
//! gx = x_t W_ih^T + b_ih,   gh = h_{t-1} W_hh^T + b_hh
//! r = σ(gx_r + gh_r),  z = σ(gx_z + gh_z),  n = tanh(gx_n + r * gh_n)
//! h_t = (1 - z) * n + z * h_{t-1}
//! ```
//!
//! The two projections stay apart because `r` multiplies only the recurrent part of `n`. Rows
//! are time-major: the input projection of all steps is one GEMM, the recurrence (biases,
//! recurrent product and cell of every step) one whole-sequence op each way, and the weight
//! gradients of all steps are single GEMMs.

use crate::buffer::{Buffer, View};
use crate::error::Result;
use crate::ops::GruGateGrads;
use crate::ops::{Gemm, Ops};
use crate::ops::{GruSequenceBackward, GruSequenceForward, SeqCall};

use super::cell_state::{StateGradBufs, StateGradViews, StateViews};
use super::layer::{Flat, LayerInput};
use super::params::ParamLayout;
use super::recurrent::{GateGrads, GateParams, HiddenSeq, RnnOutput, seq_shape};
use super::size;
use super::varlen_cell::CellSeq;

/// A GRU layer.
#[derive(Debug, Clone)]
pub(crate) struct Gru {
    pub inputs: usize,
    pub hidden: usize,
    pub steps: usize,
    pub output: RnnOutput,
    p: GateParams,
}

/// Per-batch-size buffers of one GRU layer.
pub(crate) struct GruWs {
    seq: HiddenSeq,
    /// `steps * batch x 3H`: `x W_ih^T` in the forward pass. The backward op reads only
    /// `cache`, so the backward pass reuses this buffer for the gradient w.r.t. `gx`.
    gx: Buffer,
    /// `steps * batch x 3H`: the gradient w.r.t. `gh = h W_hh^T + b_hh` of every step.
    dgh: Buffer,
    /// `steps * batch x 4H`: `[r, z, n, gh_n]` of every step, written by the forward op.
    cache: Buffer,
    state_grads: StateGradBufs,
}

impl Gru {
    pub fn new(
        layout: &mut ParamLayout,
        name: &str,
        inputs: usize,
        hidden: usize,
        steps: usize,
        output: RnnOutput,
    ) -> Self {
        Gru {
            inputs,
            hidden,
            steps,
            output,
            p: GateParams::new(layout, name, inputs, hidden, 3),
        }
    }

    pub fn workspace(&self, ops: &dyn Ops, batch: usize) -> Result<GruWs> {
        let seq = HiddenSeq::new(ops, batch, self.hidden, self.steps)?;
        let block = seq.block();
        // `HiddenSeq::new` checked `steps * block`; only the gate buffers are larger.
        let n = self.steps * block;
        let cache = size::mul(n, 4, "GRU gate cache")?;
        Ok(GruWs {
            seq,
            gx: ops.alloc(3 * n)?,
            dgh: ops.alloc(3 * n)?,
            cache: ops.alloc(cache)?,
            state_grads: StateGradBufs::new(ops, block, false)?,
        })
    }

    /// Where the forward pass reads the initial state and leaves the final one.
    pub fn state_views<'a>(&self, ws: &'a GruWs) -> Result<StateViews<'a>> {
        let [h0, h_n] = ws.seq.ends()?;
        Ok(StateViews {
            h0,
            h_n,
            c0: None,
            c_n: None,
        })
    }

    /// The gradients for the final state (read) and the initial state (written) of a backward
    /// pass with [`Flat::state_grads`].
    pub fn state_grad_views<'a>(&self, ws: &'a GruWs) -> StateGradViews<'a> {
        ws.state_grads.views()
    }

    pub fn output<'a>(&self, ws: &'a GruWs) -> Result<View<'a>> {
        ws.seq.output(self.output)
    }

    pub fn grad_output<'a>(&self, ws: &'a GruWs) -> Result<View<'a>> {
        ws.seq.grad_output(self.output)
    }

    /// Every output state and its gradient, for padded sequences.
    pub fn cell_seq<'a>(&self, ws: &'a GruWs) -> Result<CellSeq<'a>> {
        Ok(CellSeq {
            states: ws.seq.output(RnnOutput::Sequence)?,
            grads: ws.seq.grads(),
            hidden: self.hidden,
            output: self.output,
        })
    }

    /// `x` is time-major, `steps * batch x inputs`.
    pub fn forward(&self, f: &Flat<'_>, ws: &GruWs, x: View<'_>) -> Result<()> {
        self.forward_low(f, ws, x, None).map(|_| ())
    }

    /// The forward pass up to its sequence op: runs the input projection and returns the op,
    /// for the caller to run (alone, or paired with the other direction's).
    pub fn forward_call<'a>(
        &self,
        f: &Flat<'a>,
        ws: &'a GruWs,
        x: View<'_>,
    ) -> Result<SeqCall<'a>> {
        self.forward_args(f, ws, x).map(SeqCall::GruForward)
    }

    /// The input projection, then the sequence op's arguments.
    fn forward_args<'a>(
        &self,
        f: &Flat<'a>,
        ws: &'a GruWs,
        x: View<'_>,
    ) -> Result<GruSequenceForward<'a>> {
        let (b, h, t_n) = (ws.seq.batch, self.hidden, self.steps);
        let gx = ws.gx.view();
        self.p.project_inputs(f, x, gx, t_n * b)?;
        // Block 0 of the states is the zero initial state; the op writes blocks 1..=steps.
        Ok(GruSequenceForward {
            gx,
            hs: ws.seq.states(),
            weights: self.p.recurrent(f)?,
            cache: ws.cache.view(),
            shape: seq_shape(f, t_n, b, h),
        })
    }

    /// [`Gru::forward`] that also leaves the output sequence rounded to T in `low` where the
    /// ops can in the same pass ([`crate::ops::GatedSequenceOps::gru_sequence_forward_low`]):
    /// true then, false where `low` was not written.
    pub fn forward_low(
        &self,
        f: &Flat<'_>,
        ws: &GruWs,
        x: View<'_>,
        low: Option<View<'_>>,
    ) -> Result<bool> {
        let a = self.forward_args(f, ws, x)?;
        match low {
            Some(low)
                if self.output == RnnOutput::Sequence
                    && f.ops.gru_sequence_forward_low(a, low)? =>
            {
                Ok(true)
            }
            _ => f.ops.gru_sequence_forward(a).map(|()| false),
        }
    }

    /// Backpropagation through time from the gradient the next layer left in the hidden-state
    /// gradients, up to its sequence op (the final-state gradient added, where the pass has state
    /// gradients; the parameter gradients are overwritten by [`Gru::backward_rest`]): the op, for
    /// the caller to run, and the state gradients for the rest.
    pub fn backward_call<'a>(
        &self,
        f: &Flat<'a>,
        ws: &'a GruWs,
    ) -> Result<(SeqCall<'a>, Option<StateGradViews<'a>>)> {
        let (b, h, t_n) = (ws.seq.batch, self.hidden, self.steps);
        let state = f.state_grads.then(|| ws.state_grads.views());
        if let Some(s) = &state {
            s.take_final(f, ws.seq.grad_last()?)?;
        }
        let call = SeqCall::GruBackward(GruSequenceBackward {
            dh: ws.seq.grads(),
            hs: ws.seq.states(),
            cache: ws.cache.view(),
            w_hh: self.p.w_hh.view(f.params)?,
            grads: GruGateGrads::new(ws.gx.view(), ws.dgh.view()),
            dh_state: state.as_ref().map(|s| s.dh0),
            shape: seq_shape(f, t_n, b, h),
        });
        Ok((call, state))
    }

    /// The backward pass after its sequence op: the initial-state gradient, the parameter
    /// gradients (overwritten) and `dx`, where given.
    pub fn backward_rest(
        &self,
        f: &Flat<'_>,
        ws: &GruWs,
        input: LayerInput<'_>,
        state: Option<StateGradViews<'_>>,
    ) -> Result<()> {
        let LayerInput { x, dx } = input;
        let (b, h, t_n) = (ws.seq.batch, self.hidden, self.steps);
        let w_hh = self.p.w_hh.view(f.params)?;
        if let Some(s) = state {
            // dh_0 = z_0 dh_0 (the op's part) + dgh_0 W_hh.
            let g = Gemm::new(b, h, 3 * h).scaled(1.0, 1.0);
            f.ops.gemm(g, ws.dgh.slice(0, 3 * b * h)?, w_hh, s.dh0)?;
        }
        let d = GateGrads {
            input_side: ws.gx.view(),
            hidden_side: ws.dgh.view(),
        };
        let prev = ws.seq.prev_states()?;
        self.p.backward_weights(f, &d, x, prev, dx, t_n * b)?;
        Ok(())
    }
}
