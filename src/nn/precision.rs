//! [`Precision`]: the number format a network computes in (issue 28), and its parsing from the
//! `RNN_PRECISION` environment variable of the examples.

use crate::dtype::DType;
use crate::error::{Error, Result};

/// The number format of a network's activations and GEMM operands.
///
/// Which layer kinds compute in which type, in `Bf16`/`F16`:
/// - dense layers: activations, pre-activations and their gradients in the low type T, GEMM
///   operands in T (the low copy of the parameters), sums in f32; the weight and bias
///   gradients are written in f32; a linear last layer writes its output in f32 (its sums
///   plus the f32 bias), the input of the loss;
/// - embedding, dropout, layer norm, Elman/LSTM/GRU cells and their stacks: f32 (their ops
///   have no T form yet). Each casts its T input to f32, runs as in f32 training on the f32
///   master weights, and casts its output (and, backward, its input gradient) back to T (the
///   persistent LSTM/GRU kernels store the T output themselves); the layer after it writes its
///   output gradient in f32. The recurrent cell states (`h`, LSTM `c`) stay f32;
/// - except the recurrent products of a single Elman/LSTM/GRU layer's sequence where the GPU
///   runs it as per-step GEMMs (LSTM/GRU from hidden 384, Elman from 1024, where the
///   persistent kernels do not take it): their operands (`h_{t-1}`, W_hh, and backward the
///   gate gradients) are T copies, summed in f32 ([`crate::ops::SeqShape::product_type`]);
///   the cell math, the states, the gates and the layer's f32 output are as above. The CPU
///   backend and the GPU's other recurrent routes compute those products in f32;
/// - the loss: reads the last layer's output in f32 (a linear dense or f32-only last layer
///   writes it so, any other is cast); the loss values, softmax and its gradient are f32, the
///   gradient cast to T where the last layer is dense (after the loss scale, for `F16`);
/// - the f32 products that remain (the f32-only layers' GEMMs, which autocast would run in
///   T) use TF32 on CUDA with cuBLAS, as in `Tf32`: more precise than T, and on the tensor
///   cores;
/// - [`super::Stepper`]: f32 storage throughout, whatever the network's precision (its
///   products in TF32 on CUDA with cuBLAS while the network is in `Tf32`, `Bf16` or `F16`).
///
/// Master parameters, their gradients and the optimizer state are f32 in every precision;
/// gradient clipping and weight decay act on the f32 gradients (after unscaling, for `F16`).
/// Every optimizer of the crate has a mixed step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Precision {
    /// Everything in f32 (the default).
    #[default]
    F32,
    /// f32 storage, TF32 tensor-core GEMMs (cuBLAS's TF32 mode, on CUDA with cuBLAS, on any
    /// context); elsewhere the same as `F32`.
    Tf32,
    /// bfloat16 activations and GEMM operands, f32 sums, master weights and optimizer state;
    /// no loss scaling (bf16 has f32's exponent range).
    Bf16,
    /// IEEE half activations and GEMM operands, f32 sums, master weights and optimizer state,
    /// with dynamic loss scaling (PyTorch's `GradScaler`: start at 65536, halve and skip the
    /// step on inf/NaN gradients, double after 2000 clean steps), reported per epoch in
    /// [`super::EpochStats::loss_scale`] and [`super::EpochStats::skipped_steps`].
    F16,
}

/// The loss scale an `F16` run starts at (PyTorch's `GradScaler` default).
pub(crate) const INITIAL_LOSS_SCALE: f32 = 65536.0;

impl Precision {
    /// The storage type of activations and of the low copy of the parameters: `Some(Bf16)` or
    /// `Some(F16)`, `None` for f32 storage (`F32`, `Tf32`).
    pub fn low_dtype(self) -> Option<DType> {
        match self {
            Precision::Bf16 => Some(DType::Bf16),
            Precision::F16 => Some(DType::F16),
            Precision::F32 | Precision::Tf32 => None,
        }
    }

    /// True where training scales the loss dynamically (`F16`).
    pub fn scales_loss(self) -> bool {
        self == Precision::F16
    }

    /// The name [`Precision::parse`] takes: `f32`, `tf32`, `bf16`, `f16`.
    pub fn name(self) -> &'static str {
        match self {
            Precision::F32 => "f32",
            Precision::Tf32 => "tf32",
            Precision::Bf16 => "bf16",
            Precision::F16 => "f16",
        }
    }

    /// `f32`, `tf32`, `bf16` or `f16` (case and surrounding spaces ignored); anything else is
    /// [`Error::InvalidArgument`].
    pub fn parse(value: &str) -> Result<Self> {
        match value.trim().to_ascii_lowercase().as_str() {
            "f32" | "fp32" => Ok(Precision::F32),
            "tf32" => Ok(Precision::Tf32),
            "bf16" => Ok(Precision::Bf16),
            "f16" | "fp16" => Ok(Precision::F16),
            _ => Err(Error::InvalidArgument(format!(
                "precision {value:?}: expected f32, tf32, bf16 or f16"
            ))),
        }
    }

    /// The precision named by the environment variable `name` (e.g. `RNN_PRECISION`), `F32`
    /// when unset or empty; a bad value is [`Error::InvalidEnv`].
    pub fn from_env(name: &str) -> Result<Self> {
        let Some(raw) = std::env::var_os(name) else {
            return Ok(Precision::F32);
        };
        let invalid = || Error::InvalidEnv {
            name: name.into(),
            value: raw.to_string_lossy().into_owned(),
            reason: "expected f32, tf32, bf16 or f16".into(),
        };
        let text = raw.to_str().ok_or_else(invalid)?;
        if text.trim().is_empty() {
            return Ok(Precision::F32);
        }
        Precision::parse(text).map_err(|_| invalid())
    }
}

impl std::fmt::Display for Precision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::Precision;

    #[test]
    fn names_round_trip_and_bad_names_are_errors() {
        for p in [
            Precision::F32,
            Precision::Tf32,
            Precision::Bf16,
            Precision::F16,
        ] {
            assert_eq!(Precision::parse(p.name()).unwrap(), p);
        }
        assert_eq!(Precision::parse(" BF16 ").unwrap(), Precision::Bf16);
        assert!(Precision::parse("f8").is_err());
        assert_eq!(Precision::default(), Precision::F32);
    }
}
