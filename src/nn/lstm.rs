//! `Lstm`: PyTorch's LSTM (one direction, one layer, zero initial state), gates stacked i, f,
//! g, o in `weight_ih_l0 [4H, I]`, `weight_hh_l0 [4H, H]`, `bias_ih_l0 [4H]`, `bias_hh_l0 [4H]`:
//!
//! ```text
//! [i f g o] = x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh    (then σ, σ, tanh, σ)
//! c_t = f * c_{t-1} + i * g,    h_t = o * tanh(c_t)
//! ```
//!
//! Rows are time-major, so the input projection for all steps is one GEMM; the recurrence (the
//! biases, the recurrent product and the cell of every step) is one whole-sequence op each way
//! (one persistent kernel on CUDA, one fused kernel per step elsewhere), and the weight
//! gradients of all steps are single GEMMs over the stored gate gradients.

use crate::buffer::{Buffer, View};
use crate::error::Result;
use crate::ops::{Gemm, Ops};
use crate::ops::{LstmSequenceBackward, LstmSequenceForward, SeqCall};

use super::cell_state::{StateGradBufs, StateGradViews, StateViews, first_and_last};
use super::layer::{Flat, LayerInput};
use super::params::ParamLayout;
use super::recurrent::{GateGrads, GateParams, HiddenSeq, RnnOutput, seq_shape};
use super::size;
use super::varlen_cell::CellSeq;

/// An LSTM layer.
#[derive(Debug, Clone)]
pub(crate) struct Lstm {
    pub inputs: usize,
    pub hidden: usize,
    pub steps: usize,
    pub output: RnnOutput,
    p: GateParams,
}

/// Per-batch-size buffers of one LSTM layer.
pub(crate) struct LstmWs {
    seq: HiddenSeq,
    /// `(steps + 1)` blocks of `batch x hidden`; block 0 is the zero initial cell state.
    cs: Buffer,
    /// `steps * batch x 4H`: `x W_ih^T`, then (after the forward op) the activated gates that
    /// the backward op reads.
    gates: Buffer,
    /// Gradient w.r.t. the gate pre-activations of every step, so the weight and bias
    /// gradients of all steps are single GEMMs / reductions.
    dgates: Buffer,
    state_grads: StateGradBufs,
}

impl Lstm {
    pub fn new(
        layout: &mut ParamLayout,
        name: &str,
        inputs: usize,
        hidden: usize,
        steps: usize,
        output: RnnOutput,
    ) -> Self {
        Lstm {
            inputs,
            hidden,
            steps,
            output,
            p: GateParams::new(layout, name, inputs, hidden, 4),
        }
    }

    pub fn workspace(&self, ops: &dyn Ops, batch: usize) -> Result<LstmWs> {
        let seq = HiddenSeq::new(ops, batch, self.hidden, self.steps)?;
        let block = seq.block();
        // `HiddenSeq::new` checked `(steps + 1) * block`; only the gate buffers are larger.
        let cs = ops.alloc((self.steps + 1) * block)?;
        ops.fill(cs.view(), 0.0)?;
        let g = size::mul(self.steps * block, 4, "LSTM gate buffer")?;
        Ok(LstmWs {
            seq,
            cs,
            gates: ops.alloc(g)?,
            dgates: ops.alloc(g)?,
            state_grads: StateGradBufs::new(ops, block, true)?,
        })
    }

    /// Where the forward pass reads the initial state and leaves the final one.
    pub fn state_views<'a>(&self, ws: &'a LstmWs) -> Result<StateViews<'a>> {
        let [h0, h_n] = ws.seq.ends()?;
        let [c0, c_n] = first_and_last(&ws.cs, self.steps, ws.seq.block())?;
        Ok(StateViews {
            h0,
            h_n,
            c0: Some(c0),
            c_n: Some(c_n),
        })
    }

    /// The gradients for the final state (read) and the initial state (written) of a backward
    /// pass with [`Flat::state_grads`].
    pub fn state_grad_views<'a>(&self, ws: &'a LstmWs) -> StateGradViews<'a> {
        ws.state_grads.views()
    }

    pub fn output<'a>(&self, ws: &'a LstmWs) -> Result<View<'a>> {
        ws.seq.output(self.output)
    }

    pub fn grad_output<'a>(&self, ws: &'a LstmWs) -> Result<View<'a>> {
        ws.seq.grad_output(self.output)
    }

    /// Every output state and its gradient, for padded sequences.
    pub fn cell_seq<'a>(&self, ws: &'a LstmWs) -> Result<CellSeq<'a>> {
        Ok(CellSeq {
            states: ws.seq.output(RnnOutput::Sequence)?,
            grads: ws.seq.grads(),
            hidden: self.hidden,
            output: self.output,
        })
    }

    /// `x` is time-major, `steps * batch x inputs`.
    pub fn forward(&self, f: &Flat<'_>, ws: &LstmWs, x: View<'_>) -> Result<()> {
        self.forward_low(f, ws, x, None).map(|_| ())
    }

    /// The forward pass up to its sequence op: runs the input projection and returns the op,
    /// for the caller to run (alone, or paired with the other direction's).
    pub fn forward_call<'a>(
        &self,
        f: &Flat<'a>,
        ws: &'a LstmWs,
        x: View<'_>,
    ) -> Result<SeqCall<'a>> {
        self.forward_args(f, ws, x).map(SeqCall::LstmForward)
    }

    /// The input projection, then the sequence op's arguments.
    fn forward_args<'a>(
        &self,
        f: &Flat<'a>,
        ws: &'a LstmWs,
        x: View<'_>,
    ) -> Result<LstmSequenceForward<'a>> {
        let (b, h, t_n) = (ws.seq.batch, self.hidden, self.steps);
        let gates = ws.gates.view();
        self.p.project_inputs(f, x, gates, t_n * b)?;
        // Block 0 of the states is the zero initial state; the op writes blocks 1..=steps.
        Ok(LstmSequenceForward {
            gates,
            hs: ws.seq.states(),
            cs: ws.cs.view(),
            weights: self.p.recurrent(f)?,
            shape: seq_shape(f, t_n, b, h),
        })
    }

    /// [`Lstm::forward`] that also leaves the output sequence rounded to T in `low` where the
    /// ops can in the same pass ([`crate::ops::GatedSequenceOps::lstm_sequence_forward_low`]):
    /// true then, false where `low` was not written.
    pub fn forward_low(
        &self,
        f: &Flat<'_>,
        ws: &LstmWs,
        x: View<'_>,
        low: Option<View<'_>>,
    ) -> Result<bool> {
        let a = self.forward_args(f, ws, x)?;
        match low {
            Some(low)
                if self.output == RnnOutput::Sequence
                    && f.ops.lstm_sequence_forward_low(a, low)? =>
            {
                Ok(true)
            }
            _ => f.ops.lstm_sequence_forward(a).map(|()| false),
        }
    }

    /// Backpropagation through time from the gradient the next layer left in the hidden-state
    /// gradients, up to its sequence op (the final-state gradients taken in, where the pass has
    /// state gradients; the parameter gradients are overwritten by [`Lstm::backward_rest`]): the
    /// op, for the caller to run, and the state gradients for the rest.
    pub fn backward_call<'a>(
        &self,
        f: &Flat<'a>,
        ws: &'a LstmWs,
    ) -> Result<(SeqCall<'a>, Option<StateGradViews<'a>>)> {
        let (b, h, t_n) = (ws.seq.batch, self.hidden, self.steps);
        let state = f.state_grads.then(|| ws.state_grads.views());
        let dc_state = match &state {
            Some(s) => Some(s.take_final(f, ws.seq.grad_last()?)?),
            None => None,
        };
        let call = SeqCall::LstmBackward(LstmSequenceBackward {
            dh: ws.seq.grads(),
            gates: ws.gates.view(),
            cs: ws.cs.view(),
            w_hh: self.p.w_hh.view(f.params)?,
            dgates: ws.dgates.view(),
            dc_state,
            shape: seq_shape(f, t_n, b, h),
        });
        Ok((call, state))
    }

    /// The backward pass after its sequence op: the initial-state gradient, the parameter
    /// gradients (overwritten) and `dx`, where given.
    pub fn backward_rest(
        &self,
        f: &Flat<'_>,
        ws: &LstmWs,
        input: LayerInput<'_>,
        state: Option<StateGradViews<'_>>,
    ) -> Result<()> {
        let LayerInput { x, dx } = input;
        let (b, h, t_n) = (ws.seq.batch, self.hidden, self.steps);
        let w_hh = self.p.w_hh.view(f.params)?;
        let dgates = ws.dgates.view();
        if let Some(s) = state {
            // dh_0 = dgates_0 W_hh: all of it comes through the first step's gates.
            let g = Gemm::new(b, h, 4 * h);
            f.ops.gemm(g, dgates.slice(0, 4 * b * h)?, w_hh, s.dh0)?;
        }
        // Both biases enter the same sum, so they get the same gradient.
        let d = GateGrads {
            input_side: dgates,
            hidden_side: dgates,
        };
        let prev = ws.seq.prev_states()?;
        self.p.backward_weights(f, &d, x, prev, dx, t_n * b)?;
        Ok(())
    }
}
