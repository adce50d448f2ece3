//! The inline PTX of NVIDIA's OpenCL kernels, checked without NVIDIA's OpenCL:
//! kernels-cl/hgemm_tc.cl (after the part of kernels-cl/hgemm.cl it uses and the shared
//! headers) compiles as CUDA C++ through NVRTC to CUBINs for sm_80 and sm_90, behind a prelude
//! that spells the OpenCL C the file uses in CUDA, so ptxas assembles every `mma.sync`,
//! `ldmatrix`, `cp.async` and `cvt` line with its operands, and each entry is in the CUBIN.
//! What this cannot check: NVIDIA's OpenCL compiler itself, and the local-memory addresses
//! (`(uint)(size_t)` of a `__local` pointer is a shared-window address under NVIDIA's OpenCL; here
//! `__local` means nothing, so it is a generic one): the CUBINs are never run. The GPU suite
//! (`gpu_half_gemm_tensor_core_shapes`, `gpu_half_gemm_launches` on NVIDIA's OpenCL) runs them.

use rnn::backend::cuda::compile_for_arch;

use super::cuda_compile::{elf_functions, nvrtc_or_skip};

/// Types OpenCL C has built in and the shared headers do not define for CUDA.
const TYPES: &str = "typedef unsigned int uint;\ntypedef unsigned long long ulong;\n";

/// The OpenCL C of hgemm.cl and hgemm_tc.cl in CUDA C++ (after the headers, which spell their
/// dialect differences themselves).
const PRELUDE: &str = r#"
#define __kernel extern "C" __global__
#define __local
#define __global
#define __asm__ asm
#define restrict __restrict__
#define inline __device__ __inline__
#define reqd_work_group_size(x, y, z)
#define CLK_LOCAL_MEM_FENCE 0
#define barrier(flags) __syncthreads()
#define get_local_id(d) threadIdx.x
#define get_group_id(d) ((d) == 0 ? blockIdx.x : (d) == 1 ? blockIdx.y : blockIdx.z)
#define get_num_groups(d) ((d) == 0 ? gridDim.x : (d) == 1 ? gridDim.y : gridDim.z)
#define RNN_CL_NV_TC 1
"#;

const HGEMM: &str = include_str!("../../kernels-cl/hgemm.cl");
const HGEMM_TC: &str = include_str!("../../kernels-cl/hgemm_tc.cl");

/// The translation unit: hgemm.cl up to its entries (the epilogue hgemm_tc.cl calls), then
/// hgemm_tc.cl.
fn source() -> String {
    let (epilogue, _) = HGEMM
        .split_once("#define HG_F32_ENTRY")
        .expect("kernels-cl/hgemm.cl defines HG_F32_ENTRY after its epilogue");
    [
        TYPES,
        include_str!("../../kernels-common/scalar_core.h"),
        include_str!("../../kernels-common/half_convert.h"),
        PRELUDE,
        epilogue,
        HGEMM_TC,
    ]
    .concat()
}

/// The entries hgemm_tc.cl stamps out.
fn entries() -> Vec<&'static str> {
    HGEMM_TC
        .lines()
        .filter_map(|l| {
            l.strip_prefix("HTL_F32_ENTRY(")
                .or_else(|| l.strip_prefix("HTL_LOW_ENTRY("))
        })
        .filter_map(|rest| rest.split(',').next())
        .collect()
}

#[test]
fn opencl_half_tensor_core_ptx_assembles_for_sm_80_and_sm_90() {
    let test = "opencl_half_tensor_core_ptx_assembles_for_sm_80_and_sm_90";
    if !nvrtc_or_skip(test) {
        return;
    }
    let entries = entries();
    assert_eq!(entries.len(), 8, "{entries:?}");
    let source = source();
    for arch in ["sm_80", "sm_90"] {
        let cubin = compile_for_arch(&source, arch).unwrap_or_else(|e| panic!("{arch}: {e}"));
        let defined = elf_functions(&cubin);
        for e in &entries {
            assert!(
                defined.iter().any(|d| d == e),
                "{arch}: {e} not in {defined:?}"
            );
        }
    }
}
