/* HIP memory, streams, modules, launches and graph capture over the CUDA driver API. Every call
 * first makes the right CUDA context current on the calling thread: the current HIP device's for
 * allocations and loads, the stream's own for work queued on a stream, the module's for symbol
 * lookups, so any host thread may call any of them, as HIP allows. */
#include <stdint.h>
#include <stdlib.h>

#include "shim.h"

/* The largest dynamic shared memory a CUDA launch gets without opting in. AMD GPUs give a block
 * up to 64 KiB of LDS without asking, so launches above this opt in on the caller's behalf. */
#define CUDA_DEFAULT_SHARED_LIMIT (48u * 1024u)

struct ihipModule_t {
    CUmodule module;
    int device;
};

HIPSHIM_API hipError_t hipMalloc(void **ptr, size_t size) {
    if (!ptr) return shim_fail(hipErrorInvalidValue, "hipMalloc: null ptr");
    *ptr = NULL;
    int device = shim_current_device();
    hipError_t e = shim_bind_device(device);
    if (e != hipSuccess) return e;
    if (size == 0) return hipSuccess;
    CUdeviceptr p = 0;
    CUresult r = cu.cuMemAlloc_v2(&p, size);
    if (r == CUDA_ERROR_INVALID_VALUE) {
        /* CUDA rejects some impossible sizes as invalid; ROCm calls any size beyond the device
         * out of memory. */
        size_t total = 0;
        cu.cuDeviceTotalMem_v2(&total, shim_cu_device(device));
        if (size > total) return shim_fail(hipErrorOutOfMemory, "larger than the device memory");
    }
    e = shim_map(r, "cuMemAlloc");
    if (e == hipSuccess) *ptr = (void *)(uintptr_t)p;
    return e;
}

HIPSHIM_API hipError_t hipFree(void *ptr) {
    if (!ptr) return hipSuccess;
    hipError_t e = shim_bind_device(shim_current_device());
    if (e != hipSuccess) return e;
    return shim_map(cu.cuMemFree_v2((CUdeviceptr)(uintptr_t)ptr), "cuMemFree");
}

HIPSHIM_API hipError_t hipMemGetInfo(size_t *free_bytes, size_t *total_bytes) {
    if (!free_bytes || !total_bytes) return shim_fail(hipErrorInvalidValue, "hipMemGetInfo: null");
    hipError_t e = shim_bind_device(shim_current_device());
    if (e != hipSuccess) return e;
    return shim_map(cu.cuMemGetInfo_v2(free_bytes, total_bytes), "cuMemGetInfo");
}

HIPSHIM_API hipError_t hipMemcpyHtoDAsync(hipDeviceptr_t dst, void *src, size_t bytes,
                                          hipStream_t stream) {
    hipError_t e = shim_bind_stream(stream);
    if (e != hipSuccess) return e;
    return shim_map(cu.cuMemcpyHtoDAsync_v2((CUdeviceptr)(uintptr_t)dst, src, bytes,
                                            (CUstream)stream),
                    "cuMemcpyHtoDAsync");
}

HIPSHIM_API hipError_t hipMemcpyDtoHAsync(void *dst, hipDeviceptr_t src, size_t bytes,
                                          hipStream_t stream) {
    hipError_t e = shim_bind_stream(stream);
    if (e != hipSuccess) return e;
    return shim_map(cu.cuMemcpyDtoHAsync_v2(dst, (CUdeviceptr)(uintptr_t)src, bytes,
                                            (CUstream)stream),
                    "cuMemcpyDtoHAsync");
}

HIPSHIM_API hipError_t hipMemcpyDtoDAsync(hipDeviceptr_t dst, hipDeviceptr_t src, size_t bytes,
                                          hipStream_t stream) {
    hipError_t e = shim_bind_stream(stream);
    if (e != hipSuccess) return e;
    return shim_map(cu.cuMemcpyDtoDAsync_v2((CUdeviceptr)(uintptr_t)dst,
                                            (CUdeviceptr)(uintptr_t)src, bytes, (CUstream)stream),
                    "cuMemcpyDtoDAsync");
}

HIPSHIM_API hipError_t hipStreamCreate(hipStream_t *stream) {
    if (!stream) return shim_fail(hipErrorInvalidValue, "hipStreamCreate: null stream");
    hipError_t e = shim_bind_device(shim_current_device());
    if (e != hipSuccess) return e;
    CUstream s = NULL;
    /* hipStreamDefault (0) is CU_STREAM_DEFAULT: ordered with the null stream, as in HIP. */
    e = shim_map(cu.cuStreamCreate(&s, 0), "cuStreamCreate");
    if (e == hipSuccess) *stream = (hipStream_t)s;
    return e;
}

HIPSHIM_API hipError_t hipStreamSynchronize(hipStream_t stream) {
    hipError_t e = shim_bind_stream(stream);
    if (e != hipSuccess) return e;
    return shim_map(cu.cuStreamSynchronize((CUstream)stream), "cuStreamSynchronize");
}

HIPSHIM_API hipError_t hipStreamDestroy(hipStream_t stream) {
    if (!stream) return shim_fail(hipErrorInvalidHandle, "hipStreamDestroy: the null stream");
    hipError_t e = shim_bind_stream(stream);
    if (e != hipSuccess) return e;
    return shim_map(cu.cuStreamDestroy_v2((CUstream)stream), "cuStreamDestroy");
}

/* `image` is what the shim's hiprtc produced (a CUBIN, or NUL-terminated PTX): the CUDA driver
 * reads either from memory without being told the size. */
HIPSHIM_API hipError_t hipModuleLoadData(hipModule_t *module, const void *image) {
    if (!module || !image) return shim_fail(hipErrorInvalidValue, "hipModuleLoadData: null");
    int device = shim_current_device();
    hipError_t e = shim_bind_device(device);
    if (e != hipSuccess) return e;
    CUmodule m = NULL;
    e = shim_map(cu.cuModuleLoadData(&m, image), "cuModuleLoadData");
    if (e != hipSuccess) return e;
    struct ihipModule_t *h = malloc(sizeof *h);
    if (!h) {
        cu.cuModuleUnload(m);
        return shim_fail(hipErrorOutOfMemory, "host allocation failed");
    }
    h->module = m;
    h->device = device;
    *module = h;
    return hipSuccess;
}

HIPSHIM_API hipError_t hipModuleGetFunction(hipFunction_t *function, hipModule_t module,
                                            const char *name) {
    if (!function || !name) return shim_fail(hipErrorInvalidValue, "hipModuleGetFunction: null");
    if (!module) return shim_fail(hipErrorInvalidHandle, "hipModuleGetFunction: null module");
    hipError_t e = shim_bind_device(module->device);
    if (e != hipSuccess) return e;
    CUfunction f = NULL;
    e = shim_map(cu.cuModuleGetFunction(&f, module->module, name), "cuModuleGetFunction");
    if (e == hipSuccess) *function = (hipFunction_t)f;
    return e;
}

HIPSHIM_API hipError_t hipModuleUnload(hipModule_t module) {
    if (!module) return shim_fail(hipErrorInvalidHandle, "hipModuleUnload: null module");
    hipError_t e = shim_bind_device(module->device);
    if (e != hipSuccess) return e;
    e = shim_map(cu.cuModuleUnload(module->module), "cuModuleUnload");
    free(module);
    return e;
}

static hipError_t allow_shared(hipFunction_t f, unsigned int shared) {
    if (shared <= CUDA_DEFAULT_SHARED_LIMIT || !cu.cuFuncSetAttribute) return hipSuccess;
    return shim_map(cu.cuFuncSetAttribute((CUfunction)f,
                                          CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                          (int)shared),
                    "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)");
}

/* HIP's `extra` array ends with HIP_LAUNCH_PARAM_END (3), CUDA's with CU_LAUNCH_PARAM_END (0);
 * the key/value pairs in between mean the same. */
#define MAX_EXTRA 16
static hipError_t translate_extra(void **extra, void **out) {
    for (int i = 0; i + 1 < MAX_EXTRA; i += 2) {
        if (extra[i] == HIP_LAUNCH_PARAM_END) {
            out[i] = CU_LAUNCH_PARAM_END;
            return hipSuccess;
        }
        if (extra[i] != HIP_LAUNCH_PARAM_BUFFER_POINTER &&
            extra[i] != HIP_LAUNCH_PARAM_BUFFER_SIZE) {
            return shim_fail(hipErrorInvalidValue, "unknown key in hipModuleLaunchKernel extra");
        }
        out[i] = extra[i];
        out[i + 1] = extra[i + 1];
    }
    return shim_fail(hipErrorInvalidValue, "hipModuleLaunchKernel extra has no END marker");
}

/* The same argument order as cuLaunchKernel, which it forwards to. */
HIPSHIM_API hipError_t hipModuleLaunchKernel(hipFunction_t f, unsigned int gx, unsigned int gy,
                                             unsigned int gz, unsigned int bx, unsigned int by,
                                             unsigned int bz, unsigned int shared,
                                             hipStream_t stream, void **params, void **extra) {
    if (!f) return shim_fail(hipErrorInvalidDeviceFunction, "hipModuleLaunchKernel: null function");
    hipError_t e = shim_bind_stream(stream);
    if (e != hipSuccess) return e;
    void *cuda_extra[MAX_EXTRA];
    if (extra) {
        e = translate_extra(extra, cuda_extra);
        if (e != hipSuccess) return e;
    }
    e = allow_shared(f, shared);
    if (e != hipSuccess) return e;
    return shim_map(cu.cuLaunchKernel((CUfunction)f, gx, gy, gz, bx, by, bz, shared,
                                      (CUstream)stream, params, extra ? cuda_extra : NULL),
                    "cuLaunchKernel");
}

static hipError_t unsupported(const char *what) {
    return shim_fail(hipErrorNotSupported, what);
}

HIPSHIM_API hipError_t hipModuleLaunchCooperativeKernel(hipFunction_t f, unsigned int gx,
                                                        unsigned int gy, unsigned int gz,
                                                        unsigned int bx, unsigned int by,
                                                        unsigned int bz, unsigned int shared,
                                                        hipStream_t stream, void **params) {
    if (!cu.cuLaunchCooperativeKernel) return unsupported("driver lacks cuLaunchCooperativeKernel");
    if (!f) return shim_fail(hipErrorInvalidDeviceFunction, "null function");
    hipError_t e = shim_bind_stream(stream);
    if (e != hipSuccess) return e;
    e = allow_shared(f, shared);
    if (e != hipSuccess) return e;
    return shim_map(cu.cuLaunchCooperativeKernel((CUfunction)f, gx, gy, gz, bx, by, bz, shared,
                                                 (CUstream)stream, params),
                    "cuLaunchCooperativeKernel");
}

HIPSHIM_API hipError_t hipModuleOccupancyMaxActiveBlocksPerMultiprocessor(int *blocks,
                                                                          hipFunction_t f,
                                                                          int block_size,
                                                                          size_t shared) {
    if (!cu.cuOccupancyMaxActiveBlocksPerMultiprocessor) {
        return unsupported("driver lacks cuOccupancyMaxActiveBlocksPerMultiprocessor");
    }
    if (!blocks || !f) return shim_fail(hipErrorInvalidValue, "occupancy query: null argument");
    hipError_t e = shim_bind_device(shim_current_device());
    if (e != hipSuccess) return e;
    return shim_map(cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(blocks, (CUfunction)f,
                                                                   block_size, shared),
                    "cuOccupancyMaxActiveBlocksPerMultiprocessor");
}

/* hipStreamCaptureMode's values (Global 0, ThreadLocal 1, Relaxed 2) are CUDA's. */
HIPSHIM_API hipError_t hipStreamBeginCapture(hipStream_t stream, int mode) {
    if (!cu.cuStreamBeginCapture_v2) return unsupported("driver lacks cuStreamBeginCapture_v2");
    hipError_t e = shim_bind_stream(stream);
    if (e != hipSuccess) return e;
    return shim_map(cu.cuStreamBeginCapture_v2((CUstream)stream, mode), "cuStreamBeginCapture");
}

HIPSHIM_API hipError_t hipStreamEndCapture(hipStream_t stream, hipGraph_t *graph) {
    if (!cu.cuStreamEndCapture) return unsupported("driver lacks cuStreamEndCapture");
    if (!graph) return shim_fail(hipErrorInvalidValue, "hipStreamEndCapture: null graph");
    hipError_t e = shim_bind_stream(stream);
    if (e != hipSuccess) return e;
    CUgraph g = NULL;
    e = shim_map(cu.cuStreamEndCapture((CUstream)stream, &g), "cuStreamEndCapture");
    *graph = (hipGraph_t)g;
    return e;
}

/* ROCm's signature keeps the error-node and log outputs of CUDA 11's cuGraphInstantiate; the
 * shim instantiates with cuGraphInstantiateWithFlags (CUDA 11.4+, the form CUDA 12 and 13 keep)
 * and reports the failure's cause in the log instead of a node. */
HIPSHIM_API hipError_t hipGraphInstantiate(hipGraphExec_t *exec, hipGraph_t graph,
                                           hipGraphNode_t *error_node, char *log, size_t log_size) {
    if (!cu.cuGraphInstantiateWithFlags) return unsupported("driver lacks cuGraphInstantiateWithFlags");
    if (!exec || !graph) return shim_fail(hipErrorInvalidValue, "hipGraphInstantiate: null");
    if (error_node) *error_node = NULL;
    if (log && log_size) log[0] = '\0';
    hipError_t e = shim_bind_device(shim_current_device());
    if (e != hipSuccess) return e;
    CUgraphExec x = NULL;
    e = shim_map(cu.cuGraphInstantiateWithFlags(&x, (CUgraph)graph, 0), "cuGraphInstantiate");
    if (e != hipSuccess && log && log_size) {
        const char *text = hipGetErrorString(e);
        size_t i = 0;
        for (; text[i] && i + 1 < log_size; ++i) log[i] = text[i];
        log[i] = '\0';
    }
    *exec = (hipGraphExec_t)x;
    return e;
}

HIPSHIM_API hipError_t hipGraphLaunch(hipGraphExec_t exec, hipStream_t stream) {
    if (!cu.cuGraphLaunch) return unsupported("driver lacks cuGraphLaunch");
    if (!exec) return shim_fail(hipErrorInvalidValue, "hipGraphLaunch: null graph exec");
    hipError_t e = shim_bind_stream(stream);
    if (e != hipSuccess) return e;
    return shim_map(cu.cuGraphLaunch((CUgraphExec)exec, (CUstream)stream), "cuGraphLaunch");
}

/* The checks before a graph object's destroy: the driver has the call (`have`, else the error
 * `lacks`), the object is set (else `null_obj`), the current device is bound. */
static hipError_t destroy_checks(int have, const char *lacks, const void *obj,
                                 const char *null_obj) {
    if (!have) return unsupported(lacks);
    if (!obj) return shim_fail(hipErrorInvalidValue, null_obj);
    return shim_bind_device(shim_current_device());
}

HIPSHIM_API hipError_t hipGraphExecDestroy(hipGraphExec_t exec) {
    hipError_t e = destroy_checks(cu.cuGraphExecDestroy != NULL,
                                  "driver lacks cuGraphExecDestroy", exec,
                                  "hipGraphExecDestroy: null");
    if (e != hipSuccess) return e;
    return shim_map(cu.cuGraphExecDestroy((CUgraphExec)exec), "cuGraphExecDestroy");
}

HIPSHIM_API hipError_t hipGraphDestroy(hipGraph_t graph) {
    hipError_t e = destroy_checks(cu.cuGraphDestroy != NULL, "driver lacks cuGraphDestroy", graph,
                                  "hipGraphDestroy: null");
    if (e != hipSuccess) return e;
    return shim_map(cu.cuGraphDestroy((CUgraph)graph), "cuGraphDestroy");
}
