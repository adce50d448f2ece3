//! The op set: every computation layers, losses and optimizers need, written once per backend
//! family (natively for the CPU, and once over [`crate::backend::Device`] for CUDA, OpenCL and HIP).
//!
//! Conventions shared by every op:
//! - Matrices are row-major and contiguous; a `rows x cols` matrix is a view of `rows * cols`
//!   elements.
//! - Outputs are views too (buffers use interior mutability), so one flat parameter buffer can be
//!   read by many layers and one flat gradient buffer written by them.
//! - An output must not overlap an input, except where an op says "may be the same view as":
//!   then exactly the same view (same buffer, offset and length) is allowed and means in place.
//! - Every view must belong to this context's device, else [`crate::Error::ForeignBuffer`].
//! - Ops queue work; they need not wait for it. `download` and `synchronize` wait.
//! - Index data (class labels, row indices) is stored as f32 holding exact integers (integers
//!   up to 2^24 are exact in f32). Every backend applies one rule: `v` is a valid index into `n`
//!   entries iff `v >= 0 && v < n && v == v.floor()` (NaN, negative, fractional and too-large
//!   values are invalid). Each op says what an invalid index does; none reads out of bounds.

pub(crate) mod check;
pub(crate) mod gated_seq;
pub(crate) mod gpu;
mod profile;
mod random;
pub(crate) mod rnn_seq;

pub use profile::KernelTime;
pub use random::{RNG_STATE_LEN, dropout_keeps, dropout_params, rng_state, rng_state_values};
pub(crate) use random::{rng_hash, rng_key};

use crate::buffer::{Buffer, View};
use crate::device::DeviceInfo;
use crate::error::Result;
use crate::kernel::{Kernel, KernelArg, KernelSource, LaunchConfig};

/// An elementwise nonlinearity, fused into bias-add and RNN cell ops.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum Activation {
    /// `y = z`.
    Identity,
    /// `y = max(z, 0)`.
    Relu,
    /// `y = 1 / (1 + e^-z)`.
    Sigmoid,
    /// `y = tanh(z)`.
    Tanh,
    /// Exact GELU, `y = z * Phi(z) = 0.5 z (1 + erf(z / sqrt 2))` (PyTorch's default).
    Gelu,
    /// `y = z` for `z > 0`, else `slope * z`.
    LeakyRelu {
        /// Slope for negative inputs (PyTorch's default is 0.01).
        slope: f32,
    },
}

impl Activation {
    /// Stable numeric code passed to kernels (`0..=5` in declaration order).
    pub fn code(self) -> u32 {
        match self {
            Activation::Identity => 0,
            Activation::Relu => 1,
            Activation::Sigmoid => 2,
            Activation::Tanh => 3,
            Activation::Gelu => 4,
            Activation::LeakyRelu { .. } => 5,
        }
    }

    /// The parameter passed alongside [`Activation::code`] (the leaky slope, else 0).
    pub fn param(self) -> f32 {
        match self {
            Activation::LeakyRelu { slope } => slope,
            _ => 0.0,
        }
    }

    /// True when the derivative can be computed from the output alone (so a forward pass may
    /// drop the pre-activation).
    pub fn derivative_from_output(self) -> bool {
        matches!(
            self,
            Activation::Identity | Activation::Relu | Activation::Sigmoid | Activation::Tanh
        )
    }
}

/// Shape and scalars of `C = alpha * op(A) * op(B) + beta * C`, all row-major and contiguous.
///
/// `op(A)` is `m x k` (A is stored `m x k`, or `k x m` when `trans_a`); `op(B)` is `k x n` (stored
/// `k x n`, or `n x k` when `trans_b`); C is `m x n`. With `beta == 0` C is not read (so it may
/// hold NaN).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Gemm {
    /// Rows of C.
    pub m: usize,
    /// Columns of C.
    pub n: usize,
    /// Inner dimension.
    pub k: usize,
    /// Use A transposed.
    pub trans_a: bool,
    /// Use B transposed.
    pub trans_b: bool,
    /// Scale of the product.
    pub alpha: f32,
    /// Scale of the existing C.
    pub beta: f32,
}

impl Gemm {
    /// `C = A * B` with A `m x k`, B `k x n`.
    pub fn new(m: usize, n: usize, k: usize) -> Self {
        Gemm {
            m,
            n,
            k,
            trans_a: false,
            trans_b: false,
            alpha: 1.0,
            beta: 0.0,
        }
    }
    /// Transpose A.
    pub fn ta(mut self) -> Self {
        self.trans_a = true;
        self
    }
    /// Transpose B.
    pub fn tb(mut self) -> Self {
        self.trans_b = true;
        self
    }
    /// Set alpha and beta.
    pub fn scaled(mut self, alpha: f32, beta: f32) -> Self {
        self.alpha = alpha;
        self.beta = beta;
        self
    }
}

/// Length of the device-side optimizer state read and advanced by [`Ops::sgd_step`] and
/// [`Ops::adam_step`]: `[lr, steps taken, 1 - beta1^steps, 1 - beta2^steps]`.
///
/// The learning rate and the step count live in device memory (not in kernel arguments) so a
/// captured training step ([`Ops::capture_begin`]) replays correctly while they change: write a
/// new learning rate into element 0 with [`Ops::upload`] between steps. Make one with
/// [`optimizer_state`]. The step count is a float, exact up to 2^24 (16.7 million) steps; past
/// that it stops advancing, when Adam's bias corrections are 1 to float precision anyway.
pub const OPTIMIZER_STATE_LEN: usize = 4;

/// A fresh optimizer state (see [`OPTIMIZER_STATE_LEN`]): learning rate `lr`, no step taken.
pub fn optimizer_state(ops: &dyn Ops, lr: f32) -> Result<Buffer> {
    let b = ops.alloc(OPTIMIZER_STATE_LEN)?;
    ops.upload(b.view(), &[lr, 0.0, 0.0, 0.0])?;
    Ok(b)
}

/// Hyper-parameters of one SGD step over a flat parameter buffer (the learning rate is in the
/// device-side state, see [`OPTIMIZER_STATE_LEN`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SgdStep {
    /// Momentum factor (0 disables the velocity buffer update).
    pub momentum: f32,
    /// L2 penalty added to the gradient (`g + wd * p`).
    pub weight_decay: f32,
    /// Nesterov momentum.
    pub nesterov: bool,
}

/// Hyper-parameters of one Adam/AdamW step (the learning rate and the step number are in the
/// device-side state, see [`OPTIMIZER_STATE_LEN`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdamStep {
    /// First-moment decay.
    pub beta1: f32,
    /// Second-moment decay.
    pub beta2: f32,
    /// Denominator epsilon (added after the square root, as PyTorch does).
    pub eps: f32,
    /// Weight decay: L2 on the gradient for Adam, decoupled (`p -= lr * wd * p`) for AdamW.
    pub weight_decay: f32,
    /// AdamW (decoupled weight decay) instead of Adam.
    pub decoupled: bool,
}

/// The op set. Implemented natively by the CPU backend and once, generically, for every GPU
/// backend over [`crate::backend::Device`].
pub trait Ops: Send + Sync {
    /// The device these ops run on.
    fn info(&self) -> &DeviceInfo;

    /// Id of the owning context; buffers carry it.
    fn context_id(&self) -> u64;

    // ---- memory -------------------------------------------------------------------------

    /// A new buffer of `len` f32. Its contents are unspecified until written.
    fn alloc(&self, len: usize) -> Result<Buffer>;
    /// Copies `src` into `dst` (`src.len() == dst.len()`).
    fn upload(&self, dst: View<'_>, src: &[f32]) -> Result<()>;
    /// Waits for queued work, then copies `src` into `dst` (`src.len() == dst.len()`).
    fn download(&self, src: View<'_>, dst: &mut [f32]) -> Result<()>;
    /// Waits for all queued work.
    fn synchronize(&self) -> Result<()>;
    /// Compiles the built-in kernels now rather than at first use (a no-op on the CPU).
    fn warm_up(&self) -> Result<()>;

    // ---- user kernels -------------------------------------------------------------------

    /// Compiles a user kernel (through the kernel cache). The CPU backend returns
    /// [`crate::Error::Unsupported`].
    fn compile(&self, source: &KernelSource) -> Result<Kernel>;
    /// Launches a kernel compiled by [`Ops::compile`] on this context's queue.
    fn launch(&self, kernel: &Kernel, config: &LaunchConfig, args: &[KernelArg<'_>]) -> Result<()>;

    // ---- elementwise --------------------------------------------------------------------

    /// `x[i] = value`.
    fn fill(&self, x: View<'_>, value: f32) -> Result<()>;
    /// `dst[i] = src[i]`.
    fn copy(&self, src: View<'_>, dst: View<'_>) -> Result<()>;
    /// `x[i] *= alpha`.
    fn scale(&self, x: View<'_>, alpha: f32) -> Result<()>;
    /// `y[i] += alpha * x[i]`.
    fn axpy(&self, alpha: f32, x: View<'_>, y: View<'_>) -> Result<()>;
    /// `out[i] = a[i] + b[i]`; `out` may be the same view as `a` or `b`.
    fn add(&self, a: View<'_>, b: View<'_>, out: View<'_>) -> Result<()>;
    /// `out[i] = a[i] * b[i]`; `out` may be the same view as `a` or `b`.
    fn mul(&self, a: View<'_>, b: View<'_>, out: View<'_>) -> Result<()>;

    // ---- matrix product -----------------------------------------------------------------

    /// `C = alpha * op(A) op(B) + beta * C`; see [`Gemm`].
    fn gemm(&self, g: Gemm, a: View<'_>, b: View<'_>, c: View<'_>) -> Result<()>;

    // ---- activations --------------------------------------------------------------------

    /// Fused bias + activation forward over a `rows x cols` matrix: `z[r,c] += bias[c]`, then
    /// `y = act(z)`. `y` may be the same view as `z` (then `z` is not kept for the backward pass,
    /// which is fine when [`Activation::derivative_from_output`]).
    fn bias_act_forward(
        &self,
        z: View<'_>,
        bias: View<'_>,
        y: View<'_>,
        act: Activation,
        rows: usize,
        cols: usize,
    ) -> Result<()>;
    /// `y = act(x)` elementwise; `y` may be the same view as `x`.
    fn activation(&self, x: View<'_>, y: View<'_>, act: Activation) -> Result<()>;
    /// `dz = dy * act'(z)`; `y = act(z)` is passed too since some derivatives are cheaper from it.
    /// When `act.derivative_from_output()`, `z` is not read and may be the same view as `y`.
    /// `dz` may be the same view as `dy`.
    fn act_backward(
        &self,
        dy: View<'_>,
        z: View<'_>,
        y: View<'_>,
        dz: View<'_>,
        act: Activation,
    ) -> Result<()>;

    /// The backward of [`Ops::bias_act_forward`] over a `rows x cols` pre-activation:
    /// `dz = dy * act'(z)` (as [`Ops::act_backward`], with its rules: `dz` may be the same view
    /// as `dy`, and `z` is not read and may be `y` when `act.derivative_from_output()`) and the
    /// bias gradient `dbias[c] = Σ_r dz[r, c]` (overwritten), in one pass over the matrix where
    /// the backend has a kernel for it. With [`Activation::Identity`], `dz` gets `dy`.
    #[allow(clippy::too_many_arguments)]
    fn bias_act_backward(
        &self,
        dy: View<'_>,
        z: View<'_>,
        y: View<'_>,
        dz: View<'_>,
        dbias: View<'_>,
        act: Activation,
        rows: usize,
        cols: usize,
    ) -> Result<()> {
        check::len(
            "bias_act_backward",
            "dy",
            &dy,
            check::area("bias_act_backward", rows, cols)?,
        )?;
        if act != Activation::Identity {
            self.act_backward(dy, z, y, dz, act)?;
        } else if !dz.same_as(&dy) {
            self.copy(dy, dz)?;
        }
        self.sum_rows(dz, dbias, rows, cols, 0.0)
    }

    /// [`Ops::bias_act_backward`] with `dy` given as the product `g w` (`g` `rows x k`, `w`
    /// `k x cols`, both row-major): a hidden dense layer's backward whose output gradient is the
    /// input gradient of the dense layer after it (`g` that layer's pre-activation gradient,
    /// `w` its weight). `dz = (g w) * act'(z)` and `dbias[c] = Σ_r dz[r, c]` (overwritten);
    /// `dy` is never stored. `dz` must not overlap `g`, `w`, `y`, or `z` where the derivative
    /// reads it. The same as [`Ops::gemm`] into `dz` then [`Ops::bias_act_backward`] in place,
    /// which is what it does where the backend has nothing faster; GPU backends form the
    /// product inside the column-sum pass where `k <= 16` (a classifier head), saving the
    /// product's launch and a pass over the matrix.
    #[allow(clippy::too_many_arguments)]
    fn bias_act_backward_product(
        &self,
        g: View<'_>,
        w: View<'_>,
        z: View<'_>,
        y: View<'_>,
        dz: View<'_>,
        dbias: View<'_>,
        act: Activation,
        rows: usize,
        k: usize,
        cols: usize,
    ) -> Result<()> {
        let views = [&g, &w, &z, &y, &dz, &dbias];
        check::bias_act_product("bias_act_backward_product", views, act, rows, k, cols)?;
        self.gemm(Gemm::new(rows, cols, k), g, w, dz)?;
        self.bias_act_backward(dz, z, y, dz, dbias, act, rows, cols)
    }

    /// A dense layer's forward in one call: `z = x W^T + bias` (x `rows x inputs`, W `outputs x
    /// inputs`, PyTorch's layout) and `y = act(z)`; `y` may be the same view as `z`. The same as
    /// [`Ops::gemm`] then [`Ops::bias_act_forward`], which is what it does where the backend
    /// has nothing faster; GPU backends add the bias and activation inside the thin GEMM of a
    /// layer with at most 16 outputs (a classifier head), saving a launch.
    #[allow(clippy::too_many_arguments)]
    fn dense_forward(
        &self,
        x: View<'_>,
        w: View<'_>,
        bias: View<'_>,
        z: View<'_>,
        y: View<'_>,
        act: Activation,
        rows: usize,
        inputs: usize,
        outputs: usize,
    ) -> Result<()> {
        self.gemm(Gemm::new(rows, outputs, inputs).tb(), x, w, z)?;
        self.bias_act_forward(z, bias, y, act, rows, outputs)
    }

    /// A dense layer's parameter gradients from the gradient `dz` (`rows x outputs`) of its
    /// pre-activation and its input `x` (`rows x inputs`): `dw = dz^T x` (`outputs x inputs`)
    /// and `dbias[o] = Σ_r dz[r, o]`, both overwritten. The same as [`Ops::gemm`] then
    /// [`Ops::sum_rows`], which is what it does where the backend has nothing faster; GPU
    /// backends sum the bias gradient inside the thin GEMM of a layer with at most 16 outputs.
    #[allow(clippy::too_many_arguments)]
    fn dense_param_grads(
        &self,
        dz: View<'_>,
        x: View<'_>,
        dw: View<'_>,
        dbias: View<'_>,
        rows: usize,
        inputs: usize,
        outputs: usize,
    ) -> Result<()> {
        self.gemm(Gemm::new(outputs, inputs, rows).ta(), dz, x, dw)?;
        self.sum_rows(dz, dbias, rows, outputs, 0.0)
    }

    // ---- softmax and losses -------------------------------------------------------------

    /// Row-wise softmax of a `rows x cols` matrix; `y` may be the same view as `x`.
    fn softmax(&self, x: View<'_>, y: View<'_>, rows: usize, cols: usize) -> Result<()>;
    /// Row-wise log-softmax; `y` may be the same view as `x`.
    fn log_softmax(&self, x: View<'_>, y: View<'_>, rows: usize, cols: usize) -> Result<()>;
    /// Fused softmax cross-entropy, forward and backward in one pass over `rows x cols` logits.
    /// `labels[r]` is the class index of row `r`. Writes `row_loss[r] = -log softmax(x_r)[label]`,
    /// `row_correct[r] = 1` if the row's arg-max equals the label else 0, and
    /// `dlogits = grad_scale * (softmax(x) - onehot(label))`. An invalid label (not an integer in
    /// `0..cols`, see the index rule above) yields, for that row, a NaN loss, `row_correct = 0`
    /// and `dlogits = grad_scale * softmax(x)`; it is not an error.
    ///
    /// With `totals` (2 elements), also adds the sum of the row losses to `totals[0]` and the
    /// number of correct rows to `totals[1]`, in the same launch and deterministically (the
    /// same inputs give the same bits), so training accumulates its metrics on the device.
    #[allow(clippy::too_many_arguments)]
    fn softmax_cross_entropy(
        &self,
        logits: View<'_>,
        labels: View<'_>,
        dlogits: View<'_>,
        row_loss: View<'_>,
        row_correct: View<'_>,
        totals: Option<View<'_>>,
        rows: usize,
        cols: usize,
        grad_scale: f32,
    ) -> Result<()>;
    /// Mean squared error per row: `row_loss[r] = sum_c (p - t)^2 / cols`, and
    /// `dpred = grad_scale * 2 (p - t) / cols`. With `totals` (1 element or more), also adds
    /// the sum of the row losses to `totals[0]`, as [`Ops::softmax_cross_entropy`] does.
    #[allow(clippy::too_many_arguments)]
    fn mse(
        &self,
        pred: View<'_>,
        target: View<'_>,
        dpred: View<'_>,
        row_loss: View<'_>,
        totals: Option<View<'_>>,
        rows: usize,
        cols: usize,
        grad_scale: f32,
    ) -> Result<()>;

    // ---- reductions ---------------------------------------------------------------------

    /// Column sums of a `rows x cols` matrix: `out[c] = beta * out[c] + sum_r x[r,c]` (bias
    /// gradients). With `beta == 0`, `out` is not read.
    fn sum_rows(
        &self,
        x: View<'_>,
        out: View<'_>,
        rows: usize,
        cols: usize,
        beta: f32,
    ) -> Result<()>;
    /// Row sums: `out[r] = beta * out[r] + sum_c x[r,c]`.
    fn sum_cols(
        &self,
        x: View<'_>,
        out: View<'_>,
        rows: usize,
        cols: usize,
        beta: f32,
    ) -> Result<()>;
    /// `out[0] = beta * out[0] + sum_i x[i]` (`out.len() == 1`): metrics accumulate on the device.
    fn sum_all(&self, x: View<'_>, out: View<'_>, beta: f32) -> Result<()>;
    /// Gradient-norm clipping without a host round trip: computes `n = ||grads||_2`, writes it
    /// to `norm_out[0]`, and scales `grads` by `min(1, max_norm / (n + 1e-6))`.
    fn clip_grad_norm(&self, grads: View<'_>, max_norm: f32, norm_out: View<'_>) -> Result<()>;

    // ---- data movement ------------------------------------------------------------------

    /// `dst[i, :] = src[indices[i], :]` for `i in 0..indices.len()`, rows of `cols` elements.
    ///
    /// An invalid index (not an integer in `0..src.len() / cols`, see the index rule above)
    /// never reads outside `src`, but what happens differs by backend, because a GPU kernel
    /// cannot return an error and validating on the host would cost a device round trip:
    /// - CPU: [`crate::Error::InvalidArgument`], returned before anything is written.
    /// - GPU backends: `Ok(())`, and that row of `dst` is filled with NaN (the other rows are
    ///   gathered normally), so the NaN shows up in whatever is computed from it.
    fn gather_rows(
        &self,
        src: View<'_>,
        indices: View<'_>,
        dst: View<'_>,
        cols: usize,
    ) -> Result<()>;
    /// `dst[indices[i], :] += src[i, :]` for `i in 0..indices.len()`, rows of `cols` elements
    /// (the backward pass of [`Ops::gather_rows`], an embedding's weight gradient). Repeated
    /// indices accumulate. The CPU adds in index order (deterministic); GPU backends use
    /// atomic float adds, so with repeated indices the order of the additions (and so the last
    /// bits of the sums) may differ from run to run. An invalid index (see the index rule):
    /// CPU, [`crate::Error::InvalidArgument`] before anything is written; GPU backends, that
    /// row of `src` is skipped.
    fn scatter_add_rows(
        &self,
        src: View<'_>,
        indices: View<'_>,
        dst: View<'_>,
        cols: usize,
    ) -> Result<()>;
    /// `out[i, :] = onehot(indices[i])` over `classes` columns. An invalid index (not an integer
    /// in `0..classes`) gives an all-zero row on every backend.
    fn one_hot(&self, indices: View<'_>, out: View<'_>, classes: usize) -> Result<()>;

    // ---- random masks (dropout) ---------------------------------------------------------

    /// Inverted dropout with a counter-based mask: `y[i] = x[i] * m[i]`, where
    /// `m[i] = 1 / (1 - p)` when element `i` is kept and 0 when it is dropped (probability
    /// `p`, in `0..=1`). Whether `i` is kept is a hash of (the seed and the step counter in
    /// `state`, `stream`, `i`) — see [`RNG_STATE_LEN`] and [`dropout_keeps`] — so the same
    /// state, stream and index give the same mask on every backend, bit for bit, and nothing
    /// is uploaded per step (a captured training step replays with fresh masks once the
    /// counter has moved on). `stream` tells apart the dropout sites of one step (a layer
    /// uses `(layer index << 8) | site`). The backward pass is the same call on the gradient,
    /// with the same state and stream. `y` may be the same view as `x`.
    fn dropout(&self, x: View<'_>, y: View<'_>, state: View<'_>, p: f32, stream: u32)
    -> Result<()>;
    /// Advances the step counter of a random state (see [`RNG_STATE_LEN`]) by one, on the
    /// device (one tiny launch, no host traffic).
    fn rng_advance(&self, state: View<'_>) -> Result<()>;

    // ---- normalization ------------------------------------------------------------------

    /// Layer normalization of each row of a `rows x cols` matrix (PyTorch's
    /// `nn.LayerNorm(cols)`): `y = (x - mean) * rstd * weight + bias` with the row's mean, its
    /// biased variance and `rstd = 1 / sqrt(var + eps)`. `weight` and `bias` have `cols`
    /// elements. Writes `stats[2r] = mean`, `stats[2r + 1] = rstd` (`2 * rows` elements) for
    /// the backward pass. One fused launch on a GPU (a warp per row).
    #[allow(clippy::too_many_arguments)]
    fn layer_norm_forward(
        &self,
        x: View<'_>,
        weight: View<'_>,
        bias: View<'_>,
        y: View<'_>,
        stats: View<'_>,
        rows: usize,
        cols: usize,
        eps: f32,
    ) -> Result<()>;
    /// The backward pass of [`Ops::layer_norm_forward`] in one fused launch: from `dy`, `x`,
    /// `weight` and the forward's `stats`, writes `dx` (`rows x cols`) and overwrites
    /// `dweight = sum_r dy * xhat` and `dbias = sum_r dy` (`cols` each), where
    /// `xhat = (x - mean) * rstd`. The column sums are deterministic (a fixed order).
    #[allow(clippy::too_many_arguments)]
    fn layer_norm_backward(
        &self,
        dy: View<'_>,
        x: View<'_>,
        weight: View<'_>,
        stats: View<'_>,
        dx: View<'_>,
        dweight: View<'_>,
        dbias: View<'_>,
        rows: usize,
        cols: usize,
    ) -> Result<()>;

    // ---- recurrent cells ----------------------------------------------------------------

    /// Elman forward for one time step over `batch x hidden`, fused into one pass:
    /// `h = act(pre + h_prev W_hh^T + b_ih + b_hh)`, where `pre = x_t W_ih^T` (from one GEMM
    /// over all steps) and `w_hh` is `hidden x hidden`, row-major (PyTorch's layout). `act` is
    /// `Tanh` or `Relu`. `h` overlaps no input (at `t = 0` a zero block serves as `h_prev`).
    #[allow(clippy::too_many_arguments)]
    fn rnn_step_forward(
        &self,
        pre: View<'_>,
        h_prev: View<'_>,
        w_hh: View<'_>,
        b_ih: View<'_>,
        b_hh: View<'_>,
        h: View<'_>,
        act: Activation,
        batch: usize,
        hidden: usize,
    ) -> Result<()>;
    /// Elman backward for one time step over `batch x hidden`, fused into one pass:
    /// `dpre = act'(h) * (dh + dpre_next W_hh)`, the derivative taken from the output `h`.
    /// `dh` is the gradient reaching `h` from above; `dpre_next` is the next step's `dpre`
    /// (`None` at the last step, where the product is zero). `act` is `Tanh` or `Relu`. `dpre`
    /// overlaps no input.
    #[allow(clippy::too_many_arguments)]
    fn rnn_step_backward(
        &self,
        dh: View<'_>,
        dpre_next: Option<View<'_>>,
        w_hh: View<'_>,
        h: View<'_>,
        dpre: View<'_>,
        act: Activation,
        batch: usize,
        hidden: usize,
    ) -> Result<()>;
    /// Elman forward over a whole sequence: for `t in 0..steps`,
    /// `hs[t+1] = act(pre[t] + hs[t] W_hh^T + b_ih + b_hh)`, each block `batch x hidden`.
    /// `pre` is `steps * batch x hidden` (`x W_ih^T` for all steps, from one GEMM); `hs` is
    /// `(steps + 1) * batch x hidden`, its block 0 the initial state (read) and blocks
    /// `1..=steps` written. `act` is `Tanh` or `Relu`; `hs` overlaps no other argument. The same
    /// result as [`Ops::rnn_step_forward`] step by step; a GPU backend with a cooperative launch
    /// (CUDA) runs all steps in one kernel.
    #[allow(clippy::too_many_arguments)]
    fn rnn_sequence_forward(
        &self,
        pre: View<'_>,
        hs: View<'_>,
        w_hh: View<'_>,
        b_ih: View<'_>,
        b_hh: View<'_>,
        act: Activation,
        steps: usize,
        batch: usize,
        hidden: usize,
    ) -> Result<()>;
    /// Elman backward through a whole sequence: for `t` from `steps - 1` down to 0,
    /// `dpre[t] = act'(hs[t+1]) * (dh[t] + dpre[t+1] W_hh)`, without the product at
    /// `t = steps - 1`. `dh` (`steps * batch x hidden`) is the gradient reaching each `h_t` from
    /// above; `hs` is the forward's `(steps + 1) * batch x hidden` state buffer; `dpre`
    /// (`steps * batch x hidden`) is written and overlaps no input. `act` is `Tanh` or `Relu`.
    /// The same result as [`Ops::rnn_step_backward`] step by step.
    #[allow(clippy::too_many_arguments)]
    fn rnn_sequence_backward(
        &self,
        dh: View<'_>,
        hs: View<'_>,
        w_hh: View<'_>,
        dpre: View<'_>,
        act: Activation,
        steps: usize,
        batch: usize,
        hidden: usize,
    ) -> Result<()>;
    /// LSTM gates forward (PyTorch order i, f, g, o). `gates` is `batch x 4*hidden` holding
    /// `x W_ih^T + h_prev W_hh^T + b_ih + b_hh`; it is overwritten with the activated gates
    /// (sigmoid i, f, o; tanh g), which the backward step reads. Writes
    /// `c = f * c_prev + i * g` and `h = o * tanh(c)`.
    fn lstm_cell_forward(
        &self,
        gates: View<'_>,
        c_prev: View<'_>,
        c: View<'_>,
        h: View<'_>,
        batch: usize,
        hidden: usize,
    ) -> Result<()>;
    /// LSTM gates backward. Inputs: activated `gates`, `c_prev`, `c`, `dh` (gradient reaching
    /// `h`) and `dc` (gradient reaching `c` from the next step; overwritten with the gradient
    /// for `c_prev`). Writes `dgates` (`batch x 4*hidden`, gradient w.r.t. the gate
    /// pre-activations).
    #[allow(clippy::too_many_arguments)]
    fn lstm_cell_backward(
        &self,
        gates: View<'_>,
        c_prev: View<'_>,
        c: View<'_>,
        dh: View<'_>,
        dc: View<'_>,
        dgates: View<'_>,
        batch: usize,
        hidden: usize,
    ) -> Result<()>;
    /// GRU cell forward (PyTorch order r, z, n). `gx = x W_ih^T + b_ih` and
    /// `gh = h_prev W_hh^T + b_hh`, both `batch x 3*hidden`. Computes
    /// `r = σ(gx_r + gh_r)`, `z = σ(gx_z + gh_z)`, `n = tanh(gx_n + r * gh_n)`,
    /// `h = (1 - z) * n + z * h_prev`, and stores `[r, z, n, gh_n]` in `cache`
    /// (`batch x 4*hidden`) for the backward step.
    #[allow(clippy::too_many_arguments)]
    fn gru_cell_forward(
        &self,
        gx: View<'_>,
        gh: View<'_>,
        h_prev: View<'_>,
        h: View<'_>,
        cache: View<'_>,
        batch: usize,
        hidden: usize,
    ) -> Result<()>;
    /// GRU cell backward. From `cache`, `h_prev` and `dh`, writes `dgx` and `dgh` (each
    /// `batch x 3*hidden`: gradients w.r.t. `gx` and `gh`) and `dh_prev` (the direct part,
    /// `dh * z`; the GEMM through `W_hh` is added by the caller).
    #[allow(clippy::too_many_arguments)]
    fn gru_cell_backward(
        &self,
        cache: View<'_>,
        h_prev: View<'_>,
        dh: View<'_>,
        dgx: View<'_>,
        dgh: View<'_>,
        dh_prev: View<'_>,
        batch: usize,
        hidden: usize,
    ) -> Result<()>;

    /// LSTM forward over a whole sequence (PyTorch gate order i, f, g, o; `H = hidden`): for
    /// `t in 0..steps`, with `z = gates[t] + b_ih + b_hh + hs[t] W_hh^T`,
    /// `[i, f, g, o] = [σ, σ, tanh, σ](z)`, `cs[t+1] = f * cs[t] + i * g` and
    /// `hs[t+1] = o * tanh(cs[t+1])`.
    ///
    /// `gates` (`steps * batch x 4H`) holds `x_t W_ih^T` of every step on entry (one GEMM over
    /// all steps, no bias) and is overwritten with the activated gates, which
    /// [`Ops::lstm_sequence_backward`] reads. `hs` and `cs` are `(steps + 1) * batch x H`: block
    /// 0 is the initial state (read), blocks `1..=steps` are written. `w_hh` is `4H x H`
    /// row-major, `b_ih` and `b_hh` are `4H`. No output overlaps another argument. The same
    /// result as [`Ops::lstm_cell_forward`] step by step; a GPU backend with a cooperative launch
    /// (CUDA) runs all steps in one kernel, elsewhere one fused kernel per step.
    #[allow(clippy::too_many_arguments)]
    fn lstm_sequence_forward(
        &self,
        gates: View<'_>,
        hs: View<'_>,
        cs: View<'_>,
        w_hh: View<'_>,
        b_ih: View<'_>,
        b_hh: View<'_>,
        steps: usize,
        batch: usize,
        hidden: usize,
    ) -> Result<()>;
    /// LSTM backward through a whole sequence: for `t` from `steps - 1` down to 0,
    /// `dh_t = dh[t] + dgates[t+1] W_hh` (no product at `t = steps - 1`),
    /// `dc_t = dc_{t+1} * f_{t+1} + dh_t * o_t * (1 - tanh²(cs[t+1]))` (only the second term at
    /// `t = steps - 1`: nothing reaches the last cell state from beyond the sequence), and
    /// `dgates[t]` = the gradient w.r.t. the gate pre-activations:
    /// `[dc_t g i (1-i), dc_t cs[t] f (1-f), dc_t i (1-g²), dh_t tanh(cs[t+1]) o (1-o)]`.
    ///
    /// `dh` (`steps * batch x H`) is the gradient reaching each `h_t` from above; `gates` and
    /// `cs` are what [`Ops::lstm_sequence_forward`] left; `dgates` (`steps * batch x 4H`) is
    /// written and overlaps no input. The weight and bias gradients of all steps are then
    /// single GEMMs / reductions over `dgates`.
    #[allow(clippy::too_many_arguments)]
    fn lstm_sequence_backward(
        &self,
        dh: View<'_>,
        gates: View<'_>,
        cs: View<'_>,
        w_hh: View<'_>,
        dgates: View<'_>,
        steps: usize,
        batch: usize,
        hidden: usize,
    ) -> Result<()>;
    /// GRU forward over a whole sequence (PyTorch gate order r, z, n; `H = hidden`): for
    /// `t in 0..steps`, with `gx = gx[t] + b_ih` and `gh = hs[t] W_hh^T + b_hh`,
    /// `r = σ(gx_r + gh_r)`, `z = σ(gx_z + gh_z)`, `n = tanh(gx_n + r * gh_n)`,
    /// `hs[t+1] = (1 - z) * n + z * hs[t]`, and `cache[t] = [r, z, n, gh_n]`.
    ///
    /// `gx` (`steps * batch x 3H`) is `x_t W_ih^T` of every step (one GEMM, no bias), read only.
    /// `hs` is `(steps + 1) * batch x H`, block 0 the initial state (read), blocks `1..=steps`
    /// written. `cache` (`steps * batch x 4H`) is written for [`Ops::gru_sequence_backward`].
    /// `w_hh` is `3H x H`, `b_ih` and `b_hh` are `3H`. No output overlaps another argument. The
    /// same result as [`Ops::gru_cell_forward`] step by step (one kernel for all steps with a
    /// cooperative launch, one fused kernel per step elsewhere).
    #[allow(clippy::too_many_arguments)]
    fn gru_sequence_forward(
        &self,
        gx: View<'_>,
        hs: View<'_>,
        w_hh: View<'_>,
        b_ih: View<'_>,
        b_hh: View<'_>,
        cache: View<'_>,
        steps: usize,
        batch: usize,
        hidden: usize,
    ) -> Result<()>;
    /// GRU backward through a whole sequence: for `t` from `steps - 1` down to 0,
    /// `dh_t = dh[t] + dgh[t+1] W_hh + dh_{t+1} * z_{t+1}` (only `dh[t]` at `t = steps - 1`);
    /// then, with `r, z, n, gh_n` from `cache[t]` and `h_prev = hs[t]`,
    /// `dn = dh_t (1-z)(1-n²)`, `dz = dh_t (h_prev - n) z (1-z)`, `dr = dn gh_n r (1-r)`,
    /// `dgx[t] = [dr, dz, dn]` (the gradient w.r.t. `x W_ih^T + b_ih`) and
    /// `dgh[t] = [dr, dz, dn r]` (w.r.t. `h W_hh^T + b_hh`).
    ///
    /// `dh` (`steps * batch x H`) is the gradient reaching each `h_t` from above; `hs` and
    /// `cache` are what [`Ops::gru_sequence_forward`] left; `dgx` and `dgh` (each
    /// `steps * batch x 3H`) are written and overlap no input and each other.
    #[allow(clippy::too_many_arguments)]
    fn gru_sequence_backward(
        &self,
        dh: View<'_>,
        hs: View<'_>,
        cache: View<'_>,
        w_hh: View<'_>,
        dgx: View<'_>,
        dgh: View<'_>,
        steps: usize,
        batch: usize,
        hidden: usize,
    ) -> Result<()>;

    // ---- optimizers: one launch over the flat buffers -----------------------------------

    /// SGD with momentum: `g' = g + wd p`; `v = momentum v + g'`; step with `v` (or
    /// `g' + momentum v` for Nesterov); `p -= lr * step`, with `lr = state[0]`; then advances
    /// `state` by one step (see [`OPTIMIZER_STATE_LEN`]). With `momentum == 0`, `velocity` is
    /// not touched.
    fn sgd_step(
        &self,
        params: View<'_>,
        grads: View<'_>,
        velocity: View<'_>,
        state: View<'_>,
        s: SgdStep,
    ) -> Result<()>;
    /// Adam/AdamW with PyTorch's semantics (bias-corrected moments, eps after the square root):
    /// takes step `t = state[1] + 1` with learning rate `state[0]`, and leaves `t` and its bias
    /// corrections in `state` (see [`OPTIMIZER_STATE_LEN`]).
    fn adam_step(
        &self,
        params: View<'_>,
        grads: View<'_>,
        m: View<'_>,
        v: View<'_>,
        state: View<'_>,
        s: AdamStep,
    ) -> Result<()>;

    // ---- graphs and profiling -----------------------------------------------------------

    /// Starts recording the work this context queues into a graph instead of running it
    /// (CUDA or HIP stream capture). `Ok(false)` when the device cannot record graphs (OpenCL,
    /// the CPU, a HIP runtime without the graph API): the caller then just runs its work. While recording, ops that would allocate
    /// device memory, copy from the host or wait fail with [`crate::Error::Unsupported`]; end
    /// the recording with [`Ops::capture_end`] in every case.
    fn capture_begin(&self) -> Result<bool>;
    /// Ends the recording started by [`Ops::capture_begin`] and returns the graph, ready to
    /// launch. Nothing recorded has run yet. An error (a recorded op failed, or the driver
    /// rejected the graph) leaves no recording active.
    fn capture_end(&self) -> Result<crate::graph::Graph>;
    /// Queues one replay of `graph` (from this context): the recorded kernels run again with
    /// the same arguments, reading whatever the buffers hold now.
    fn graph_launch(&self, graph: &crate::graph::Graph) -> Result<()>;
    /// As [`Ops::native_queue`], for the context's side stream: collectives queued there
    /// overlap the main stream's work.
    #[doc(hidden)]
    fn native_side_queue(&self, _x: View<'_>) -> Result<(u64, u64)> {
        Err(crate::Error::Unsupported {
            op: "native_side_queue".into(),
            backend: self.info().backend,
            reason: "this backend has no side stream".into(),
        })
    }

    /// Orders this context's side stream (see [`Ops::native_side_queue`]) after the work queued
    /// so far on its main stream (`to_side`), or the main stream after the side stream's.
    #[doc(hidden)]
    fn order_streams(&self, _to_side: bool) -> Result<()> {
        Err(crate::Error::Unsupported {
            op: "order_streams".into(),
            backend: self.info().backend,
            reason: "this backend has no side stream".into(),
        })
    }

    /// For a collective library that queues its own kernels on this context's stream (NCCL,
    /// RCCL): makes the device current on the calling thread and returns the raw stream handle
    /// and the device address of `x`'s first element. [`crate::Error::Unsupported`] on
    /// backends without such handles (OpenCL, the CPU).
    #[doc(hidden)]
    fn native_queue(&self, _x: View<'_>) -> Result<(u64, u64)> {
        Err(crate::Error::Unsupported {
            op: "native_queue".into(),
            backend: self.info().backend,
            reason: "this backend has no native stream a collective library can use".into(),
        })
    }
    /// Marks the start (`true`) or end of a region for an external profiler (CUDA:
    /// `cuProfilerStart`/`cuProfilerStop`, which `ncu --profile-from-start off` honours); a
    /// no-op elsewhere.
    fn profiler_range(&self, on: bool) -> Result<()>;
    /// The per-kernel device times collected since the last call (which resets them), most
    /// time first, once all queued work has finished (this waits for it). `None` when this
    /// context collects none: only OpenCL has the timer, and only when it was opened with
    /// [`crate::ContextOptions::profile_kernels`] or `RNN_PROFILE_KERNELS=1`.
    fn kernel_times(&self) -> Result<Option<Vec<KernelTime>>> {
        Ok(None)
    }
}

/// Convenience: a zero-filled buffer.
pub fn zeros(ops: &dyn Ops, len: usize) -> Result<Buffer> {
    let b = ops.alloc(len)?;
    ops.fill(b.view(), 0.0)?;
    Ok(b)
}
