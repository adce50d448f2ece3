//! The op set: every computation layers, losses and optimizers need, written once per backend
//! family (natively for the CPU, and once over [`crate::backend::Device`] for CUDA, OpenCL and
//! HIP).
//!
//! Conventions shared by every op:
//! - Matrices are row-major and contiguous; a `rows x cols` matrix is a view of `rows * cols`
//!   elements.
//! - Outputs are views too (buffers use interior mutability), so one flat parameter buffer can be
//!   read by many layers and one flat gradient buffer written by them.
//! - An output must not overlap an input, except where an op says "may be the same view as":
//!   then exactly the same view (same buffer, offset and length) is allowed and means in place.
//! - Every view must belong to this context's device, else [`crate::Error::ForeignBuffer`].
//! - Every view has an element type ([`crate::DType`]); lengths and offsets count its
//!   elements. Every computing op takes f32 views, except index data (below), which is u32,
//!   and rejects another type with [`crate::Error::DTypeMismatch`] naming the op and argument,
//!   before any work (the shared `check::same_context` and `check::typed`, which each op calls
//!   with all its views). `copy` takes any type, the same on both sides; `alloc_as`,
//!   `upload_bytes`, `download_bytes` and [`TypedMemory`]'s `upload_as`/`download_as` any type.
//! - Ops queue work; they need not wait for it. `download` and `synchronize` wait.
//! - Index data (class labels, token ids, row indices) is u32: the `indices` of
//!   [`IndexOps`] and the `labels` of [`LossOps::softmax_cross_entropy`]. Every backend
//!   applies one rule: `v` is a valid index into `n` entries iff `v < n`. Each op says what an
//!   invalid index does; none reads out of bounds.

pub(crate) mod activation;
pub(crate) mod check;
pub(crate) mod dense;
mod elementwise;
mod elman;
mod execution;
mod gated_cell;
pub(crate) mod gated_seq;
mod gated_sequence;
mod host_block;
mod index;
mod kernels;
pub(crate) mod linalg;
mod loss;
mod memory;
mod norm;
mod optim;
mod profile;
mod random;
mod recurrent_args;
mod reduce;
pub(crate) mod rnn_seq;
mod row_args;
pub(crate) mod seq_pair;
mod shape;
mod varlen;
mod views;

pub use activation::ActivationOps;
pub use dense::DenseOps;
pub use elementwise::ElementwiseOps;
pub use elman::ElmanOps;
pub(crate) use execution::Engine;
pub use execution::Execution;
pub use gated_cell::GatedCellOps;
pub use gated_sequence::GatedSequenceOps;
pub use host_block::HostBlock;
pub(crate) use host_block::PlainBlock;
pub use index::IndexOps;
pub use kernels::KernelOps;
pub use linalg::LinalgOps;
pub use loss::LossOps;
pub use memory::{MemoryOps, TypedMemory};
pub use norm::NormOps;
pub use optim::{
    AdamStep, MixedUpdate, OPTIMIZER_STATE_LEN, OptimOps, SCALER_STATE_LEN, ScaleUpdate, SgdStep,
    optimizer_state, scaler_state,
};
pub use profile::KernelTime;
pub use random::{
    DropoutMask, RNG_STATE_LEN, RandomOps, dropout_keeps, dropout_params, rng_state,
    rng_state_values,
};
pub(crate) use random::{rng_hash, rng_key};
pub use recurrent_args::{
    GruCellBackward, GruCellForward, GruSequenceBackward, GruSequenceForward, LstmCellBackward,
    LstmCellForward, LstmSequenceBackward, LstmSequenceForward, RnnSequenceBackward,
    RnnSequenceForward, RnnStepBackward, RnnStepForward,
};
pub use reduce::ReduceOps;
pub(crate) use reduce::SumAxis;
pub use row_args::{
    BiasActBackward, BiasActBackwardProduct, DenseForward, DenseParamGrads, IndexedRows,
    LayerNormBackward, LayerNormForward, Mse, SoftmaxCrossEntropy,
};
pub use seq_pair::{SeqCall, SequencePairOps};
pub use shape::{DenseShape, MatShape, SeqShape};
pub(crate) use varlen::check_scale_rows;
pub use varlen::{LengthLayout, LossWeights, SequenceMaskOps};
pub use views::{
    Activated, BiasActGrads, DenseParams, GruGateGrads, LayerNormGrads, LayerNormParams,
    LossOutputs, OptimBuffers, RecurrentWeights,
};

use crate::buffer::Buffer;
use crate::error::Result;

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

/// Declares [`Ops`] over the family traits and implements it for every type that implements
/// them all, from one list.
macro_rules! op_set {
    ($(#[$meta:meta])* $($family:ident),+ $(,)?) => {
        $(#[$meta])*
        pub trait Ops: $($family +)+ Send + Sync {}

        impl<T> Ops for T where T: $($family +)+ Send + Sync + ?Sized {}
    };
}

op_set! {
    /// The whole op set: every family trait. Implemented natively by the CPU backend and once,
    /// generically, for every GPU backend over [`crate::backend::Device`]; a type that implements
    /// every family implements `Ops` (a blanket impl), so `&dyn Ops` and `Arc<dyn Ops>` reach every
    /// op (a trait object's supertrait methods need no import). Code generic over one family, or
    /// over a concrete backend type, brings the traits in scope with `use rnn::ops::prelude::*`.
    ///
    /// Graph recording, native streams and profiling are not ops: they are the context's
    /// [`Execution`] ([`crate::Context::capture_begin`], [`crate::Context::kernel_times`], ...).
    MemoryOps,
    KernelOps,
    ElementwiseOps,
    LinalgOps,
    ReduceOps,
    ActivationOps,
    DenseOps,
    LossOps,
    IndexOps,
    RandomOps,
    NormOps,
    ElmanOps,
    GatedCellOps,
    GatedSequenceOps,
    SequencePairOps,
    OptimOps,
    SequenceMaskOps,
}

/// Everything needed to call ops: [`Ops`] and every family trait (a method of a family is
/// callable on `&dyn Ops` only with its trait in scope). `use rnn::prelude::*;`.
pub mod prelude {
    pub use super::{
        ActivationOps, DenseOps, ElementwiseOps, ElmanOps, Execution, GatedCellOps,
        GatedSequenceOps, IndexOps, KernelOps, LinalgOps, LossOps, MemoryOps, NormOps, Ops,
        OptimOps, RandomOps, ReduceOps, SequenceMaskOps, SequencePairOps, TypedMemory,
    };
}

/// Convenience: a zero-filled buffer.
pub fn zeros(ops: &(impl MemoryOps + ?Sized), len: usize) -> Result<Buffer> {
    let b = ops.alloc(len)?;
    ops.fill(b.view(), 0.0)?;
    Ok(b)
}
