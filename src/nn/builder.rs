//! [`NetworkBuilder`]: describe the layers, then `build` checks the chain of shapes, lays out
//! the flat parameter buffer and initializes it from the seed.

use crate::context::Context;
use crate::error::{Error, Result};
use crate::ops::Activation;

use super::dense::Dense;
use super::dropout::Dropout;
use super::embedding::Embedding;
use super::gru::Gru;
use super::layer::Layer;
use super::layer_norm::{DEFAULT_EPS, LayerNorm};
use super::loss::Loss;
use super::lstm::Lstm;
use super::network::Network;
use super::params::ParamLayout;
use super::recurrent::RnnOutput;
use super::rnn::Rnn;
use super::size::{self, MAX_INDEXED_ROWS};
use super::stack::{RecurrentCell, RecurrentOptions, Stack};
use super::workspace_cache::Workspaces;

#[derive(Debug, Clone, Copy)]
enum Spec {
    Dense(usize, usize, Activation),
    Rnn(usize, usize, Activation, RnnOutput),
    Lstm(usize, usize, RnnOutput),
    Gru(usize, usize, RnnOutput),
    Stack(usize, usize, RecurrentCell, RnnOutput, RecurrentOptions),
    /// Drop probability; the width is the previous layer's.
    Dropout(f32),
    /// Features and epsilon.
    LayerNorm(usize, f32),
    /// Table rows and vector width.
    Embedding(usize, usize),
}

impl Spec {
    /// Input and output widths; `prev` is the previous layer's output width, which layers
    /// that keep their width (dropout) take (`None` when they come first: an error).
    fn sizes(self, prev: Option<usize>) -> Option<(usize, usize)> {
        match self {
            Spec::Dense(a, b, _)
            | Spec::Rnn(a, b, _, _)
            | Spec::Lstm(a, b, _)
            | Spec::Gru(a, b, _) => Some((a, b)),
            Spec::LayerNorm(f, _) => Some((f, f)),
            Spec::Embedding(_, d) => Some((1, d)),
            Spec::Dropout(_) => prev.map(|w| (w, w)),
            Spec::Stack(a, b, _, _, o) => Some((a, b.saturating_mul(o.directions()))),
        }
    }

    /// How a recurrent layer hands on its states; `None` for a dense layer.
    fn recurrent_output(self) -> Option<RnnOutput> {
        match self {
            Spec::Dense(..) | Spec::Dropout(..) | Spec::LayerNorm(..) | Spec::Embedding(..) => None,
            Spec::Rnn(.., o) | Spec::Lstm(.., o) | Spec::Gru(.., o) => Some(o),
            Spec::Stack(_, _, _, o, _) => Some(o),
        }
    }
}

/// Builds a [`Network`] layer by layer.
///
/// ```
/// use rnn::nn::{Loss, Network};
/// use rnn::Activation;
/// let ctx = rnn::Context::cpu();
/// let net = Network::builder(&ctx)
///     .dense(784, 128, Activation::Relu)
///     .dense(128, 10, Activation::Identity)
///     .build(Loss::SoftmaxCrossEntropy);
/// # let _ = net;
/// ```
#[derive(Debug, Clone)]
pub struct NetworkBuilder {
    ctx: Context,
    seed: u64,
    steps: Option<usize>,
    specs: Vec<Spec>,
}

impl NetworkBuilder {
    pub(crate) fn new(ctx: &Context) -> Self {
        NetworkBuilder {
            ctx: ctx.clone(),
            seed: 0,
            steps: None,
            specs: Vec::new(),
        }
    }

    /// Seeds parameter initialization (same seed, same initial parameters on every backend).
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Declares sequence input: each sample is `steps` rows of the first layer's input width.
    /// Required when the network has a recurrent layer.
    pub fn sequence_length(mut self, steps: usize) -> Self {
        self.steps = Some(steps);
        self
    }

    /// A fully connected layer `inputs -> outputs` followed by `activation` (applied per step
    /// in a sequence model).
    pub fn dense(mut self, inputs: usize, outputs: usize, activation: Activation) -> Self {
        self.specs.push(Spec::Dense(inputs, outputs, activation));
        self
    }

    /// An Elman RNN layer (`Tanh` or `Relu`) over the sequence.
    pub fn rnn(
        mut self,
        inputs: usize,
        hidden: usize,
        activation: Activation,
        output: RnnOutput,
    ) -> Self {
        self.specs
            .push(Spec::Rnn(inputs, hidden, activation, output));
        self
    }

    /// An LSTM layer over the sequence, with PyTorch's parameter names, layout and gate order
    /// (`weight_ih_l0 [4H, I]`, `weight_hh_l0 [4H, H]`, `bias_ih_l0`, `bias_hh_l0`; i, f, g, o)
    /// and a zero initial state.
    ///
    /// ```
    /// use rnn::nn::{Loss, Network, RnnOutput};
    /// use rnn::Activation;
    /// let ctx = rnn::Context::cpu();
    /// // Classify sequences of 20 steps of 8 features from the last hidden state.
    /// let net = Network::builder(&ctx)
    ///     .sequence_length(20)
    ///     .lstm(8, 32, RnnOutput::Last)
    ///     .dense(32, 4, Activation::Identity)
    ///     .build(Loss::SoftmaxCrossEntropy)?;
    /// assert_eq!(net.param_info()[0].name, "0.weight_ih_l0");
    /// assert_eq!(net.param_info()[0].shape, [128, 8]);
    /// # Ok::<(), rnn::Error>(())
    /// ```
    pub fn lstm(mut self, inputs: usize, hidden: usize, output: RnnOutput) -> Self {
        self.specs.push(Spec::Lstm(inputs, hidden, output));
        self
    }

    /// A GRU layer over the sequence, with PyTorch's parameter names, layout and gate order
    /// (`weight_ih_l0 [3H, I]`, `weight_hh_l0 [3H, H]`, `bias_ih_l0`, `bias_hh_l0`; r, z, n,
    /// with `n = tanh(W_in x + b_in + r * (W_hn h + b_hn))`) and a zero initial state.
    pub fn gru(mut self, inputs: usize, hidden: usize, output: RnnOutput) -> Self {
        self.specs.push(Spec::Gru(inputs, hidden, output));
        self
    }

    /// A stacked and/or bidirectional recurrent layer of any cell, PyTorch's `nn.RNN`/`nn.LSTM`/
    /// `nn.GRU` with `num_layers`, `bidirectional` and `dropout` (see [`RecurrentOptions`] for
    /// the output layout and what [`RnnOutput::Last`] hands on). Parameters are named as
    /// PyTorch names them (`weight_ih_l0`, `weight_hh_l0_reverse`, `bias_ih_l1`, ...); each
    /// output row is `hidden * directions` wide. With plain options this is the same layer as
    /// [`NetworkBuilder::rnn`], [`NetworkBuilder::lstm`] or [`NetworkBuilder::gru`].
    ///
    /// ```
    /// use rnn::nn::{Loss, Network, RecurrentCell, RecurrentOptions, RnnOutput};
    /// use rnn::Activation;
    /// let ctx = rnn::Context::cpu();
    /// // A 2-layer bidirectional LSTM over 12 steps of 8 features, classifying from h_n.
    /// let opts = RecurrentOptions::new().layers(2).bidirectional(true);
    /// let net = Network::builder(&ctx)
    ///     .sequence_length(12)
    ///     .recurrent(RecurrentCell::Lstm, 8, 16, RnnOutput::Last, opts)
    ///     .dense(32, 3, Activation::Identity)
    ///     .build(Loss::SoftmaxCrossEntropy)?;
    /// let names: Vec<&str> = net.param_info().iter().map(|p| p.name.as_str()).collect();
    /// assert_eq!(names[4], "0.weight_ih_l0_reverse");
    /// assert_eq!(net.param_info()[8].shape, [64, 32]); // weight_ih_l1: [4H, 2H]
    /// # Ok::<(), rnn::Error>(())
    /// ```
    pub fn recurrent(
        mut self,
        cell: RecurrentCell,
        inputs: usize,
        hidden: usize,
        output: RnnOutput,
        options: RecurrentOptions,
    ) -> Self {
        let spec = match cell {
            _ if !options.is_plain() || options.dropout != 0.0 => {
                Spec::Stack(inputs, hidden, cell, output, options)
            }
            RecurrentCell::Rnn(act) => Spec::Rnn(inputs, hidden, act, output),
            RecurrentCell::Lstm => Spec::Lstm(inputs, hidden, output),
            RecurrentCell::Gru => Spec::Gru(inputs, hidden, output),
        };
        self.specs.push(spec);
        self
    }

    /// Inverted dropout (PyTorch's `nn.Dropout(p)`) on the previous layer's output: in
    /// training each value is zeroed with probability `p` (in `0..=1`) and the others are
    /// scaled by `1 / (1 - p)`; in evaluation and prediction it is the identity. Masks come from
    /// a counter-based hash of the network's device-side random state (seeded by
    /// [`NetworkBuilder::seed`], reseeded by `train` from `TrainingConfig::seed`): the same seed
    /// gives the same masks, and a training step uploads nothing. It has no parameters and
    /// cannot be the first layer.
    ///
    /// ```
    /// use rnn::nn::{LayerDesc, Loss, Network};
    /// use rnn::Activation;
    /// let ctx = rnn::Context::cpu();
    /// let mut net = Network::builder(&ctx)
    ///     .dense(4, 16, Activation::Relu)
    ///     .dropout(0.5)
    ///     .dense(16, 2, Activation::Identity)
    ///     .build(Loss::SoftmaxCrossEntropy)?;
    /// assert_eq!(net.layers()[1], LayerDesc::Dropout { features: 16, p: 0.5 });
    /// // Prediction runs without dropout, so it is deterministic.
    /// let x = [0.1, -0.2, 0.3, 0.4];
    /// assert_eq!(net.predict(&x)?, net.predict(&x)?);
    /// # Ok::<(), rnn::Error>(())
    /// ```
    pub fn dropout(mut self, p: f32) -> Self {
        self.specs.push(Spec::Dropout(p));
        self
    }

    /// Layer normalization over each row's `features` values (PyTorch's
    /// `nn.LayerNorm(features)`, `eps = 1e-5`, biased variance): `weight` starts at 1 and
    /// `bias` at 0, named `N.weight` and `N.bias` as in `torch.nn`. Applied per step in a
    /// sequence model. Forward and backward are one fused op each.
    ///
    /// ```
    /// use rnn::nn::{Loss, Network, RnnOutput};
    /// use rnn::Activation;
    /// let ctx = rnn::Context::cpu();
    /// let mut net = Network::builder(&ctx)
    ///     .sequence_length(6)
    ///     .gru(3, 8, RnnOutput::Last)
    ///     .layer_norm(8)
    ///     .dense(8, 2, Activation::Identity)
    ///     .build(Loss::Mse)?;
    /// assert_eq!(net.param_info()[4].name, "1.weight");
    /// assert_eq!(net.param_info()[5].name, "1.bias");
    /// assert_eq!(net.predict(&[0.5; 18])?.len(), 2);
    /// # Ok::<(), rnn::Error>(())
    /// ```
    pub fn layer_norm(self, features: usize) -> Self {
        self.layer_norm_eps(features, DEFAULT_EPS)
    }

    /// [`NetworkBuilder::layer_norm`] with another epsilon (finite, `> 0`).
    pub fn layer_norm_eps(mut self, features: usize, eps: f32) -> Self {
        self.specs.push(Spec::LayerNorm(features, eps));
        self
    }

    /// A token embedding (PyTorch's `nn.Embedding(num_embeddings, dim)`, parameter
    /// `N.weight [num_embeddings, dim]`, standard-normal init) as the FIRST layer: each input
    /// value is a token id in `0..num_embeddings`, so a sample of a sequence model is `steps`
    /// ids ([`crate::nn::CharCorpus::id_sequences`] makes such data). The device holds ids as
    /// u32: a data set of ids ([`crate::nn::Dataset::tokens`]) and
    /// [`crate::nn::Network::predict_ids`] pass them as they are; f32 features holding exact
    /// integers (the other data sets, [`crate::nn::Network::predict`],
    /// [`crate::nn::Network::forward`]) are converted. Ids are checked on the host before
    /// anything runs: an id outside the table is an [`Error::InvalidData`]. The weight
    /// gradient is a scatter-add of the output gradients at their ids (repeated ids
    /// accumulate): in index order on the CPU (deterministic), with atomic adds on GPUs.
    ///
    /// ```
    /// use rnn::nn::{Loss, Network, RnnOutput};
    /// use rnn::Activation;
    /// let ctx = rnn::Context::cpu();
    /// let mut net = Network::builder(&ctx)
    ///     .sequence_length(4)
    ///     .embedding(10, 6)
    ///     .lstm(6, 8, RnnOutput::Last)
    ///     .dense(8, 2, Activation::Identity)
    ///     .build(Loss::SoftmaxCrossEntropy)?;
    /// assert_eq!(net.param_info()[0].name, "0.weight");
    /// assert_eq!(net.param_info()[0].shape, [10, 6]);
    /// assert_eq!(net.input_width(), 4); // four ids per sample
    /// assert_eq!(net.predict(&[1.0, 2.0, 9.0, 0.0])?.len(), 2);
    /// assert!(net.predict(&[1.0, 2.0, 10.0, 0.0]).is_err()); // 10 is not in 0..10
    /// # Ok::<(), rnn::Error>(())
    /// ```
    pub fn embedding(mut self, num_embeddings: usize, dim: usize) -> Self {
        self.specs.push(Spec::Embedding(num_embeddings, dim));
        self
    }

    /// Checks the layer chain and creates the network with its parameters on the device.
    pub fn build(self, loss: Loss) -> Result<Network> {
        let bad = |m: String| Err(Error::InvalidArgument(m));
        if self.specs.is_empty() {
            return bad("a network needs at least one layer".into());
        }
        if let Some(i) =
            (1..self.specs.len()).find(|&i| matches!(self.specs[i], Spec::Embedding(..)))
        {
            return bad(format!(
                "layer {i}: an embedding takes token ids, so it must be the first layer"
            ));
        }
        let has_rnn = self.specs.iter().any(|s| s.recurrent_output().is_some());
        let in_steps = match self.steps {
            Some(0) => return bad("sequence_length must be > 0".into()),
            Some(t) => t,
            None if has_rnn => {
                return bad("a network with a recurrent layer needs sequence_length(steps)".into());
            }
            None => 1,
        };
        let mut layout = ParamLayout::default();
        let mut layers = Vec::new();
        let mut layer_steps = Vec::new();
        let mut steps = in_steps;
        let mut prev_out: Option<usize> = None;
        for (i, spec) in self.specs.iter().enumerate() {
            let Some((inputs, outputs)) = spec.sizes(prev_out) else {
                return bad(format!(
                    "layer {i}: {spec:?} takes its width from the layer before it, so it cannot come first"
                ));
            };
            if inputs == 0 || outputs == 0 {
                return bad(format!(
                    "layer {i}: sizes must be > 0, got {inputs} -> {outputs}"
                ));
            }
            if let Some(p) = prev_out
                && p != inputs
            {
                return bad(format!(
                    "layer {i} takes {inputs} inputs but layer {} gives {p}",
                    i - 1
                ));
            }
            layer_steps.push(steps);
            if let Some(output) = spec.recurrent_output() {
                if steps != in_steps {
                    return bad(format!(
                        "layer {i}: a recurrent layer cannot follow one that returned only the last state"
                    ));
                }
                if output == RnnOutput::Last {
                    steps = 1;
                }
            }
            let name = i.to_string();
            let l = &mut layout;
            let layer = match *spec {
                Spec::Dense(a, b, act) => Layer::Dense(Dense::new(l, &name, a, b, act)),
                Spec::Rnn(a, b, act, output) => {
                    if !matches!(act, Activation::Tanh | Activation::Relu) {
                        return bad(format!("layer {i}: an RNN takes Tanh or Relu, not {act:?}"));
                    }
                    Layer::Rnn(Rnn::new(l, &name, a, b, in_steps, act, output))
                }
                Spec::Lstm(a, b, output) => {
                    Layer::Lstm(Lstm::new(l, &name, a, b, in_steps, output))
                }
                Spec::Gru(a, b, output) => Layer::Gru(Gru::new(l, &name, a, b, in_steps, output)),
                Spec::Stack(a, b, cell, output, opts) => {
                    check_recurrent(i, cell, opts)?;
                    Layer::Stack(Stack::new(l, i, cell, a, b, in_steps, output, opts))
                }
                Spec::Dropout(p) => {
                    if !(0.0..=1.0).contains(&p) {
                        return bad(format!(
                            "layer {i}: dropout probability {p} is not in 0..=1"
                        ));
                    }
                    Layer::Dropout(Dropout::new(inputs, p, i))
                }
                Spec::Embedding(num, dim) => {
                    if num == 0 || num > MAX_INDEXED_ROWS {
                        return bad(format!(
                            "layer {i}: an embedding of {num} ids; ids are u32 on the device, so 1 to \
                             {MAX_INDEXED_ROWS} are supported"
                        ));
                    }
                    Layer::Embedding(Embedding::new(l, &name, num, dim))
                }
                Spec::LayerNorm(f, eps) => {
                    if !(eps.is_finite() && eps > 0.0) {
                        return bad(format!("layer {i}: layer norm eps {eps} must be > 0"));
                    }
                    Layer::LayerNorm(LayerNorm::new(l, &name, f, eps, i == 0))
                }
            };
            layers.push(layer);
            prev_out = Some(outputs);
        }
        // Every size derived from these (input width, output width, parameter count) must be
        // representable before anything is allocated.
        layout.check()?;
        if let Some(first) = layers.first() {
            size::mul(in_steps, first.inputs(), "sequence length x input features")?;
        }
        for (layer, &steps) in layers.iter().zip(&layer_steps) {
            size::mul(steps, layer.outputs(), "sequence length x layer outputs")?;
        }
        let ops = self.ctx.ops();
        let params = ops.alloc(layout.total)?;
        ops.upload(params.view(), &layout.initial_values(self.seed))?;
        let grads = ops.alloc(layout.total)?;
        ops.fill(grads.view(), 0.0)?;
        let rng = crate::ops::rng_state(ops, self.seed)?;
        Ok(Network {
            ctx: self.ctx.clone(),
            layers,
            loss,
            layout,
            params,
            grads,
            rng,
            in_steps,
            layer_steps,
            out_steps: steps,
            workspaces: Workspaces::default(),
            padding: Default::default(),
            precision: Default::default(),
            low: None,
        })
    }
}

/// The options of a stacked or bidirectional layer `i` make sense.
fn check_recurrent(i: usize, cell: RecurrentCell, opts: RecurrentOptions) -> Result<()> {
    let bad = |m: String| Err(Error::InvalidArgument(format!("layer {i}: {m}")));
    if let RecurrentCell::Rnn(act) = cell
        && !matches!(act, Activation::Tanh | Activation::Relu)
    {
        return bad(format!("an RNN takes Tanh or Relu, not {act:?}"));
    }
    if opts.num_layers == 0 {
        return bad("num_layers must be >= 1".into());
    }
    if !(0.0..1.0).contains(&opts.dropout) {
        return bad(format!("dropout must be in [0, 1), got {}", opts.dropout));
    }
    if opts.dropout > 0.0 && opts.num_layers > 256 {
        // Each inter-layer dropout site has its own 8-bit mask stream within the layer's.
        return bad(format!(
            "dropout between more than 256 stacked layers is not supported (got {})",
            opts.num_layers
        ));
    }
    if opts.dropout > 0.0 && opts.num_layers == 1 {
        // PyTorch accepts this with a warning: dropout acts only between stacked layers.
        log::warn!(
            "layer {i}: dropout {} with num_layers 1 has no effect (it acts between layers)",
            opts.dropout
        );
    }
    Ok(())
}
