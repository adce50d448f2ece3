//! `Lstm`: PyTorch's LSTM (one direction, one layer, zero initial state), gates stacked i, f,
//! g, o in `weight_ih_l0 [4H, I]`, `weight_hh_l0 [4H, H]`, `bias_ih_l0 [4H]`, `bias_hh_l0 [4H]`:
//!
//! ```text
//! [i f g o] = x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh    (then σ, σ, tanh, σ)
//! c_t = f * c_{t-1} + i * g,    h_t = o * tanh(c_t)
//! ```
//!
//! Rows are time-major, so the input projection (and both biases) for all steps is one GEMM and
//! one bias pass; each step is one recurrent GEMM and one fused cell launch, and the weight
//! gradients of all steps are single GEMMs over the stored gate gradients.

use crate::buffer::{Buffer, View};
use crate::error::Result;
use crate::ops::{Activation, Gemm, Ops};

use super::layer::Flat;
use super::params::ParamLayout;
use super::recurrent::{GateGrads, GateParams, HiddenSeq};
use super::rnn::RnnOutput;
use super::size;

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
    /// `steps * batch x 4H`: pre-activations, then (after each cell step) the activated gates
    /// that the backward step reads.
    gates: Buffer,
    /// Gradient w.r.t. the gate pre-activations of every step, so the weight and bias
    /// gradients of all steps are single GEMMs / reductions.
    dgates: Buffer,
    /// The gradient reaching `c_t`, carried backwards one step at a time.
    dc: Buffer,
    /// `b_ih + b_hh`, so the biases cost one pass over the gates instead of two.
    bias: Buffer,
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
            dc: ops.alloc(block)?,
            bias: ops.alloc(4 * self.hidden)?,
        })
    }

    pub fn output<'a>(&self, ws: &'a LstmWs) -> Result<View<'a>> {
        ws.seq.output(self.output)
    }

    pub fn grad_output<'a>(&self, ws: &'a LstmWs) -> Result<View<'a>> {
        ws.seq.grad_output(self.output)
    }

    /// `x` is time-major, `steps * batch x inputs`.
    pub fn forward(&self, f: &Flat<'_>, ws: &LstmWs, x: View<'_>) -> Result<()> {
        let (b, h, t_n) = (ws.seq.batch, self.hidden, self.steps);
        let block = ws.seq.block();
        let rows = t_n * b;
        let gates = ws.gates.view();
        f.ops.gemm(
            Gemm::new(rows, 4 * h, self.inputs).tb(),
            x,
            self.p.w_ih.view(f.params)?,
            gates,
        )?;
        f.ops.add(
            self.p.b_ih.view(f.params)?,
            self.p.b_hh.view(f.params)?,
            ws.bias.view(),
        )?;
        f.ops.bias_act_forward(
            gates,
            ws.bias.view(),
            gates,
            Activation::Identity,
            rows,
            4 * h,
        )?;
        let w_hh = self.p.w_hh.view(f.params)?;
        for t in 0..t_n {
            let gates_t = ws.gates.slice(t * 4 * block, 4 * block)?;
            // h_0 is zero: the first step has no recurrent term.
            if t > 0 {
                f.ops.gemm(
                    Gemm::new(b, 4 * h, h).tb().scaled(1.0, 1.0),
                    ws.seq.h_prev(t)?,
                    w_hh,
                    gates_t,
                )?;
            }
            f.ops.lstm_cell_forward(
                gates_t,
                ws.cs.slice(t * block, block)?,
                ws.cs.slice((t + 1) * block, block)?,
                ws.seq.h(t)?,
                b,
                h,
            )?;
        }
        Ok(())
    }

    /// Backpropagation through time from the gradient the next layer left in the hidden-state
    /// gradients; overwrites this layer's parameter gradients.
    pub fn backward(
        &self,
        f: &Flat<'_>,
        ws: &LstmWs,
        x: View<'_>,
        dx: Option<View<'_>>,
    ) -> Result<()> {
        let (b, h, t_n) = (ws.seq.batch, self.hidden, self.steps);
        let block = ws.seq.block();
        ws.seq.clear_unfed_grads(f.ops, self.output)?;
        // Nothing flows into the last cell state from beyond the sequence.
        f.ops.fill(ws.dc.view(), 0.0)?;
        let w_hh = self.p.w_hh.view(f.params)?;
        for t in (0..t_n).rev() {
            let dgates_t = ws.dgates.slice(t * 4 * block, 4 * block)?;
            f.ops.lstm_cell_backward(
                ws.gates.slice(t * 4 * block, 4 * block)?,
                ws.cs.slice(t * block, block)?,
                ws.cs.slice((t + 1) * block, block)?,
                ws.seq.dh(t)?,
                ws.dc.view(),
                dgates_t,
                b,
                h,
            )?;
            if t > 0 {
                f.ops.gemm(
                    Gemm::new(b, h, 4 * h).scaled(1.0, 1.0),
                    dgates_t,
                    w_hh,
                    ws.seq.dh(t - 1)?,
                )?;
            }
        }
        let dgates = ws.dgates.view();
        // Both biases enter the same sum, so they get the same gradient.
        let d = GateGrads {
            input_side: dgates,
            hidden_side: dgates,
        };
        let prev = ws.seq.prev_states()?;
        self.p
            .backward_weights(f, &d, x, prev, dx, t_n * b, self.inputs, h, 4)?;
        Ok(())
    }
}
