//! Shape descriptors: the integers that travel with an op's views, named and kept together.

use super::Gemm;
use crate::dtype::DType;

/// The shape of a recurrent op: `steps` time steps, each a `batch x hidden` block (one row per
/// sequence of the batch, one column per hidden unit), and the operand type of a sequence's
/// recurrent products (as cuDNN's RNN descriptor carries its math precision next to the hidden
/// size). The one-step ops (the Elman step, the LSTM and GRU cells) read only `batch` and
/// `hidden`: make theirs with [`SeqShape::step`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SeqShape {
    /// Time steps.
    pub steps: usize,
    /// Sequences processed together (rows of every block).
    pub batch: usize,
    /// Hidden units (columns of a state block).
    pub hidden: usize,
    /// `Some(Bf16)` or `Some(F16)`: the whole-sequence ops may round the operands of each
    /// step's recurrent product (`h_{t-1}`, `W_hh`, the gate gradients) to that type, summing
    /// in f32, where they run those products as GEMMs (the GPU's per-step GEMM path); every
    /// state, gate and output stays f32. `None` (the default, [`SeqShape::new`]): f32
    /// operands. Any other type is an invalid argument of the sequence ops.
    pub product_type: Option<DType>,
}

impl SeqShape {
    /// `steps` time steps of `batch x hidden`.
    pub const fn new(steps: usize, batch: usize, hidden: usize) -> Self {
        SeqShape {
            steps,
            batch,
            hidden,
            product_type: None,
        }
    }

    /// This shape with the recurrent products' operand type `t` ([`SeqShape::product_type`]).
    pub const fn with_product_type(self, t: Option<DType>) -> Self {
        SeqShape {
            product_type: t,
            ..self
        }
    }

    /// One time step of `batch x hidden`.
    pub const fn step(batch: usize, hidden: usize) -> Self {
        SeqShape::new(1, batch, hidden)
    }

    /// One time step of this shape's `batch x hidden`.
    pub const fn one_step(&self) -> Self {
        SeqShape::step(self.batch, self.hidden)
    }

    /// Elements of one `batch x hidden` state block.
    pub const fn block(&self) -> usize {
        self.batch * self.hidden
    }
}

/// The shape of a row-wise op over a `rows x cols` matrix, row-major (one row per sample).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MatShape {
    /// Rows (samples).
    pub rows: usize,
    /// Columns (features or classes of a row).
    pub cols: usize,
}

impl MatShape {
    /// `rows x cols`.
    pub const fn new(rows: usize, cols: usize) -> Self {
        MatShape { rows, cols }
    }
}

/// The shape of a dense layer over a batch: `rows` samples of `inputs` features in, `outputs`
/// units out (its weight is `outputs x inputs`, PyTorch's layout).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DenseShape {
    /// Samples (rows of the input and of the output).
    pub rows: usize,
    /// Input features (columns of the input).
    pub inputs: usize,
    /// Output units (columns of the output, rows of the weight).
    pub outputs: usize,
}

impl DenseShape {
    /// `rows` samples, `inputs` in, `outputs` out.
    pub const fn new(rows: usize, inputs: usize, outputs: usize) -> Self {
        DenseShape {
            rows,
            inputs,
            outputs,
        }
    }

    /// The forward product `z = x W^T` (`rows x outputs`).
    pub fn forward_gemm(&self) -> Gemm {
        Gemm::new(self.rows, self.outputs, self.inputs).tb()
    }

    /// The weight gradient's product `dW = dz^T x` (`outputs x inputs`).
    pub fn weight_grad_gemm(&self) -> Gemm {
        Gemm::new(self.outputs, self.inputs, self.rows).ta()
    }

    /// The output's shape, `rows x outputs` (that of `z`, `y` and `dz`).
    pub const fn output(&self) -> MatShape {
        MatShape::new(self.rows, self.outputs)
    }
}
