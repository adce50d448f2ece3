//! [`ContextOptions`]: what is fixed when a context is created. Its own module, below both the
//! context and the backends that read it, so that neither depends on the other through it.

use crate::recurrent_algorithm::RecurrentAlgorithm;

/// Options fixed when a context is created.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ContextOptions {
    /// Let a vendor BLAS (cuBLAS) use TF32 tensor cores for f32 GEMM, like PyTorch's
    /// `allow_tf32`. Off by default: results then match f32 arithmetic.
    pub allow_tf32: bool,
    /// Route GEMM through the vendor library (cuBLAS) when present; otherwise the built-in
    /// `sgemm` kernel runs. On by default.
    pub vendor_blas: bool,
    /// On an H100/H200 (op set built for sm_90a), run the products that fill the GPU with the
    /// built-in warpgroup tensor-core GEMM (`sgemm_wg128`, f32 accuracy) ahead of cuBLAS, which
    /// it outruns there. Through NVIDIA's OpenCL on such a GPU, the products that take the
    /// tensor-core kernels run its OpenCL counterpart `sgemm_wg64` instead of the `mma.sync`
    /// ones. On by default; off leaves those products to cuBLAS (or, without it, to the other
    /// built-in kernels), for comparison.
    pub warpgroup_gemm: bool,
    /// Run GEMMs with a side of at most 16 (a classifier head's 10 outputs, a 10-wide input
    /// gradient) with the built-in thin kernels (`sgemm_thin`, `sgemm_thin_k`) on every GPU
    /// backend, ahead of cuBLAS and the tile kernels: they read each operand once, where a tile
    /// kernel spends most of its tile on padding. On by default; off leaves those products to
    /// the other routes, for comparison and to test the tile kernels at small sizes.
    pub thin_gemm: bool,
    /// Verification aid for machines without an AMD GPU: on a CUDA device, build the op set from
    /// the HIP kernel sources (`kernels-hip/` over `kernels-cu/`) through NVRTC with a small
    /// HIP-to-CUDA prelude, instead of the CUDA sources. User kernels on such a context are HIP
    /// sources too ([`crate::Dialect::Hip`]), compiled the same way, with the prelude as the
    /// header `<hip/hip_runtime.h>`. Such a context never uses cuBLAS, so GEMM runs the HIP
    /// `sgemm` kernel. Off by default; ignored elsewhere.
    #[cfg(feature = "testing")]
    #[doc(hidden)]
    pub hip_sources_via_nvrtc: bool,
    // Without the `testing` feature, the verification aids are not part of the API.
    #[cfg(not(feature = "testing"))]
    pub(crate) hip_sources_via_nvrtc: bool,
    /// Verification aid: on an OpenCL device, run every GEMM with the kernel of this block tile
    /// (64: `sgemm_tile64_split`, 128: `sgemm_split`) instead of picking one per launch from the output's
    /// size and the device, so both are tested on any device. Another value, or 128 on a
    /// device that cannot hold that tile, is [`crate::Error::InvalidArgument`] when the context is
    /// created. `None` by default; ignored elsewhere.
    #[cfg(feature = "testing")]
    #[doc(hidden)]
    pub opencl_sgemm_tile: Option<u32>,
    #[cfg(not(feature = "testing"))]
    pub(crate) opencl_sgemm_tile: Option<u32>,
    /// Verification aid: on a GPU, every f32 GEMM that the tier-0 stand-ins cover (the thin
    /// and tile kernels; not cuBLAS) launches its stand-in (`sgemm_tier0`), cold or warm, as
    /// `RNN_KERNEL_TIER0=force` does for every context, so the backend suites test it. Off by
    /// default.
    #[cfg(feature = "testing")]
    #[doc(hidden)]
    pub force_tier0: bool,
    #[cfg(not(feature = "testing"))]
    pub(crate) force_tier0: bool,
    /// Time every kernel launch and device-side copy on the device, per entry name, for
    /// [`crate::Context::kernel_times`]. OpenCL only (its queue is then created with
    /// `CL_QUEUE_PROFILING_ENABLE` and each launch keeps its event, which costs some launch
    /// speed); `RNN_PROFILE_KERNELS=1` turns it on for every OpenCL context too. Off by
    /// default; ignored elsewhere (CUDA kernels are profiled with Nsight Compute).
    pub profile_kernels: bool,
    /// How a GPU runs the recurrent sequences (Elman, LSTM, GRU) that its persistent kernels do
    /// not take (large hidden sizes, devices without them): `Some(true)` as a GEMM (tensor cores
    /// where the device has them) and a cell kernel per step, `Some(false)` with the fused step
    /// kernels (product and gate math in one launch per step), `None` the GEMMs from hidden 384
    /// up (LSTM, GRU) and 1024 up (Elman). Unless `Some(false)`, sequences whose step product
    /// has at least 2^18 outputs (gates x batch x hidden, hidden >= 256), and Elman sequences
    /// of at least 2^16 state elements at hidden >= 768, take the GEMM path even where the
    /// persistent kernels fit. `RNN_RECURRENT_GEMM_STEPS=0|1` sets it for every context that
    /// leaves it `None`.
    pub recurrent_gemm_steps: Option<bool>,
    /// Whether a GPU runs recurrent sequences (Elman, LSTM, GRU) with the block-local kernels
    /// where W_hh and a tile of rows fit one block's shared memory (small hidden sizes: on an
    /// H100 LSTM up to 119, GRU 136, Elman 240 units), ahead of every other path:
    /// `Some(false)` never, `Some(true)` or `None` wherever they fit.
    /// `RNN_RECURRENT_BLOCK_LOCAL=0|1` sets it for every context that leaves it `None`.
    pub recurrent_block_local: Option<bool>,
    /// The algorithm every recurrent sequence op tries first ([`RecurrentAlgorithm`]), for
    /// measuring: where it cannot run a sequence, the automatic choice (which the two options
    /// above steer) runs it instead, with a `log::debug!` line that says why. A forced
    /// algorithm ignores `recurrent_gemm_steps` and `recurrent_block_local`.
    /// `RNN_RECURRENT_ALGO` (`auto`, `block-local`, `block-local-l1`, `block-local-regs`,
    /// `persistent`, `gemm` or `steps`) sets it for every context that leaves it `None`; `None`
    /// and `Some(Auto)` choose automatically.
    pub recurrent_algorithm: Option<RecurrentAlgorithm>,
}

impl Default for ContextOptions {
    fn default() -> Self {
        ContextOptions {
            allow_tf32: false,
            vendor_blas: true,
            warpgroup_gemm: true,
            thin_gemm: true,
            hip_sources_via_nvrtc: false,
            opencl_sgemm_tile: None,
            force_tier0: false,
            profile_kernels: false,
            recurrent_gemm_steps: None,
            recurrent_block_local: None,
            recurrent_algorithm: None,
        }
    }
}
