//! Elman `Rnn`: `h_t = act(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh)`, PyTorch names and
//! layout. Rows are time-major (row `t * batch + b`), so each step is one contiguous slice and
//! the input projection for all steps is a single GEMM; backpropagation runs through the whole
//! sequence, and the weight gradients of all steps are again single GEMMs.

use crate::buffer::{Buffer, View};
use crate::error::Result;
use crate::ops::RecurrentWeights;
use crate::ops::{Activation, Gemm, Ops, zeros};
use crate::ops::{RnnSequenceBackward, RnnSequenceForward, SeqCall};

use super::cell_state::{StateGradBufs, StateGradViews, StateViews, first_and_last};
use super::layer::{Flat, LayerInput};
use super::params::{ParamLayout, ParamRef};
use super::recurrent::{GateParams, RnnOutput, seq_shape};
use super::size;
use super::varlen_cell::CellSeq;

/// An Elman recurrent layer (one direction, one layer, zero initial state).
#[derive(Debug, Clone)]
pub(crate) struct Rnn {
    pub inputs: usize,
    pub hidden: usize,
    pub steps: usize,
    pub act: Activation,
    pub output: RnnOutput,
    w_ih: ParamRef,
    w_hh: ParamRef,
    b_ih: ParamRef,
    b_hh: ParamRef,
}

/// Per-batch-size buffers of one RNN layer.
pub(crate) struct RnnWs {
    batch: usize,
    /// `(steps + 1) x batch x hidden`: block 0 is the zero initial state, block `t + 1` is
    /// `h_t`, so blocks `0..steps` are exactly the previous states the `W_hh` gradient needs.
    hs: Buffer,
    pre: Buffer,
    dpre: Buffer,
    /// Gradient reaching each `h_t` from the next layer, which writes all of it (`Sequence`)
    /// or the last block (`Last`). The steps only read it (the recurrent part travels through
    /// `dpre`), so with `Last` the other blocks stay the zeros they start as.
    dh: Buffer,
    state_grads: StateGradBufs,
}

impl RnnWs {
    fn block(&self, hidden: usize) -> usize {
        self.batch * hidden
    }
}

impl Rnn {
    /// Registers `{name}.weight_ih_l0 [H, I]`, `weight_hh_l0 [H, H]`, `bias_ih_l0`,
    /// `bias_hh_l0`, all initialized in `±1/sqrt(H)` as PyTorch does.
    pub fn new(
        layout: &mut ParamLayout,
        name: &str,
        inputs: usize,
        hidden: usize,
        steps: usize,
        act: Activation,
        output: RnnOutput,
    ) -> Self {
        // The gated cells' four tensors with one gate are exactly the Elman cell's.
        let GateParams {
            w_ih,
            w_hh,
            b_ih,
            b_hh,
            ..
        } = GateParams::new(layout, name, inputs, hidden, 1);
        Rnn {
            inputs,
            hidden,
            steps,
            act,
            output,
            w_ih,
            w_hh,
            b_ih,
            b_hh,
        }
    }

    pub fn workspace(&self, ops: &dyn Ops, batch: usize) -> Result<RnnWs> {
        let block = size::mul(batch, self.hidden, "RNN batch x hidden")?;
        let seq = size::mul(self.steps, block, "RNN steps x batch x hidden")?;
        let hs = ops.alloc(size::add(seq, block, "RNN state buffer")?)?;
        ops.fill(hs.view(), 0.0)?;
        Ok(RnnWs {
            batch,
            hs,
            pre: ops.alloc(seq)?,
            dpre: ops.alloc(seq)?,
            dh: zeros(ops, seq)?,
            state_grads: StateGradBufs::new(ops, block, false)?,
        })
    }

    /// Where the forward pass reads the initial state and leaves the final one.
    pub fn state_views<'a>(&self, ws: &'a RnnWs) -> Result<StateViews<'a>> {
        let [h0, h_n] = first_and_last(&ws.hs, self.steps, ws.block(self.hidden))?;
        Ok(StateViews {
            h0,
            h_n,
            c0: None,
            c_n: None,
        })
    }

    /// The gradients for the final state (read) and the initial state (written) of a backward
    /// pass with [`Flat::state_grads`].
    pub fn state_grad_views<'a>(&self, ws: &'a RnnWs) -> StateGradViews<'a> {
        ws.state_grads.views()
    }

    pub fn output<'a>(&self, ws: &'a RnnWs) -> Result<View<'a>> {
        let block = ws.block(self.hidden);
        match self.output {
            RnnOutput::Sequence => ws.hs.slice(block, self.steps * block),
            RnnOutput::Last => ws.hs.slice(self.steps * block, block),
        }
    }

    /// Every output state and its gradient, for padded sequences.
    pub fn cell_seq<'a>(&self, ws: &'a RnnWs) -> Result<CellSeq<'a>> {
        let block = ws.block(self.hidden);
        Ok(CellSeq {
            states: ws.hs.slice(block, self.steps * block)?,
            grads: ws.dh.view(),
            hidden: self.hidden,
            output: self.output,
        })
    }

    pub fn grad_output<'a>(&self, ws: &'a RnnWs) -> Result<View<'a>> {
        let block = ws.block(self.hidden);
        match self.output {
            RnnOutput::Sequence => Ok(ws.dh.view()),
            RnnOutput::Last => ws.dh.slice((self.steps - 1) * block, block),
        }
    }

    /// `x` is time-major, `steps * batch x inputs`.
    pub fn forward(&self, f: &Flat<'_>, ws: &RnnWs, x: View<'_>) -> Result<()> {
        self.forward_call(f, ws, x)?.run(f.ops)
    }

    /// The forward pass up to its sequence op: runs the input projection and returns the op,
    /// for the caller to run (alone, or paired with the other direction's).
    pub fn forward_call<'a>(
        &self,
        f: &Flat<'a>,
        ws: &'a RnnWs,
        x: View<'_>,
    ) -> Result<SeqCall<'a>> {
        let (b, h, t_n) = (ws.batch, self.hidden, self.steps);
        let w_hh = self.w_hh.view(f.params)?;
        let b_ih = self.b_ih.view(f.params)?;
        let b_hh = self.b_hh.view(f.params)?;
        f.ops.gemm(
            Gemm::new(t_n * b, h, self.inputs).tb(),
            x,
            self.w_ih.view(f.params)?,
            ws.pre.view(),
        )?;
        // Block 0 of `hs` is the zero initial state; the op writes blocks 1..=steps.
        Ok(SeqCall::RnnForward(RnnSequenceForward {
            pre: ws.pre.view(),
            hs: ws.hs.view(),
            weights: RecurrentWeights::new(w_hh, b_ih, b_hh),
            act: self.act,
            shape: seq_shape(f, t_n, b, h),
        }))
    }

    /// Backpropagation through time from the gradient the next layer left in `dh`, up to its
    /// sequence op (the final-state gradient added, where the pass has state gradients; the
    /// parameter gradients are overwritten by [`Rnn::backward_rest`]): the op, for the caller to
    /// run, and the state gradients for the rest.
    pub fn backward_call<'a>(
        &self,
        f: &Flat<'a>,
        ws: &'a RnnWs,
    ) -> Result<(SeqCall<'a>, Option<StateGradViews<'a>>)> {
        let (b, h, t_n) = (ws.batch, self.hidden, self.steps);
        let block = ws.block(h);
        let state = f.state_grads.then(|| ws.state_grads.views());
        if let Some(s) = &state {
            s.take_final(f, ws.dh.slice((t_n - 1) * block, block)?)?;
        }
        let call = SeqCall::RnnBackward(RnnSequenceBackward {
            dh: ws.dh.view(),
            hs: ws.hs.view(),
            w_hh: self.w_hh.view(f.params)?,
            dpre: ws.dpre.view(),
            act: self.act,
            shape: seq_shape(f, t_n, b, h),
        });
        Ok((call, state))
    }

    /// The backward pass after its sequence op: the initial-state gradient, the parameter
    /// gradients (overwritten) and `dx`, where given.
    pub fn backward_rest(
        &self,
        f: &Flat<'_>,
        ws: &RnnWs,
        input: LayerInput<'_>,
        state: Option<StateGradViews<'_>>,
    ) -> Result<()> {
        let LayerInput { x, dx } = input;
        let (b, h, t_n) = (ws.batch, self.hidden, self.steps);
        let w_hh = self.w_hh.view(f.params)?;
        let block = ws.block(h);
        let rows = t_n * b;
        let dpre = ws.dpre.view();
        if let Some(s) = state {
            // dh_0 = dpre_0 W_hh.
            f.ops
                .gemm(Gemm::new(b, h, h), dpre.slice(0, block)?, w_hh, s.dh0)?;
        }
        f.ops.gemm(
            Gemm::new(h, self.inputs, rows).ta(),
            dpre,
            x,
            self.w_ih.view(f.grads)?,
        )?;
        f.ops.gemm(
            Gemm::new(h, h, rows).ta(),
            dpre,
            ws.hs.slice(0, rows * h)?,
            self.w_hh.view(f.grads)?,
        )?;
        let db_ih = self.b_ih.view(f.grads)?;
        f.ops
            .sum_rows(dpre, db_ih, crate::ops::MatShape::new(rows, h), 0.0)?;
        f.ops.copy(db_ih, self.b_hh.view(f.grads)?)?;
        if let Some(dx) = dx {
            f.ops.gemm(
                Gemm::new(rows, self.inputs, h),
                dpre,
                self.w_ih.view(f.params)?,
                dx,
            )?;
        }
        Ok(())
    }
}
