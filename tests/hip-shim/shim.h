/* Internal declarations shared by the shim's files (nothing here is exported). */
#ifndef HIPSHIM_SHIM_H
#define HIPSHIM_SHIM_H

/* The ROCm release whose ABI the shim presents: 6 (hipGetDevicePropertiesR0600 exported,
 * hipRuntimeGetVersion 6.2.0) or 5 (no R0600 symbol, 5.7.0). Set by build.sh. */
#ifndef HIPSHIM_ROCM_MAJOR
#define HIPSHIM_ROCM_MAJOR 6
#endif

#include "cuda_abi.h"
#include "hip_abi.h"
#include "hip_api.h"

#define HIPSHIM_API __attribute__((visibility("default")))

/* The architecture every device reports in gcnArchName: an MI200 (CDNA2), whose real wave width
 * is 64; the kernels here run at NVIDIA's 32 (see README.md). */
#define HIPSHIM_GCN_ARCH_NAME "gfx90a:sramecc+:xnack-"
#define HIPSHIM_GCN_ARCH 910
#define HIPSHIM_MAX_DEVICES 64

/* The CUDA driver's entry points (cuda_abi.h), NULL where an optional one is absent. */
struct cuda_api {
#define HIPSHIM_FIELD(name, ret, args) ret(*name) args;
    HIPSHIM_CUDA_REQUIRED(HIPSHIM_FIELD)
    HIPSHIM_CUDA_OPTIONAL(HIPSHIM_FIELD)
#undef HIPSHIM_FIELD
};

struct nvrtc_api {
#define HIPSHIM_FIELD(name, ret, args) ret(*name) args;
    HIPSHIM_NVRTC_REQUIRED(HIPSHIM_FIELD)
    HIPSHIM_NVRTC_OPTIONAL(HIPSHIM_FIELD)
#undef HIPSHIM_FIELD
};

extern struct cuda_api cu;

/* loader.c. shim_init runs once (later calls return the first result): hipSuccess, or what every
 * HIP call that needs a device answers, as ROCm does without a usable GPU. */
hipError_t shim_init(void);
int shim_device_count(void);
CUdevice shim_cu_device(int ordinal);
/* Makes the primary context of `ordinal` (retained on first use) current on this thread. */
hipError_t shim_bind_device(int ordinal);
/* The calling thread's current HIP device (0 until hipSetDevice). */
int shim_current_device(void);
void shim_set_current_device(int ordinal);
/* Makes the context that owns `stream` current (the current device's for the null stream). */
hipError_t shim_bind_stream(hipStream_t stream);
/* NVRTC, loaded on first use; NULL with `why` filled when it cannot be. */
const struct nvrtc_api *shim_nvrtc(const char **why);
/* Why init failed, for messages (empty after success). */
const char *shim_init_failure(void);

/* errors.c. shim_map turns a CUresult of `call` into a hipError_t, shim_fail returns `e`; both
 * keep the cause for hipGetErrorString. */
hipError_t shim_map(CUresult r, const char *call);
hipError_t shim_fail(hipError_t e, const char *why);
const char *shim_hip_error_name(hipError_t e);

#endif /* HIPSHIM_SHIM_H */
