// HIP dialect of the op set: this header comes first, then the kernels-cu/ sources unchanged.
//
// It does two things:
// 1. Maps the CUDA spellings the kernels-cu/ sources use to their HIP equivalents, so a kernel
//    that is the same algorithm on both vendors has one source.
// 2. Defines RNN_HIP, which makes kernels-cu/common.cuh skip its 32-lane warp helpers; the
//    wavefront-width versions live in wave_reduce.h (included right after this file).
//
// hiprtc pre-includes the HIP device runtime (threadIdx, __syncthreads, __shfl_xor, expf, ...),
// so no #include is needed or allowed here.

#define RNN_HIP 1

// Wavefront width the compiler targets: 64 on gfx9 (GCN/CDNA: gfx908, gfx90a, gfx942), 32 by
// default on gfx10+ (RDNA) unless -mwavefrontsize64. Clang defines __AMDGCN_WAVEFRONT_SIZE for
// device code; when a compiler no longer does, the run-time `warpSize` is exact for either mode
// (loops over it are then bounded at run time instead of unrolled).
#if defined(__AMDGCN_WAVEFRONT_SIZE)
#define WARP_SIZE __AMDGCN_WAVEFRONT_SIZE
#else
#define WARP_SIZE warpSize
#endif

// CUDA spellings -> HIP. Skipped when the NVRTC prelude (nvrtc_prelude.h) has declared the
// CUDA spellings native, where this map would be the identity.
#ifndef RNN_NATIVE_CUDA_SPELLINGS
// HIP before ROCm 6.2 has no *_sync shuffles; a full-mask CUDA shuffle
// is the same as HIP's wavefront-wide one (AMD wavefronts execute in lockstep, so the mask
// argument has nothing to select). Only full masks are used by kernels-cu/.
#define __shfl_sync(mask, v, lane, ...) __shfl((v), (lane), ##__VA_ARGS__)
#define __shfl_down_sync(mask, v, delta, ...) __shfl_down((v), (delta), ##__VA_ARGS__)
#define __shfl_up_sync(mask, v, delta, ...) __shfl_up((v), (delta), ##__VA_ARGS__)
#define __shfl_xor_sync(mask, v, lane_mask, ...) __shfl_xor((v), (lane_mask), ##__VA_ARGS__)
// A wavefront never diverges in scheduling, so a warp barrier only has to stop the compiler
// from reordering memory operations across it.
#define __syncwarp(...) __builtin_amdgcn_wave_barrier()
#endif  // RNN_NATIVE_CUDA_SPELLINGS
