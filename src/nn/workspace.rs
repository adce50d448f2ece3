//! Per-batch-size device buffers and the pieces of a step (load a batch, forward, loss,
//! backward) that training, evaluation and prediction share. Nothing here allocates or reads
//! back once a workspace exists.

use crate::ops::IndexedRows;
use crate::ops::{Gemm, LossOutputs, MatShape, Mse, SoftmaxCrossEntropy};
use parking_lot::Mutex;

use crate::buffer::{Buffer, View};
use crate::dtype::DType;
use crate::error::Result;
use crate::ops::TypedMemory;

use super::data::{Dataset, Targets};
use super::dense::PendingGrad;
use super::layer::{Flat, Layer, LayerWs};
use super::loss::Loss;
use super::network::Network;
use super::padding::{LengthWs, widest_cell};
use super::size;
use super::step_graph::EvalGraphs;

/// [`crate::Error::InvalidData`] for token ids given to a network without a first embedding.
pub(crate) fn token_ids_need_an_embedding() -> crate::Error {
    crate::Error::InvalidData(
        "the data holds token ids, which only a network whose first layer is an embedding takes"
            .into(),
    )
}

/// A data set uploaded once: inputs `[n, width]` (f32 features, or u32 token ids for an
/// embedding) and targets `[n, target_width]` (u32 class labels, or f32 values).
pub(crate) struct DeviceData {
    pub x: Buffer,
    pub y: Buffer,
    pub n: usize,
    /// u32 per-sample lengths, when the network runs with lengths.
    pub lens: Option<Buffer>,
}

/// Which samples a batch holds.
pub(crate) enum Rows<'a> {
    /// Rows of the data named by an index view on the device (a slice of the epoch's
    /// permutation).
    Gather(View<'a>),
    /// The contiguous rows `start..start + batch`.
    Range(usize),
}

/// A batch's inputs and targets as a pass reads them: the workspace's own buffers or rows of
/// the uploaded data ([`Network::load_rows`] says which).
#[derive(Clone, Copy)]
pub(crate) struct Batch<'a> {
    x: View<'a>,
    /// `None` for a batch without targets (prediction), which no loss may read.
    y: Option<View<'a>>,
}

/// Every buffer one step at one batch size needs.
pub(crate) struct Workspace {
    /// Evaluation and prediction batches recorded against these buffers. First, so they are
    /// dropped before the buffers they refer to.
    pub graphs: Mutex<EvalGraphs>,
    pub batch: usize,
    pub(crate) xb: Buffer,
    x_tm: Option<Buffer>,
    /// Time-major row `t * B + b` comes from batch-major row `b * T + t`.
    idx_tm: Option<Buffer>,
    /// The inverse: batch-major row `b * T + t` comes from time-major row `t * B + b`.
    idx_bm: Option<Buffer>,
    pub(crate) yb: Buffer,
    y_tm: Option<Buffer>,
    pub out_bm: Option<Buffer>,
    layers: Vec<LayerWs>,
    row_loss: Buffer,
    row_correct: Buffer,
    /// The batch's lengths and their layout, when the network runs with lengths.
    pub(crate) lengths: Option<LengthWs>,
    /// One weight per loss row, when the loss skips padded rows or an ignored label.
    pub(crate) loss_weights: Option<Buffer>,
    /// Mixed precision only ([`super::Precision`]): the f32 input features cast to the low
    /// type for a first dense layer, and the f32 side of the loss.
    mixed: Option<MixedWs>,
}

/// The buffers a bf16/f16 workspace adds: where the network's input and output cross
/// between f32 and the low type.
struct MixedWs {
    /// The input features in the low type, when a dense layer reads them.
    x_low: Option<Buffer>,
    /// The output cast to f32, what the loss and prediction read; `None` where the last layer
    /// writes its output in f32 itself (a linear dense layer).
    out32: Option<Buffer>,
    /// The loss gradient in f32, and the same multiplied by the loss scale (f16).
    dout32: Buffer,
    dscaled: Buffer,
}

impl Network {
    /// The flat buffers for evaluation and prediction (dropout off).
    pub(crate) fn flat(&self) -> Flat<'_> {
        Flat {
            ops: self.ctx.ops(),
            params: &self.params,
            weights: self.low.as_ref().unwrap_or(&self.params),
            grads: &self.grads,
            rng: None,
            state_grads: false,
            lengths: None,
        }
    }

    /// The flat buffers for a training pass (dropout on, masks from the random state).
    pub(crate) fn train_flat(&self) -> Flat<'_> {
        Flat {
            rng: Some(self.rng.view()),
            ..self.flat()
        }
    }

    /// True when some layer draws random masks (so a training step advances the state).
    pub(crate) fn uses_rng(&self) -> bool {
        self.layers.iter().any(|l| l.uses_rng())
    }

    /// Target values per sample: one label per output step, or `out_features` values per step.
    pub(crate) fn target_width(&self) -> usize {
        match self.loss {
            Loss::SoftmaxCrossEntropy => self.out_steps,
            Loss::Mse => self.out_steps * self.output_features(),
        }
    }

    /// The element type of the first layer's input: u32 token ids for an embedding, else f32.
    pub(crate) fn input_dtype(&self) -> DType {
        match self.layers[0] {
            Layer::Embedding(_) => DType::U32,
            _ => DType::F32,
        }
    }

    /// The element type of the targets: u32 class labels for cross-entropy, else f32 values.
    pub(crate) fn target_dtype(&self) -> DType {
        match self.loss {
            Loss::SoftmaxCrossEntropy => DType::U32,
            Loss::Mse => DType::F32,
        }
    }

    /// `data`'s inputs on the device, as the first layer reads them: token ids as u32
    /// (converted from f32 features holding ids, checked, for an embedding), else f32.
    pub(crate) fn upload_inputs(&self, data: &Dataset) -> Result<Buffer> {
        let ops = self.ctx.ops();
        let x = ops.alloc_as(self.input_dtype(), data.len() * data.width())?;
        match (data.token_ids(), &self.layers[0]) {
            (Some(ids), Layer::Embedding(e)) => {
                e.check_u32_ids(ids, data.width())?;
                ops.upload_as(x.view(), ids)?;
            }
            (None, Layer::Embedding(e)) => {
                ops.upload_as(x.view(), &e.ids_of(data.features(), data.width())?)?
            }
            (None, _) => ops.upload(x.view(), data.features())?,
            (Some(_), _) => return Err(token_ids_need_an_embedding()),
        }
        Ok(x)
    }

    pub(crate) fn upload(&self, data: &Dataset) -> Result<DeviceData> {
        let ops = self.ctx.ops();
        let x = self.upload_inputs(data)?;
        let y = match data.targets() {
            Targets::Classes { labels, .. } => {
                let y = ops.alloc_as(DType::U32, labels.len())?;
                ops.upload_as(y.view(), labels)?;
                y
            }
            Targets::Values { values, .. } => {
                let y = ops.alloc(values.len())?;
                ops.upload(y.view(), values)?;
                y
            }
        };
        Ok(DeviceData {
            x,
            y,
            n: data.len(),
            lens: self.upload_lengths(data)?,
        })
    }

    /// Allocates every buffer a step over `batch` samples needs. Sizes are checked before
    /// anything is allocated; use [`Network::workspace`] to get one.
    pub(crate) fn build_workspace(&self, batch: usize) -> Result<Workspace> {
        let ops = self.ctx.ops();
        let t = self.in_steps;
        let seq_rows = size::mul(batch, t, "batch x sequence length")?;
        let x_len = size::mul(batch, self.input_width(), "batch x input width")?;
        let tw = self.target_width();
        let y_len = size::mul(batch, tw, "batch x target width")?;
        let out_rows = size::mul(batch, self.out_steps, "batch x output steps")?;
        let out_len = size::mul(out_rows, self.output_features(), "output rows x features")?;
        let (idx_tm, idx_bm, x_tm) = if t > 1 {
            size::check_indexed_rows(seq_rows, "batch x sequence length")?;
            // Every row number fits u32 (checked above).
            let mut tm = vec![0u32; seq_rows];
            let mut bm = vec![0u32; seq_rows];
            for s in 0..t {
                for b in 0..batch {
                    tm[s * batch + b] = (b * t + s) as u32;
                    bm[b * t + s] = (s * batch + b) as u32;
                }
            }
            let a = ops.alloc_as(DType::U32, tm.len())?;
            ops.upload_as(a.view(), &tm)?;
            let c = ops.alloc_as(DType::U32, bm.len())?;
            ops.upload_as(c.view(), &bm)?;
            (
                Some(a),
                Some(c),
                Some(ops.alloc_as(self.input_dtype(), x_len)?),
            )
        } else {
            (None, None, None)
        };
        let (y_tm, out_bm) = if self.out_steps > 1 {
            let y_tm = ops.alloc_as(self.target_dtype(), y_len)?;
            (Some(y_tm), Some(ops.alloc(out_len)?))
        } else {
            (None, None)
        };
        let low = self.precision.low_dtype();
        let mut layers = Vec::new();
        let last = self.layers.len() - 1;
        for (i, (layer, &steps)) in self.layers.iter().zip(&self.layer_steps).enumerate() {
            let rows = size::mul(batch, steps, "batch x sequence length")?;
            let at = (i == 0, i == last);
            layers.push(layer.workspace_in(ops, (batch, rows), low, at)?);
        }
        let last_is_f32 = self.layers[last].output(&layers[last])?.dtype() == DType::F32;
        let mixed = match low {
            Some(t) => Some(MixedWs {
                x_low: matches!(self.layers[0], Layer::Dense(_))
                    .then(|| ops.alloc_as(t, x_len))
                    .transpose()?,
                out32: (!last_is_f32).then(|| ops.alloc(out_len)).transpose()?,
                dout32: ops.alloc(out_len)?,
                dscaled: ops.alloc(out_len)?,
            }),
            None => None,
        };
        let ws = Workspace {
            graphs: Mutex::new(EvalGraphs::new()),
            batch,
            xb: ops.alloc_as(self.input_dtype(), x_len)?,
            x_tm,
            idx_tm,
            idx_bm,
            yb: ops.alloc_as(self.target_dtype(), y_len)?,
            y_tm,
            out_bm,
            layers,
            row_loss: ops.alloc(out_rows)?,
            row_correct: ops.alloc(out_rows)?,
            lengths: self
                .padding
                .lengths
                .then(|| LengthWs::new(ops, batch, t, widest_cell(&self.layers)))
                .transpose()?,
            loss_weights: self
                .weighs_loss()
                .then(|| ops.alloc(out_rows))
                .transpose()?,
            mixed,
        };
        Ok(ws)
    }

    /// Puts a batch's inputs (and targets, when `data` has them) where a pass reads them,
    /// time-major for sequence models, and returns the views to pass on. Gathered rows and
    /// time-major rows go into the workspace. Contiguous rows of a model without steps are
    /// copied into the workspace too unless `in_place`, when the pass reads them where they
    /// are: the caller says so only for a pass that runs op by op, since a recorded graph
    /// keeps the addresses it was recorded with.
    pub(crate) fn load_rows<'a>(
        &'a self,
        ws: &'a Workspace,
        x: View<'a>,
        y: Option<View<'a>>,
        rows: &Rows<'_>,
        in_place: bool,
    ) -> Result<Batch<'a>> {
        let ops = self.ctx.ops();
        let b = ws.batch;
        let w = self.input_width();
        let tw = self.target_width();
        let (x, y, gathered) = match rows {
            Rows::Gather(idx) => {
                ops.gather_rows(IndexedRows::new(x, *idx, ws.xb.view(), w))?;
                if let Some(y) = y {
                    ops.gather_rows(IndexedRows::new(y, *idx, ws.yb.view(), tw))?;
                }
                (ws.xb.view(), y.map(|_| ws.yb.view()), true)
            }
            Rows::Range(start) => {
                let y = y.map(|y| y.slice(start * tw, b * tw)).transpose()?;
                (x.slice(start * w, b * w)?, y, false)
            }
        };
        let x = match (&ws.idx_tm, &ws.x_tm) {
            (Some(idx), Some(x_tm)) => {
                ops.gather_rows(IndexedRows::new(
                    x,
                    idx.view(),
                    x_tm.view(),
                    w / self.in_steps,
                ))?;
                x_tm.view()
            }
            _ if gathered || in_place => x,
            _ => {
                ops.copy(x, ws.xb.view())?;
                ws.xb.view()
            }
        };
        let y = match (y, &ws.idx_tm, &ws.y_tm) {
            (Some(y), Some(idx), Some(y_tm)) => {
                ops.gather_rows(IndexedRows::new(
                    y,
                    idx.view(),
                    y_tm.view(),
                    tw / self.out_steps,
                ))?;
                Some(y_tm.view())
            }
            (Some(y), _, _) if !gathered && !in_place => {
                ops.copy(y, ws.yb.view())?;
                Some(ws.yb.view())
            }
            (y, _, _) => y,
        };
        Ok(Batch { x, y })
    }

    fn layer_input<'a>(
        &'a self,
        ws: &'a Workspace,
        batch: &Batch<'a>,
        i: usize,
    ) -> Result<View<'a>> {
        if i == 0 {
            match ws.mixed.as_ref().and_then(|m| m.x_low.as_ref()) {
                Some(x) => Ok(x.view()),
                None => Ok(batch.x),
            }
        } else {
            self.layers[i - 1].output(&ws.layers[i - 1])
        }
    }

    /// The state views of every recurrent cell of every layer at this workspace's batch size,
    /// one list per layer (empty for the other layers), each in PyTorch's `h_0` order.
    pub(crate) fn state_views<'a>(
        &'a self,
        ws: &'a Workspace,
    ) -> Result<Vec<Vec<super::cell_state::StateViews<'a>>>> {
        let layers = self.layers.iter().zip(&ws.layers);
        layers.map(|(l, w)| l.state_views(w)).collect()
    }

    /// The state-gradient views of every recurrent cell, as [`Self::state_views`].
    pub(crate) fn state_grad_views<'a>(
        &'a self,
        ws: &'a Workspace,
    ) -> Vec<Vec<super::cell_state::StateGradViews<'a>>> {
        let layers = self.layers.iter().zip(&ws.layers);
        layers.map(|(l, w)| l.state_grad_views(w)).collect()
    }

    /// The last layer's output (time-major rows for sequence outputs), in f32 (a copy of it
    /// in mixed precision).
    pub(crate) fn output_view<'a>(&'a self, ws: &'a Workspace) -> Result<View<'a>> {
        if let Some(out32) = ws.mixed.as_ref().and_then(|m| m.out32.as_ref()) {
            return Ok(out32.view());
        }
        let last = self.layers.len() - 1;
        self.layers[last].output(&ws.layers[last])
    }

    /// Queues what puts the output into batch-major rows (sample-major, then step), when
    /// they are not already: see [`Self::batch_major_view`].
    pub(crate) fn batch_major_gather(&self, ws: &Workspace) -> Result<()> {
        match (&ws.idx_bm, &ws.out_bm) {
            (Some(idx), Some(bm)) if self.out_steps > 1 => {
                let out = self.output_view(ws)?;
                self.ctx.ops().gather_rows(IndexedRows::new(
                    out,
                    idx.view(),
                    bm.view(),
                    self.output_features(),
                ))
            }
            _ => Ok(()),
        }
    }

    /// The output with batch-major rows, once [`Self::batch_major_gather`] has run.
    pub(crate) fn batch_major_view<'a>(&'a self, ws: &'a Workspace) -> Result<View<'a>> {
        match &ws.out_bm {
            Some(bm) if self.out_steps > 1 && ws.idx_bm.is_some() => Ok(bm.view()),
            _ => self.output_view(ws),
        }
    }

    /// Forward in evaluation mode (dropout is the identity).
    pub(crate) fn forward_ws(&self, ws: &Workspace, batch: &Batch<'_>) -> Result<()> {
        self.forward_with(ws, batch, &self.flat())
    }

    /// Forward in training mode, with the masks of the random state's current step.
    pub(crate) fn forward_train_ws(&self, ws: &Workspace, batch: &Batch<'_>) -> Result<()> {
        self.forward_with(ws, batch, &self.train_flat())
    }

    fn forward_with(&self, ws: &Workspace, batch: &Batch<'_>, f: &Flat<'_>) -> Result<()> {
        let f = &with_lengths(f, ws);
        if let Some(x_low) = ws.mixed.as_ref().and_then(|m| m.x_low.as_ref()) {
            f.ops.cast(batch.x, x_low.view())?;
        }
        for (i, layer) in self.layers.iter().enumerate() {
            let x = self.layer_input(ws, batch, i)?;
            layer.forward(f, &ws.layers[i], x)?;
        }
        if let Some(out32) = ws.mixed.as_ref().and_then(|m| m.out32.as_ref()) {
            let last = self.layers.len() - 1;
            f.ops
                .cast(self.layers[last].output(&ws.layers[last])?, out32.view())?;
        }
        Ok(())
    }

    /// Loss and its gradient (into the last layer's output gradient), mean over the batch's
    /// rows. With `acc` (2 elements), adds the summed loss to `acc[0]` and the number of
    /// correct rows to `acc[1]`, on the device.
    pub(crate) fn loss_ws(
        &self,
        ws: &Workspace,
        batch: &Batch<'_>,
        acc: Option<View<'_>>,
    ) -> Result<()> {
        self.scaled_loss_ws(ws, batch, acc, None)
    }

    /// [`Self::loss_ws`] whose gradient is multiplied by the device-side loss scale
    /// `loss_scale` (one f32, mixed precision only). In mixed precision the loss runs in f32
    /// on the f32 output (the last layer's own, or a copy) and its gradient is cast to the
    /// type of the last layer's output gradient where that is T.
    pub(crate) fn scaled_loss_ws(
        &self,
        ws: &Workspace,
        batch: &Batch<'_>,
        acc: Option<View<'_>>,
        loss_scale: Option<View<'_>>,
    ) -> Result<()> {
        let last = self.layers.len() - 1;
        let dlast = self.layers[last].grad_output(&ws.layers[last])?;
        let Some(m) = &ws.mixed else {
            return self.f32_loss_ws(ws, batch, acc, dlast);
        };
        // The output gradient of a last f32-only layer is its own f32 one: no cast.
        let f32_grad = dlast.dtype() == DType::F32;
        if f32_grad && loss_scale.is_none() {
            return self.f32_loss_ws(ws, batch, acc, dlast);
        }
        let ops = self.ctx.ops();
        self.f32_loss_ws(ws, batch, acc, m.dout32.view())?;
        match loss_scale {
            Some(scale) => {
                // dscaled = dout32 * scale as an n x 1 by 1 x 1 product: the scale stays on the
                // device, so a recorded step replays with the scale of its time.
                let n = m.dout32.len();
                let scaled = if f32_grad { dlast } else { m.dscaled.view() };
                ops.gemm(Gemm::new(n, 1, 1), m.dout32.view(), scale, scaled)?;
                if f32_grad {
                    return Ok(());
                }
                ops.cast(scaled, dlast)
            }
            None => ops.cast(m.dout32.view(), dlast),
        }
    }

    /// The loss over the f32 output, its gradient into `dout`.
    fn f32_loss_ws(
        &self,
        ws: &Workspace,
        batch: &Batch<'_>,
        acc: Option<View<'_>>,
        dout: View<'_>,
    ) -> Result<()> {
        let ops = self.ctx.ops();
        let out = self.output_view(ws)?;
        let rows = ws.batch * self.out_steps;
        let cols = self.output_features();
        let targets = batch.y.ok_or_else(|| {
            crate::Error::InvalidArgument("a loss over a batch loaded without targets".into())
        })?;
        let scale = 1.0 / rows as f32;
        if self.weighs_loss() {
            return self.weighted_loss_ws(ws, targets, (out, dout), acc);
        }
        match self.loss {
            Loss::SoftmaxCrossEntropy => ops.softmax_cross_entropy(SoftmaxCrossEntropy {
                logits: out,
                labels: targets,
                out: LossOutputs::new(dout, ws.row_loss.view(), acc),
                row_correct: ws.row_correct.view(),
                shape: MatShape::new(rows, cols),
                grad_scale: scale,
            }),
            Loss::Mse => ops.mse(Mse {
                pred: out,
                target: targets,
                out: LossOutputs::new(dout, ws.row_loss.view(), acc),
                shape: MatShape::new(rows, cols),
                grad_scale: scale,
            }),
        }
    }

    /// The loss of a network whose loss rows are weighed ([`Network::weigh_loss`]): the loss
    /// op without totals, then the weights, which add the totals.
    fn weighted_loss_ws(
        &self,
        ws: &Workspace,
        targets: View<'_>,
        (out, dout): (View<'_>, View<'_>),
        acc: Option<View<'_>>,
    ) -> Result<()> {
        let ops = self.ctx.ops();
        let rows = ws.batch * self.out_steps;
        let shape = MatShape::new(rows, self.output_features());
        let scale = 1.0 / rows as f32;
        let outs = LossOutputs::new(dout, ws.row_loss.view(), None);
        let correct = match self.loss {
            Loss::SoftmaxCrossEntropy => {
                ops.softmax_cross_entropy(SoftmaxCrossEntropy {
                    logits: out,
                    labels: targets,
                    out: outs,
                    row_correct: ws.row_correct.view(),
                    shape,
                    grad_scale: scale,
                })?;
                Some(ws.row_correct.view())
            }
            Loss::Mse => {
                ops.mse(Mse {
                    pred: out,
                    target: targets,
                    out: outs,
                    shape,
                    grad_scale: scale,
                })?;
                None
            }
        };
        self.weigh_loss(ws, targets, (dout, ws.row_loss.view(), correct), acc)
    }

    /// One training step on the batch already loaded into `ws`: forward, loss (its sums added
    /// to `acc`), backward, clipping when `clip` gives `(max_norm, norm_out)`, and one
    /// optimizer launch. It queues the same work on the same buffers every call, so
    /// [`super::step_graph::StepGraphs`] can record it once and replay it.
    pub(crate) fn train_step_ws(
        &self,
        ws: &Workspace,
        batch: &Batch<'_>,
        acc: View<'_>,
        clip: Option<(f32, View<'_>)>,
        opt: &super::optim::OptimizerState,
    ) -> Result<()> {
        self.forward_train_ws(ws, batch)?;
        self.scaled_loss_ws(ws, batch, Some(acc), opt.loss_scale())?;
        self.backward_ws(ws, batch)?;
        self.update_ws(clip, opt)
    }

    /// The second half of a training step, once the gradient buffer holds the step's
    /// gradients: clipping, the optimizer update and the dropout state's advance.
    pub(crate) fn update_ws(
        &self,
        clip: Option<(f32, View<'_>)>,
        opt: &super::optim::OptimizerState,
    ) -> Result<()> {
        let ops = self.ctx.ops();
        // Clipping sees the true gradients: unscaled first (f16).
        opt.unscale(ops, self.grads.view())?;
        if let Some((max, norm)) = clip {
            ops.clip_grad_norm(self.grads.view(), max, norm)?;
        }
        let low = self.low.as_ref().map(|b| b.view());
        opt.queue(ops, self.params.view(), self.grads.view(), low)?;
        opt.update_scale(ops)?;
        // The next step draws fresh masks; the counter moves on the device, so a recorded
        // step replays correctly.
        if self.uses_rng() {
            ops.rng_advance(self.rng.view())?;
        }
        Ok(())
    }

    /// Backward through every layer (after [`Self::forward_train_ws`], whose masks it
    /// reuses); overwrites the whole gradient buffer.
    pub(crate) fn backward_ws(&self, ws: &Workspace, batch: &Batch<'_>) -> Result<()> {
        self.backward_ws_then(ws, batch, &mut |_| Ok(()))
    }

    /// [`Self::backward_ws`], calling `after(i)` once layer `i`'s gradients are queued (last
    /// layer first), e.g. to start their all-reduce while earlier layers run backward.
    pub(crate) fn backward_ws_then(
        &self,
        ws: &Workspace,
        batch: &Batch<'_>,
        after: &mut dyn FnMut(usize) -> Result<()>,
    ) -> Result<()> {
        self.backward_flat(ws, batch, &self.train_flat(), after)
    }

    /// [`Self::backward_ws_then`] with the flat buffers `f` (which say, among other things,
    /// whether the recurrent layers form their state gradients).
    pub(crate) fn backward_flat(
        &self,
        ws: &Workspace,
        batch: &Batch<'_>,
        f: &Flat<'_>,
        after: &mut dyn FnMut(usize) -> Result<()>,
    ) -> Result<()> {
        let f = &with_lengths(f, ws);
        // A dense layer under a dense layer gets its output gradient unformed (the product the
        // layer above would have stored) and forms it in its own pass: one launch and one pass
        // over the matrix fewer where the layer above is thin.
        let mut pending: Option<PendingGrad<'_>> = None;
        for i in (0..self.layers.len()).rev() {
            let x = self.layer_input(ws, batch, i)?;
            let dx = if i == 0 {
                None
            } else {
                Some(self.layers[i - 1].grad_output(&ws.layers[i - 1])?)
            };
            match (&self.layers[i], &ws.layers[i]) {
                (Layer::Dense(d), LayerWs::Dense(dws)) => {
                    let defer = i > 0 && matches!(&self.layers[i - 1], Layer::Dense(_));
                    let dx = if defer { None } else { dx };
                    d.backward(f, dws, x, dx, pending.take())?;
                    if defer {
                        pending = Some(d.pending_input_grad(f, dws)?);
                    }
                }
                (layer, lws) => layer.backward(f, lws, x, dx)?,
            }
            after(i)?;
        }
        Ok(())
    }
}

/// `f` with the lengths of the batch loaded into `ws`, when the network runs with lengths.
fn with_lengths<'a>(f: &Flat<'a>, ws: &'a Workspace) -> Flat<'a> {
    Flat {
        ops: f.ops,
        params: f.params,
        weights: f.weights,
        grads: f.grads,
        rng: f.rng,
        state_grads: f.state_grads,
        lengths: ws.lengths.as_ref().map(LengthWs::views),
    }
}
