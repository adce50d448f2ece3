//! The built-in op-set kernel sources of the OpenCL dialect (`kernels-cl/`), embedded at build
//! time and concatenated into one translation unit.

const PARTS: [&str; 15] = [
    // The scalar core every dialect shares (activations, index rule).
    include_str!("../../../kernels-common/scalar_core.h"),
    include_str!("../../../kernels-cl/common.cl"),
    include_str!("../../../kernels-cl/elementwise.cl"),
    include_str!("../../../kernels-cl/gemm.cl"),
    // Only with RNN_CL_NV_TC defined (src/backend/opencl/sgemm.rs); uses gemm.cl's loads.
    include_str!("../../../kernels-cl/gemm_tc.cl"),
    // Only with RNN_CL_NV_WGMMA defined (src/backend/opencl/sm90a.rs); uses gemm_tc.cl's helpers.
    include_str!("../../../kernels-cl/gemm_wg.cl"),
    include_str!("../../../kernels-cl/gemm_thin.cl"),
    include_str!("../../../kernels-cl/reduce.cl"),
    include_str!("../../../kernels-cl/rnn.cl"),
    // Uses rnn.cl's tile product.
    include_str!("../../../kernels-cl/gated_step.cl"),
    // Only with RNN_CL_NV_PERSISTENT defined (src/backend/opencl/persistent.rs).
    include_str!("../../../kernels-cl/seq.cl"),
    include_str!("../../../kernels-cl/optim.cl"),
    include_str!("../../../kernels-cl/random.cl"),
    include_str!("../../../kernels-cl/norm.cl"),
    include_str!("../../../kernels-cl/embedding.cl"),
];

/// The complete op-set translation unit for this dialect (see docs/kernel-abi.md).
pub(crate) fn op_set_source() -> String {
    PARTS.join("\n")
}
