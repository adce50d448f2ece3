//! View groups: views that always travel together through an op, named and kept together.

use crate::buffer::View;
use crate::ops::Activation;

/// A `Clone + Copy` struct of views with a `const fn new` taking its fields in order: every view
/// group below is one of these.
macro_rules! view_group {
    (
        $(#[$meta:meta])*
        $name:ident {
            $($(#[$field_meta:meta])* $field:ident: $ty:ty,)+
        }
        $(#[$new_meta:meta])*
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy)]
        pub struct $name<'a> {
            $($(#[$field_meta])* pub $field: $ty,)+
        }

        impl<'a> $name<'a> {
            $(#[$new_meta])*
            pub const fn new($($field: $ty),+) -> Self {
                $name { $($field),+ }
            }
        }
    };
}
pub(crate) use view_group;

/// An op's argument struct: a [`view_group!`] made with the op's name (`OP`, as its errors
/// give it) and, where listed, its views in the kernels' order (`views()`, each a field or a
/// field's field).
macro_rules! op_args {
    (
        $(#[$meta:meta])*
        $name:ident for $op:literal {
            $($(#[$field_meta:meta])* $field:ident: $ty:ty,)+
        }
        $(views [$($v:ident $(. $sub:ident)?),+])?
    ) => {
        $crate::ops::views::view_group! {
            $(#[$meta])*
            $name {
                $($(#[$field_meta])* $field: $ty,)+
            }
            /// The arguments in declaration order.
        }

        impl<'a> $name<'a> {
            /// The op's name.
            pub(crate) const OP: &'static str = $op;

            $(
                /// Every view, in the kernels' order.
                pub(crate) fn views(&self) -> [View<'a>; [$(stringify!($v)),+].len()] {
                    [$(self.$v $(.$sub)?),+]
                }
            )?
        }
    };
}
pub(crate) use op_args;

view_group! {
    /// A recurrent layer's recurrent weight and its two biases: `w_hh` (`G*hidden x hidden`,
    /// row-major, PyTorch's layout; `G` is 1 for Elman, 4 for LSTM, 3 for GRU), `b_ih` and `b_hh`
    /// (`G*hidden` each).
    RecurrentWeights {
        /// Recurrent weight, `G*hidden x hidden` row-major.
        w_hh: View<'a>,
        /// Input-side bias, `G*hidden`.
        b_ih: View<'a>,
        /// Recurrent-side bias, `G*hidden`.
        b_hh: View<'a>,
    }
    /// The recurrent weight `w_hh` with its biases `b_ih` and `b_hh`.
}

view_group! {
    /// What a fused loss op writes, for a `rows x cols` prediction: `grad` (`rows x cols`, the
    /// gradient w.r.t. the logits or predictions), `row_loss` (`rows`, one loss per row) and, when
    /// given, `totals`, which the op adds the sum of the row losses to (and, for
    /// [`crate::ops::LossOps::softmax_cross_entropy`], the count of correct rows).
    LossOutputs {
        /// Gradient w.r.t. the loss's input, `rows x cols`.
        grad: View<'a>,
        /// One loss per row, `rows`.
        row_loss: View<'a>,
        /// Device-side running totals the op adds to, if any.
        totals: Option<View<'a>>,
    }
    /// The gradient, the per-row losses and, if given, the totals to add to.
}

view_group! {
    /// Layer normalization's affine parameters: `weight` (the scale) and `bias` (the shift),
    /// `cols` elements each.
    LayerNormParams {
        /// Per-column scale, `cols`.
        weight: View<'a>,
        /// Per-column shift, `cols`.
        bias: View<'a>,
    }
    /// The scale `weight` and the shift `bias`.
}

view_group! {
    /// What layer normalization's backward pass writes: `dx` (`rows x cols`) and the parameter
    /// gradients `dweight` and `dbias` (`cols` each).
    LayerNormGrads {
        /// Gradient w.r.t. the input, `rows x cols`.
        dx: View<'a>,
        /// Gradient w.r.t. the scale, `cols`.
        dweight: View<'a>,
        /// Gradient w.r.t. the shift, `cols`.
        dbias: View<'a>,
    }
    /// The input gradient `dx` and the parameter gradients `dweight` and `dbias`.
}

view_group! {
    /// A dense layer's weight `w` (`outputs x inputs`, row-major) and bias (`outputs`), or their
    /// gradients of the same shapes.
    DenseParams {
        /// Weight (or its gradient), `outputs x inputs`.
        w: View<'a>,
        /// Bias (or its gradient), `outputs`.
        bias: View<'a>,
    }
    /// The weight `w` and the `bias` (or their gradients).
}

view_group! {
    /// The gradients a GRU backward pass writes w.r.t. its gate pre-activations, `[dr, dz, dn]`
    /// each `3*hidden` wide per row: `dgx` w.r.t. the input side `x W_ih^T + b_ih`, and `dgh`
    /// w.r.t. the hidden side `h W_hh^T + b_hh` (`[dr, dz, dn r]`).
    GruGateGrads {
        /// Gradient w.r.t. the input-side gate pre-activations.
        dgx: View<'a>,
        /// Gradient w.r.t. the hidden-side gate pre-activations.
        dgh: View<'a>,
    }
    /// The input-side `dgx` and hidden-side `dgh` gate gradients.
}

view_group! {
    /// What the backward pass of a bias + activation writes: `dz` (`rows x cols`, the gradient
    /// w.r.t. the pre-activation) and `dbias` (`cols`, its column sums).
    BiasActGrads {
        /// Gradient w.r.t. the pre-activation, `rows x cols`.
        dz: View<'a>,
        /// Gradient w.r.t. the bias, `cols`.
        dbias: View<'a>,
    }
    /// The pre-activation gradient `dz` and the bias gradient `dbias`.
}

view_group! {
    /// The buffers every optimizer step reads and updates: the flat `params` (updated in place),
    /// their `grads`, and the device-side `state` (see [`crate::ops::OPTIMIZER_STATE_LEN`]), which
    /// the step advances.
    OptimBuffers {
        /// The flat parameters, updated in place.
        params: View<'a>,
        /// Their gradients, read.
        grads: View<'a>,
        /// The optimizer state: learning rate, steps taken and bias corrections.
        state: View<'a>,
    }
    /// The parameters, their gradients and the optimizer state.
}

view_group! {
    /// An activation's forward pass: the pre-activation `z`, the output `y = act(z)` and the
    /// function `act`. A backward pass reads `y`, or `z` where the output does not give the
    /// derivative ([`Activation::derivative_from_output`]).
    Activated {
        /// The pre-activation.
        z: View<'a>,
        /// The output, `act(z)`; may be the same view as `z`.
        y: View<'a>,
        /// The activation function.
        act: Activation,
    }
    /// The pre-activation `z`, the output `y` and the function `act`.
}
