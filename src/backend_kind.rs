//! [`BackendKind`]: which runtime. Its own module, below `error` (whose variants name a backend)
//! and `device` (which parses it), so the two do not depend on each other.

use std::fmt;

/// A compute runtime that `rnn` can drive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum BackendKind {
    /// NVIDIA CUDA (driver API, NVRTC, cuBLAS), loaded at run time.
    Cuda,
    /// OpenCL through the ICD loader, any platform (NVIDIA, AMD, Intel, PoCL).
    OpenCl,
    /// AMD ROCm/HIP with hiprtc, loaded at run time.
    Hip,
    /// The multi-threaded CPU backend (Rayon); always available, and the numerical reference.
    Cpu,
}

impl BackendKind {
    /// Every backend, in probing order.
    pub const ALL: [BackendKind; 4] = [
        BackendKind::Cuda,
        BackendKind::OpenCl,
        BackendKind::Hip,
        BackendKind::Cpu,
    ];

    /// The lowercase name used in device ids and `RNN_BACKENDS`.
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Cuda => "cuda",
            BackendKind::OpenCl => "opencl",
            BackendKind::Hip => "hip",
            BackendKind::Cpu => "cpu",
        }
    }
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
