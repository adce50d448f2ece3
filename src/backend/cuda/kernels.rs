//! The built-in op-set kernel sources of this dialect, embedded at build time.

use crate::backend::gpu::gemm_k_splits;
use crate::backend::{SgemmKernel, tensor_core_sgemm};
use crate::kernel::{
    OpFamily, OpModule, TIER0, add_tier0_copies, concatenate, family_entries, whole_op_set,
};

/// The `sgemm` kernel of `kernels-cu/gemm.cu` (`SG_BM`, `SG_BN`, `SG_THREADS`); the HIP build
/// compiles that same kernel, so it launches it the same way.
pub(crate) const SGEMM: SgemmKernel = SgemmKernel {
    splits_k: false,
    ..SgemmKernel::new("sgemm", (128, 128, 256))
};

/// Dynamic shared memory of `sgemm_wg128` (kernels-cu/gemm_wg.cu): two stages of four 128 x 32
/// f32 tiles, and 1 KB of slack to start them on the 1024-byte period of the 128-byte swizzle.
const SGEMM_WG_SHARED_BYTES: u32 = 2 * 4 * 128 * 32 * 4 + 1024;

/// The warpgroup tensor-core kernel of `kernels-cu/gemm_wg.cu` (CUDA sm_90a): 128 x 128 tiles of
/// 2 warpgroups, one block per SM.
pub(crate) const SGEMM_WG128: SgemmKernel = SgemmKernel {
    shared_bytes: SGEMM_WG_SHARED_BYTES,
    one_block_per_sm: true,
    ..SgemmKernel::new("sgemm_wg128", (128, 128, 256))
};

/// Whether `sgemm_wg128` takes an `m x n x k` product on a device with `sms` SMs: when its grid
/// (one block per SM, k split to fill them) covers at least three quarters of the SMs. There it
/// beats cuBLAS's f32 GEMM on the H100; on smaller grids cuBLAS's smaller tiles win
/// (docs/performance.md, GEMM).
pub(crate) fn warpgroup_gemm_fits(sms: u32, m: usize, n: usize, k: usize) -> bool {
    let tiles = m.div_ceil(128) * n.div_ceil(128);
    let splits = gemm_k_splits(tiles, m.saturating_mul(n), k, sms, true) as usize;
    tiles.saturating_mul(splits) * 4 >= sms as usize * 3
}

/// The GEMM kernel for an `m x n` product on a device with `sms` SMs whose op set was built for
/// `arch` (`80` for sm_80) from the CUDA sources: the tensor-core kernels from sm_80 on, 128-wide
/// tiles while they fill at least three quarters of the SMs, else 64-wide ones (which split k
/// further if they still leave SMs idle); before sm_80, `sgemm`.
pub(crate) fn sgemm_for(arch: u32, hip_sources: bool, sms: u32, m: usize, n: usize) -> SgemmKernel {
    if hip_sources || arch < 80 {
        return SGEMM;
    }
    tensor_core_sgemm(sms, m, n)
}

/// Whether an op set built for `arch` (`80` for sm_80) from the CUDA sources (not the HIP ones
/// through NVRTC) has the bf16/f16 tensor-core kernels of `kernels-cu/hgemm_tc.cu`.
pub(crate) fn half_tensor_cores(arch: u32, hip_sources: bool) -> bool {
    !hip_sources && arch >= 80
}

/// The headers every module of the CUDA op set starts with (repository paths and texts): the
/// scalar core and the f32/bf16/f16 conversions every dialect shares, the common header, the streaming helpers (the HIP dialect
/// puts its vendor header before them).
pub(crate) const HEADERS: [(&str, &str); 4] = [
    (
        "kernels-common/scalar_core.h",
        include_str!("../../../kernels-common/scalar_core.h"),
    ),
    (
        "kernels-common/half_convert.h",
        include_str!("../../../kernels-common/half_convert.h"),
    ),
    (
        "kernels-cu/common.cuh",
        include_str!("../../../kernels-cu/common.cuh"),
    ),
    (
        "kernels-cu/stream.cuh",
        include_str!("../../../kernels-cu/stream.cuh"),
    ),
];

/// The stores and asynchronous copies of the f32 and bf16/f16 GEMMs: the first file of the three
/// GEMM families (include-guarded, so the whole op set has it once).
const GEMM_COMMON: (&str, &str) = (
    "kernels-cu/gemm_common.cuh",
    include_str!("../../../kernels-cu/gemm_common.cuh"),
);

/// The body of the bias-activation backward: the first file of `bias_grad` and
/// `bias_grad_product` (include-guarded, so the whole op set has it once), and of tier 0's copies.
const BIAS_GRAD_COMMON: (&str, &str) = (
    "kernels-cu/bias_grad_common.cuh",
    include_str!("../../../kernels-cu/bias_grad_common.cuh"),
);

/// The bias-activation backward: its family's file, and one of tier 0's copies.
const BIAS_GRAD: (&str, &str) = (
    "kernels-cu/bias_grad.cu",
    include_str!("../../../kernels-cu/bias_grad.cu"),
);

/// Its variant that forms the upstream gradient as a product: its family's file, and one of
/// tier 0's copies.
const BIAS_GRAD_PRODUCT: (&str, &str) = (
    "kernels-cu/bias_grad_product.cu",
    include_str!("../../../kernels-cu/bias_grad_product.cu"),
);

/// The optimizers' state helpers: the first file of `optim` and `optim_mixed` (include-guarded,
/// so the whole op set has it once).
const OPTIM_COMMON: (&str, &str) = (
    "kernels-cu/optim_common.cuh",
    include_str!("../../../kernels-cu/optim_common.cuh"),
);

/// The bodies of the block-local sequence kernels: the first file of each `small_seq` family
/// (include-guarded, so the whole op set has it once).
const SMALL_SEQ: (&str, &str) = (
    "kernels-cu/small_seq.cu",
    include_str!("../../../kernels-cu/small_seq.cu"),
);

/// The families of the CUDA op set, each compiled as a module of its own after [`HEADERS`]
/// (docs/kernel-abi.md; the HIP dialect compiles the same families). Files that call each other's
/// device functions share a module.
pub(crate) const FAMILIES: [OpFamily; 23] = [
    OpFamily {
        name: "elementwise",
        files: &[(
            "kernels-cu/elementwise.cu",
            include_str!("../../../kernels-cu/elementwise.cu"),
        )],
        entries: &[family_entries::ELEMENTWISE],
    },
    OpFamily {
        name: "reduce",
        files: &[(
            "kernels-cu/reduce.cu",
            include_str!("../../../kernels-cu/reduce.cu"),
        )],
        entries: &[family_entries::REDUCE],
    },
    OpFamily {
        name: "bias_grad",
        files: &[BIAS_GRAD_COMMON, BIAS_GRAD],
        entries: &[family_entries::BIAS_GRAD],
    },
    OpFamily {
        name: "bias_grad_product",
        files: &[BIAS_GRAD_COMMON, BIAS_GRAD_PRODUCT],
        entries: &[family_entries::BIAS_GRAD_PRODUCT],
    },
    OpFamily {
        name: "optim",
        files: &[
            OPTIM_COMMON,
            (
                "kernels-cu/optim.cu",
                include_str!("../../../kernels-cu/optim.cu"),
            ),
        ],
        entries: &[family_entries::OPTIM],
    },
    // Only mixed-precision training launches these (most of what `optim` used to build).
    OpFamily {
        name: "optim_mixed",
        files: &[
            OPTIM_COMMON,
            (
                "kernels-cu/optim_mixed.cu",
                include_str!("../../../kernels-cu/optim_mixed.cu"),
            ),
        ],
        entries: &[family_entries::OPTIM_MIXED],
    },
    OpFamily {
        name: "gemm",
        files: &[
            GEMM_COMMON,
            (
                "kernels-cu/gemm_thin.cu",
                include_str!("../../../kernels-cu/gemm_thin.cu"),
            ),
        ],
        entries: &[&[
            "sgemm_thin",
            "sgemm_thin1",
            "sgemm_thin_k",
            "sgemm_split_sum",
        ]],
    },
    // The tile kernels: gemm.cu's SIMT sgemm (the tile GEMM of HIP and of CUDA before sm_80),
    // gemm_tc.cu (sm_80+ only) and gemm_wg.cu (sm_90a only).
    OpFamily {
        name: "gemm_tc",
        files: &[
            GEMM_COMMON,
            (
                "kernels-cu/gemm.cu",
                include_str!("../../../kernels-cu/gemm.cu"),
            ),
            (
                "kernels-cu/gemm_tc.cu",
                include_str!("../../../kernels-cu/gemm_tc.cu"),
            ),
            (
                "kernels-cu/gemm_wg.cu",
                include_str!("../../../kernels-cu/gemm_wg.cu"),
            ),
        ],
        entries: &[&["sgemm", "sgemm_tc128", "sgemm_tc64", "sgemm_wg128"]],
    },
    // bf16/f16 GEMM: hgemm.cu (every build; its cuBLAS epilogues CUDA only) and hgemm_tc.cu
    // (sm_80+ only; uses hgemm.cu's epilogues).
    OpFamily {
        name: "hgemm",
        files: &[
            GEMM_COMMON,
            (
                "kernels-cu/hgemm.cu",
                include_str!("../../../kernels-cu/hgemm.cu"),
            ),
            (
                "kernels-cu/hgemm_tc.cu",
                include_str!("../../../kernels-cu/hgemm_tc.cu"),
            ),
        ],
        entries: &[
            family_entries::HALF_GEMM,
            family_entries::HALF_GEMM_TC,
            &["hgemm_epilogue_bf16", "hgemm_epilogue_f16"],
        ],
    },
    // gated_step.cu uses rnn.cu's tile product.
    OpFamily {
        name: "rnn",
        files: &[
            (
                "kernels-cu/rnn.cu",
                include_str!("../../../kernels-cu/rnn.cu"),
            ),
            (
                "kernels-cu/gated_step.cu",
                include_str!("../../../kernels-cu/gated_step.cu"),
            ),
        ],
        entries: &[family_entries::RNN_STEP],
    },
    // gated_seq.cu uses rnn_seq.cu's row barrier.
    OpFamily {
        name: "rnn_seq",
        files: &[
            (
                "kernels-cu/rnn_seq.cu",
                include_str!("../../../kernels-cu/rnn_seq.cu"),
            ),
            (
                "kernels-cu/gated_seq.cu",
                include_str!("../../../kernels-cu/gated_seq.cu"),
            ),
        ],
        entries: &[family_entries::SEQUENCE],
    },
    // The block-local sequence kernels: the bodies (small_seq, include-guarded) under each
    // cell's entries, a module per cell (an Elman model never builds the LSTM and GRU kernels).
    OpFamily {
        name: "small_seq",
        files: &[
            SMALL_SEQ,
            (
                "kernels-cu/small_seq_pack.cu",
                include_str!("../../../kernels-cu/small_seq_pack.cu"),
            ),
        ],
        entries: &[family_entries::SMALL_SEQUENCE_PACK],
    },
    OpFamily {
        name: "small_seq_rnn",
        files: &[
            SMALL_SEQ,
            (
                "kernels-cu/small_seq_rnn.cu",
                include_str!("../../../kernels-cu/small_seq_rnn.cu"),
            ),
        ],
        entries: &[family_entries::SMALL_SEQUENCE_RNN],
    },
    OpFamily {
        name: "small_seq_lstm",
        files: &[
            SMALL_SEQ,
            (
                "kernels-cu/small_seq_lstm.cu",
                include_str!("../../../kernels-cu/small_seq_lstm.cu"),
            ),
        ],
        entries: &[family_entries::SMALL_SEQUENCE_LSTM],
    },
    OpFamily {
        name: "small_seq_gru",
        files: &[
            SMALL_SEQ,
            (
                "kernels-cu/small_seq_gru.cu",
                include_str!("../../../kernels-cu/small_seq_gru.cu"),
            ),
        ],
        entries: &[family_entries::SMALL_SEQUENCE_GRU],
    },
    OpFamily {
        name: "small_seq_regs",
        files: &[
            SMALL_SEQ,
            (
                "kernels-cu/small_seq_regs.cu",
                include_str!("../../../kernels-cu/small_seq_regs.cu"),
            ),
        ],
        entries: &[family_entries::SMALL_SEQUENCE_REGS],
    },
    OpFamily {
        name: "small_seq_pair",
        files: &[
            SMALL_SEQ,
            (
                "kernels-cu/small_seq_pair.cu",
                include_str!("../../../kernels-cu/small_seq_pair.cu"),
            ),
        ],
        entries: &[family_entries::SMALL_SEQUENCE_PAIR],
    },
    OpFamily {
        name: "random",
        files: &[(
            "kernels-cu/random.cu",
            include_str!("../../../kernels-cu/random.cu"),
        )],
        entries: &[family_entries::RANDOM],
    },
    OpFamily {
        name: "norm",
        files: &[(
            "kernels-cu/norm.cu",
            include_str!("../../../kernels-cu/norm.cu"),
        )],
        entries: &[family_entries::NORM],
    },
    OpFamily {
        name: "embedding",
        files: &[(
            "kernels-cu/embedding.cu",
            include_str!("../../../kernels-cu/embedding.cu"),
        )],
        entries: &[family_entries::EMBEDDING],
    },
    OpFamily {
        name: "varlen",
        files: &[(
            "kernels-cu/varlen.cu",
            include_str!("../../../kernels-cu/varlen.cu"),
        )],
        entries: &[family_entries::VARLEN],
    },
    OpFamily {
        name: "mixed",
        files: &[(
            "kernels-cu/mixed.cu",
            include_str!("../../../kernels-cu/mixed.cu"),
        )],
        entries: &[family_entries::MIXED],
    },
    // Stand-ins for the f32 GEMM families while they build on a cold start
    // (src/backend/gpu/modules.rs); never prefetched from a warm cache.
    OpFamily {
        name: TIER0,
        files: &[
            (
                "kernels-common/sgemm_tier0.h",
                include_str!("../../../kernels-common/sgemm_tier0.h"),
            ),
            (
                "kernels-cu/tier0.cu",
                include_str!("../../../kernels-cu/tier0.cu"),
            ),
        ],
        entries: &[family_entries::TIER0],
    },
];

/// The complete op-set translation unit for this dialect, every family in one (see
/// docs/kernel-abi.md): what the compile tests and the kernel contract read.
pub fn op_set_source() -> String {
    whole_op_set(&HEADERS, &FAMILIES)
}

/// The op set as one module per family.
pub fn op_set_modules() -> Vec<OpModule> {
    let prelude = concatenate(&HEADERS);
    let mut modules: Vec<OpModule> = FAMILIES.iter().map(|f| f.module(&prelude)).collect();
    add_tier0_copies(&mut modules, &TIER0_COPY_FILES);
    modules
}

/// The files the tier-0 module's copies come from ([`crate::kernel::TIER0_COPIES`]).
pub(crate) const TIER0_COPY_FILES: [(&str, &str); 7] = [
    (
        "kernels-cu/elementwise.cu",
        include_str!("../../../kernels-cu/elementwise.cu"),
    ),
    (
        "kernels-cu/reduce.cu",
        include_str!("../../../kernels-cu/reduce.cu"),
    ),
    BIAS_GRAD_COMMON,
    BIAS_GRAD,
    BIAS_GRAD_PRODUCT,
    OPTIM_COMMON,
    (
        "kernels-cu/optim.cu",
        include_str!("../../../kernels-cu/optim.cu"),
    ),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warpgroup_gemm_takes_products_that_fill_an_h100() {
        // W1 at batch 4096: forward (128 tiles), weight gradients (28 and 16 tiles, k split).
        for (m, n, k) in [(4096, 512, 784), (512, 784, 4096), (512, 512, 4096)] {
            assert!(warpgroup_gemm_fits(132, m, n, k), "{m} x {n} x {k}");
        }
        // The GEMM suite's WARPGROUP_SHAPES (tests/ops/backend_suite/gemm.rs).
        for (m, n, k) in [(1300, 1290, 40), (384, 520, 3001), (1157, 1163, 133)] {
            assert!(warpgroup_gemm_fits(132, m, n, k), "{m} x {n} x {k}");
        }
        // W1 at batch 256: too few blocks; cuBLAS's smaller tiles are faster there.
        for (m, n, k) in [
            (256, 512, 784),
            (512, 784, 256),
            (256, 10, 512),
            (1, 1, 5000),
        ] {
            assert!(!warpgroup_gemm_fits(132, m, n, k), "{m} x {n} x {k}");
        }
    }
}
