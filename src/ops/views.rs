//! View groups: views that always travel together through an op, named and kept together.

use crate::buffer::View;

/// A recurrent layer's recurrent weight and its two biases: `w_hh` (`G*hidden x hidden`,
/// row-major, PyTorch's layout; `G` is 1 for Elman, 4 for LSTM, 3 for GRU), `b_ih` and `b_hh`
/// (`G*hidden` each).
#[derive(Clone, Copy)]
pub struct RecurrentWeights<'a> {
    /// Recurrent weight, `G*hidden x hidden` row-major.
    pub w_hh: View<'a>,
    /// Input-side bias, `G*hidden`.
    pub b_ih: View<'a>,
    /// Recurrent-side bias, `G*hidden`.
    pub b_hh: View<'a>,
}

impl<'a> RecurrentWeights<'a> {
    /// The recurrent weight `w_hh` with its biases `b_ih` and `b_hh`.
    pub const fn new(w_hh: View<'a>, b_ih: View<'a>, b_hh: View<'a>) -> Self {
        RecurrentWeights { w_hh, b_ih, b_hh }
    }
}

/// What a fused loss op writes, for a `rows x cols` prediction: `grad` (`rows x cols`, the
/// gradient w.r.t. the logits or predictions), `row_loss` (`rows`, one loss per row) and, when
/// given, `totals`, which the op adds the sum of the row losses to (and, for
/// [`crate::ops::LossOps::softmax_cross_entropy`], the count of correct rows).
#[derive(Clone, Copy)]
pub struct LossOutputs<'a> {
    /// Gradient w.r.t. the loss's input, `rows x cols`.
    pub grad: View<'a>,
    /// One loss per row, `rows`.
    pub row_loss: View<'a>,
    /// Device-side running totals the op adds to, if any.
    pub totals: Option<View<'a>>,
}

impl<'a> LossOutputs<'a> {
    /// The gradient, the per-row losses and, if given, the totals to add to.
    pub const fn new(grad: View<'a>, row_loss: View<'a>, totals: Option<View<'a>>) -> Self {
        LossOutputs {
            grad,
            row_loss,
            totals,
        }
    }
}

/// Layer normalization's affine parameters: `weight` (the scale) and `bias` (the shift),
/// `cols` elements each.
#[derive(Clone, Copy)]
pub struct LayerNormParams<'a> {
    /// Per-column scale, `cols`.
    pub weight: View<'a>,
    /// Per-column shift, `cols`.
    pub bias: View<'a>,
}

impl<'a> LayerNormParams<'a> {
    /// The scale `weight` and the shift `bias`.
    pub const fn new(weight: View<'a>, bias: View<'a>) -> Self {
        LayerNormParams { weight, bias }
    }
}

/// What layer normalization's backward pass writes: `dx` (`rows x cols`) and the parameter
/// gradients `dweight` and `dbias` (`cols` each).
#[derive(Clone, Copy)]
pub struct LayerNormGrads<'a> {
    /// Gradient w.r.t. the input, `rows x cols`.
    pub dx: View<'a>,
    /// Gradient w.r.t. the scale, `cols`.
    pub dweight: View<'a>,
    /// Gradient w.r.t. the shift, `cols`.
    pub dbias: View<'a>,
}

impl<'a> LayerNormGrads<'a> {
    /// The input gradient `dx` and the parameter gradients `dweight` and `dbias`.
    pub const fn new(dx: View<'a>, dweight: View<'a>, dbias: View<'a>) -> Self {
        LayerNormGrads { dx, dweight, dbias }
    }
}

/// A dense layer's weight `w` (`outputs x inputs`, row-major) and bias (`outputs`), or their
/// gradients of the same shapes.
#[derive(Clone, Copy)]
pub struct DenseParams<'a> {
    /// Weight (or its gradient), `outputs x inputs`.
    pub w: View<'a>,
    /// Bias (or its gradient), `outputs`.
    pub bias: View<'a>,
}

impl<'a> DenseParams<'a> {
    /// The weight `w` and the `bias` (or their gradients).
    pub const fn new(w: View<'a>, bias: View<'a>) -> Self {
        DenseParams { w, bias }
    }
}

/// The gradients a GRU backward pass writes w.r.t. its gate pre-activations, `[dr, dz, dn]`
/// each `3*hidden` wide per row: `dgx` w.r.t. the input side `x W_ih^T + b_ih`, and `dgh`
/// w.r.t. the hidden side `h W_hh^T + b_hh` (`[dr, dz, dn r]`).
#[derive(Clone, Copy)]
pub struct GruGateGrads<'a> {
    /// Gradient w.r.t. the input-side gate pre-activations.
    pub dgx: View<'a>,
    /// Gradient w.r.t. the hidden-side gate pre-activations.
    pub dgh: View<'a>,
}

impl<'a> GruGateGrads<'a> {
    /// The input-side `dgx` and hidden-side `dgh` gate gradients.
    pub const fn new(dgx: View<'a>, dgh: View<'a>) -> Self {
        GruGateGrads { dgx, dgh }
    }
}

/// What the backward pass of a bias + activation writes: `dz` (`rows x cols`, the gradient
/// w.r.t. the pre-activation) and `dbias` (`cols`, its column sums).
#[derive(Clone, Copy)]
pub struct BiasActGrads<'a> {
    /// Gradient w.r.t. the pre-activation, `rows x cols`.
    pub dz: View<'a>,
    /// Gradient w.r.t. the bias, `cols`.
    pub dbias: View<'a>,
}

impl<'a> BiasActGrads<'a> {
    /// The pre-activation gradient `dz` and the bias gradient `dbias`.
    pub const fn new(dz: View<'a>, dbias: View<'a>) -> Self {
        BiasActGrads { dz, dbias }
    }
}
