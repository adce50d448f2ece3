/* Finds the CUDA driver and NVRTC at run time (no CUDA SDK at build time), keeps the per-device
 * primary contexts and the per-thread current device that the HIP runtime API implies. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shim.h"

struct cuda_api cu;

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static hipError_t init_status = hipErrorInvalidDevice;
static char init_why[1024];
static int device_count;
static CUdevice devices[HIPSHIM_MAX_DEVICES];
static CUcontext contexts[HIPSHIM_MAX_DEVICES];
static pthread_mutex_t contexts_lock = PTHREAD_MUTEX_INITIALIZER;
static _Thread_local int current_device;

/* dlopen the first of `names` that loads (or exactly `override` when set); NULL with every
 * reason in `why` otherwise. */
static void *open_first(const char *override, const char *const *names, char *why, size_t len) {
    const char *only[] = {override, NULL};
    const char *const *list = (override && *override) ? only : names;
    size_t used = (size_t)snprintf(why, len, "tried");
    for (; *list; ++list) {
        void *h = dlopen(*list, RTLD_NOW | RTLD_LOCAL);
        if (h) return h;
        const char *err = dlerror();
        if (used < len) {
            used += (size_t)snprintf(why + used, len - used, " %s (%s)", *list,
                                     err ? err : "unknown error");
        }
    }
    return NULL;
}

static void init_once_fn(void) {
    static const char *const names[] = {"libcuda.so.1", "libcuda.so", NULL};
    void *h = open_first(getenv("HIPSHIM_CUDA_LIBRARY"), names, init_why, sizeof init_why);
    if (!h) {
        /* ROCm without a usable GPU answers hipErrorInvalidDevice from hipInit. */
        init_status = hipErrorInvalidDevice;
        return;
    }
    /* Copied, not cast: ISO C has no conversion from object to function pointers. */
    void *sym;
#define HIPSHIM_LOAD(name, ret, args)                                                         \
    sym = dlsym(h, #name);                                                                    \
    memcpy(&cu.name, &sym, sizeof sym);                                                       \
    if (!sym) {                                                                           \
        snprintf(init_why, sizeof init_why, "the CUDA driver lacks %s", #name);               \
        init_status = hipErrorInsufficientDriver;                                             \
        return;                                                                               \
    }
    HIPSHIM_CUDA_REQUIRED(HIPSHIM_LOAD)
#undef HIPSHIM_LOAD
#define HIPSHIM_LOAD_OPT(name, ret, args)                                                     \
    sym = dlsym(h, #name);                                                                    \
    memcpy(&cu.name, &sym, sizeof sym);
    HIPSHIM_CUDA_OPTIONAL(HIPSHIM_LOAD_OPT)
#undef HIPSHIM_LOAD_OPT
    CUresult r = cu.cuInit(0);
    if (r == CUDA_ERROR_NO_DEVICE) {
        snprintf(init_why, sizeof init_why, "cuInit: no CUDA device");
        init_status = hipErrorInvalidDevice;
        return;
    }
    if (r != CUDA_SUCCESS) {
        const char *name = NULL;
        cu.cuGetErrorName(r, &name);
        snprintf(init_why, sizeof init_why, "cuInit failed: %s (%d)", name ? name : "?", r);
        init_status = shim_map(r, "cuInit");
        return;
    }
    int n = 0;
    r = cu.cuDeviceGetCount(&n);
    if (r != CUDA_SUCCESS || n <= 0) {
        snprintf(init_why, sizeof init_why, "cuDeviceGetCount: no CUDA device (%d)", r);
        init_status = hipErrorInvalidDevice;
        return;
    }
    if (n > HIPSHIM_MAX_DEVICES) n = HIPSHIM_MAX_DEVICES;
    for (int i = 0; i < n; ++i) {
        r = cu.cuDeviceGet(&devices[i], i);
        if (r != CUDA_SUCCESS) {
            snprintf(init_why, sizeof init_why, "cuDeviceGet(%d) failed (%d)", i, r);
            init_status = shim_map(r, "cuDeviceGet");
            return;
        }
    }
    device_count = n;
    init_why[0] = '\0';
    init_status = hipSuccess;
}

hipError_t shim_init(void) {
    pthread_once(&init_once, init_once_fn);
    return init_status;
}

const char *shim_init_failure(void) {
    shim_init();
    return init_why;
}

int shim_device_count(void) { return shim_init() == hipSuccess ? device_count : 0; }

CUdevice shim_cu_device(int ordinal) { return devices[ordinal]; }

int shim_current_device(void) { return current_device; }

void shim_set_current_device(int ordinal) { current_device = ordinal; }

hipError_t shim_bind_device(int ordinal) {
    hipError_t e = shim_init();
    if (e != hipSuccess) return e;
    if (ordinal < 0 || ordinal >= device_count) return hipErrorInvalidDevice;
    pthread_mutex_lock(&contexts_lock);
    CUresult r = CUDA_SUCCESS;
    if (!contexts[ordinal]) r = cu.cuDevicePrimaryCtxRetain(&contexts[ordinal], devices[ordinal]);
    CUcontext ctx = contexts[ordinal];
    pthread_mutex_unlock(&contexts_lock);
    if (r != CUDA_SUCCESS) return shim_map(r, "cuDevicePrimaryCtxRetain");
    return shim_map(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
}

hipError_t shim_bind_stream(hipStream_t stream) {
    if (!stream) return shim_bind_device(current_device);
    hipError_t e = shim_init();
    if (e != hipSuccess) return e;
    CUcontext ctx = NULL;
    CUresult r = cu.cuStreamGetCtx((CUstream)stream, &ctx);
    if (r != CUDA_SUCCESS) return shim_map(r, "cuStreamGetCtx");
    return shim_map(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
}

static pthread_once_t nvrtc_once = PTHREAD_ONCE_INIT;
static struct nvrtc_api nvrtc;
static int nvrtc_ok;
static char nvrtc_why[1024];

static void nvrtc_once_fn(void) {
    /* The names the crate's CUDA backend (cudarc) tries on Linux, plus CUDA 13's soname. */
    static const char *const names[] = {"libnvrtc.so",    "libnvrtc.so.13", "libnvrtc.so.12",
                                        "libnvrtc.so.11", "libnvrtc.so.10", "libnvrtc.so.9",
                                        "libnvrtc.so.1",  NULL};
    char tried[900];
    void *h = open_first(getenv("HIPSHIM_NVRTC_LIBRARY"), names, tried, sizeof tried);
    if (!h) {
        snprintf(nvrtc_why, sizeof nvrtc_why, "NVRTC not found: %s", tried);
        return;
    }
    void *sym;
#define HIPSHIM_LOAD(name, ret, args)                                                         \
    sym = dlsym(h, #name);                                                                    \
    memcpy(&nvrtc.name, &sym, sizeof sym);                                                    \
    if (!sym) {                                                                        \
        snprintf(nvrtc_why, sizeof nvrtc_why, "NVRTC lacks %s", #name);                       \
        return;                                                                               \
    }
    HIPSHIM_NVRTC_REQUIRED(HIPSHIM_LOAD)
#undef HIPSHIM_LOAD
#define HIPSHIM_LOAD_OPT(name, ret, args)                                                     \
    sym = dlsym(h, #name);                                                                    \
    memcpy(&nvrtc.name, &sym, sizeof sym);
    HIPSHIM_NVRTC_OPTIONAL(HIPSHIM_LOAD_OPT)
#undef HIPSHIM_LOAD_OPT
    nvrtc_ok = 1;
}

const struct nvrtc_api *shim_nvrtc(const char **why) {
    pthread_once(&nvrtc_once, nvrtc_once_fn);
    if (nvrtc_ok) return &nvrtc;
    *why = nvrtc_why;
    return NULL;
}
