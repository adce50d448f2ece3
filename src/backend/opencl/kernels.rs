//! The built-in op-set kernel sources of the OpenCL dialect (`kernels-cl/`), embedded at build
//! time: the shared headers and the families, each family compiled as a module of its own.

use crate::kernel::{
    OpFamily, OpModule, TIER0, add_tier0_copies, concatenate, family_entries, whole_op_set,
};

/// What every module starts with, after the device's defines: the scalar core every dialect
/// shares (activations, index rule) and its f32/bf16/f16 conversions, the common header, the streaming helpers.
const HEADERS: [(&str, &str); 4] = [
    (
        "kernels-common/scalar_core.h",
        include_str!("../../../kernels-common/scalar_core.h"),
    ),
    (
        "kernels-common/half_convert.h",
        include_str!("../../../kernels-common/half_convert.h"),
    ),
    (
        "kernels-cl/common.cl",
        include_str!("../../../kernels-cl/common.cl"),
    ),
    (
        "kernels-cl/stream.cl",
        include_str!("../../../kernels-cl/stream.cl"),
    ),
];

/// The operand load of the f32 GEMM families: the first file of `gemm` and `gemm_tc`
/// (include-guarded, so the whole op set has it once).
const GEMM_COMMON: (&str, &str) = (
    "kernels-cl/gemm_common.cl",
    include_str!("../../../kernels-cl/gemm_common.cl"),
);

/// The optimizers' state helpers: the first file of `optim` and `optim_mixed` (include-guarded,
/// so the whole op set has it once).
const OPTIM_COMMON: (&str, &str) = (
    "kernels-cl/optim_common.cl",
    include_str!("../../../kernels-cl/optim_common.cl"),
);

/// The bodies of the block-local sequence kernels: the first file of each `small_seq` family
/// (include-guarded, so the whole op set has it once).
const SMALL_SEQ: (&str, &str) = (
    "kernels-cl/small_seq.cl",
    include_str!("../../../kernels-cl/small_seq.cl"),
);

/// The families of the OpenCL op set, each compiled as a module of its own after [`HEADERS`]
/// (docs/kernel-abi.md). Files that call each other's functions share a module.
pub(crate) const FAMILIES: [OpFamily; 21] = [
    OpFamily {
        name: "elementwise",
        files: &[(
            "kernels-cl/elementwise.cl",
            include_str!("../../../kernels-cl/elementwise.cl"),
        )],
        entries: &[family_entries::ELEMENTWISE],
    },
    OpFamily {
        name: "reduce",
        // norm.cl uses reduce.cl's row-segment loop (geometry W). The bias-activation backward
        // stays in reduce.cl: NVIDIA's compiler builds one program at a time, so a module of
        // its own would not come sooner.
        files: &[
            (
                "kernels-cl/reduce.cl",
                include_str!("../../../kernels-cl/reduce.cl"),
            ),
            (
                "kernels-cl/norm.cl",
                include_str!("../../../kernels-cl/norm.cl"),
            ),
        ],
        entries: &[
            family_entries::REDUCE,
            family_entries::BIAS_GRAD,
            family_entries::BIAS_GRAD_PRODUCT,
            family_entries::NORM,
        ],
    },
    OpFamily {
        name: "optim",
        files: &[
            OPTIM_COMMON,
            (
                "kernels-cl/optim.cl",
                include_str!("../../../kernels-cl/optim.cl"),
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
                "kernels-cl/optim_mixed.cl",
                include_str!("../../../kernels-cl/optim_mixed.cl"),
            ),
        ],
        entries: &[family_entries::OPTIM_MIXED],
    },
    OpFamily {
        name: "gemm",
        files: &[
            GEMM_COMMON,
            (
                "kernels-cl/gemm.cl",
                include_str!("../../../kernels-cl/gemm.cl"),
            ),
        ],
        entries: &[&[
            "sgemm",
            "sgemm_split",
            "sgemm_tile64_split",
            "sgemm_split_sum",
        ]],
    },
    // gemm_tc.cl (only with RNN_CL_NV_TC defined, src/backend/opencl/sgemm.rs) and gemm_wg.cl
    // (only with RNN_CL_NV_WGMMA defined, src/backend/opencl/sm90a.rs), which uses gemm_tc.cl's
    // helpers. The sm_90a build (sm90a.rs) is this module's. Elsewhere the module holds no kernel.
    OpFamily {
        name: "gemm_tc",
        files: &[
            GEMM_COMMON,
            (
                "kernels-cl/gemm_tc.cl",
                include_str!("../../../kernels-cl/gemm_tc.cl"),
            ),
            (
                "kernels-cl/gemm_wg.cl",
                include_str!("../../../kernels-cl/gemm_wg.cl"),
            ),
        ],
        entries: &[&["sgemm_tc128", "sgemm_tc64", "sgemm_wg64"]],
    },
    OpFamily {
        name: "gemm_thin",
        files: &[(
            "kernels-cl/gemm_thin.cl",
            include_str!("../../../kernels-cl/gemm_thin.cl"),
        )],
        entries: &[&["sgemm_thin", "sgemm_thin1", "sgemm_thin_k"]],
    },
    // hgemm_tc.cl (only with RNN_CL_NV_TC defined, src/backend/opencl/sgemm.rs) uses hgemm.cl's
    // epilogue.
    OpFamily {
        name: "hgemm",
        files: &[
            (
                "kernels-cl/hgemm.cl",
                include_str!("../../../kernels-cl/hgemm.cl"),
            ),
            (
                "kernels-cl/hgemm_tc.cl",
                include_str!("../../../kernels-cl/hgemm_tc.cl"),
            ),
        ],
        entries: &[family_entries::HALF_GEMM, family_entries::HALF_GEMM_TC],
    },
    // gated_step.cl uses rnn.cl's tile product.
    OpFamily {
        name: "rnn",
        files: &[
            (
                "kernels-cl/rnn.cl",
                include_str!("../../../kernels-cl/rnn.cl"),
            ),
            (
                "kernels-cl/gated_step.cl",
                include_str!("../../../kernels-cl/gated_step.cl"),
            ),
        ],
        entries: &[family_entries::RNN_STEP],
    },
    // Only with RNN_CL_NV_PERSISTENT defined (src/backend/opencl/persistent.rs).
    OpFamily {
        name: "seq",
        files: &[(
            "kernels-cl/seq.cl",
            include_str!("../../../kernels-cl/seq.cl"),
        )],
        entries: &[family_entries::SEQUENCE],
    },
    // The block-local sequence kernels: the bodies (small_seq, include-guarded) under each
    // cell's entries, a module per cell (an Elman model never builds the LSTM and GRU kernels).
    OpFamily {
        name: "small_seq",
        files: &[
            SMALL_SEQ,
            (
                "kernels-cl/small_seq_pack.cl",
                include_str!("../../../kernels-cl/small_seq_pack.cl"),
            ),
        ],
        entries: &[family_entries::SMALL_SEQUENCE_PACK],
    },
    OpFamily {
        name: "small_seq_rnn",
        files: &[
            SMALL_SEQ,
            (
                "kernels-cl/small_seq_rnn.cl",
                include_str!("../../../kernels-cl/small_seq_rnn.cl"),
            ),
        ],
        entries: &[family_entries::SMALL_SEQUENCE_RNN],
    },
    OpFamily {
        name: "small_seq_lstm",
        files: &[
            SMALL_SEQ,
            (
                "kernels-cl/small_seq_lstm.cl",
                include_str!("../../../kernels-cl/small_seq_lstm.cl"),
            ),
        ],
        entries: &[family_entries::SMALL_SEQUENCE_LSTM],
    },
    OpFamily {
        name: "small_seq_gru",
        files: &[
            SMALL_SEQ,
            (
                "kernels-cl/small_seq_gru.cl",
                include_str!("../../../kernels-cl/small_seq_gru.cl"),
            ),
        ],
        entries: &[family_entries::SMALL_SEQUENCE_GRU],
    },
    OpFamily {
        name: "small_seq_regs",
        files: &[
            SMALL_SEQ,
            (
                "kernels-cl/small_seq_regs.cl",
                include_str!("../../../kernels-cl/small_seq_regs.cl"),
            ),
        ],
        entries: &[family_entries::SMALL_SEQUENCE_REGS],
    },
    OpFamily {
        name: "small_seq_pair",
        files: &[
            SMALL_SEQ,
            (
                "kernels-cl/small_seq_pair.cl",
                include_str!("../../../kernels-cl/small_seq_pair.cl"),
            ),
        ],
        entries: &[family_entries::SMALL_SEQUENCE_PAIR],
    },
    OpFamily {
        name: "random",
        files: &[(
            "kernels-cl/random.cl",
            include_str!("../../../kernels-cl/random.cl"),
        )],
        entries: &[family_entries::RANDOM],
    },
    OpFamily {
        name: "embedding",
        files: &[(
            "kernels-cl/embedding.cl",
            include_str!("../../../kernels-cl/embedding.cl"),
        )],
        entries: &[family_entries::EMBEDDING],
    },
    OpFamily {
        name: "varlen",
        files: &[(
            "kernels-cl/varlen.cl",
            include_str!("../../../kernels-cl/varlen.cl"),
        )],
        entries: &[family_entries::VARLEN],
    },
    OpFamily {
        name: "mixed",
        files: &[(
            "kernels-cl/mixed.cl",
            include_str!("../../../kernels-cl/mixed.cl"),
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
                "kernels-cl/tier0.cl",
                include_str!("../../../kernels-cl/tier0.cl"),
            ),
        ],
        entries: &[family_entries::TIER0],
    },
];

/// The complete op-set translation unit for this dialect, every family in one (see
/// docs/kernel-abi.md): what the kernel contract reads.
pub(crate) fn op_set_source() -> String {
    whole_op_set(&HEADERS, &FAMILIES)
}

/// The op set as one module per family, each after `defines`.
pub(crate) fn op_set_modules(defines: &str) -> Vec<OpModule> {
    let prelude = format!("{defines}{}", concatenate(&HEADERS));
    let mut modules: Vec<OpModule> = FAMILIES.iter().map(|f| f.module(&prelude)).collect();
    add_tier0_copies(&mut modules, &TIER0_COPY_FILES);
    modules
}

/// The files the tier-0 module's copies come from ([`crate::kernel::TIER0_COPIES`]).
const TIER0_COPY_FILES: [(&str, &str); 4] = [
    (
        "kernels-cl/elementwise.cl",
        include_str!("../../../kernels-cl/elementwise.cl"),
    ),
    (
        "kernels-cl/reduce.cl",
        include_str!("../../../kernels-cl/reduce.cl"),
    ),
    OPTIM_COMMON,
    (
        "kernels-cl/optim.cl",
        include_str!("../../../kernels-cl/optim.cl"),
    ),
];
