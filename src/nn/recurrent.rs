//! Pieces the recurrent layers share: what they hand to the next layer, their four PyTorch-named
//! parameter tensors (`Lstm` and `Gru` stack their gates in them), and the time-major
//! hidden-state sequence of the gated layers with the gradient reaching each state.

use crate::buffer::{Buffer, View};
use crate::dtype::DType;
use crate::error::Result;
use crate::ops::{Gemm, Ops, RecurrentWeights, SeqShape, zeros};

use super::cell_state::first_and_last;
use super::layer::Flat;
use super::params::{ParamLayout, ParamRef};
use super::size;

/// What an RNN layer hands to the next layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RnnOutput {
    /// Every hidden state: `steps` rows per sample (a head then predicts at every step).
    Sequence,
    /// Only the last hidden state: one row per sample.
    Last,
}

/// The shape of a recurrent layer's sequence ops over `steps` steps of `batch x hidden`: in
/// Bf16/F16 precision (the parameters' low copy `f.weights` is T) their recurrent products may
/// take T operands ([`SeqShape::product_type`]), else f32.
pub(crate) fn seq_shape(f: &Flat<'_>, steps: usize, batch: usize, hidden: usize) -> SeqShape {
    let t = f.weights.dtype();
    SeqShape::new(steps, batch, hidden).with_product_type((t != DType::F32).then_some(t))
}

/// `weight_ih_l0 [G*H, I]`, `weight_hh_l0 [G*H, H]`, `bias_ih_l0 [G*H]`, `bias_hh_l0 [G*H]` for
/// a cell with `G` gates stacked in PyTorch's order, with the sizes they were made for.
#[derive(Debug, Clone)]
pub(crate) struct GateParams {
    pub w_ih: ParamRef,
    pub w_hh: ParamRef,
    pub b_ih: ParamRef,
    pub b_hh: ParamRef,
    /// `I`: input features.
    inputs: usize,
    /// `H`: hidden units.
    hidden: usize,
    /// `G`: gates.
    gates: usize,
}

impl GateParams {
    /// Registers the four tensors under `{name}.`, all initialized in `±1/sqrt(H)` as PyTorch
    /// does for every recurrent parameter.
    pub fn new(
        layout: &mut ParamLayout,
        name: &str,
        inputs: usize,
        hidden: usize,
        gates: usize,
    ) -> Self {
        let bound = 1.0 / (hidden as f32).sqrt();
        // Saturating: an absurd size then overflows the layout, which the builder reports
        // before allocating.
        let g = gates.saturating_mul(hidden);
        GateParams {
            w_ih: layout.add(format!("{name}.weight_ih_l0"), vec![g, inputs], bound),
            w_hh: layout.add(format!("{name}.weight_hh_l0"), vec![g, hidden], bound),
            b_ih: layout.add(format!("{name}.bias_ih_l0"), vec![g], bound),
            b_hh: layout.add(format!("{name}.bias_hh_l0"), vec![g], bound),
            inputs,
            hidden,
            gates,
        }
    }
}

impl GateParams {
    /// `x W_ih^T` for all `rows = steps * batch` rows of the time-major input into `out`
    /// (`rows x G*H`): the input side of every step in one GEMM, without a bias.
    pub fn project_inputs(
        &self,
        f: &Flat<'_>,
        x: View<'_>,
        out: View<'_>,
        rows: usize,
    ) -> Result<()> {
        let g = Gemm::new(rows, self.gates * self.hidden, self.inputs).tb();
        f.ops.gemm(g, x, self.w_ih.view(f.params)?, out)
    }

    /// `W_hh` and both biases, as the sequence ops take them.
    pub fn recurrent<'a>(&self, f: &Flat<'a>) -> Result<RecurrentWeights<'a>> {
        let (w_hh, b_ih) = (self.w_hh.view(f.params)?, self.b_ih.view(f.params)?);
        Ok(RecurrentWeights::new(w_hh, b_ih, self.b_hh.view(f.params)?))
    }
}

/// Gradients w.r.t. the gate pre-activations over all `rows = steps * batch` rows, each
/// `rows x gates*hidden`: the part that came through `x W_ih^T + b_ih`, and the part that came
/// through `h W_hh^T + b_hh` (the same view for the LSTM, where both enter one sum).
pub(crate) struct GateGrads<'a> {
    pub input_side: View<'a>,
    pub hidden_side: View<'a>,
}

impl GateParams {
    /// The weight and bias gradients from all time steps at once (one GEMM each, written over
    /// the old values), and, when asked, the gradient w.r.t. the input sequence `dx`; `rows`
    /// is `steps * batch`.
    pub fn backward_weights(
        &self,
        f: &Flat<'_>,
        d: &GateGrads<'_>,
        x: View<'_>,
        prev_states: View<'_>,
        dx: Option<View<'_>>,
        rows: usize,
    ) -> Result<()> {
        let (inputs, hidden) = (self.inputs, self.hidden);
        let g = self.gates * hidden;
        f.ops.gemm(
            Gemm::new(g, inputs, rows).ta(),
            d.input_side,
            x,
            self.w_ih.view(f.grads)?,
        )?;
        f.ops.gemm(
            Gemm::new(g, hidden, rows).ta(),
            d.hidden_side,
            prev_states,
            self.w_hh.view(f.grads)?,
        )?;
        let db_ih = self.b_ih.view(f.grads)?;
        f.ops
            .sum_rows(d.input_side, db_ih, crate::ops::MatShape::new(rows, g), 0.0)?;
        if d.hidden_side.same_as(&d.input_side) {
            f.ops.copy(db_ih, self.b_hh.view(f.grads)?)?;
        } else {
            f.ops.sum_rows(
                d.hidden_side,
                self.b_hh.view(f.grads)?,
                crate::ops::MatShape::new(rows, g),
                0.0,
            )?;
        }
        if let Some(dx) = dx {
            f.ops.gemm(
                Gemm::new(rows, inputs, g),
                d.input_side,
                self.w_ih.view(f.params)?,
                dx,
            )?;
        }
        Ok(())
    }
}

/// The hidden states of one batch over the whole sequence, time-major, and their gradients.
pub(crate) struct HiddenSeq {
    pub batch: usize,
    hidden: usize,
    steps: usize,
    /// `(steps + 1)` blocks of `batch x hidden`: block 0 is the zero initial state, block
    /// `t + 1` is `h_t`, so blocks `0..steps` are exactly the previous states that the
    /// recurrent weight gradient needs, in one contiguous range.
    hs: Buffer,
    /// `steps` blocks: the gradient reaching each `h_t` from the next layer, which writes all
    /// of it (`Sequence`) or the last block (`Last`). The sequence ops only read it (the
    /// recurrent part travels inside them), so with `Last` the other blocks stay the zeros they
    /// start as.
    dh: Buffer,
}

impl HiddenSeq {
    pub fn new(ops: &dyn Ops, batch: usize, hidden: usize, steps: usize) -> Result<Self> {
        let block = size::mul(batch, hidden, "recurrent batch x hidden")?;
        let states = size::mul(
            size::add(steps, 1, "sequence length")?,
            block,
            "hidden states",
        )?;
        let hs = ops.alloc(states)?;
        // Only block 0 must be zero (nothing writes it), but the rest is rewritten every
        // forward pass, so one fill of the whole buffer is the cheapest way there.
        ops.fill(hs.view(), 0.0)?;
        Ok(HiddenSeq {
            batch,
            hidden,
            steps,
            hs,
            dh: zeros(ops, steps * block)?,
        })
    }

    /// Elements of one step's `batch x hidden` block.
    pub fn block(&self) -> usize {
        self.batch * self.hidden
    }

    /// All `steps + 1` state blocks, the initial one first.
    pub fn states(&self) -> View<'_> {
        self.hs.view()
    }

    /// Every state entering a step, `steps * batch x hidden`.
    pub fn prev_states(&self) -> Result<View<'_>> {
        self.hs.slice(0, self.steps * self.block())
    }

    /// The gradients reaching every `h_t` from above, `steps * batch x hidden`.
    pub fn grads(&self) -> View<'_> {
        self.dh.view()
    }

    /// The initial state (block 0) and the final state (block `steps`).
    pub fn ends(&self) -> Result<[View<'_>; 2]> {
        first_and_last(&self.hs, self.steps, self.block())
    }

    pub fn output(&self, mode: RnnOutput) -> Result<View<'_>> {
        match mode {
            RnnOutput::Sequence => self.hs.slice(self.block(), self.steps * self.block()),
            RnnOutput::Last => self.hs.slice(self.steps * self.block(), self.block()),
        }
    }

    /// The gradient reaching the last state, `h_{steps-1}`.
    pub fn grad_last(&self) -> Result<View<'_>> {
        self.dh.slice((self.steps - 1) * self.block(), self.block())
    }

    pub fn grad_output(&self, mode: RnnOutput) -> Result<View<'_>> {
        match mode {
            RnnOutput::Sequence => Ok(self.dh.view()),
            RnnOutput::Last => self.dh.slice((self.steps - 1) * self.block(), self.block()),
        }
    }
}
