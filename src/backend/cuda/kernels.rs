//! The built-in op-set kernel sources of this dialect, embedded at build time.

use crate::backend::SgemmKernel;

/// The `sgemm` kernel of `kernels-cu/gemm.cu` (`SG_BM`, `SG_BN`, `SG_THREADS`); the HIP build
/// compiles that same kernel, so it launches it the same way.
pub(crate) const SGEMM: SgemmKernel = SgemmKernel {
    entry: "sgemm",
    tile: (128, 128, 256),
    splits_k: false,
};

/// The tensor-core kernels of `kernels-cu/gemm_tc.cu` (CUDA, sm_80+): 128 x 128 tiles of 8 warps
/// and 64 x 64 tiles of 4 warps.
pub(crate) const SGEMM_TC128: SgemmKernel = SgemmKernel {
    entry: "sgemm_tc128",
    tile: (128, 128, 256),
    splits_k: true,
};
/// See [`SGEMM_TC128`].
pub(crate) const SGEMM_TC64: SgemmKernel = SgemmKernel {
    entry: "sgemm_tc64",
    tile: (64, 64, 128),
    splits_k: true,
};

/// The GEMM kernel for an `m x n` product on a device with `sms` SMs whose op set was built for
/// `arch` (`80` for sm_80) from the CUDA sources: the tensor-core kernels from sm_80 on, 128-wide
/// tiles while they fill at least three quarters of the SMs, else 64-wide ones (which split k
/// further if they still leave SMs idle); before sm_80, `sgemm`.
pub(crate) fn sgemm_for(arch: u32, hip_sources: bool, sms: u32, m: usize, n: usize) -> SgemmKernel {
    if hip_sources || arch < 80 {
        return SGEMM;
    }
    let tiles = m.div_ceil(128) * n.div_ceil(128);
    if tiles * 4 >= sms as usize * 3 {
        SGEMM_TC128
    } else {
        SGEMM_TC64
    }
}

/// The files of `kernels-cu/`, in translation-unit order: the shared header first (the HIP
/// dialect reuses this list after its vendor header).
pub(crate) const FILES: [(&str, &str); 13] = [
    ("common.cuh", include_str!("../../../kernels-cu/common.cuh")),
    (
        "elementwise.cu",
        include_str!("../../../kernels-cu/elementwise.cu"),
    ),
    ("reduce.cu", include_str!("../../../kernels-cu/reduce.cu")),
    ("gemm.cu", include_str!("../../../kernels-cu/gemm.cu")),
    // CUDA sm_80+ only; empty in HIP and older-architecture builds.
    ("gemm_tc.cu", include_str!("../../../kernels-cu/gemm_tc.cu")),
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
