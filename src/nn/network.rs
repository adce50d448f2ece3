//! [`Network`]: a stack of layers over one flat parameter buffer, with forward, predict,
//! evaluate and gradient computation. Training lives in `train.rs`.

use crate::buffer::Buffer;
use crate::context::Context;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::tensor::Tensor;

use super::builder::NetworkBuilder;
use super::data::{Dataset, Targets};
use super::history::Evaluation;
use super::layer::{Layer, LayerDesc};
use super::loss::Loss;
use super::padding::Padding;
use super::params::{ParamInfo, ParamLayout};
use super::precision::Precision;
use super::size::MAX_INDEXED_ROWS;
use super::step_graph::EvalKind;
use super::workspace::{DeviceData, Rows, token_ids_need_an_embedding};
use super::workspace_cache::Workspaces;

/// Largest batch used by evaluation and prediction.
const EVAL_BATCH: usize = 1024;

/// A feed-forward or recurrent network on one device.
///
/// Parameters live in one device buffer and gradients in another; layers address them by
/// offset. Methods that run the network take `&mut self` because they reuse per-batch-size
/// device workspaces that are created on first use.
pub struct Network {
    pub(crate) ctx: Context,
    pub(crate) layers: Vec<Layer>,
    pub(crate) loss: Loss,
    pub(crate) layout: ParamLayout,
    pub(crate) params: Buffer,
    pub(crate) grads: Buffer,
    /// The random state of dropout masks ([`crate::ops::RNG_STATE_LEN`]); training steps
    /// advance its counter on the device.
    pub(crate) rng: Buffer,
    /// Steps per sample at the input (1 without a sequence).
    pub(crate) in_steps: usize,
    /// Steps per sample at each layer's input.
    pub(crate) layer_steps: Vec<usize>,
    /// Steps per sample at the output.
    pub(crate) out_steps: usize,
    pub(crate) workspaces: Workspaces,
    /// The padding (lengths, ignored label) the workspaces are built for.
    pub(crate) padding: Padding,
    /// The precision of evaluation and prediction, and of the last training
    /// ([`Network::set_precision`]).
    pub(crate) precision: Precision,
    /// The bf16/f16 copy of `params` that dense layers read in `Bf16`/`F16`; `None` in f32.
    pub(crate) low: Option<Buffer>,
}

impl std::fmt::Debug for Network {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Network")
            .field("device", &self.ctx.id())
            .field("layers", &self.layers())
            .field("loss", &self.loss)
            .field("parameters", &self.layout.total)
            .finish()
    }
}

impl Network {
    /// Starts describing a network whose parameters will live on `ctx`.
    pub fn builder(ctx: &Context) -> NetworkBuilder {
        NetworkBuilder::new(ctx)
    }

    /// The context the parameters live on.
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// The layers, in order.
    pub fn layers(&self) -> Vec<LayerDesc> {
        self.layers.iter().map(Layer::desc).collect()
    }

    /// The loss it trains with.
    pub fn loss(&self) -> Loss {
        self.loss
    }

    /// Every parameter tensor with its PyTorch-style name, shape and flat offset.
    pub fn param_info(&self) -> &[ParamInfo] {
        &self.layout.tensors
    }

    /// Total number of parameters.
    pub fn num_parameters(&self) -> usize {
        self.layout.total
    }

    /// Values per input sample (`steps * features` for sequence models).
    pub fn input_width(&self) -> usize {
        self.in_steps * self.layers[0].inputs()
    }

    /// Output features per step.
    pub fn output_features(&self) -> usize {
        self.layers[self.layers.len() - 1].outputs()
    }

    /// Output steps per sample (the sequence length when the model predicts at every step).
    pub fn output_steps(&self) -> usize {
        self.out_steps
    }

    /// All parameters, flat, in [`Network::param_info`] order.
    pub fn parameters(&self) -> Result<Vec<f32>> {
        let mut out = vec![0.0; self.layout.total];
        self.ctx.ops().download(self.params.view(), &mut out)?;
        Ok(out)
    }

    /// Replaces all parameters (`values.len() == num_parameters()`).
    pub fn set_parameters(&mut self, values: &[f32]) -> Result<()> {
        if values.len() != self.layout.total {
            return Err(Error::shape(
                "set_parameters",
                format!(
                    "{} values for {} parameters",
                    values.len(),
                    self.layout.total
                ),
            ));
        }
        if let Some(i) = values.iter().position(|v| !v.is_finite()) {
            return Err(Error::InvalidArgument(format!(
                "parameter {i} is {} (must be finite)",
                values[i]
            )));
        }
        self.ctx.ops().upload(self.params.view(), values)?;
        self.refresh_low()
    }

    /// The gradients left by the last backward pass, flat.
    pub fn gradients(&self) -> Result<Vec<f32>> {
        let mut out = vec![0.0; self.layout.total];
        self.ctx.ops().download(self.grads.view(), &mut out)?;
        Ok(out)
    }

    /// Moves the parameters to another context (workspaces are rebuilt there on demand).
    pub fn to_context(&mut self, ctx: &Context) -> Result<()> {
        let (params, grads, rng) = self.buffers_on(ctx)?;
        self.low = self.low_on(ctx.ops())?;
        self.rng = rng;
        self.workspaces.clear();
        self.params = params;
        self.grads = grads;
        self.ctx = ctx.clone();
        self.refresh_low()
    }

    /// This network's parameters, zeroed gradients and dropout state, copied to `ctx`.
    pub(super) fn buffers_on(&self, ctx: &Context) -> Result<(Buffer, Buffer, Buffer)> {
        let values = self.parameters()?;
        let ops = ctx.ops();
        let params = ops.alloc(values.len())?;
        ops.upload(params.view(), &values)?;
        let grads = ops.alloc(values.len())?;
        ops.fill(grads.view(), 0.0)?;
        let mut state = vec![0.0f32; self.rng.len()];
        self.ctx.ops().download(self.rng.view(), &mut state)?;
        let rng = ops.alloc(state.len())?;
        ops.upload(rng.view(), &state)?;
        Ok((params, grads, rng))
    }

    /// Token ids for a first [`super::NetworkBuilder::embedding`] layer must all be in its
    /// table; checked on the host so no kernel ever sees an invalid id.
    fn check_ids(&self, features: &[f32]) -> Result<()> {
        match &self.layers[0] {
            Layer::Embedding(e) => e.check_ids(features, self.input_width()),
            _ => Ok(()),
        }
    }

    /// Checks that `data` fits this network: input width, kind of targets, classes, steps,
    /// and token ids when the first layer is an embedding.
    pub fn check_data(&self, data: &Dataset) -> Result<()> {
        if data.width() != self.input_width() {
            return Err(Error::InvalidData(format!(
                "samples have {} values but the network takes {}",
                data.width(),
                self.input_width()
            )));
        }
        match (data.token_ids(), &self.layers[0]) {
            (Some(ids), Layer::Embedding(e)) => e.check_u32_ids(ids, data.width())?,
            (Some(_), _) => return Err(token_ids_need_an_embedding()),
            (None, _) => self.check_ids(data.features())?,
        }
        let c = self.output_features();
        match (self.loss, data.targets()) {
            (
                Loss::SoftmaxCrossEntropy,
                Targets::Classes {
                    classes,
                    per_sample,
                    ..
                },
            ) => {
                if *classes > MAX_INDEXED_ROWS {
                    return Err(Error::InvalidData(format!(
                        "{classes} classes; labels are u32 on the device, so at most \
                         {MAX_INDEXED_ROWS} are supported"
                    )));
                }
                if *classes > c {
                    return Err(Error::InvalidData(format!(
                        "data has {classes} classes but the network outputs {c}"
                    )));
                }
                if *per_sample != self.out_steps {
                    return Err(Error::InvalidData(format!(
                        "data has {per_sample} label(s) per sample, the network predicts {} step(s)",
                        self.out_steps
                    )));
                }
            }
            (Loss::Mse, Targets::Values { width, .. }) => {
                if *width != self.target_width() {
                    return Err(Error::InvalidData(format!(
                        "data has {width} target values per sample, the network outputs {}",
                        self.target_width()
                    )));
                }
            }
            (Loss::SoftmaxCrossEntropy, _) => {
                return Err(Error::InvalidData(
                    "cross-entropy needs class labels, the data has real targets".into(),
                ));
            }
            (Loss::Mse, _) => {
                return Err(Error::InvalidData(
                    "MSE needs real-valued targets, the data has class labels".into(),
                ));
            }
        }
        Ok(())
    }

    /// Samples per evaluation batch: [`EVAL_BATCH`], fewer for sequences so long that the
    /// batch's time-major rows would pass [`MAX_INDEXED_ROWS`].
    fn eval_batch(&self) -> usize {
        // A bidirectional layer indexes its output as twice the rows, half as wide.
        let bi = self
            .layers
            .iter()
            .any(|l| matches!(l, Layer::Stack(s) if s.opts.bidirectional));
        let rows_per_sample = self.in_steps * if bi { 2 } else { 1 };
        EVAL_BATCH.min(((MAX_INDEXED_ROWS - 1) / rows_per_sample).max(1))
    }

    /// Runs the network on `x` (`[n, input_width]`, on this network's context) and returns
    /// the outputs, `[n, output_features]` or `[n, steps, output_features]`. With an
    /// embedding first, `x` holds token ids (u32, or f32 holding exact integers, which are
    /// converted) and is read back once to check them.
    pub fn forward(&mut self, x: &Tensor) -> Result<Tensor> {
        let converted = self.check_forward_input(x)?;
        self.forward_checked(converted.as_ref().unwrap_or(x))
    }

    /// Checks the input of a forward pass: whole samples, and with an embedding first, valid
    /// token ids; returns the ids as u32 where `x` held them as f32.
    pub(crate) fn check_forward_input(&self, x: &Tensor) -> Result<Option<Tensor>> {
        let w = self.input_width();
        if x.is_empty() || x.len() % w != 0 {
            return Err(Error::shape(
                "forward",
                format!("{} input values are not whole samples of {w}", x.len()),
            ));
        }
        if let Layer::Embedding(e) = &self.layers[0] {
            // Ids must be checked before any kernel reads them; this input is on the device,
            // so it is read back once (training and evaluation check their data on the host).
            if x.dtype() == DType::U32 {
                e.check_u32_ids(&x.to_vec_as::<u32>()?, w)?;
            } else {
                let ids = e.ids_of(&x.to_vec()?, w)?;
                return Ok(Some(self.ctx.tensor_as(x.shape(), &ids)?));
            }
        }
        Ok(None)
    }

    /// [`Network::forward`] on input whose ids (if any) are already checked. Each batch is
    /// copied into the workspace, then runs (or replays) its recorded forward, then is copied
    /// out: the copies, whose addresses change, stay outside the recording. Where the forward
    /// runs op by op, it reads the batch's rows in place instead.
    fn forward_checked(&mut self, x: &Tensor) -> Result<Tensor> {
        // Inputs given here carry no lengths: every sample runs its whole sequence.
        self.use_padding(Padding {
            lengths: false,
            ..self.padding
        });
        let w = self.input_width();
        let n = x.len() / w;
        let cols = self.output_features();
        let out_w = self.out_steps * cols;
        let shape: Vec<usize> = if self.out_steps > 1 {
            vec![n, self.out_steps, cols]
        } else {
            vec![n, cols]
        };
        let out = self.ctx.zeros(&shape)?;
        let graphs = self.workspaces.graphs_on();
        let mut runs = Vec::new();
        let mut start = 0;
        while start < n {
            let b = (n - start).min(self.eval_batch());
            let (net, ws) = self.workspace(b)?;
            let ops = net.ctx.ops();
            let mut ws_graphs = ws.graphs.lock();
            let in_place = ws_graphs.runs_op_by_op(EvalKind::Forward, b, graphs);
            let batch = net.load_rows(ws, x.view(), None, &Rows::Range(start), in_place)?;
            runs.push(ws_graphs.run(&net.ctx, EvalKind::Forward, b, graphs, || {
                net.forward_ws(ws, &batch)?;
                net.batch_major_gather(ws)
            })?);
            let y = net.batch_major_view(ws)?;
            ops.copy(y, out.view().slice(start * out_w, b * out_w)?)?;
            start += b;
        }
        self.workspaces.count(&runs);
        Ok(out)
    }

    /// Outputs for host features (`[n, input_width]`), on the host.
    pub fn predict(&mut self, features: &[f32]) -> Result<Vec<f32>> {
        if let Some(i) = features.iter().position(|v| !v.is_finite()) {
            return Err(Error::InvalidData(format!(
                "row {}: feature column {} is {} (values must be finite)",
                i / self.input_width(),
                i % self.input_width(),
                features[i]
            )));
        }
        let w = self.input_width();
        if features.is_empty() || features.len() % w != 0 {
            return Err(Error::InvalidData(format!(
                "{} feature values are not whole samples of {w}",
                features.len()
            )));
        }
        let shape = [features.len() / w, w];
        let x = match &self.layers[0] {
            Layer::Embedding(e) => self.ctx.tensor_as(&shape, &e.ids_of(features, w)?)?,
            _ => self.ctx.tensor(&shape, features)?,
        };
        self.forward_checked(&x)?.to_vec()
    }

    /// [`Network::predict`] for a network whose first layer is an embedding, on token ids as
    /// they are (`[n, steps]`, each in `0..num_embeddings`): no conversion, and ids of any size
    /// the table has (f32 holds integers exactly only up to 2^24).
    pub fn predict_ids(&mut self, ids: &[u32]) -> Result<Vec<f32>> {
        let w = self.input_width();
        let Layer::Embedding(e) = &self.layers[0] else {
            return Err(token_ids_need_an_embedding());
        };
        if ids.is_empty() || ids.len() % w != 0 {
            return Err(Error::InvalidData(format!(
                "{} token ids are not whole samples of {w}",
                ids.len()
            )));
        }
        e.check_u32_ids(ids, w)?;
        let x = self.ctx.tensor_as(&[ids.len() / w, w], ids)?;
        self.forward_checked(&x)?.to_vec()
    }

    /// The arg-max class of every output row (every step of every sample for sequence
    /// outputs).
    pub fn predict_classes(&mut self, features: &[f32]) -> Result<Vec<usize>> {
        let out = self.predict(features)?;
        Ok(out
            .chunks(self.output_features())
            .map(|row| {
                row.iter()
                    .enumerate()
                    .fold((0, f32::NEG_INFINITY), |best, (i, &v)| {
                        if v > best.1 { (i, v) } else { best }
                    })
                    .0
            })
            .collect())
    }

    /// Mean loss (and accuracy) over `data`.
    pub fn evaluate(&mut self, data: &Dataset) -> Result<Evaluation> {
        self.check_data(data)?;
        self.adopt_padding(data)?;
        let dd = self.upload(data)?;
        self.evaluate_device(&dd, true)
    }

    /// Evaluation over uploaded data: metrics accumulate on the device and are read once.
    /// Each batch size's forward and loss are recorded once as a graph and replayed (with
    /// `graphs`, [`Network::set_graphs`] and a device that records); the batch is copied into
    /// the workspace and the accumulator zeroed outside the recording. Batches that run op by
    /// op read their rows in place.
    pub(crate) fn evaluate_device(&mut self, dd: &DeviceData, graphs: bool) -> Result<Evaluation> {
        let graphs = graphs && self.workspaces.graphs_on();
        self.workspaces.reset_eval_acc(self.ctx.ops())?;
        let mut runs = Vec::new();
        let mut start = 0;
        while start < dd.n {
            let b = (dd.n - start).min(self.eval_batch());
            let (net, ws) = self.workspace(b)?;
            // reset_eval_acc created it; only `clear` drops it, and nothing here clears.
            let acc = net.workspaces.eval_acc().ok_or_else(|| {
                Error::InvalidArgument("evaluation accumulator dropped during evaluation".into())
            })?;
            let mut ws_graphs = ws.graphs.lock();
            let in_place = ws_graphs.runs_op_by_op(EvalKind::Loss, b, graphs);
            let rows = Rows::Range(start);
            net.load_lengths(ws, dd, &rows)?;
            let batch = net.load_rows(ws, dd.x.view(), Some(dd.y.view()), &rows, in_place)?;
            runs.push(ws_graphs.run(&net.ctx, EvalKind::Loss, b, graphs, || {
                net.forward_ws(ws, &batch)?;
                net.loss_ws(ws, &batch, Some(acc.view()))
            })?);
            start += b;
        }
        self.workspaces.count(&runs);
        let mut sums = [0.0f32; 2];
        if let Some(acc) = self.workspaces.eval_acc() {
            self.ctx.ops().download(acc.view(), &mut sums)?;
        }
        let rows = (dd.n * self.out_steps) as f32;
        Ok(Evaluation {
            loss: sums[0] / rows,
            accuracy: self.loss.is_classification().then(|| sums[1] / rows),
        })
    }

    /// Whether [`Network::evaluate`], [`Network::predict`] and [`Network::forward`] record
    /// each batch size's device work once as a graph and replay it (on by default; CUDA and
    /// HIP record, other devices run op by op either way). The results are the same either
    /// way. Training steps follow [`super::TrainingConfig::graphs`] instead, and the
    /// per-epoch validation follows both; `RNN_GRAPHS=off` turns every graph off.
    pub fn set_graphs(&mut self, enabled: bool) {
        self.workspaces.set_graphs(enabled);
    }

    /// `(recorded, replayed)`: how many evaluation and prediction batches were recorded as
    /// graphs, and how many were replayed from one, since the network was built. For tests.
    #[cfg(feature = "testing")]
    #[doc(hidden)]
    pub fn eval_graph_counts(&self) -> (u64, u64) {
        self.workspaces.counts()
    }

    /// Forward and backward over all of `data` as one batch, leaving the gradients of the mean
    /// loss in the gradient buffer ([`Network::gradients`]); returns the mean loss. Meant for
    /// gradient checks and custom training loops. It runs in training mode (dropout on) with
    /// the random state's current masks, which it does not advance: repeated calls see the
    /// same masks, so finite differences of its loss match its gradients.
    pub fn compute_gradients(&mut self, data: &Dataset) -> Result<f32> {
        self.check_data(data)?;
        self.adopt_padding(data)?;
        let dd = self.upload(data)?;
        let ops = self.ctx.ops();
        let acc = ops.alloc(2)?;
        ops.fill(acc.view(), 0.0)?;
        let (net, ws) = self.workspace(dd.n)?;
        net.load_lengths(ws, &dd, &Rows::Range(0))?;
        let batch = net.load_rows(ws, dd.x.view(), Some(dd.y.view()), &Rows::Range(0), true)?;
        net.forward_train_ws(ws, &batch)?;
        net.loss_ws(ws, &batch, Some(acc.view()))?;
        net.backward_ws(ws, &batch)?;
        let mut sums = [0.0f32; 2];
        self.ctx.ops().download(acc.view(), &mut sums)?;
        Ok(sums[0] / (dd.n * self.out_steps) as f32)
    }
}
