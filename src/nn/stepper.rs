//! [`Stepper`]: a recurrent network run a few steps at a time, its state carried on the device
//! from one call to the next, for generation (warm up on a prompt, then one token a call)
//! without recomputing the steps already taken.
//!
//! The stepper runs copies of the network's layers made for `k` steps (one set per `k` it has
//! seen, sharing the network's parameter buffer), with stacked layers unrolled into their cells
//! and dropout left out (it is the identity outside training). Each cell's state buffer holds
//! `k + 1` blocks, block 0 the state a pass starts from: a call runs the layers, then copies each
//! cell's last block into its block 0, so the next call starts where this one ended. Both are
//! queued together and recorded once per `k` as a device graph where the device records
//! ([`super::step_graph::StepGraphs`], as evaluation batches are), so on CUDA and HIP a call is
//! the input upload, one graph launch and the output read. When the steps per call change, the
//! state moves to the other set's block 0 by one device copy per cell.

use std::collections::HashMap;

use crate::buffer::{Buffer, View};
use crate::error::{Error, Result};
use crate::ops::{Ops, TypedMemory};

use super::cell_state::StateViews;
use super::layer::{Layer, LayerWs};
use super::network::Network;
use super::recurrent::RnnOutput;
use super::size;
use super::stack::RecurrentCell;
use super::step_graph::{Ran, StepGraphs};
use super::workspace::token_ids_need_an_embedding;

/// Sets of buffers (steps per call) kept before the least recently used one is dropped.
const KEEP_SHAPES: usize = 4;

/// The state one recurrent layer of a network carries between [`Stepper`] calls, in PyTorch's
/// `h_n`/`c_n` layout: `[num_layers, batch, hidden]`, flat.
#[derive(Debug, Clone, PartialEq)]
pub struct StepState {
    /// `[num_layers, batch, hidden]`: the hidden state of each stacked layer.
    pub h: Vec<f32>,
    /// The cell state of an LSTM, same layout; `None` for Elman and GRU layers.
    pub c: Option<Vec<f32>>,
    /// `[num_layers, batch, hidden]`.
    pub shape: [usize; 3],
}

/// The cells of one recurrent layer of the network, as the stepper runs them.
#[derive(Debug, Clone)]
struct StateGroup {
    /// Indices of its cells in the stepper's layer list, bottom level first.
    cells: std::ops::Range<usize>,
    hidden: usize,
    lstm: bool,
}

/// The layers and buffers for one number of steps per call.
struct StepShape {
    /// First, so the recording goes before the buffers it refers to.
    graphs: StepGraphs,
    layers: Vec<Layer>,
    ws: Vec<LayerWs>,
    /// The input of every step, time-major (`steps * batch` rows): u32 ids or f32 features.
    x: Buffer,
    /// Rows per sample at the output: the steps, or 1 after a `Last` layer.
    out_steps: usize,
    last_use: u64,
}

/// Step-by-step inference over a recurrent network: each [`Stepper::step`] (or
/// [`Stepper::step_ids`]) call feeds the next `k >= 1` steps of every sample of a fixed batch
/// and returns their outputs, starting from the state the previous call ended with (zeros at
/// first and after [`Stepper::reset`]). Made by [`Network::stepper`].
///
/// The outputs equal those of [`Network::predict`] over the whole sequence so far (to rounding):
/// the network's `sequence_length` only sizes training and prediction windows, not how far a
/// stepper may go. Dropout is off. A bidirectional layer reads the sequence backwards from its
/// end, so a network with one cannot step.
///
/// ```
/// use rnn::nn::{Loss, Network, RnnOutput};
/// use rnn::Activation;
/// let ctx = rnn::Context::cpu();
/// let mut net = Network::builder(&ctx)
///     .seed(1)
///     .sequence_length(4)
///     .embedding(10, 8)
///     .lstm(8, 16, RnnOutput::Sequence)
///     .dense(16, 10, Activation::Identity)
///     .build(Loss::SoftmaxCrossEntropy)?;
/// let full = net.predict_ids(&[3, 1, 4, 1])?; // 4 steps of 10 logits
/// let mut stepper = net.stepper(1)?;
/// let warm = stepper.step_ids(&[3, 1, 4])?; // three steps at once
/// let next = stepper.step_ids(&[1])?; // then one, from the carried state
/// assert_eq!(warm.len(), 30);
/// assert!(next.iter().zip(&full[30..]).all(|(a, b)| (a - b).abs() < 1e-5));
/// # Ok::<(), rnn::Error>(())
/// ```
pub struct Stepper<'a> {
    net: &'a Network,
    batch: usize,
    groups: Vec<StateGroup>,
    /// The sets of buffers made so far, by steps per call.
    shapes: HashMap<usize, StepShape>,
    /// The steps per call whose buffers hold the carried state in their cells' block 0.
    active: usize,
    graphs: bool,
    clock: u64,
    recorded: u64,
    replayed: u64,
}

impl std::fmt::Debug for Stepper<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stepper")
            .field("device", &self.net.ctx.id())
            .field("batch", &self.batch)
            .field("recurrent_layers", &self.groups.len())
            .finish()
    }
}

impl Network {
    /// A [`Stepper`] over `batch` parallel sequences, its state zero. It borrows the network,
    /// so the parameters cannot change while it lives. Steps are recorded as device graphs
    /// unless [`Network::set_graphs`] turned them off (or `RNN_GRAPHS=off`).
    ///
    /// Errors: `batch == 0`, a network without a recurrent layer (nothing to carry), a
    /// bidirectional layer.
    pub fn stepper(&self, batch: usize) -> Result<Stepper<'_>> {
        if batch == 0 {
            return Err(Error::InvalidArgument("a stepper needs batch >= 1".into()));
        }
        let groups = state_groups(self)?;
        let mut stepper = Stepper {
            net: self,
            batch,
            groups,
            shapes: HashMap::new(),
            active: 1,
            graphs: self.workspaces.graphs_on(),
            clock: 0,
            recorded: 0,
            replayed: 0,
        };
        stepper.activate(1)?;
        // Fresh state buffers start at zero; the fill keeps that true whatever a workspace
        // starts as.
        stepper.reset()?;
        Ok(stepper)
    }
}

/// One entry per recurrent layer of `net`, its cells numbered as [`step_layers`] lists them.
fn state_groups(net: &Network) -> Result<Vec<StateGroup>> {
    let mut groups = Vec::new();
    let mut next = 0;
    for (i, layer) in net.layers.iter().enumerate() {
        let (levels, hidden, lstm) = match layer {
            Layer::Stack(s) if s.opts.bidirectional => {
                return Err(Error::InvalidArgument(format!(
                    "layer {i} is bidirectional: its reverse direction starts from the end of \
                     the sequence, so the network cannot run step by step"
                )));
            }
            Layer::Stack(s) => (s.opts.num_layers, s.hidden, s.cell == RecurrentCell::Lstm),
            Layer::Rnn(r) => (1, r.hidden, false),
            Layer::Lstm(l) => (1, l.hidden, true),
            Layer::Gru(g) => (1, g.hidden, false),
            Layer::Dropout(_) => continue,
            _ => {
                next += 1;
                continue;
            }
        };
        groups.push(StateGroup {
            cells: next..next + levels,
            hidden,
            lstm,
        });
        next += levels;
    }
    if groups.is_empty() {
        return Err(Error::InvalidArgument(
            "a stepper carries recurrent state, and this network has no recurrent layer \
             (predict runs it)"
                .into(),
        ));
    }
    Ok(groups)
}

/// `layer` (a single Elman, LSTM or GRU cell) made for `steps` steps.
fn cell_with_steps(layer: &Layer, steps: usize) -> Layer {
    let mut cell = layer.clone();
    match &mut cell {
        Layer::Rnn(r) => r.steps = steps,
        Layer::Lstm(l) => l.steps = steps,
        Layer::Gru(g) => g.steps = steps,
        _ => {}
    }
    cell
}

/// The network's layers for `steps` steps per call: stacks unrolled into their cells, dropout
/// (the identity outside training) left out.
fn step_layers(net: &Network, steps: usize) -> Vec<Layer> {
    let mut out = Vec::new();
    for layer in &net.layers {
        match layer {
            Layer::Dropout(_) => {}
            Layer::Stack(s) => out.extend(s.cells().iter().map(|l| cell_with_steps(&l[0], steps))),
            other => out.push(cell_with_steps(other, steps)),
        }
    }
    out
}

/// Whether a layer hands on only its last state.
fn returns_last(layer: &Layer) -> bool {
    let output = match layer {
        Layer::Rnn(r) => r.output,
        Layer::Lstm(l) => l.output,
        Layer::Gru(g) => g.output,
        _ => return false,
    };
    output == RnnOutput::Last
}

/// The state views of a single cell's workspace.
fn cell_states<'a>(layer: &Layer, ws: &'a LayerWs) -> Result<StateViews<'a>> {
    let views = layer.state_views(ws)?;
    match views[..] {
        [one] if !matches!(layer, Layer::Stack(_)) => Ok(one),
        _ => Err(Error::InvalidArgument(
            "stepper: a state group names a layer that is not a recurrent cell".into(),
        )),
    }
}

impl StepShape {
    fn new(net: &Network, batch: usize, steps: usize, graphs: bool) -> Result<Self> {
        let ops = net.ctx.ops();
        let layers = step_layers(net, steps);
        let rows = size::mul(steps, batch, "steps x batch")?;
        size::check_indexed_rows(rows, "steps x batch")?;
        let mut ws = Vec::new();
        let mut layer_steps = steps;
        for layer in &layers {
            let rows = size::mul(batch, layer_steps, "batch x steps")?;
            ws.push(layer.workspace(ops, batch, rows)?);
            if returns_last(layer) {
                layer_steps = 1;
            }
        }
        let width = size::mul(rows, layers[0].inputs(), "steps x batch x input features")?;
        Ok(StepShape {
            graphs: StepGraphs::named(graphs, "generation step"),
            x: ops.alloc_as(net.input_dtype(), width)?,
            layers,
            ws,
            out_steps: layer_steps,
            last_use: 0,
        })
    }

    fn cell(&self, i: usize) -> Result<StateViews<'_>> {
        cell_states(&self.layers[i], &self.ws[i])
    }
}

/// Queues every layer's forward pass over the input `x`, then the copy of each cell's final
/// state into its initial one: the same work on the same buffers every call, so it can be
/// recorded.
fn queue_step(
    net: &Network,
    groups: &[StateGroup],
    (layers, ws): (&[Layer], &[LayerWs]),
    x: View<'_>,
) -> Result<()> {
    // The stepper's workspaces are f32 whatever the network's precision: its dense layers
    // read the f32 parameters.
    let f = super::layer::Flat {
        weights: &net.params,
        ..net.flat()
    };
    for (i, layer) in layers.iter().enumerate() {
        let x = match i {
            0 => x,
            _ => layers[i - 1].output(&ws[i - 1])?,
        };
        layer.forward(&f, &ws[i], x)?;
    }
    for i in groups.iter().flat_map(|g| g.cells.clone()) {
        let s = cell_states(&layers[i], &ws[i])?;
        f.ops.copy(s.h_n, s.h0)?;
        if let (Some(c_n), Some(c0)) = (s.c_n, s.c0) {
            f.ops.copy(c_n, c0)?;
        }
    }
    Ok(())
}

impl Stepper<'_> {
    /// The number of parallel sequences.
    pub fn batch(&self) -> usize {
        self.batch
    }

    fn ops(&self) -> &dyn Ops {
        self.net.ctx.ops()
    }

    /// Makes the buffers for `steps` steps per call (if missing) the ones holding the carried
    /// state.
    fn activate(&mut self, steps: usize) -> Result<()> {
        self.clock += 1;
        if !self.shapes.contains_key(&steps) {
            let shape = StepShape::new(self.net, self.batch, steps, self.graphs)?;
            self.shapes.insert(steps, shape);
        }
        if steps != self.active {
            self.move_state(steps)?;
        }
        self.evict();
        if let Some(shape) = self.shapes.get_mut(&steps) {
            shape.last_use = self.clock;
        }
        Ok(())
    }

    /// Copies the carried state into the initial blocks of the `to` buffers, which then hold it.
    fn move_state(&mut self, to: usize) -> Result<()> {
        let (from, ops) = (self.active_shape()?, self.ops());
        let dst = self.shapes.get(&to).ok_or_else(|| gone(to))?;
        for i in self.groups.iter().flat_map(|g| g.cells.clone()) {
            let (a, b) = (from.cell(i)?, dst.cell(i)?);
            ops.copy(a.h0, b.h0)?;
            if let (Some(ca), Some(cb)) = (a.c0, b.c0) {
                ops.copy(ca, cb)?;
            }
        }
        self.active = to;
        Ok(())
    }

    /// Drops the least recently used buffers but the active ones once more than
    /// [`KEEP_SHAPES`] exist.
    fn evict(&mut self) {
        if self.shapes.len() <= KEEP_SHAPES {
            return;
        }
        let victim = self
            .shapes
            .iter()
            .filter(|(k, _)| **k != self.active)
            .min_by_key(|(_, s)| s.last_use)
            .map(|(k, _)| *k);
        if let Some(k) = victim {
            self.shapes.remove(&k);
        }
    }

    /// Runs the next steps of every sample from `x`: `batch * k * features` values, sample by
    /// sample, step by step (as [`Network::predict`] lays out a sample), `k >= 1`. For a network
    /// whose first layer is an embedding the values are token ids (exact integers). Returns
    /// `batch * k * output_features` values in the same order, or `batch * output_features`
    /// (the last step's) for a network that hands on only the last state
    /// ([`RnnOutput::Last`]).
    pub fn step(&mut self, x: &[f32]) -> Result<Vec<f32>> {
        let (features, batch) = (self.net.layers[0].inputs(), self.batch);
        let steps = self.steps_of(x.len(), features, "values")?;
        if let Some(i) = x.iter().position(|v| !v.is_finite()) {
            return Err(Error::InvalidData(format!(
                "stepper input value {i} is {} (values must be finite)",
                x[i]
            )));
        }
        match &self.net.layers[0] {
            Layer::Embedding(e) => {
                let ids = e.ids_of(x, steps)?;
                self.run(steps, |ops, dst| {
                    ops.upload_as(dst, &swap_outer(&ids, batch, 1))
                })
            }
            _ => self.run(steps, |ops, dst| {
                ops.upload(dst, &swap_outer(x, batch, features))
            }),
        }
    }

    /// [`Stepper::step`] for a network whose first layer is an embedding, on u32 token ids
    /// (`batch * k`, sample by sample, each in `0..num_embeddings`).
    pub fn step_ids(&mut self, ids: &[u32]) -> Result<Vec<f32>> {
        let Layer::Embedding(e) = &self.net.layers[0] else {
            return Err(token_ids_need_an_embedding());
        };
        let (steps, batch) = (self.steps_of(ids.len(), 1, "token ids")?, self.batch);
        e.check_u32_ids(ids, steps)?;
        self.run(steps, |ops, dst| {
            ops.upload_as(dst, &swap_outer(ids, batch, 1))
        })
    }

    /// Steps per sample in an input of `len` values of `features` each.
    fn steps_of(&self, len: usize, features: usize, what: &str) -> Result<usize> {
        let per_step = self.batch * features;
        if len == 0 || len % per_step != 0 {
            return Err(Error::InvalidData(format!(
                "{len} {what} are not whole steps of {} samples x {features}",
                self.batch
            )));
        }
        Ok(len / per_step)
    }

    /// Uploads the input with `upload`, runs (or replays) the step and reads its output back in
    /// sample-major order.
    fn run(
        &mut self,
        steps: usize,
        upload: impl FnOnce(&dyn Ops, View<'_>) -> Result<()>,
    ) -> Result<Vec<f32>> {
        let (net, batch, graphs) = (self.net, self.batch, self.graphs);
        self.activate(steps)?;
        let shape = self.shapes.get_mut(&steps).ok_or_else(|| gone(steps))?;
        let ops = net.ctx.ops();
        upload(ops, shape.x.view())?;
        let StepShape {
            graphs: recordings,
            layers,
            ws,
            x,
            out_steps,
            ..
        } = shape;
        let (groups, parts) = (&self.groups, (&layers[..], &ws[..]));
        let ran = if graphs {
            recordings.run(&net.ctx, batch, || queue_step(net, groups, parts, x.view()))?
        } else {
            queue_step(net, groups, parts, x.view())?;
            Ran::OpByOp
        };
        match ran {
            Ran::Recorded => self.recorded += 1,
            Ran::Replayed => self.replayed += 1,
            Ran::OpByOp => {}
        }
        let out = layers[layers.len() - 1].output(&ws[ws.len() - 1])?;
        let mut host = vec![0.0f32; out.len()];
        ops.download(out, &mut host)?;
        let features = layers[layers.len() - 1].outputs();
        Ok(swap_outer(&host, *out_steps, features))
    }

    /// Sets the carried state to zeros, as a new stepper starts.
    pub fn reset(&mut self) -> Result<()> {
        let ops = self.ops();
        let shape = self.active_shape()?;
        for i in self.groups.iter().flat_map(|g| g.cells.clone()) {
            let s = shape.cell(i)?;
            ops.fill(s.h0, 0.0)?;
            if let Some(c0) = s.c0 {
                ops.fill(c0, 0.0)?;
            }
        }
        Ok(())
    }

    fn active_shape(&self) -> Result<&StepShape> {
        self.shapes
            .get(&self.active)
            .ok_or_else(|| gone(self.active))
    }

    /// The carried state: one [`StepState`] per recurrent layer of the network, in layer
    /// order.
    pub fn state(&self) -> Result<Vec<StepState>> {
        let ops = self.ops();
        let shape = self.active_shape()?;
        let mut out = Vec::new();
        for g in &self.groups {
            let block = self.batch * g.hidden;
            let mut h = vec![0.0f32; g.cells.len() * block];
            let mut c = g.lstm.then(|| vec![0.0f32; g.cells.len() * block]);
            for (level, i) in g.cells.clone().enumerate() {
                let s = shape.cell(i)?;
                let at = level * block..(level + 1) * block;
                ops.download(s.h0, &mut h[at.clone()])?;
                if let (Some(c), Some(c0)) = (c.as_mut(), s.c0) {
                    ops.download(c0, &mut c[at])?;
                }
            }
            out.push(StepState {
                h,
                c,
                shape: [g.cells.len(), self.batch, g.hidden],
            });
        }
        Ok(out)
    }

    /// Replaces the carried state (one [`StepState`] per recurrent layer, as
    /// [`Stepper::state`] gives it). Errors: another number of layers, shape, a missing or
    /// extra cell state, non-finite values.
    pub fn set_state(&mut self, states: &[StepState]) -> Result<()> {
        if states.len() != self.groups.len() {
            return Err(Error::InvalidArgument(format!(
                "{} states for a network with {} recurrent layer(s)",
                states.len(),
                self.groups.len()
            )));
        }
        for (k, (s, g)) in states.iter().zip(&self.groups).enumerate() {
            check_state(k, s, g, self.batch)?;
        }
        let ops = self.ops();
        let shape = self.active_shape()?;
        for (s, g) in states.iter().zip(&self.groups) {
            let block = self.batch * g.hidden;
            for (level, i) in g.cells.clone().enumerate() {
                let blocks = shape.cell(i)?;
                let at = level * block..(level + 1) * block;
                ops.upload(blocks.h0, &s.h[at.clone()])?;
                if let (Some(c), Some(c0)) = (&s.c, blocks.c0) {
                    ops.upload(c0, &c[at])?;
                }
            }
        }
        Ok(())
    }

    /// `(recorded, replayed)`: how many calls were recorded as a graph and how many replayed
    /// one. For tests.
    #[cfg(feature = "testing")]
    #[doc(hidden)]
    pub fn graph_counts(&self) -> (u64, u64) {
        (self.recorded, self.replayed)
    }
}

/// The error for buffers that should exist and do not (a bug, reported rather than a panic).
fn gone(steps: usize) -> Error {
    Error::InvalidArgument(format!(
        "stepper: the buffers for {steps} step(s) a call are missing"
    ))
}

/// [`Error::InvalidArgument`] unless `s` fits recurrent layer `k` of the stepper.
fn check_state(k: usize, s: &StepState, g: &StateGroup, batch: usize) -> Result<()> {
    let want = [g.cells.len(), batch, g.hidden];
    let n = want.iter().product::<usize>();
    let bad = |m: String| Err(Error::InvalidArgument(format!("state {k}: {m}")));
    if s.shape != want || s.h.len() != n {
        return bad(format!(
            "shape {:?} with {} h values, expected {want:?} ({n} values)",
            s.shape,
            s.h.len()
        ));
    }
    match (&s.c, g.lstm) {
        (None, true) => return bad("an LSTM layer needs the cell state c".into()),
        (Some(_), false) => return bad("only an LSTM layer has a cell state c".into()),
        (Some(c), true) if c.len() != n => {
            return bad(format!("{} c values, expected {n}", c.len()));
        }
        _ => {}
    }
    let values = s.h.iter().chain(s.c.iter().flatten());
    if let Some(v) = values.copied().find(|v| !v.is_finite()) {
        return bad(format!("holds {v} (values must be finite)"));
    }
    Ok(())
}

/// `x` as `[outer, inner, rows of width]` reordered `[inner, outer, ...]`: sample-major rows
/// to step-major (`outer` the samples) and back (`outer` the steps).
fn swap_outer<T: Copy>(x: &[T], outer: usize, width: usize) -> Vec<T> {
    let inner = x.len() / (outer * width);
    if inner == 1 || outer == 1 {
        return x.to_vec();
    }
    let mut out = Vec::with_capacity(x.len());
    for i in 0..inner {
        for o in 0..outer {
            let at = (o * inner + i) * width;
            out.extend_from_slice(&x[at..at + width]);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::swap_outer;

    #[test]
    fn step_major_and_back() {
        // 2 samples of 3 steps of 2 values.
        let x: Vec<f32> = (0..12).map(|v| v as f32).collect();
        let tm = swap_outer(&x, 2, 2);
        assert_eq!(tm, [0., 1., 6., 7., 2., 3., 8., 9., 4., 5., 10., 11.]);
        assert_eq!(swap_outer(&tm, 3, 2), x);
    }
}
