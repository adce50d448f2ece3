//! The HIP op-set translation unit: the vendor header (`kernels-hip/`) over the CUDA kernel
//! sources (the scalar core and `kernels-cu/`, in the CUDA backend's order), so a kernel
//! that is the same algorithm on both vendors has one source. Only what must differ on AMD lives
//! in `kernels-hip/`: the CUDA-to-HIP spellings and the wavefront-width reductions.

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

/// The complete HIP op-set translation unit for hiprtc (see docs/kernel-abi.md).
pub(crate) fn op_set_source() -> String {
    let mut s = String::new();
    s.push_str("// ---- kernels-hip/hip_vendor.h\n");
    s.push_str(VENDOR_HEADER);
    // wave_reduce.h uses nothing from common.cuh, and common.cuh's block reductions need the
    // wave helpers declared first.
    s.push_str("\n// ---- kernels-hip/wave_reduce.h\n");
    s.push_str(WAVE_REDUCE);
    for (name, text) in crate::backend::cuda::kernels::FILES {
        s.push_str(&format!("\n// ---- {name} (unchanged)\n"));
        s.push_str(text);
    }
    s
}

/// The same HIP translation unit behind a HIP-to-CUDA prelude, for NVRTC: this is how the HIP
/// sources' numerics are checked on an NVIDIA GPU (the CUDA backend uses it when
/// `ContextOptions::hip_sources_via_nvrtc` is set). On NVIDIA the wave width is 32, so the
/// reductions run their generic `WARP_SIZE` code at 32 lanes.
#[cfg(feature = "cuda")]
pub(crate) fn op_set_source_for_nvrtc() -> String {
    let hip = op_set_source();
    let mut s = String::with_capacity(NVRTC_PRELUDE.len() + hip.len() + 48);
    s.push_str("// ---- kernels-hip/nvrtc_prelude.h\n");
    s.push_str(NVRTC_PRELUDE);
    s.push('\n');
    s.push_str(&hip);
    s
}
