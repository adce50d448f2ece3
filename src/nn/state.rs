//! Recurrent state in and out: a network's recurrent layers started from a given state (PyTorch's
//! `h_0`/`c_0`), their final state handed back (`h_n`/`c_n`), and the gradients across both
//! ends of the sequence (a gradient for the final state in, the gradient for the initial state
//! out), for every cell, stacked and bidirectional, on every backend.
//!
//! The network keeps each cell's initial state in block 0 of its workspace's state buffers,
//! which the plain passes read as zeros: these entry points write it before their passes and
//! zero it again afterwards ([`super::cell_state`]).

use crate::error::{Error, Result};
use crate::tensor::Tensor;

use super::cell_state::{StateGradViews, StateViews};
use super::data::Dataset;
use super::layer::Layer;
use super::network::Network;
use super::workspace::{Rows, Workspace};

/// The state of one recurrent layer of a network in PyTorch's layout: `cells = num_layers *
/// directions` blocks of `batch x hidden`, block `layer * directions + direction` (the reverse
/// direction second), row-major as `torch.Tensor` of shape `[cells, batch, hidden]`.
#[derive(Debug, Clone, PartialEq)]
pub struct LayerState {
    /// `num_layers * directions`.
    pub cells: usize,
    /// Samples.
    pub batch: usize,
    /// Hidden units per direction.
    pub hidden: usize,
    /// The hidden state, `cells * batch * hidden` values (`h_0` or `h_n`).
    pub h: Vec<f32>,
    /// The LSTM's cell state, shaped as `h` (`c_0` or `c_n`); `None` for RNN and GRU layers.
    pub c: Option<Vec<f32>>,
}

impl LayerState {
    /// A zero state of `cells` blocks of `batch x hidden`, with a cell state when `lstm`.
    pub fn zeros(cells: usize, batch: usize, hidden: usize, lstm: bool) -> Self {
        let n = cells * batch * hidden;
        LayerState {
            cells,
            batch,
            hidden,
            h: vec![0.0; n],
            c: lstm.then(|| vec![0.0; n]),
        }
    }
}

/// The state of every recurrent layer of a network, in layer order (one [`LayerState`] per
/// `rnn`/`lstm`/`gru`/`recurrent` layer). The same type carries the gradients with respect
/// to a state.
///
/// ```
/// use rnn::nn::{Loss, Network, RecurrentCell, RecurrentOptions, RnnOutput};
/// let ctx = rnn::Context::cpu();
/// let opts = RecurrentOptions::new().layers(2).bidirectional(true);
/// let mut net = Network::builder(&ctx)
///     .seed(3)
///     .sequence_length(5)
///     .recurrent(RecurrentCell::Lstm, 2, 4, RnnOutput::Sequence, opts)
///     .dense(8, 1, rnn::Activation::Identity)
///     .build(Loss::Mse)?;
/// let mut h0 = net.zero_state(3);
/// h0.layers[0].h.iter_mut().for_each(|v| *v = 0.5);
/// let x = ctx.tensor(&[3, 10], &[0.1; 30])?;
/// let (y, h_n) = net.forward_with_state(&x, &h0)?;
/// assert_eq!(y.shape(), &[3, 5, 1]);
/// // [num_layers * directions, batch, hidden], as PyTorch's h_n.
/// assert_eq!(h_n.layers[0].h.len(), 4 * 3 * 4);
/// assert!(h_n.layers[0].c.is_some());
/// # Ok::<(), rnn::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct RecurrentState {
    /// One entry per recurrent layer, in layer order.
    pub layers: Vec<LayerState>,
}

/// What a recurrent layer's state looks like: cells, hidden units, cell state or not.
struct StateShape {
    cells: usize,
    hidden: usize,
    lstm: bool,
}

fn state_shape(layer: &Layer) -> Option<StateShape> {
    let (cells, hidden, lstm) = match layer {
        Layer::Rnn(r) => (1, r.hidden, false),
        Layer::Lstm(l) => (1, l.hidden, true),
        Layer::Gru(g) => (1, g.hidden, false),
        Layer::Stack(s) => (
            s.opts.num_layers * s.opts.directions(),
            s.hidden,
            matches!(s.cell, super::stack::RecurrentCell::Lstm),
        ),
        _ => return None,
    };
    Some(StateShape {
        cells,
        hidden,
        lstm,
    })
}

/// `what`'s values for one cell `k` of `batch x hidden`.
fn block(values: &[f32], k: usize, n: usize) -> &[f32] {
    &values[k * n..(k + 1) * n]
}

impl Network {
    /// The shape of every recurrent layer's state, in layer order.
    fn state_shapes(&self) -> Vec<StateShape> {
        self.layers.iter().filter_map(state_shape).collect()
    }

    /// A zero state for `batch` samples (what every pass without a state starts from).
    pub fn zero_state(&self, batch: usize) -> RecurrentState {
        let layers = self.state_shapes().into_iter();
        RecurrentState {
            layers: layers
                .map(|s| LayerState::zeros(s.cells, batch, s.hidden, s.lstm))
                .collect(),
        }
    }

    /// Checks that `state` fits this network's recurrent layers and `batch` samples.
    fn check_state(&self, state: &RecurrentState, batch: usize, what: &str) -> Result<()> {
        let shapes = self.state_shapes();
        if shapes.is_empty() {
            return Err(Error::InvalidArgument(format!(
                "{what}: the network has no recurrent layer"
            )));
        }
        if state.layers.len() != shapes.len() {
            return Err(Error::shape(
                what,
                format!(
                    "{} layer states for {} recurrent layers",
                    state.layers.len(),
                    shapes.len()
                ),
            ));
        }
        for (i, (s, want)) in state.layers.iter().zip(&shapes).enumerate() {
            let n = want.cells * batch * want.hidden;
            let fits = s.cells == want.cells && s.batch == batch && s.hidden == want.hidden;
            if !fits || s.h.len() != n {
                return Err(Error::shape(
                    what,
                    format!(
                        "recurrent layer {i}: state [{}, {}, {}] with {} values of h, expected \
                         [{}, {batch}, {}] ({n} values)",
                        s.cells,
                        s.batch,
                        s.hidden,
                        s.h.len(),
                        want.cells,
                        want.hidden
                    ),
                ));
            }
            match (&s.c, want.lstm) {
                (Some(c), true) if c.len() == n => {}
                (Some(c), true) => {
                    return Err(Error::shape(
                        what,
                        format!("recurrent layer {i}: {} values of c, expected {n}", c.len()),
                    ));
                }
                (None, true) => {
                    return Err(Error::InvalidArgument(format!(
                        "{what}: recurrent layer {i} is an LSTM and needs a cell state c"
                    )));
                }
                (Some(_), false) => {
                    return Err(Error::InvalidArgument(format!(
                        "{what}: recurrent layer {i} has no cell state, but c was given"
                    )));
                }
                (None, false) => {}
            }
            if let Some(v) =
                s.h.iter()
                    .chain(s.c.iter().flatten())
                    .find(|v| !v.is_finite())
            {
                return Err(Error::InvalidData(format!(
                    "{what}: recurrent layer {i} holds {v} (values must be finite)"
                )));
            }
        }
        Ok(())
    }

    /// The cells' state views of `ws`, the recurrent layers only.
    fn recurrent_views<'a>(&'a self, ws: &'a Workspace) -> Result<Vec<Vec<StateViews<'a>>>> {
        let all = self.state_views(ws)?;
        Ok(all.into_iter().filter(|v| !v.is_empty()).collect())
    }

    /// Writes `state` into the initial-state blocks of `ws`.
    fn write_initial(&self, ws: &Workspace, state: &RecurrentState) -> Result<()> {
        let ops = self.ctx.ops();
        for (views, s) in self.recurrent_views(ws)?.iter().zip(&state.layers) {
            let n = s.batch * s.hidden;
            for (k, v) in views.iter().enumerate() {
                ops.upload(v.h0, block(&s.h, k, n))?;
                if let (Some(c0), Some(c)) = (v.c0, &s.c) {
                    ops.upload(c0, block(c, k, n))?;
                }
            }
        }
        Ok(())
    }

    /// Zeroes the initial-state blocks of `ws` again (the plain passes read them as zeros).
    pub(crate) fn zero_initial(&self, ws: &Workspace) -> Result<()> {
        let ops = self.ctx.ops();
        for v in self.recurrent_views(ws)?.iter().flatten() {
            ops.fill(v.h0, 0.0)?;
            if let Some(c0) = v.c0 {
                ops.fill(c0, 0.0)?;
            }
        }
        Ok(())
    }

    /// Reads one view per cell (`pick` chooses it) into a state shaped as this network's.
    fn read_state<'a, T: 'a>(
        &self,
        batch: usize,
        cells: &[Vec<T>],
        pick: impl Fn(&T) -> (crate::buffer::View<'a>, Option<crate::buffer::View<'a>>),
    ) -> Result<RecurrentState> {
        let ops = self.ctx.ops();
        let mut out = self.zero_state(batch);
        for (s, views) in out.layers.iter_mut().zip(cells) {
            let n = batch * s.hidden;
            for (k, v) in views.iter().enumerate() {
                let (h, c) = pick(v);
                ops.download(h, &mut s.h[k * n..(k + 1) * n])?;
                if let (Some(c), Some(dst)) = (c, s.c.as_mut()) {
                    ops.download(c, &mut dst[k * n..(k + 1) * n])?;
                }
            }
        }
        Ok(out)
    }

    /// Runs the network on `x` (`[batch, input_width]`, all samples as one batch, evaluation
    /// mode) from the initial state `initial` (`batch` samples, as [`Network::zero_state`]
    /// gives its shape) and returns the output (as [`Network::forward`]) and every recurrent
    /// layer's final state (`h_n`, `c_n`; for the reverse direction of a bidirectional layer
    /// the state after the first step, as in PyTorch).
    pub fn forward_with_state(
        &mut self,
        x: &Tensor,
        initial: &RecurrentState,
    ) -> Result<(Tensor, RecurrentState)> {
        let converted = self.check_forward_input(x)?;
        let x = converted.as_ref().unwrap_or(x);
        let batch = x.len() / self.input_width();
        self.check_state(initial, batch, "forward_with_state")?;
        let cols = self.output_features();
        let shape: Vec<usize> = if self.out_steps > 1 {
            vec![batch, self.out_steps, cols]
        } else {
            vec![batch, cols]
        };
        let out = self.ctx.zeros(&shape)?;
        let (net, ws) = self.workspace(batch)?;
        net.write_initial(ws, initial)?;
        let run = || -> Result<RecurrentState> {
            let b = net.load_rows(ws, x.view(), None, &Rows::Range(0), true)?;
            net.forward_ws(ws, &b)?;
            net.batch_major_gather(ws)?;
            net.ctx.ops().copy(net.batch_major_view(ws)?, out.view())?;
            let views = net.recurrent_views(ws)?;
            net.read_state(batch, &views, |v: &StateViews<'_>| (v.h_n, v.c_n))
        };
        let result = run();
        net.zero_initial(ws)?;
        Ok((out, result?))
    }

    /// [`Network::compute_gradients`] from the initial state `initial` (`data.len()` samples),
    /// with `final_grad` the gradient of an outside term of the loss with respect to every
    /// recurrent layer's final state (`h_n`, `c_n`; `None`: zero): leaves the parameter
    /// gradients in the gradient buffer ([`Network::gradients`]) and returns the mean loss and
    /// the gradient with respect to `initial` (`h_0`, `c_0`).
    pub fn compute_gradients_with_state(
        &mut self,
        data: &Dataset,
        initial: &RecurrentState,
        final_grad: Option<&RecurrentState>,
    ) -> Result<(f32, RecurrentState)> {
        self.check_data(data)?;
        let what = "compute_gradients_with_state";
        if data.lengths().is_some() || data.ignore_index().is_some() {
            return Err(Error::InvalidArgument(format!(
                "{what}: padded sequences and ignore_index are not supported with a given state \
                 (the final state is taken after the last step of every sample)"
            )));
        }
        self.check_state(initial, data.len(), what)?;
        if let Some(g) = final_grad {
            self.check_state(g, data.len(), what)?;
        }
        let dd = self.upload(data)?;
        let ops = self.ctx.ops();
        let acc = ops.alloc(2)?;
        ops.fill(acc.view(), 0.0)?;
        let (net, ws) = self.workspace(dd.n)?;
        net.write_initial(ws, initial)?;
        let run = || -> Result<RecurrentState> {
            net.write_final_grads(ws, final_grad)?;
            let batch = net.load_rows(ws, dd.x.view(), Some(dd.y.view()), &Rows::Range(0), true)?;
            net.forward_train_ws(ws, &batch)?;
            net.loss_ws(ws, &batch, Some(acc.view()))?;
            let f = super::layer::Flat {
                state_grads: true,
                ..net.train_flat()
            };
            net.backward_flat(ws, &batch, &f, &mut |_| Ok(()))?;
            let grads: Vec<_> = net
                .state_grad_views(ws)
                .into_iter()
                .filter(|v| !v.is_empty())
                .collect();
            net.read_state(dd.n, &grads, |g: &StateGradViews<'_>| (g.dh0, g.dc0))
        };
        let result = run();
        net.zero_initial(ws)?;
        let grads = result?;
        let mut sums = [0.0f32; 2];
        self.ctx.ops().download(acc.view(), &mut sums)?;
        Ok((sums[0] / (dd.n * self.out_steps) as f32, grads))
    }

    /// Writes the gradients for the final states (zeros without `grads`).
    fn write_final_grads(&self, ws: &Workspace, grads: Option<&RecurrentState>) -> Result<()> {
        let ops = self.ctx.ops();
        let cells = self
            .state_grad_views(ws)
            .into_iter()
            .filter(|v| !v.is_empty());
        for (i, views) in cells.enumerate() {
            let s = grads.map(|g| &g.layers[i]);
            for (k, v) in views.iter().enumerate() {
                match s {
                    Some(s) => {
                        let n = s.batch * s.hidden;
                        ops.upload(v.dh_n, block(&s.h, k, n))?;
                        if let (Some(dc), Some(c)) = (v.dc_n, &s.c) {
                            ops.upload(dc, block(c, k, n))?;
                        }
                    }
                    None => {
                        ops.fill(v.dh_n, 0.0)?;
                        if let Some(dc) = v.dc_n {
                            ops.fill(dc, 0.0)?;
                        }
                    }
                }
            }
        }
        Ok(())
    }
}
