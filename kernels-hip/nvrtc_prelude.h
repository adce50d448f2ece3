// HIP-to-CUDA prelude: lets NVRTC compile the HIP translation unit (hip_vendor.h,
// wave_reduce.h, kernels-cu/) unchanged, so the HIP-specific code paths run and are checked on
// an NVIDIA GPU. Only the HIP spellings used by the kernels-hip/ headers are mapped.

// The CUDA spellings in kernels-cu/ are native here: hip_vendor.h must not map them to HIP.
#define RNN_NATIVE_CUDA_SPELLINGS 1

// NVIDIA warps are 32 lanes; the HIP headers take the wave width from this clang macro.
#define __AMDGCN_WAVEFRONT_SIZE 32

// HIP's wavefront-wide shuffles are CUDA's full-mask *_sync shuffles. Macros (not functions)
// so they cannot collide with the deprecated non-sync declarations some CUDA headers keep. The
// kernels-hip/ headers always pass the width, so these take exactly three arguments.
#define __shfl(v, lane, width) __shfl_sync(0xffffffffu, (v), (lane), (width))
#define __shfl_down(v, delta, width) __shfl_down_sync(0xffffffffu, (v), (delta), (width))
#define __shfl_up(v, delta, width) __shfl_up_sync(0xffffffffu, (v), (delta), (width))
#define __shfl_xor(v, mask, width) __shfl_xor_sync(0xffffffffu, (v), (mask), (width))
#define __builtin_amdgcn_wave_barrier() __syncwarp()
