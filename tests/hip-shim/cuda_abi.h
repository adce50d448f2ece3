/* The few CUDA driver API and NVRTC declarations the shim needs, written from cuda.h and nvrtc.h
 * (CUDA 12.x; every item below has had this value and prototype since CUDA 11.4 and still has it
 * in CUDA 13), so that the shim builds without a CUDA SDK. The functions are loaded with dlsym;
 * the names are the exported symbol names (the `_v2` suffixes are what cuda.h's macros select). */
#ifndef HIPSHIM_CUDA_ABI_H
#define HIPSHIM_CUDA_ABI_H

#include <stddef.h>
#include <stdint.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphExec_st *CUgraphExec;

/* CUresult values the shim tests for by name (the rest are mapped by number, see errors.c). */
enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1,
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    CUDA_ERROR_NO_DEVICE = 100,
};

/* CUdevice_attribute values used. */
enum {
    CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1,
    CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X = 2,
    CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y = 3,
    CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z = 4,
    CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X = 5,
    CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y = 6,
    CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z = 7,
    CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK = 8,
    CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY = 9,
    CU_DEVICE_ATTRIBUTE_WARP_SIZE = 10,
    CU_DEVICE_ATTRIBUTE_MAX_PITCH = 11,
    CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK = 12,
    CU_DEVICE_ATTRIBUTE_CLOCK_RATE = 13,
    CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT = 14,
    CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
    CU_DEVICE_ATTRIBUTE_KERNEL_EXEC_TIMEOUT = 17,
    CU_DEVICE_ATTRIBUTE_INTEGRATED = 18,
    CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY = 19,
    CU_DEVICE_ATTRIBUTE_COMPUTE_MODE = 20,
    CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS = 31,
    CU_DEVICE_ATTRIBUTE_ECC_ENABLED = 32,
    CU_DEVICE_ATTRIBUTE_PCI_BUS_ID = 33,
    CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID = 34,
    CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE = 36,
    CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH = 37,
    CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE = 38,
    CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR = 39,
    CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT = 40,
    CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING = 41,
    CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID = 50,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
    CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR = 81,
    CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR = 82,
    CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY = 83,
    CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD = 84,
    CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD_GROUP_ID = 85,
    CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH = 95,
    CU_DEVICE_ATTRIBUTE_COOPERATIVE_MULTI_DEVICE_LAUNCH = 96,
    CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
    CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR = 106,
};

/* CUfunction_attribute. */
enum { CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8 };

/* cuLaunchKernel's `extra` markers. HIP's END marker is 3, CUDA's is 0 (see runtime.c). */
#define CU_LAUNCH_PARAM_END ((void *)0x00)
#define CU_LAUNCH_PARAM_BUFFER_POINTER ((void *)0x01)
#define CU_LAUNCH_PARAM_BUFFER_SIZE ((void *)0x02)

/* The driver entry points, by exported name. Required ones make init fail when absent; the
 * optional ones (graphs, cooperative launch, occupancy, function attributes) make only the HIP
 * call that needs them answer hipErrorNotSupported. */
#define HIPSHIM_CUDA_REQUIRED(X)                                                              \
    X(cuInit, CUresult, (unsigned int))                                                       \
    X(cuDriverGetVersion, CUresult, (int *))                                                  \
    X(cuDeviceGetCount, CUresult, (int *))                                                    \
    X(cuDeviceGet, CUresult, (CUdevice *, int))                                               \
    X(cuDeviceGetName, CUresult, (char *, int, CUdevice))                                     \
    X(cuDeviceTotalMem_v2, CUresult, (size_t *, CUdevice))                                    \
    X(cuDeviceGetAttribute, CUresult, (int *, int, CUdevice))                                 \
    X(cuDevicePrimaryCtxRetain, CUresult, (CUcontext *, CUdevice))                            \
    X(cuCtxSetCurrent, CUresult, (CUcontext))                                                 \
    X(cuMemAlloc_v2, CUresult, (CUdeviceptr *, size_t))                                       \
    X(cuMemFree_v2, CUresult, (CUdeviceptr))                                                  \
    X(cuMemGetInfo_v2, CUresult, (size_t *, size_t *))                                        \
    X(cuMemcpyHtoDAsync_v2, CUresult, (CUdeviceptr, const void *, size_t, CUstream))          \
    X(cuMemcpyDtoHAsync_v2, CUresult, (void *, CUdeviceptr, size_t, CUstream))                \
    X(cuMemcpyDtoDAsync_v2, CUresult, (CUdeviceptr, CUdeviceptr, size_t, CUstream))           \
    X(cuStreamCreate, CUresult, (CUstream *, unsigned int))                                   \
    X(cuStreamSynchronize, CUresult, (CUstream))                                              \
    X(cuStreamDestroy_v2, CUresult, (CUstream))                                               \
    X(cuStreamGetCtx, CUresult, (CUstream, CUcontext *))                                      \
    X(cuModuleLoadData, CUresult, (CUmodule *, const void *))                                 \
    X(cuModuleGetFunction, CUresult, (CUfunction *, CUmodule, const char *))                  \
    X(cuModuleUnload, CUresult, (CUmodule))                                                   \
    X(cuLaunchKernel, CUresult,                                                               \
      (CUfunction, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int,      \
       unsigned int, unsigned int, CUstream, void **, void **))                               \
    X(cuGetErrorName, CUresult, (CUresult, const char **))                                    \
    X(cuGetErrorString, CUresult, (CUresult, const char **))

#define HIPSHIM_CUDA_OPTIONAL(X)                                                              \
    X(cuFuncSetAttribute, CUresult, (CUfunction, int, int))                                   \
    X(cuLaunchCooperativeKernel, CUresult,                                                    \
      (CUfunction, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int,      \
       unsigned int, unsigned int, CUstream, void **))                                        \
    X(cuOccupancyMaxActiveBlocksPerMultiprocessor, CUresult, (int *, CUfunction, int, size_t)) \
    X(cuStreamBeginCapture_v2, CUresult, (CUstream, int))                                     \
    X(cuStreamEndCapture, CUresult, (CUstream, CUgraph *))                                    \
    X(cuGraphInstantiateWithFlags, CUresult, (CUgraphExec *, CUgraph, unsigned long long))    \
    X(cuGraphLaunch, CUresult, (CUgraphExec, CUstream))                                       \
    X(cuGraphExecDestroy, CUresult, (CUgraphExec))                                            \
    X(cuGraphDestroy, CUresult, (CUgraph))

/* NVRTC. nvrtcResult values 0..11 are hiprtcResult's values 0..11, name for name. */
typedef int nvrtcResult;
typedef struct _nvrtcProgram *nvrtcProgram;
enum { NVRTC_SUCCESS = 0 };

#define HIPSHIM_NVRTC_REQUIRED(X)                                                             \
    X(nvrtcVersion, nvrtcResult, (int *, int *))                                              \
    X(nvrtcGetErrorString, const char *, (nvrtcResult))                                       \
    X(nvrtcCreateProgram, nvrtcResult,                                                        \
      (nvrtcProgram *, const char *, const char *, int, const char *const *,                 \
       const char *const *))                                                                  \
    X(nvrtcDestroyProgram, nvrtcResult, (nvrtcProgram *))                                     \
    X(nvrtcCompileProgram, nvrtcResult, (nvrtcProgram, int, const char *const *))             \
    X(nvrtcGetProgramLogSize, nvrtcResult, (nvrtcProgram, size_t *))                          \
    X(nvrtcGetProgramLog, nvrtcResult, (nvrtcProgram, char *))                                \
    X(nvrtcGetPTXSize, nvrtcResult, (nvrtcProgram, size_t *))                                 \
    X(nvrtcGetPTX, nvrtcResult, (nvrtcProgram, char *))

/* CUBIN output (NVRTC 11.1+) and the list of real architectures (11.2+). Without them the shim
 * builds PTX for the device's compute_XY, which the driver compiles at load. */
#define HIPSHIM_NVRTC_OPTIONAL(X)                                                             \
    X(nvrtcGetCUBINSize, nvrtcResult, (nvrtcProgram, size_t *))                               \
    X(nvrtcGetCUBIN, nvrtcResult, (nvrtcProgram, char *))                                     \
    X(nvrtcGetNumSupportedArchs, nvrtcResult, (int *))                                        \
    X(nvrtcGetSupportedArchs, nvrtcResult, (int *))

#endif /* HIPSHIM_CUDA_ABI_H */
