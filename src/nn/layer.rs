//! The layer set as one enum: the network walks a list of layers without boxing, and each layer
//! kind keeps its own file.

use crate::buffer::{Buffer, View};
use crate::dtype::DType;
use crate::error::Result;
use crate::ops::{Activation, Ops, SeqCall};

use super::cast_boundary::CastWs;
use super::cell_state::{StateGradViews, StateViews};
use super::dense::{Dense, DenseWs};
use super::dropout::{Dropout, DropoutWs};
use super::embedding::{Embedding, EmbeddingWs};
use super::gru::{Gru, GruWs};
use super::layer_norm::{LayerNorm, LayerNormWs};
use super::lstm::{Lstm, LstmWs};
use super::padding::LengthViews;
use super::recurrent::RnnOutput;
use super::rnn::{Rnn, RnnWs};
use super::stack::{RecurrentCell, Stack, StackWs};
use super::varlen_cell::{self, CellSeq};

/// A layer's input rows and, unless it is the first layer (whose input needs no gradient), the
/// buffer its backward pass writes the gradient with respect to them into.
#[derive(Clone, Copy)]
pub(crate) struct LayerInput<'a> {
    pub x: View<'a>,
    pub dx: Option<View<'a>>,
}

/// What every layer needs besides its workspace: the ops and the two flat buffers.
pub(crate) struct Flat<'a> {
    pub ops: &'a dyn Ops,
    pub params: &'a Buffer,
    /// The parameters dense layers read in the forward and input-gradient products: the
    /// bf16/f16 low copy in mixed precision, else `params` itself.
    pub weights: &'a Buffer,
    pub grads: &'a Buffer,
    /// The device-side random state ([`crate::ops::RNG_STATE_LEN`]) while training; `None`
    /// in evaluation and prediction, where dropout is the identity.
    pub rng: Option<View<'a>>,
    /// A backward pass that also adds each recurrent cell's final-state gradient and writes the
    /// gradient for its initial state ([`super::cell_state::StateGradViews`]); false keeps the
    /// plain pass and its cost.
    pub state_grads: bool,
    /// The batch's lengths, when its sequences are padded: recurrent layers then zero their
    /// outputs past each length and mask the gradients coming back.
    pub lengths: Option<LengthViews<'a>>,
}

#[derive(Debug, Clone)]
pub(crate) enum Layer {
    Dense(Dense),
    Rnn(Rnn),
    Lstm(Lstm),
    Gru(Gru),
    Stack(Stack),
    Dropout(Dropout),
    LayerNorm(LayerNorm),
    Embedding(Embedding),
}

pub(crate) enum LayerWs {
    Dense(DenseWs),
    Rnn(RnnWs),
    Lstm(LstmWs),
    Gru(GruWs),
    Stack(StackWs),
    Dropout(DropoutWs),
    LayerNorm(LayerNormWs),
    Embedding(EmbeddingWs),
    /// An f32-only layer inside a bf16/f16 network ([`CastWs`]).
    Cast(Box<CastWs>),
}

/// A read-only description of one layer, for summaries and tooling.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum LayerDesc {
    /// A dense layer.
    Dense {
        /// Input features.
        inputs: usize,
        /// Output features.
        outputs: usize,
        /// Its activation.
        activation: Activation,
    },
    /// An Elman RNN layer.
    Rnn {
        /// Input features per step.
        inputs: usize,
        /// Hidden size.
        hidden: usize,
        /// Sequence length.
        steps: usize,
        /// `Tanh` or `Relu`.
        activation: Activation,
        /// Full sequence or last state.
        output: RnnOutput,
    },
    /// An LSTM layer (PyTorch gate order i, f, g, o).
    Lstm {
        /// Input features per step.
        inputs: usize,
        /// Hidden size.
        hidden: usize,
        /// Sequence length.
        steps: usize,
        /// Full sequence or last state.
        output: RnnOutput,
    },
    /// A GRU layer (PyTorch gate order r, z, n).
    Gru {
        /// Input features per step.
        inputs: usize,
        /// Hidden size.
        hidden: usize,
        /// Sequence length.
        steps: usize,
        /// Full sequence or last state.
        output: RnnOutput,
    },
    /// A stacked and/or bidirectional RNN, LSTM or GRU (PyTorch's `num_layers`,
    /// `bidirectional`, `dropout`); outputs `hidden * directions` features per row.
    Recurrent {
        /// The cell of every layer and direction.
        cell: RecurrentCell,
        /// Input features per step.
        inputs: usize,
        /// Hidden size of each direction.
        hidden: usize,
        /// Sequence length.
        steps: usize,
        /// Full sequence or last state (`h_n` of the top layer, both directions).
        output: RnnOutput,
        /// Stacked layers.
        num_layers: usize,
        /// Two directions.
        bidirectional: bool,
        /// Inter-layer dropout probability (training only).
        dropout: f32,
    },
    /// Inverted dropout (training only).
    Dropout {
        /// Features per row (unchanged by the layer).
        features: usize,
        /// Drop probability.
        p: f32,
    },
    /// Layer normalization over each row's features.
    LayerNorm {
        /// Features per row.
        features: usize,
        /// Added to the variance.
        eps: f32,
    },
    /// A token-id lookup table (first layer only).
    Embedding {
        /// Rows of the table (valid ids are `0..num_embeddings`).
        num_embeddings: usize,
        /// Values per id.
        dim: usize,
    },
}

impl Layer {
    pub fn inputs(&self) -> usize {
        match self {
            Layer::Dense(d) => d.inputs,
            Layer::Rnn(r) => r.inputs,
            Layer::Lstm(l) => l.inputs,
            Layer::Gru(g) => g.inputs,
            Layer::Stack(s) => s.inputs,
            Layer::Dropout(d) => d.features,
            Layer::LayerNorm(n) => n.features,
            Layer::Embedding(_) => 1,
        }
    }

    pub fn outputs(&self) -> usize {
        match self {
            Layer::Dense(d) => d.outputs,
            Layer::Rnn(r) => r.hidden,
            Layer::Lstm(l) => l.hidden,
            Layer::Gru(g) => g.hidden,
            Layer::Stack(s) => s.outputs(),
            Layer::Dropout(d) => d.features,
            Layer::LayerNorm(n) => n.features,
            Layer::Embedding(e) => e.dim,
        }
    }

    /// True for layers that draw random masks while training.
    pub fn uses_rng(&self) -> bool {
        match self {
            Layer::Dropout(d) => d.p > 0.0,
            Layer::Stack(s) => s.uses_rng(),
            _ => false,
        }
    }

    pub fn desc(&self) -> LayerDesc {
        match self {
            Layer::Dense(d) => LayerDesc::Dense {
                inputs: d.inputs,
                outputs: d.outputs,
                activation: d.act,
            },
            Layer::Rnn(r) => LayerDesc::Rnn {
                inputs: r.inputs,
                hidden: r.hidden,
                steps: r.steps,
                activation: r.act,
                output: r.output,
            },
            Layer::Lstm(l) => LayerDesc::Lstm {
                inputs: l.inputs,
                hidden: l.hidden,
                steps: l.steps,
                output: l.output,
            },
            Layer::Gru(g) => LayerDesc::Gru {
                inputs: g.inputs,
                hidden: g.hidden,
                steps: g.steps,
                output: g.output,
            },
            Layer::Stack(s) => LayerDesc::Recurrent {
                cell: s.cell,
                inputs: s.inputs,
                hidden: s.hidden,
                steps: s.steps,
                output: s.output,
                num_layers: s.opts.num_layers,
                bidirectional: s.opts.bidirectional,
                dropout: s.opts.dropout,
            },
            Layer::Dropout(d) => LayerDesc::Dropout {
                features: d.features,
                p: d.p,
            },
            Layer::LayerNorm(n) => LayerDesc::LayerNorm {
                features: n.features,
                eps: n.eps,
            },
            Layer::Embedding(e) => LayerDesc::Embedding {
                num_embeddings: e.num,
                dim: e.dim,
            },
        }
    }

    /// `rows` is `batch * steps` at this layer's input.
    pub fn workspace(&self, ops: &dyn Ops, batch: usize, rows: usize) -> Result<LayerWs> {
        Ok(match self {
            Layer::Dense(d) => LayerWs::Dense(d.workspace(ops, rows)?),
            Layer::Rnn(r) => LayerWs::Rnn(r.workspace(ops, batch)?),
            Layer::Lstm(l) => LayerWs::Lstm(l.workspace(ops, batch)?),
            Layer::Gru(g) => LayerWs::Gru(g.workspace(ops, batch)?),
            Layer::Stack(s) => LayerWs::Stack(s.workspace(ops, batch)?),
            Layer::Dropout(d) => LayerWs::Dropout(d.workspace(ops, rows)?),
            Layer::LayerNorm(n) => LayerWs::LayerNorm(n.workspace(ops, rows)?),
            Layer::Embedding(e) => LayerWs::Embedding(e.workspace(ops, rows)?),
        })
    }

    /// [`Layer::workspace`] for activations of type `low` (`None`: f32): a dense layer keeps
    /// its activations in that type (but the output of a last, linear one in f32: what the
    /// loss reads); every other layer computes in f32 behind a [`CastWs`] (its output in T
    /// unless it is the last). `first` says whether the layer reads the network's input (f32
    /// features or u32 ids), `last` whether the loss reads its output.
    pub fn workspace_in(
        &self,
        ops: &dyn Ops,
        (batch, rows): (usize, usize),
        low: Option<DType>,
        (first, last): (bool, bool),
    ) -> Result<LayerWs> {
        match (self, low) {
            (_, None) => self.workspace(ops, batch, rows),
            (Layer::Dense(d), Some(t)) if last && d.act == Activation::Identity => {
                Ok(LayerWs::Dense(d.workspace_f32_output(ops, rows, t)?))
            }
            (Layer::Dense(d), Some(t)) => Ok(LayerWs::Dense(d.workspace_as(ops, rows, t)?)),
            (_, Some(t)) => {
                let inner = self.workspace(ops, batch, rows)?;
                let ws = CastWs::new(ops, (self, inner), rows, t, (!first, last))?;
                Ok(LayerWs::Cast(Box::new(ws)))
            }
        }
    }

    /// The output the next layer (or the loss) reads: in T for every layer of a T network
    /// but the last, whose output is f32 where it can be (a linear dense layer, an f32-only
    /// layer).
    pub fn output<'a>(&self, ws: &'a LayerWs) -> Result<View<'a>> {
        match (self, ws) {
            (_, LayerWs::Cast(c)) => c.output().map_or_else(|| self.output(&c.inner), Ok),
            (Layer::Dense(_), LayerWs::Dense(w)) => Ok(w.output()),
            (Layer::Rnn(r), LayerWs::Rnn(w)) => r.output(w),
            (Layer::Lstm(l), LayerWs::Lstm(w)) => l.output(w),
            (Layer::Gru(g), LayerWs::Gru(w)) => g.output(w),
            (Layer::Stack(s), LayerWs::Stack(w)) => s.output(w),
            (Layer::Dropout(_), LayerWs::Dropout(w)) => Ok(w.output()),
            (Layer::LayerNorm(_), LayerWs::LayerNorm(w)) => Ok(w.output()),
            (Layer::Embedding(_), LayerWs::Embedding(w)) => Ok(w.output()),
            _ => unreachable!("workspaces are built from their own layer"),
        }
    }

    /// The output gradient, which the layer after this one (or the loss) writes: in T for a
    /// dense layer of a T network, in f32 for every other layer, also behind a [`CastWs`].
    pub fn grad_output<'a>(&self, ws: &'a LayerWs) -> Result<View<'a>> {
        match (self, ws) {
            (_, LayerWs::Cast(c)) => self.grad_output(&c.inner),
            (Layer::Dense(_), LayerWs::Dense(w)) => Ok(w.grad_output()),
            (Layer::Rnn(r), LayerWs::Rnn(w)) => r.grad_output(w),
            (Layer::Lstm(l), LayerWs::Lstm(w)) => l.grad_output(w),
            (Layer::Gru(g), LayerWs::Gru(w)) => g.grad_output(w),
            (Layer::Stack(s), LayerWs::Stack(w)) => s.grad_output(w),
            (Layer::Dropout(_), LayerWs::Dropout(w)) => Ok(w.grad_output()),
            (Layer::LayerNorm(_), LayerWs::LayerNorm(w)) => Ok(w.grad_output()),
            (Layer::Embedding(_), LayerWs::Embedding(w)) => Ok(w.grad_output()),
            _ => unreachable!("workspaces are built from their own layer"),
        }
    }

    /// A one-direction recurrent cell's output states and their gradients; `None` for the
    /// other layers.
    fn cell_seq<'a>(&self, ws: &'a LayerWs) -> Result<Option<CellSeq<'a>>> {
        Ok(match (self, ws) {
            (Layer::Rnn(r), LayerWs::Rnn(w)) => Some(r.cell_seq(w)?),
            (Layer::Lstm(l), LayerWs::Lstm(w)) => Some(l.cell_seq(w)?),
            (Layer::Gru(g), LayerWs::Gru(w)) => Some(g.cell_seq(w)?),
            _ => None,
        })
    }

    pub fn forward(&self, f: &Flat<'_>, ws: &LayerWs, x: View<'_>) -> Result<()> {
        if let LayerWs::Cast(c) = ws {
            return c.forward(self, f, x);
        }
        self.forward_unmasked(f, ws, x)?;
        self.cell_forward_finish(f, ws)
    }

    /// [`Layer::forward`] of an f32-only layer (`ws` its own workspace, not a [`CastWs`]) that
    /// also leaves its output rounded to T in `low` where the ops can in the same pass (an
    /// LSTM or GRU layer without lengths): true then, false where `low` was not written.
    pub fn forward_low(
        &self,
        f: &Flat<'_>,
        ws: &LayerWs,
        x: View<'_>,
        low: View<'_>,
    ) -> Result<bool> {
        // Lengths mask the outputs after the pass, which the T copy would miss.
        if f.lengths.is_none() {
            match (self, ws) {
                (Layer::Lstm(l), LayerWs::Lstm(w)) => return l.forward_low(f, w, x, Some(low)),
                (Layer::Gru(g), LayerWs::Gru(w)) => return g.forward_low(f, w, x, Some(low)),
                _ => {}
            }
        }
        self.forward(f, ws, x).map(|()| false)
    }

    fn forward_unmasked(&self, f: &Flat<'_>, ws: &LayerWs, x: View<'_>) -> Result<()> {
        match (self, ws) {
            (Layer::Dense(d), LayerWs::Dense(w)) => d.forward(f, w, x),
            (Layer::Rnn(r), LayerWs::Rnn(w)) => r.forward(f, w, x),
            (Layer::Lstm(l), LayerWs::Lstm(w)) => l.forward(f, w, x),
            (Layer::Gru(g), LayerWs::Gru(w)) => g.forward(f, w, x),
            (Layer::Stack(s), LayerWs::Stack(w)) => s.forward(f, w, x),
            (Layer::Dropout(d), LayerWs::Dropout(w)) => d.forward(f, w, x),
            (Layer::LayerNorm(n), LayerWs::LayerNorm(w)) => n.forward(f, w, x),
            (Layer::Embedding(e), LayerWs::Embedding(w)) => e.forward(f, w, x),
            _ => unreachable!("workspaces are built from their own layer"),
        }
    }

    /// A recurrent cell's forward pass up to its sequence op: the input projection runs and
    /// the op comes back, for a bidirectional stack to run both directions' as a pair
    /// ([`crate::ops::SequencePairOps`]); [`Layer::cell_forward_finish`] follows it.
    pub fn cell_forward_call<'a>(
        &self,
        f: &Flat<'a>,
        ws: &'a LayerWs,
        x: View<'_>,
    ) -> Result<SeqCall<'a>> {
        match (self, ws) {
            (Layer::Rnn(r), LayerWs::Rnn(w)) => r.forward_call(f, w, x),
            (Layer::Lstm(l), LayerWs::Lstm(w)) => l.forward_call(f, w, x),
            (Layer::Gru(g), LayerWs::Gru(w)) => g.forward_call(f, w, x),
            _ => unreachable!("a stack's cells are recurrent cells with their own workspaces"),
        }
    }

    /// What [`Layer::forward`] does after a recurrent cell's sequence op: for a padded batch,
    /// the outputs past each length zeroed.
    pub fn cell_forward_finish(&self, f: &Flat<'_>, ws: &LayerWs) -> Result<()> {
        match (&f.lengths, self.cell_seq(ws)?) {
            (Some(lv), Some(c)) => varlen_cell::mask_outputs(f.ops, lv, &c),
            _ => Ok(()),
        }
    }

    /// A recurrent cell's backward pass up to its sequence op (for a padded batch, the
    /// gradients past each length masked first): the op, and the state gradients for
    /// [`Layer::cell_backward_rest`].
    pub fn cell_backward_call<'a>(
        &self,
        f: &Flat<'a>,
        ws: &'a LayerWs,
    ) -> Result<(SeqCall<'a>, Option<StateGradViews<'a>>)> {
        if let (Some(lv), Some(c)) = (&f.lengths, self.cell_seq(ws)?) {
            varlen_cell::mask_grads(f.ops, lv, &c)?;
        }
        match (self, ws) {
            (Layer::Rnn(r), LayerWs::Rnn(w)) => r.backward_call(f, w),
            (Layer::Lstm(l), LayerWs::Lstm(w)) => l.backward_call(f, w),
            (Layer::Gru(g), LayerWs::Gru(w)) => g.backward_call(f, w),
            _ => unreachable!("a stack's cells are recurrent cells with their own workspaces"),
        }
    }

    /// A recurrent cell's backward pass after its sequence op: the initial-state and parameter
    /// gradients, and `dx` where given.
    pub fn cell_backward_rest(
        &self,
        f: &Flat<'_>,
        ws: &LayerWs,
        input: LayerInput<'_>,
        state: Option<StateGradViews<'_>>,
    ) -> Result<()> {
        match (self, ws) {
            (Layer::Rnn(r), LayerWs::Rnn(w)) => r.backward_rest(f, w, input, state),
            (Layer::Lstm(l), LayerWs::Lstm(w)) => l.backward_rest(f, w, input, state),
            (Layer::Gru(g), LayerWs::Gru(w)) => g.backward_rest(f, w, input, state),
            _ => unreachable!("a stack's cells are recurrent cells with their own workspaces"),
        }
    }

    pub fn backward(
        &self,
        f: &Flat<'_>,
        ws: &LayerWs,
        x: View<'_>,
        dx: Option<View<'_>>,
    ) -> Result<()> {
        if let LayerWs::Cast(c) = ws {
            return c.backward(self, f, x, dx);
        }
        let input = LayerInput { x, dx };
        match (self, ws) {
            (Layer::Dense(d), LayerWs::Dense(w)) => d.backward(f, w, x, dx, None),
            (Layer::Rnn(_) | Layer::Lstm(_) | Layer::Gru(_), _) => {
                let (call, state) = self.cell_backward_call(f, ws)?;
                call.run(f.ops)?;
                self.cell_backward_rest(f, ws, input, state)
            }
            (Layer::Stack(s), LayerWs::Stack(w)) => s.backward(f, w, input),
            (Layer::Dropout(d), LayerWs::Dropout(w)) => d.backward(f, w, dx),
            (Layer::LayerNorm(n), LayerWs::LayerNorm(w)) => n.backward(f, w, input),
            (Layer::Embedding(e), LayerWs::Embedding(w)) => e.backward(f, w, x),
            _ => unreachable!("workspaces are built from their own layer"),
        }
    }

    /// The state of every recurrent cell of this layer in PyTorch's `h_0`/`h_n` order (index
    /// `layer * directions + direction`); empty for the other layers.
    pub fn state_views<'a>(&self, ws: &'a LayerWs) -> Result<Vec<StateViews<'a>>> {
        match (self, ws) {
            (_, LayerWs::Cast(c)) => self.state_views(&c.inner),
            (Layer::Rnn(r), LayerWs::Rnn(w)) => Ok(vec![r.state_views(w)?]),
            (Layer::Lstm(l), LayerWs::Lstm(w)) => Ok(vec![l.state_views(w)?]),
            (Layer::Gru(g), LayerWs::Gru(w)) => Ok(vec![g.state_views(w)?]),
            (Layer::Stack(s), LayerWs::Stack(w)) => s.state_views(w),
            _ => Ok(Vec::new()),
        }
    }

    /// The state gradients of every recurrent cell, in the order of [`Layer::state_views`].
    pub fn state_grad_views<'a>(&self, ws: &'a LayerWs) -> Vec<StateGradViews<'a>> {
        match (self, ws) {
            (_, LayerWs::Cast(c)) => self.state_grad_views(&c.inner),
            (Layer::Rnn(r), LayerWs::Rnn(w)) => vec![r.state_grad_views(w)],
            (Layer::Lstm(l), LayerWs::Lstm(w)) => vec![l.state_grad_views(w)],
            (Layer::Gru(g), LayerWs::Gru(w)) => vec![g.state_grad_views(w)],
            (Layer::Stack(s), LayerWs::Stack(w)) => s.state_grad_views(w),
            _ => Vec::new(),
        }
    }
}
