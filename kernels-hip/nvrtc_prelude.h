// HIP-to-CUDA prelude: lets NVRTC compile HIP sources unchanged, so the HIP code paths run and
// are checked on an NVIDIA GPU. Two users:
// - the HIP op-set translation unit (hip_vendor.h, wave_reduce.h, kernels-cu/), which inlines
//   this file at its top;
// - a user's HIP kernel on a context with `hip_sources_via_nvrtc`: NVRTC gets this file as the
//   in-memory header <hip/hip_runtime.h> and pre-includes it (hiprtc pre-includes the HIP
//   runtime the same way), so a source compiles whether or not it includes that header.
// Only the HIP device spellings that hiprtc accepts and that differ from CUDA are mapped;
// threadIdx, blockIdx, warpSize, __syncthreads, __shared__, expf and friends are the same in
// both.

#ifndef RNN_NVRTC_HIP_PRELUDE
#define RNN_NVRTC_HIP_PRELUDE 1

// The CUDA spellings in kernels-cu/ are native here: hip_vendor.h must not map them to HIP.
#define RNN_NATIVE_CUDA_SPELLINGS 1

// NVIDIA warps are 32 lanes; the HIP headers take the wave width from this clang macro.
#define __AMDGCN_WAVEFRONT_SIZE 32

// HIP's wavefront-wide shuffles are CUDA's full-mask *_sync shuffles; HIP's width argument is
// optional (default: the wave width, as in CUDA). Macros (not functions) so they cannot collide
// with the deprecated non-sync declarations some CUDA headers keep.
#define __shfl(v, lane, ...) __shfl_sync(0xffffffffu, (v), (lane), ##__VA_ARGS__)
#define __shfl_down(v, delta, ...) __shfl_down_sync(0xffffffffu, (v), (delta), ##__VA_ARGS__)
#define __shfl_up(v, delta, ...) __shfl_up_sync(0xffffffffu, (v), (delta), ##__VA_ARGS__)
#define __shfl_xor(v, mask, ...) __shfl_xor_sync(0xffffffffu, (v), (mask), ##__VA_ARGS__)
#define __builtin_amdgcn_wave_barrier() __syncwarp()

// Wave votes. HIP's __ballot returns a 64-bit mask; on a 32-lane warp the upper half is zero.
#define __any(p) __any_sync(0xffffffffu, (p))
#define __all(p) __all_sync(0xffffffffu, (p))
#define __ballot(p) ((unsigned long long)__ballot_sync(0xffffffffu, (p)))

#endif  // RNN_NVRTC_HIP_PRELUDE
