//! Stacked and bidirectional recurrent layers, as PyTorch's `nn.RNN`/`nn.LSTM`/`nn.GRU` with
//! `num_layers` and `bidirectional`: a grid of one-direction, one-layer cells (the existing
//! [`Rnn`], [`Lstm`] and [`Gru`] layers) named `weight_ih_l{k}`, `weight_hh_l{k}_reverse`, ...
//!
//! The reverse direction runs the very same cell code (and so the same kernels) on a
//! time-reversed copy of its input: one `gather_rows` with a fixed permutation before the
//! cell, and the inverse bookkeeping after it. The two directions' outputs are then
//! interleaved into `[forward | reverse]` per row by one more `gather_rows`, reading the
//! reverse half in original time order. Every index buffer is built when the workspace is,
//! so a step uploads nothing (it can be captured as a CUDA graph).

use crate::buffer::{Buffer, View};
use crate::dtype::DType;
use crate::error::Result;
use crate::ops::IndexedRows;
use crate::ops::{Activation, DropoutMask, Ops, TypedMemory};

use super::cell_state::{StateGradViews, StateViews};
use super::gru::Gru;
use super::layer::{Flat, Layer, LayerInput, LayerWs};
use super::lstm::Lstm;
use super::params::ParamLayout;
use super::recurrent::RnnOutput;
use super::rnn::Rnn;
use super::size;

/// The cell of a recurrent layer.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum RecurrentCell {
    /// Elman RNN with `Tanh` or `Relu` (PyTorch's `nonlinearity`).
    Rnn(Activation),
    /// LSTM, gates i, f, g, o.
    Lstm,
    /// GRU, gates r, z, n.
    Gru,
}

/// PyTorch's `num_layers`, `bidirectional` and `dropout` arguments of a recurrent layer.
///
/// With `bidirectional`, every layer runs a second cell over the reversed sequence, and each
/// output row is `[forward | reverse]` (`2 * hidden` wide), the reverse half aligned with the
/// original time step, as in PyTorch's `output`. With [`RnnOutput::Last`] the layer hands on
/// PyTorch's `h_n` of the top layer: `h_n[-1]` for one direction, and for two
/// `torch.cat([h_n[-2], h_n[-1]], dim=1)`: the forward direction's state after the last step
/// next to the reverse direction's state after the FIRST step (the end of its pass), which is
/// not the same as the last row of the `Sequence` output.
///
/// `dropout` zeroes each output of every layer but the last with that probability during
/// training (scaling the rest by `1 / (1 - p)`), as PyTorch does; it is off in evaluation
/// and prediction.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RecurrentOptions {
    /// Stacked layers (PyTorch `num_layers`), at least 1.
    pub num_layers: usize,
    /// Run a second cell over the reversed sequence in every layer.
    pub bidirectional: bool,
    /// Dropout probability on the outputs of every layer but the last, in `[0, 1)`.
    pub dropout: f32,
}

impl Default for RecurrentOptions {
    fn default() -> Self {
        RecurrentOptions {
            num_layers: 1,
            bidirectional: false,
            dropout: 0.0,
        }
    }
}

impl RecurrentOptions {
    /// One layer, one direction, no dropout (the same as the plain builder methods).
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets `num_layers`.
    pub fn layers(mut self, num_layers: usize) -> Self {
        self.num_layers = num_layers;
        self
    }

    /// Sets `bidirectional`.
    pub fn bidirectional(mut self, on: bool) -> Self {
        self.bidirectional = on;
        self
    }

    /// Sets the inter-layer `dropout` probability.
    pub fn dropout(mut self, p: f32) -> Self {
        self.dropout = p;
        self
    }

    /// 2 when bidirectional, else 1.
    pub fn directions(&self) -> usize {
        if self.bidirectional { 2 } else { 1 }
    }

    /// True when these options describe more than the plain one-layer, one-direction layer.
    pub(crate) fn is_plain(&self) -> bool {
        self.num_layers == 1 && !self.bidirectional
    }
}

/// A stacked and/or bidirectional recurrent layer.
#[derive(Debug, Clone)]
pub(crate) struct Stack {
    pub cell: RecurrentCell,
    pub inputs: usize,
    pub hidden: usize,
    pub steps: usize,
    pub output: RnnOutput,
    pub opts: RecurrentOptions,
    /// `cells[layer][direction]`, direction 0 forward, 1 reverse.
    cells: Vec<Vec<Layer>>,
    /// The dropout stream of this layer (`index << 8`); the dropout after level `k` uses
    /// `stream | k`.
    stream: u32,
}

/// The dropout between level `k` and `k + 1`: its output (the next level's input) and the
/// gradient the next level leaves there.
struct DropWs {
    y: Buffer,
    dy: Buffer,
}

/// Buffers of one bidirectional level (layer) of the stack.
struct BiWs {
    /// The level's input in reversed time order (the reverse cell's input); after the
    /// backward pass of the reverse cell it holds its input gradient back in original order.
    x_rev: Buffer,
    /// The reverse cell's input gradient, in reversed time order.
    dx_rev: Buffer,
    /// The forward cell's output, then the reverse cell's, as one source for `cat_idx`.
    stage: Buffer,
    /// `rows x 2H`: the level's output, `[forward | reverse]` per row.
    out: Buffer,
    /// Its gradient, written by the next level or layer.
    dout: Buffer,
    /// Row `j` of `out` viewed as `2 * rows x H` comes from row `cat_idx[j]` of `stage`.
    cat_idx: Buffer,
    /// Forward cell's output-gradient row `r` is row `fwd_idx[r]` of `dout` as `2 * rows x H`.
    fwd_idx: Buffer,
    /// Same for the reverse cell (its rows in reversed time order).
    rev_idx: Buffer,
    /// `cat_idx` and `rev_idx` without the time reversal, for padded batches, whose
    /// per-sample reversal is a separate gather ([`super::padding::LengthViews::reversal`]).
    cat_plain: Buffer,
    rev_plain: Buffer,
}

/// Per-batch-size buffers of a [`Stack`].
pub(crate) struct StackWs {
    cells: Vec<Vec<LayerWs>>,
    /// One per level when bidirectional, else empty.
    bi: Vec<BiWs>,
    /// Time reversal of `steps * batch` time-major rows: row `t * B + b` <- `(T-1-t) * B + b`.
    time_rev: Option<Buffer>,
    /// One per level but the top when `dropout > 0`, else empty.
    drops: Vec<DropWs>,
}

/// Uploads `values` (row numbers, checked to fit u32 by the caller) as a u32 index buffer.
fn index_buffer(ops: &dyn Ops, values: &[usize]) -> Result<Buffer> {
    let v: Vec<u32> = values.iter().map(|&i| i as u32).collect();
    let b = ops.alloc_as(DType::U32, v.len())?;
    ops.upload_as(b.view(), &v)?;
    Ok(b)
}

impl Stack {
    /// Registers every cell's parameters in PyTorch's order (`l0`, `l0_reverse`, `l1`, ...).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        layout: &mut ParamLayout,
        index: usize,
        cell: RecurrentCell,
        inputs: usize,
        hidden: usize,
        steps: usize,
        output: RnnOutput,
        opts: RecurrentOptions,
    ) -> Self {
        let name = index.to_string();
        let name = name.as_str();
        let dirs = opts.directions();
        let mut cells = Vec::new();
        for k in 0..opts.num_layers {
            let level_in = if k == 0 {
                inputs
            } else {
                hidden.saturating_mul(dirs)
            };
            let top = k + 1 == opts.num_layers;
            let out = if top { output } else { RnnOutput::Sequence };
            let mut level = Vec::new();
            for d in 0..dirs {
                let first = layout.tensors.len();
                let c = match cell {
                    RecurrentCell::Rnn(act) => {
                        Layer::Rnn(Rnn::new(layout, name, level_in, hidden, steps, act, out))
                    }
                    RecurrentCell::Lstm => {
                        Layer::Lstm(Lstm::new(layout, name, level_in, hidden, steps, out))
                    }
                    RecurrentCell::Gru => {
                        Layer::Gru(Gru::new(layout, name, level_in, hidden, steps, out))
                    }
                };
                // The cells register PyTorch's one-layer names (`..._l0`); rename them to
                // this cell's level and direction.
                let suffix = format!("_l{k}{}", if d == 1 { "_reverse" } else { "" });
                for t in &mut layout.tensors[first..] {
                    if let Some(stem) = t.name.strip_suffix("_l0") {
                        t.name = format!("{stem}{suffix}");
                    }
                }
                level.push(c);
            }
            cells.push(level);
        }
        Stack {
            cell,
            inputs,
            hidden,
            steps,
            output,
            opts,
            cells,
            stream: (index as u32) << 8,
        }
    }

    /// The cells, `[layer][direction]`.
    pub fn cells(&self) -> &[Vec<Layer>] {
        &self.cells
    }

    /// True when training draws dropout masks between the levels.
    pub fn uses_rng(&self) -> bool {
        self.has_dropout()
    }

    fn has_dropout(&self) -> bool {
        self.opts.dropout > 0.0 && self.opts.num_layers > 1
    }

    /// Output features per row: `hidden`, or `2 * hidden` when bidirectional.
    pub fn outputs(&self) -> usize {
        self.hidden * self.opts.directions()
    }

    fn bidirectional(&self) -> bool {
        self.opts.bidirectional
    }

    /// Rows a level hands on: `steps * batch`, or `batch` for the top level with `Last`.
    fn level_rows(&self, k: usize, batch: usize) -> usize {
        if k + 1 == self.opts.num_layers && self.output == RnnOutput::Last {
            batch
        } else {
            self.steps * batch
        }
    }

    pub fn workspace(&self, ops: &dyn Ops, batch: usize) -> Result<StackWs> {
        let mut cells = Vec::new();
        for level in &self.cells {
            let mut ws = Vec::new();
            for c in level {
                ws.push(c.workspace(ops, batch, 0)?);
            }
            cells.push(ws);
        }
        let (t_n, h) = (self.steps, self.hidden);
        let seq_rows = size::mul(t_n, batch, "recurrent steps x batch")?;
        let mut bi = Vec::new();
        let mut time_rev = None;
        if self.bidirectional() {
            // Interleaved rows of H: twice the rows, each a u32 index.
            size::check_indexed_rows(
                size::mul(seq_rows, 2, "bidirectional rows")?,
                "bidirectional recurrent rows",
            )?;
            let rev_row = |r: usize| (t_n - 1 - r / batch) * batch + r % batch;
            let rev: Vec<usize> = (0..seq_rows).map(rev_row).collect();
            time_rev = Some(index_buffer(ops, &rev)?);
            for k in 0..self.opts.num_layers {
                let level_in = if k == 0 { self.inputs } else { 2 * h };
                let m = self.level_rows(k, batch);
                // With `Last` both cells hand on their final state: no reordering.
                let partner = |r: usize| if m == seq_rows { rev_row(r) } else { r };
                let interleave = |partner: &dyn Fn(usize) -> usize| -> Vec<usize> {
                    (0..2 * m)
                        .map(|j| {
                            if j % 2 == 0 {
                                j / 2
                            } else {
                                m + partner(j / 2)
                            }
                        })
                        .collect()
                };
                let cat = interleave(&partner);
                let fwd: Vec<usize> = (0..m).map(|r| 2 * r).collect();
                let rev_d: Vec<usize> = (0..m).map(|r| 2 * partner(r) + 1).collect();
                let rev_plain: Vec<usize> = (0..m).map(|r| 2 * r + 1).collect();
                let x_len = size::mul(seq_rows, level_in, "recurrent input")?;
                let out_len = size::mul(m, 2 * h, "bidirectional output")?;
                bi.push(BiWs {
                    x_rev: ops.alloc(x_len)?,
                    dx_rev: ops.alloc(x_len)?,
                    stage: ops.alloc(out_len)?,
                    out: ops.alloc(out_len)?,
                    dout: ops.alloc(out_len)?,
                    cat_idx: index_buffer(ops, &cat)?,
                    fwd_idx: index_buffer(ops, &fwd)?,
                    rev_idx: index_buffer(ops, &rev_d)?,
                    cat_plain: index_buffer(ops, &interleave(&|r| r))?,
                    rev_plain: index_buffer(ops, &rev_plain)?,
                });
            }
        }
        let mut drops = Vec::new();
        if self.has_dropout() {
            for k in 0..self.opts.num_layers - 1 {
                let n = size::mul(self.level_rows(k, batch), self.outputs(), "dropout")?;
                drops.push(DropWs {
                    y: ops.alloc(n)?,
                    dy: ops.alloc(n)?,
                });
            }
        }
        Ok(StackWs {
            cells,
            bi,
            time_rev,
            drops,
        })
    }

    fn level_output<'a>(&self, ws: &'a StackWs, k: usize) -> Result<View<'a>> {
        if self.bidirectional() {
            Ok(ws.bi[k].out.view())
        } else {
            self.cells[k][0].output(&ws.cells[k][0])
        }
    }

    fn level_grad_output<'a>(&self, ws: &'a StackWs, k: usize) -> Result<View<'a>> {
        if self.bidirectional() {
            Ok(ws.bi[k].dout.view())
        } else {
            self.cells[k][0].grad_output(&ws.cells[k][0])
        }
    }

    /// What level `k > 0` reads: the level below's output, after dropout when there is one.
    fn level_input<'a>(&self, ws: &'a StackWs, x: View<'a>, k: usize) -> Result<View<'a>> {
        match (k, ws.drops.get(k.wrapping_sub(1))) {
            (0, _) => Ok(x),
            (_, Some(d)) => Ok(d.y.view()),
            _ => self.level_output(ws, k - 1),
        }
    }

    /// Where level `k > 0` writes its input gradient.
    fn level_input_grad<'a>(
        &self,
        ws: &'a StackWs,
        dx: Option<View<'a>>,
        k: usize,
    ) -> Result<Option<View<'a>>> {
        match (k, ws.drops.get(k.wrapping_sub(1))) {
            (0, _) => Ok(dx),
            (_, Some(d)) => Ok(Some(d.dy.view())),
            _ => self.level_grad_output(ws, k - 1).map(Some),
        }
    }

    /// PyTorch's inter-layer dropout on `src` into `dst`: masked in training, a copy
    /// otherwise. The backward pass is the same call on the gradient (same mask).
    fn drop(&self, f: &Flat<'_>, k: usize, src: View<'_>, dst: View<'_>) -> Result<()> {
        match f.rng {
            Some(state) => f.ops.dropout(
                src,
                dst,
                DropoutMask::new(state, self.stream | k as u32, self.opts.dropout),
            ),
            None => f.ops.copy(src, dst),
        }
    }

    /// Every cell's state, index `layer * directions + direction` (PyTorch's `h_0` order).
    pub fn state_views<'a>(&self, ws: &'a StackWs) -> Result<Vec<StateViews<'a>>> {
        let mut out = Vec::new();
        for (level, lws) in self.cells.iter().zip(&ws.cells) {
            for (c, w) in level.iter().zip(lws) {
                out.extend(c.state_views(w)?);
            }
        }
        Ok(out)
    }

    /// Every cell's state gradients, in the order of [`Stack::state_views`].
    pub fn state_grad_views<'a>(&self, ws: &'a StackWs) -> Vec<StateGradViews<'a>> {
        let cells = self.cells.iter().flatten().zip(ws.cells.iter().flatten());
        cells.flat_map(|(c, w)| c.state_grad_views(w)).collect()
    }

    pub fn output<'a>(&self, ws: &'a StackWs) -> Result<View<'a>> {
        self.level_output(ws, self.opts.num_layers - 1)
    }

    pub fn grad_output<'a>(&self, ws: &'a StackWs) -> Result<View<'a>> {
        self.level_grad_output(ws, self.opts.num_layers - 1)
    }

    /// `x` is time-major, `steps * batch x inputs`.
    pub fn forward(&self, f: &Flat<'_>, ws: &StackWs, x: View<'_>) -> Result<()> {
        for k in 0..self.opts.num_layers {
            let xin = self.level_input(ws, x, k)?;
            match (ws.bi.get(k), self.reversal(f, ws)) {
                (Some(bi), Some(rev)) => self.bi_forward(f, ws, k, xin, (bi, rev))?,
                _ => self.cells[k][0].forward(f, &ws.cells[k][0], xin)?,
            }
            if let Some(d) = ws.drops.get(k) {
                self.drop(f, k, self.level_output(ws, k)?, d.y.view())?;
            }
        }
        Ok(())
    }

    /// The forward pass of bidirectional level `k` on `xin`, `rev` its time reversal: both
    /// cells, then their outputs interleaved into `bi.out`.
    fn bi_forward(
        &self,
        f: &Flat<'_>,
        ws: &StackWs,
        k: usize,
        xin: View<'_>,
        (bi, rev): (&BiWs, View<'_>),
    ) -> Result<()> {
        let h = self.hidden;
        let level = &self.cells[k];
        let level_in = xin.len() / rev.len();
        f.ops
            .gather_rows(IndexedRows::new(xin, rev, bi.x_rev.view(), level_in))?;
        // Both directions' sequence ops at once: one launch where the GPU runs them
        // block-local (a few SMs each at small batches).
        let (wf, wr) = (&ws.cells[k][0], &ws.cells[k][1]);
        let forward = level[0].cell_forward_call(f, wf, xin)?;
        let reverse = level[1].cell_forward_call(f, wr, bi.x_rev.view())?;
        f.ops.sequence_pair(forward, reverse)?;
        level[0].cell_forward_finish(f, wf)?;
        level[1].cell_forward_finish(f, wr)?;
        let fo = level[0].output(wf)?;
        let ro = level[1].output(wr)?;
        let m = fo.len();
        f.ops.copy(fo, bi.stage.slice(0, m)?)?;
        let cat = match (&f.lengths, m == rev.len() * h) {
            // Padded: the reverse cell's sequence back in time order first.
            (Some(lv), true) => {
                let back = bi.stage.slice(m, m)?;
                f.ops
                    .gather_rows(IndexedRows::new(ro, lv.reversal, back, h))?;
                bi.cat_plain.view()
            }
            _ => {
                f.ops.copy(ro, bi.stage.slice(m, m)?)?;
                bi.cat_idx.view()
            }
        };
        f.ops
            .gather_rows(IndexedRows::new(bi.stage.view(), cat, bi.out.view(), h))
    }

    /// The time reversal of the reverse direction: each sample's own for a padded batch, else
    /// the whole sequence's; `None` with one direction.
    fn reversal<'a>(&self, f: &Flat<'a>, ws: &'a StackWs) -> Option<View<'a>> {
        match (&f.lengths, &ws.time_rev) {
            (_, None) => None,
            (Some(lv), Some(_)) => Some(lv.reversal),
            (None, Some(rev)) => Some(rev.view()),
        }
    }

    /// The reverse cell's output gradient (in its reversed time order) from the level's.
    fn reverse_grad(&self, f: &Flat<'_>, bi: &BiWs, dst: View<'_>) -> Result<()> {
        let h = self.hidden;
        match f.lengths {
            Some(lv) if dst.len() == lv.reversal.len() * h => {
                // Padded: the reverse half in time order, then reversed per sample. `stage` is
                // free during the backward pass.
                let tmp = bi.stage.slice(0, dst.len())?;
                f.ops.gather_rows(IndexedRows::new(
                    bi.dout.view(),
                    bi.rev_plain.view(),
                    tmp,
                    h,
                ))?;
                f.ops
                    .gather_rows(IndexedRows::new(tmp, lv.reversal, dst, h))
            }
            _ => f
                .ops
                .gather_rows(IndexedRows::new(bi.dout.view(), bi.rev_idx.view(), dst, h)),
        }
    }

    /// Backpropagation through every level, from the gradient the next layer left in
    /// [`Stack::grad_output`]; overwrites every cell's parameter gradients, and writes `dx`
    /// when given.
    pub fn backward(&self, f: &Flat<'_>, ws: &StackWs, input: LayerInput<'_>) -> Result<()> {
        let LayerInput { x, dx } = input;
        let h = self.hidden;
        for k in (0..self.opts.num_layers).rev() {
            if let Some(d) = ws.drops.get(k) {
                self.drop(f, k, d.dy.view(), self.level_grad_output(ws, k)?)?;
            }
            let xin = self.level_input(ws, x, k)?;
            let dxin = self.level_input_grad(ws, dx, k)?;
            let level = &self.cells[k];
            let (wf, wr) = (&ws.cells[k][0], ws.cells[k].get(1));
            if let (Some(bi), Some(wr)) = (ws.bi.get(k), wr) {
                f.ops.gather_rows(IndexedRows::new(
                    bi.dout.view(),
                    bi.fwd_idx.view(),
                    level[0].grad_output(wf)?,
                    h,
                ))?;
                self.reverse_grad(f, bi, level[1].grad_output(wr)?)?;
                // Both directions' sequence ops at once, as in the forward pass.
                let (reverse, state_r) = level[1].cell_backward_call(f, wr)?;
                let (forward, state_f) = level[0].cell_backward_call(f, wf)?;
                f.ops.sequence_pair(reverse, forward)?;
                let dx_rev = dxin.map(|_| bi.dx_rev.view());
                let rev_input = LayerInput {
                    x: bi.x_rev.view(),
                    dx: dx_rev,
                };
                level[1].cell_backward_rest(f, wr, rev_input, state_r)?;
                let fwd_input = LayerInput { x: xin, dx: dxin };
                level[0].cell_backward_rest(f, wf, fwd_input, state_f)?;
            } else {
                level[0].backward(f, wf, xin, dxin)?;
            }
            if let (Some(dxin), Some(bi), Some(rev)) = (dxin, ws.bi.get(k), self.reversal(f, ws)) {
                // `x_rev` is free once the reverse cell's backward pass has run; every
                // reversal is its own inverse.
                let level_in = dxin.len() / rev.len();
                f.ops.gather_rows(IndexedRows::new(
                    bi.dx_rev.view(),
                    rev,
                    bi.x_rev.view(),
                    level_in,
                ))?;
                f.ops.axpy(1.0, bi.x_rev.view(), dxin)?;
            }
        }
        Ok(())
    }
}
