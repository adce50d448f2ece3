/* CUDA driver results to HIP error codes, and HIP's error names and texts.
 *
 * HIP numbered most of hipError_t after CUDA, so a CUresult whose number is also a hipError_t of
 * the same meaning passes through unchanged (CUDA_ERROR_OUT_OF_MEMORY 2 -> hipErrorOutOfMemory 2,
 * CUDA_ERROR_INVALID_IMAGE 200 -> hipErrorInvalidImage 200, CUDA_ERROR_INVALID_PTX 218 ->
 * hipErrorInvalidKernelFile 218, ...). The few others map to the HIP code of the same kind, and
 * anything unknown to hipErrorUnknown. The CUDA error behind the last mapped failure on a thread
 * is appended to hipGetErrorString's text for that code, so messages keep the real cause. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "shim.h"

struct entry {
    hipError_t code;
    const char *name;
    const char *text;
};

static const struct entry table[] = {
    {hipSuccess, "hipSuccess", "no error"},
    {hipErrorInvalidValue, "hipErrorInvalidValue", "invalid argument"},
    {hipErrorOutOfMemory, "hipErrorOutOfMemory", "out of memory"},
    {hipErrorNotInitialized, "hipErrorNotInitialized", "initialization error"},
    {hipErrorDeinitialized, "hipErrorDeinitialized", "driver shutting down"},
    {hipErrorProfilerDisabled, "hipErrorProfilerDisabled", "profiler disabled"},
    {hipErrorProfilerNotInitialized, "hipErrorProfilerNotInitialized", "profiler not initialized"},
    {hipErrorProfilerAlreadyStarted, "hipErrorProfilerAlreadyStarted", "profiler already started"},
    {hipErrorProfilerAlreadyStopped, "hipErrorProfilerAlreadyStopped", "profiler already stopped"},
    {hipErrorInvalidConfiguration, "hipErrorInvalidConfiguration", "invalid configuration argument"},
    {hipErrorInvalidPitchValue, "hipErrorInvalidPitchValue", "invalid pitch argument"},
    {hipErrorInvalidSymbol, "hipErrorInvalidSymbol", "invalid device symbol"},
    {hipErrorInvalidDevicePointer, "hipErrorInvalidDevicePointer", "invalid device pointer"},
    {hipErrorInvalidMemcpyDirection, "hipErrorInvalidMemcpyDirection", "invalid copy direction"},
    {hipErrorInsufficientDriver, "hipErrorInsufficientDriver",
     "driver version is insufficient for runtime version"},
    {hipErrorMissingConfiguration, "hipErrorMissingConfiguration", "__global__ function call is not configured"},
    {hipErrorPriorLaunchFailure, "hipErrorPriorLaunchFailure", "unspecified launch failure in prior launch"},
    {hipErrorInvalidDeviceFunction, "hipErrorInvalidDeviceFunction", "invalid device function"},
    {hipErrorNoDevice, "hipErrorNoDevice", "no ROCm-capable device is detected"},
    {hipErrorInvalidDevice, "hipErrorInvalidDevice", "invalid device ordinal"},
    {hipErrorInvalidImage, "hipErrorInvalidImage", "device kernel image is invalid"},
    {hipErrorInvalidContext, "hipErrorInvalidContext", "invalid device context"},
    {hipErrorContextAlreadyCurrent, "hipErrorContextAlreadyCurrent", "context is already current context"},
    {hipErrorMapFailed, "hipErrorMapFailed", "mapping of buffer object failed"},
    {hipErrorUnmapFailed, "hipErrorUnmapFailed", "unmapping of buffer object failed"},
    {hipErrorArrayIsMapped, "hipErrorArrayIsMapped", "array is mapped"},
    {hipErrorAlreadyMapped, "hipErrorAlreadyMapped", "resource already mapped"},
    {hipErrorNoBinaryForGpu, "hipErrorNoBinaryForGpu", "no kernel image is available for execution on the device"},
    {hipErrorAlreadyAcquired, "hipErrorAlreadyAcquired", "resource already acquired"},
    {hipErrorNotMapped, "hipErrorNotMapped", "resource not mapped"},
    {hipErrorNotMappedAsArray, "hipErrorNotMappedAsArray", "resource not mapped as array"},
    {hipErrorNotMappedAsPointer, "hipErrorNotMappedAsPointer", "resource not mapped as pointer"},
    {hipErrorECCNotCorrectable, "hipErrorECCNotCorrectable", "uncorrectable ECC error encountered"},
    {hipErrorUnsupportedLimit, "hipErrorUnsupportedLimit", "limit is not supported on this architecture"},
    {hipErrorContextAlreadyInUse, "hipErrorContextAlreadyInUse", "exclusive-thread device already in use by a different thread"},
    {hipErrorPeerAccessUnsupported, "hipErrorPeerAccessUnsupported", "peer access is not supported between these two devices"},
    {hipErrorInvalidKernelFile, "hipErrorInvalidKernelFile", "a PTX JIT compilation failed"},
    {hipErrorInvalidGraphicsContext, "hipErrorInvalidGraphicsContext", "invalid OpenGL or DirectX context"},
    {hipErrorInvalidSource, "hipErrorInvalidSource", "device kernel image is invalid"},
    {hipErrorFileNotFound, "hipErrorFileNotFound", "file not found"},
    {hipErrorSharedObjectSymbolNotFound, "hipErrorSharedObjectSymbolNotFound", "shared object symbol not found"},
    {hipErrorSharedObjectInitFailed, "hipErrorSharedObjectInitFailed", "shared object initialization failed"},
    {hipErrorOperatingSystem, "hipErrorOperatingSystem", "OS call failed or operation not supported on this OS"},
    {hipErrorInvalidHandle, "hipErrorInvalidHandle", "invalid resource handle"},
    {hipErrorIllegalState, "hipErrorIllegalState", "the operation cannot be performed in the present state"},
    {hipErrorNotFound, "hipErrorNotFound", "named symbol not found"},
    {hipErrorNotReady, "hipErrorNotReady", "device not ready"},
    {hipErrorIllegalAddress, "hipErrorIllegalAddress", "an illegal memory access was encountered"},
    {hipErrorLaunchOutOfResources, "hipErrorLaunchOutOfResources", "too many resources requested for launch"},
    {hipErrorLaunchTimeOut, "hipErrorLaunchTimeOut", "the launch timed out and was terminated"},
    {hipErrorPeerAccessAlreadyEnabled, "hipErrorPeerAccessAlreadyEnabled", "peer access is already enabled"},
    {hipErrorPeerAccessNotEnabled, "hipErrorPeerAccessNotEnabled", "peer access has not been enabled"},
    {hipErrorSetOnActiveProcess, "hipErrorSetOnActiveProcess", "cannot set while device is active in this process"},
    {hipErrorContextIsDestroyed, "hipErrorContextIsDestroyed", "context is destroyed"},
    {hipErrorAssert, "hipErrorAssert", "device-side assert triggered"},
    {hipErrorHostMemoryAlreadyRegistered, "hipErrorHostMemoryAlreadyRegistered", "part or all of the requested memory range is already mapped"},
    {hipErrorHostMemoryNotRegistered, "hipErrorHostMemoryNotRegistered", "pointer does not correspond to a registered memory region"},
    {hipErrorLaunchFailure, "hipErrorLaunchFailure", "unspecified launch failure"},
    {hipErrorCooperativeLaunchTooLarge, "hipErrorCooperativeLaunchTooLarge", "too many blocks in cooperative launch"},
    {hipErrorNotSupported, "hipErrorNotSupported", "operation not supported"},
    {hipErrorStreamCaptureUnsupported, "hipErrorStreamCaptureUnsupported", "operation not permitted when stream is capturing"},
    {hipErrorStreamCaptureInvalidated, "hipErrorStreamCaptureInvalidated", "operation failed due to a previous error during capture"},
    {hipErrorStreamCaptureMerge, "hipErrorStreamCaptureMerge", "operation would result in a merge of separate capture sequences"},
    {hipErrorStreamCaptureUnmatched, "hipErrorStreamCaptureUnmatched", "capture was not ended in the same stream as it began"},
    {hipErrorStreamCaptureUnjoined, "hipErrorStreamCaptureUnjoined", "capturing stream has unjoined work"},
    {hipErrorStreamCaptureIsolation, "hipErrorStreamCaptureIsolation", "dependency created on uncaptured work in another stream"},
    {hipErrorStreamCaptureImplicit, "hipErrorStreamCaptureImplicit", "operation would make the legacy stream depend on a capturing blocking stream"},
    {hipErrorCapturedEvent, "hipErrorCapturedEvent", "operation not permitted on an event last recorded in a capturing stream"},
    {hipErrorStreamCaptureWrongThread, "hipErrorStreamCaptureWrongThread", "attempt to terminate a thread-local capture sequence from another thread"},
    {hipErrorGraphExecUpdateFailure, "hipErrorGraphExecUpdateFailure", "the graph update was not performed because it included changes which violated constraints specific to instantiated graph update"},
    {hipErrorUnknown, "hipErrorUnknown", "unknown error"},
};

static const struct entry *find(hipError_t e) {
    for (size_t i = 0; i < sizeof table / sizeof table[0]; ++i) {
        if (table[i].code == e) return &table[i];
    }
    return NULL;
}

const char *shim_hip_error_name(hipError_t e) {
    const struct entry *t = find(e);
    return t ? t->name : "hipErrorUnknown";
}

/* The cause of the last failure this thread returned, and the code it was returned as. */
static _Thread_local char detail[1024];
static _Thread_local hipError_t detail_code = hipSuccess;
static _Thread_local char text_buf[1400];

static void note(hipError_t code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(hipError_t code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    detail_code = code;
}

static hipError_t map_number(CUresult r) {
    /* Every CUresult number that is also a hipError_t has the same meaning in both. */
    if (find(r)) return r;
    switch (r) {
    case 34:  /* CUDA_ERROR_STUB_LIBRARY */
    case 36:  /* CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER */
    case 221: /* CUDA_ERROR_JIT_COMPILER_NOT_FOUND */
    case 227: /* CUDA_ERROR_INSUFFICIENT_LOADER_VERSION */
    case 803: /* CUDA_ERROR_SYSTEM_DRIVER_MISMATCH */
    case 804: /* CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE */
        return hipErrorInsufficientDriver;
    case 46: /* CUDA_ERROR_DEVICE_UNAVAILABLE */
    case 102: /* CUDA_ERROR_DEVICE_NOT_LICENSED */
        return hipErrorInvalidDevice;
    case 222: /* CUDA_ERROR_UNSUPPORTED_PTX_VERSION: the image is unusable here */
        return hipErrorInvalidKernelFile;
    case 714: /* CUDA_ERROR_HARDWARE_STACK_ERROR */
    case 715: /* CUDA_ERROR_ILLEGAL_INSTRUCTION */
    case 716: /* CUDA_ERROR_MISALIGNED_ADDRESS */
    case 717: /* CUDA_ERROR_INVALID_ADDRESS_SPACE */
    case 718: /* CUDA_ERROR_INVALID_PC */
        return hipErrorLaunchFailure;
    case 800: /* CUDA_ERROR_NOT_PERMITTED */
        return hipErrorNotSupported;
    default:
        return hipErrorUnknown;
    }
}

hipError_t shim_map(CUresult r, const char *call) {
    if (r == CUDA_SUCCESS) return hipSuccess;
    hipError_t e = map_number(r);
    const char *name = NULL, *text = NULL;
    if (cu.cuGetErrorName) cu.cuGetErrorName(r, &name);
    if (cu.cuGetErrorString) cu.cuGetErrorString(r, &text);
    note(e, "%s returned %s (%d): %s", call, name ? name : "CUDA error", r, text ? text : "");
    return e;
}

hipError_t shim_fail(hipError_t e, const char *why) {
    note(e, "%s", why);
    return e;
}

HIPSHIM_API const char *hipGetErrorName(hipError_t e) { return shim_hip_error_name(e); }

HIPSHIM_API const char *hipGetErrorString(hipError_t e) {
    const struct entry *t = find(e);
    const char *text = t ? t->text : "unknown error";
    if (e == hipSuccess || detail_code != e || !detail[0]) return text;
    snprintf(text_buf, sizeof text_buf, "%s [hipshim: %s]", text, detail);
    return text_buf;
}
