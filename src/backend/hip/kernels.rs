//! The HIP op-set translation unit: the vendor header (`kernels-hip/`) over the CUDA kernel
//! sources (the scalar core and `kernels-cu/`, in the CUDA backend's order), so a kernel
//! that is the same algorithm on both vendors has one source. Only what must differ on AMD lives
//! in `kernels-hip/`: the CUDA-to-HIP spellings and the wavefront-width reductions.

use crate::backend::cuda::kernels as cuda_kernels;
use crate::kernel::{OpModule, add_tier0_copies, concatenate, whole_op_set};

/// CUDA spellings to HIP, `RNN_HIP`, `WARP_SIZE` per target.
const VENDOR_HEADER: &str = include_str!("../../../kernels-hip/hip_vendor.h");
/// `warp_reduce_sum`/`max`/`argmax` over a wavefront of `WARP_SIZE` lanes.
const WAVE_REDUCE: &str = include_str!("../../../kernels-hip/wave_reduce.h");
/// HIP spellings to CUDA, for compiling HIP sources with NVRTC: inlined at the top of the op set,
/// and the in-memory `hip/hip_runtime.h` of a user's HIP kernel.
#[cfg(feature = "cuda")]
pub(crate) const NVRTC_PRELUDE: &str = include_str!("../../../kernels-hip/nvrtc_prelude.h");
/// The include name a HIP source uses for the runtime header (hiprtc pre-includes it); NVRTC is
/// given the prelude under this name.
#[cfg(feature = "cuda")]
pub(crate) const NVRTC_RUNTIME_HEADER: &str = "hip/hip_runtime.h";

/// What every HIP module starts with: the vendor header and the wave reductions, then the CUDA
/// headers. wave_reduce.h uses nothing from common.cuh, and common.cuh's block reductions need
/// the wave helpers declared first.
const HEADERS: [(&str, &str); 6] = [
    ("kernels-hip/hip_vendor.h", VENDOR_HEADER),
    ("kernels-hip/wave_reduce.h", WAVE_REDUCE),
    cuda_kernels::HEADERS[0],
    cuda_kernels::HEADERS[1],
    cuda_kernels::HEADERS[2],
    cuda_kernels::HEADERS[3],
];

/// The complete HIP op-set translation unit for hiprtc, every family in one (see
/// docs/kernel-abi.md).
pub fn op_set_source() -> String {
    whole_op_set(&HEADERS, &cuda_kernels::FAMILIES)
}

/// The HIP op set as one module per family (the CUDA families), each for hiprtc.
pub fn op_set_modules() -> Vec<OpModule> {
    let prelude = concatenate(&HEADERS);
    let mut modules: Vec<OpModule> = cuda_kernels::FAMILIES
        .iter()
        .map(|f| f.module(&prelude))
        .collect();
    add_tier0_copies(&mut modules, &cuda_kernels::TIER0_COPY_FILES);
    modules
}

/// The HIP-to-CUDA prelude before `hip`, for NVRTC.
#[cfg(feature = "cuda")]
fn for_nvrtc(hip: &str) -> String {
    let mut s = String::with_capacity(NVRTC_PRELUDE.len() + hip.len() + 48);
    s.push_str("// ---- kernels-hip/nvrtc_prelude.h\n");
    s.push_str(NVRTC_PRELUDE);
    s.push('\n');
    s.push_str(hip);
    s
}

/// The same HIP translation unit behind a HIP-to-CUDA prelude, for NVRTC: this is how the HIP
/// sources' numerics are checked on an NVIDIA GPU (the CUDA backend uses it when
/// `ContextOptions::hip_sources_via_nvrtc` is set). On NVIDIA the wave width is 32, so the
/// reductions run their generic `WARP_SIZE` code at 32 lanes.
#[cfg(feature = "cuda")]
pub fn op_set_source_for_nvrtc() -> String {
    for_nvrtc(&op_set_source())
}

/// [`op_set_modules`] behind the HIP-to-CUDA prelude, for NVRTC.
#[cfg(feature = "cuda")]
pub(crate) fn op_set_modules_for_nvrtc() -> Vec<OpModule> {
    let mut modules = op_set_modules();
    for m in &mut modules {
        m.source = for_nvrtc(&m.source);
    }
    modules
}
