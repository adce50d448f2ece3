//! The crate's one error type.

use crate::backend_kind::BackendKind;

/// Everything that can go wrong in `rnn`.
///
/// Backend errors keep the driver's own message and numeric code; compile errors carry the
/// compiler's full build log; running out of device memory is its own variant so callers can
/// react (smaller batch, another device).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A runtime (CUDA, OpenCL, HIP) could not be used: library missing, no device, init failure.
    #[error("{backend} backend unavailable: {reason}")]
    BackendUnavailable {
        /// Which runtime.
        backend: BackendKind,
        /// Why, in words (library names tried, driver error code, ...).
        reason: String,
    },
    /// A driver or runtime call failed.
    #[error("{backend} error in {call}: {message} (code {code})")]
    Backend {
        /// Which runtime reported it.
        backend: BackendKind,
        /// The API call that failed, e.g. `cuMemcpyHtoD`.
        call: String,
        /// The driver's numeric status code.
        code: i64,
        /// The driver's description of the code.
        message: String,
    },
    /// Kernel source failed to compile; `log` is the compiler's complete build log.
    #[error("kernel compilation failed on {device}:\n{log}")]
    Compile {
        /// The device the source was compiled for.
        device: String,
        /// The full build log.
        log: String,
    },
    /// The device ran out of memory even after the pool released its cached blocks.
    #[error(
        "out of device memory on {device}: requested {requested} bytes{}",
        free_of(*.free, *.total)
    )]
    OutOfMemory {
        /// The device.
        device: String,
        /// Bytes asked for.
        requested: usize,
        /// Bytes the driver reported free after the pool was emptied (the host's available
        /// memory for the CPU backend); 0 with `total` 0 when unknown.
        free: usize,
        /// Total device memory in bytes; 0 when unknown (then left out of the message).
        total: usize,
    },
    /// A device id string did not parse or names no device that exists.
    #[error("unknown device '{given}': {reason}; valid ids here: {valid}")]
    UnknownDevice {
        /// What the user gave.
        given: String,
        /// Why it was rejected.
        reason: String,
        /// The valid ids on this machine, comma separated.
        valid: String,
    },
    /// An environment variable held a value that could not be used.
    #[error("environment variable {name}={value:?} is invalid: {reason}")]
    InvalidEnv {
        /// The variable.
        name: String,
        /// Its value.
        value: String,
        /// What is expected.
        reason: String,
    },
    /// Tensor or op shapes do not fit together.
    #[error("shape mismatch in {op}: {detail}")]
    Shape {
        /// The op or layer that checked.
        op: String,
        /// What was expected and what was given.
        detail: String,
    },
    /// A user-supplied argument or configuration value is invalid.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// Training or evaluation data is unusable (empty, NaN, label out of range, ...).
    #[error("invalid data: {0}")]
    InvalidData(String),
    /// The operation exists but not on this backend or device.
    #[error("{op} is not supported on {backend}: {reason}")]
    Unsupported {
        /// The op.
        op: String,
        /// The backend that lacks it.
        backend: BackendKind,
        /// Why.
        reason: String,
    },
    /// A view of the wrong element type was passed to an op (every computing op takes f32
    /// views; `copy` needs both sides of one type; the typed transfers need the view's type).
    #[error("{op}: {arg} must hold {expected} elements, but holds {found}")]
    DTypeMismatch {
        /// The op that checked.
        op: String,
        /// Which argument (its name, or its position among the op's views).
        arg: String,
        /// The type the op needs.
        expected: crate::DType,
        /// The view's type.
        found: crate::DType,
    },
    /// A buffer from one context was handed to another context's ops.
    #[error("buffer belongs to another context ({0})")]
    ForeignBuffer(String),
    /// A collective library (NCCL for CUDA, RCCL for HIP) cannot be used: not installed, too
    /// old, or the devices cannot take part (OpenCL, the CPU, a single device).
    #[error("{library} unavailable: {reason}")]
    CollectiveUnavailable {
        /// `NCCL` or `RCCL`.
        library: String,
        /// Why, with the names tried and how to install it when it is missing.
        reason: String,
    },
    /// A collective library call failed.
    #[error("{library} error in {call}: {message} (code {code})")]
    Collective {
        /// `NCCL` or `RCCL`.
        library: String,
        /// The call, e.g. `ncclAllReduce`.
        call: String,
        /// The library's `ncclResult_t`.
        code: i64,
        /// The library's description of the code.
        message: String,
    },
    /// The multi-process rendezvous (torchrun's environment, the TCP exchange of the NCCL
    /// unique id) failed: a bad variable, an unreachable or silent rank 0, a timeout.
    #[error("rendezvous failed: {0}")]
    Rendezvous(String),
    /// Reading or writing a file (data, checkpoint, cache) failed.
    #[error("I/O error on {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A checkpoint or data file had the wrong format.
    #[error("format error in {path}: {reason}")]
    Format {
        /// The file.
        path: String,
        /// What was wrong.
        reason: String,
    },
    /// Training stopped because a step's loss was NaN or infinite (the learning rate is
    /// usually too high; gradient clipping may help).
    #[error(
        "training loss became {loss} at epoch {epoch}, step {step} of the epoch (global step \
         {global_step}); lower the learning rate or clip gradients"
    )]
    NonFiniteLoss {
        /// 1-based epoch.
        epoch: usize,
        /// 1-based step within the epoch: the first whose loss was not finite.
        step: usize,
        /// 1-based step since training began.
        global_step: u64,
        /// The loss summed over the epoch up to that step.
        loss: f32,
    },
}

/// The "free of total" part of an out-of-memory message; nothing when the total is unknown.
fn free_of(free: usize, total: usize) -> String {
    if total == 0 {
        String::new()
    } else {
        format!(", {free} bytes free of {total}")
    }
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Shorthand for [`Error::Shape`].
    pub fn shape(op: impl Into<String>, detail: impl Into<String>) -> Self {
        Error::Shape {
            op: op.into(),
            detail: detail.into(),
        }
    }

    /// Shorthand for [`Error::Io`].
    pub fn io(path: impl AsRef<std::path::Path>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.as_ref().display().to_string(),
            source,
        }
    }
}
