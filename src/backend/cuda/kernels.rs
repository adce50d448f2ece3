//! The built-in op-set kernel sources of this dialect, embedded at build time.

use crate::backend::SgemmKernel;

/// The `sgemm` kernel of `kernels-cu/gemm.cu` (`SG_BM`, `SG_BN`, `SG_THREADS`); the HIP build
/// compiles that same kernel, so it launches it the same way.
pub(crate) const SGEMM: SgemmKernel = SgemmKernel {
    entry: "sgemm",
    tile: (128, 128, 256),
};

/// The files of `kernels-cu/`, in translation-unit order: the shared header first (the HIP
/// dialect reuses this list after its vendor header).
pub(crate) const FILES: [(&str, &str); 12] = [
    ("common.cuh", include_str!("../../../kernels-cu/common.cuh")),
    (
        "elementwise.cu",
        include_str!("../../../kernels-cu/elementwise.cu"),
    ),
    ("reduce.cu", include_str!("../../../kernels-cu/reduce.cu")),
    ("gemm.cu", include_str!("../../../kernels-cu/gemm.cu")),
    ("rnn.cu", include_str!("../../../kernels-cu/rnn.cu")),
    // Uses rnn.cu's tile product.
    (
        "gated_step.cu",
        include_str!("../../../kernels-cu/gated_step.cu"),
    ),
    ("rnn_seq.cu", include_str!("../../../kernels-cu/rnn_seq.cu")),
    // Uses rnn_seq.cu's row barrier.
    (
        "gated_seq.cu",
        include_str!("../../../kernels-cu/gated_seq.cu"),
    ),
    ("optim.cu", include_str!("../../../kernels-cu/optim.cu")),
    ("random.cu", include_str!("../../../kernels-cu/random.cu")),
    ("norm.cu", include_str!("../../../kernels-cu/norm.cu")),
    (
        "embedding.cu",
        include_str!("../../../kernels-cu/embedding.cu"),
    ),
];

/// The complete op-set translation unit for this dialect (see docs/kernel-abi.md).
pub(crate) fn op_set_source() -> String {
    let mut out = String::new();
    for (name, text) in FILES {
        out.push_str("// ---- kernels-cu/");
        out.push_str(name);
        out.push_str(" ----\n");
        out.push_str(text);
        out.push('\n');
    }
    out
}
