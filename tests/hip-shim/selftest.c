/* Self-test of the shim through its exported HIP/hiprtc API, loaded with dlopen as the crate
 * loads it. Exercises what the Rust backend does not call yet (graph capture, cooperative launch,
 * occupancy, launch `extra` buffers) besides what it does.
 *
 *   selftest LIBRARY              on a machine with a CUDA GPU: everything
 *   selftest LIBRARY --no-device  with HIPSHIM_CUDA_LIBRARY pointing nowhere: ROCm's no-GPU answers
 *
 * Prints one line per failed check and a summary; exits 1 when any check failed. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hip_api.h"

static int checks, failures;

#define CHECK(cond, ...)                                                                      \
    do {                                                                                      \
        ++checks;                                                                             \
        if (!(cond)) {                                                                        \
            ++failures;                                                                       \
            printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                            \
            printf(__VA_ARGS__);                                                              \
            printf("\n");                                                                     \
        }                                                                                     \
    } while (0)

/* Every entry point, resolved from the library under test (never linked). */
#define ENTRY_POINTS(X)                                                                       \
    X(hipInit) X(hipGetDeviceCount) X(hipDeviceGetName) X(hipDeviceGetAttribute)              \
    X(hipDeviceTotalMem) X(hipDriverGetVersion) X(hipRuntimeGetVersion) X(hipGetErrorName)    \
    X(hipGetErrorString) X(hipSetDevice) X(hipGetDeviceProperties) X(hipMalloc) X(hipFree)    \
    X(hipMemGetInfo) X(hipMemcpyHtoDAsync) X(hipMemcpyDtoHAsync) X(hipMemcpyDtoDAsync)       \
    X(hipStreamCreate) X(hipStreamSynchronize) X(hipStreamDestroy) X(hipModuleLoadData)      \
    X(hipModuleGetFunction) X(hipModuleLaunchKernel) X(hipModuleUnload)                      \
    X(hipModuleLaunchCooperativeKernel) X(hipModuleOccupancyMaxActiveBlocksPerMultiprocessor) \
    X(hipStreamBeginCapture) X(hipStreamEndCapture) X(hipGraphInstantiate) X(hipGraphLaunch)  \
    X(hipGraphExecDestroy) X(hipGraphDestroy) X(hiprtcCreateProgram) X(hiprtcCompileProgram) \
    X(hiprtcGetProgramLogSize) X(hiprtcGetProgramLog) X(hiprtcGetCodeSize) X(hiprtcGetCode)   \
    X(hiprtcDestroyProgram) X(hiprtcVersion) X(hiprtcGetErrorString)

#define DECLARE(name) static __typeof__(&name) p_##name;
ENTRY_POINTS(DECLARE)
#undef DECLARE
/* Only in the ROCm 6 flavour. */
typedef hipError_t (*props_r0600_fn)(hipDeviceProp_tR0600 *, int);
static props_r0600_fn p_hipGetDevicePropertiesR0600;

static int load(const char *path) {
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        printf("FAIL dlopen %s: %s\n", path, dlerror());
        return 0;
    }
    void *sym;
#define RESOLVE(name)                                                                         \
    sym = dlsym(h, #name);                                                                    \
    if (!sym) {                                                                               \
        printf("FAIL %s lacks %s\n", path, #name);                                            \
        return 0;                                                                             \
    }                                                                                         \
    memcpy(&p_##name, &sym, sizeof sym);
    ENTRY_POINTS(RESOLVE)
#undef RESOLVE
    sym = dlsym(h, "hipGetDevicePropertiesR0600");
    memcpy(&p_hipGetDevicePropertiesR0600, &sym, sizeof sym);
    return 1;
}

static void no_device(void) {
    CHECK(p_hipInit(0) == hipErrorInvalidDevice, "hipInit gave %d", p_hipInit(0));
    int count = -1;
    hipError_t e = p_hipGetDeviceCount(&count);
    CHECK(e == hipErrorNoDevice && count == 0, "hipGetDeviceCount gave %d, count %d", e, count);
    CHECK(strstr(p_hipGetErrorString(hipErrorNoDevice), "hipshim") != NULL,
          "the text says why: %s", p_hipGetErrorString(hipErrorNoDevice));
    char name[64];
    CHECK(p_hipDeviceGetName(name, 64, 0) == hipErrorInvalidDevice, "hipDeviceGetName");
    void *ptr = &count;
    CHECK(p_hipMalloc(&ptr, 16) == hipErrorInvalidDevice && ptr == NULL, "hipMalloc");
    CHECK(strcmp(p_hipGetErrorName(hipErrorNoDevice), "hipErrorNoDevice") == 0, "error name");
}

static const char *const source =
    "#include <hip/hip_runtime.h>\n"
    "extern \"C\" __global__ void axpb(const float* x, float* y, unsigned n, float a) {\n"
    "  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) y[i] = a * x[i] + 1.0f;\n"
    "}\n"
    "extern \"C\" __global__ void wave(const float* x, float* out) {\n"
    "  float v = x[threadIdx.x];\n"
    "  for (int d = warpSize / 2; d > 0; d >>= 1) v += __shfl_xor(v, d);\n"
    "  unsigned long long lanes = __ballot(1);\n"
    "  if (threadIdx.x == 0) { out[0] = v; out[1] = (float)__popcll(lanes); out[2] = warpSize; }\n"
    "}\n"
    "extern \"C\" __global__ void bump(float* y) { y[threadIdx.x] += 1.0f; }\n";

/* Compiles `src` with AMD options, as the backend passes them; returns the code (malloc'd). */
static char *compile(const char *src, size_t *size, char **log_out) {
    hiprtcProgram prog = NULL;
    const char *names[] = {"hip/hip_runtime.h"};
    const char *texts[] = {"// pre-included by hiprtc\n"};
    hiprtcResult r = p_hiprtcCreateProgram(&prog, src, "selftest.hip", 1, texts, names);
    CHECK(r == HIPRTC_SUCCESS, "hiprtcCreateProgram: %s", p_hiprtcGetErrorString(r));
    if (r != HIPRTC_SUCCESS) return NULL;
    const char *opts[] = {"--offload-arch=gfx90a", "-O3"};
    r = p_hiprtcCompileProgram(prog, 2, opts);
    size_t n = 0;
    p_hiprtcGetProgramLogSize(prog, &n);
    char *log = calloc(n + 1, 1);
    p_hiprtcGetProgramLog(prog, log);
    *log_out = log;
    char *code = NULL;
    *size = 0;
    if (r == HIPRTC_SUCCESS && p_hiprtcGetCodeSize(prog, size) == HIPRTC_SUCCESS && *size) {
        code = malloc(*size);
        CHECK(p_hiprtcGetCode(prog, code) == HIPRTC_SUCCESS, "hiprtcGetCode");
    }
    CHECK(p_hiprtcDestroyProgram(&prog) == HIPRTC_SUCCESS && prog == NULL, "destroy");
    return code;
}

/* Evaluates `call` once (it may launch work) and reports its code and text on failure. */
#define OK(call)                                                                              \
    do {                                                                                      \
        hipError_t ok_ = (call);                                                              \
        CHECK(ok_ == hipSuccess, "%d: %s", ok_, p_hipGetErrorString(ok_));                    \
    } while (0)

static void device(void) {
    CHECK(p_hipInit(0) == hipSuccess, "hipInit");
    int count = 0;
    OK(p_hipGetDeviceCount(&count));
    CHECK(count >= 1, "count %d", count);
    OK(p_hipSetDevice(0));
    char name[256] = {0};
    OK(p_hipDeviceGetName(name, sizeof name, 0));
    CHECK(strstr(name, "hipshim") != NULL, "name %s", name);
    int warp = 0, sms = 0;
    OK(p_hipDeviceGetAttribute(&warp, hipDeviceAttributeWarpSize, 0));
    OK(p_hipDeviceGetAttribute(&sms, hipDeviceAttributeMultiprocessorCount, 0));
    CHECK(warp == 32 && sms > 0, "warp %d, %d multiprocessors", warp, sms);
    size_t total = 0, free_bytes = 0, total2 = 0;
    OK(p_hipDeviceTotalMem(&total, 0));
    OK(p_hipMemGetInfo(&free_bytes, &total2));
    CHECK(total > 0 && total2 == total && free_bytes <= total, "memory %zu %zu %zu", total,
          free_bytes, total2);
    int runtime = 0, driver = 0;
    OK(p_hipRuntimeGetVersion(&runtime));
    OK(p_hipDriverGetVersion(&driver));
    printf("device 0: %s, wave %d, %d CUs, %zu MiB, runtime %d, driver %d\n", name, warp, sms,
           total >> 20, runtime, driver);

    /* Both layouts, read at the offsets ffi.rs uses. */
    unsigned char buf[16384];
    memset(buf, 0, sizeof buf);
    OK(p_hipGetDeviceProperties((hipDeviceProp_tR0000 *)(void *)buf, 0));
    CHECK(strcmp((char *)buf + 396, "gfx90a:sramecc+:xnack-") == 0, "R0000 gcnArchName");
    CHECK(memcmp(buf, name, strlen(name)) == 0, "R0000 name");
    if (p_hipGetDevicePropertiesR0600) {
        memset(buf, 0, sizeof buf);
        OK(p_hipGetDevicePropertiesR0600((hipDeviceProp_tR0600 *)(void *)buf, 0));
        CHECK(strcmp((char *)buf + 1160, "gfx90a:sramecc+:xnack-") == 0, "R0600 gcnArchName");
        CHECK(((hipDeviceProp_tR0600 *)(void *)buf)->multiProcessorCount == sms, "R0600 CUs");
    }

    size_t size = 0;
    char *log = NULL;
    char *code = compile(source, &size, &log);
    CHECK(code != NULL, "compile failed:\n%s", log);
    CHECK(strstr(log, "--offload-arch=gfx90a") != NULL, "log names ignored options:\n%s", log);
    printf("hiprtc log: %s", log);
    free(log);
    if (!code) return;
    hipModule_t mod = NULL;
    OK(p_hipModuleLoadData(&mod, code));
    hipFunction_t axpb = NULL, wave = NULL, bump = NULL, missing = NULL;
    OK(p_hipModuleGetFunction(&axpb, mod, "axpb"));
    OK(p_hipModuleGetFunction(&wave, mod, "wave"));
    OK(p_hipModuleGetFunction(&bump, mod, "bump"));
    hipError_t e = p_hipModuleGetFunction(&missing, mod, "no_such_kernel");
    CHECK(e == hipErrorNotFound, "missing kernel gave %d", e);

    enum { N = 1000 };
    static float x[N], y[N];
    for (int i = 0; i < N; ++i) x[i] = (float)i * 0.5f - 100.0f;
    hipStream_t stream = NULL;
    OK(p_hipStreamCreate(&stream));
    void *dx = NULL, *dy = NULL, *dz = NULL;
    OK(p_hipMalloc(&dx, sizeof x));
    OK(p_hipMalloc(&dy, sizeof y));
    OK(p_hipMalloc(&dz, sizeof y));
    OK(p_hipMemcpyHtoDAsync(dx, x, sizeof x, stream));
    unsigned n = N;
    float a = 3.0f;
    void *params[] = {&dx, &dy, &n, &a};
    OK(p_hipModuleLaunchKernel(axpb, (N + 127) / 128, 1, 1, 128, 1, 1, 0, stream, params, NULL));
    OK(p_hipMemcpyDtoDAsync(dz, dy, sizeof y, stream));
    OK(p_hipMemcpyDtoHAsync(y, dz, sizeof y, stream));
    OK(p_hipStreamSynchronize(stream));
    int bad = 0;
    for (int i = 0; i < N; ++i) bad += y[i] != 3.0f * x[i] + 1.0f;
    CHECK(bad == 0, "axpb through kernelParams: %d wrong", bad);

    /* The same launch through a HIP `extra` argument buffer. */
    struct {
        void *x, *y;
        unsigned n;
        float a;
    } packed = {dx, dy, N, -2.0f};
    size_t packed_size = sizeof packed;
    void *extra[] = {HIP_LAUNCH_PARAM_BUFFER_POINTER, &packed, HIP_LAUNCH_PARAM_BUFFER_SIZE,
                     &packed_size, HIP_LAUNCH_PARAM_END};
    OK(p_hipModuleLaunchKernel(axpb, (N + 127) / 128, 1, 1, 128, 1, 1, 0, stream, NULL, extra));
    OK(p_hipMemcpyDtoHAsync(y, dy, sizeof y, stream));
    OK(p_hipStreamSynchronize(stream));
    bad = 0;
    for (int i = 0; i < N; ++i) bad += y[i] != -2.0f * x[i] + 1.0f;
    CHECK(bad == 0, "axpb through extra: %d wrong", bad);

    /* A wave of 32: the shuffle sum, the ballot and warpSize. */
    void *wparams[] = {&dx, &dz};
    OK(p_hipModuleLaunchKernel(wave, 1, 1, 1, 32, 1, 1, 0, stream, wparams, NULL));
    float out[3] = {0};
    OK(p_hipMemcpyDtoHAsync(out, dz, sizeof out, stream));
    OK(p_hipStreamSynchronize(stream));
    float sum = 0;
    for (int i = 0; i < 32; ++i) sum += x[i];
    CHECK(out[0] == sum && out[1] == 32.0f && out[2] == 32.0f, "wave: %g (want %g) %g %g", out[0],
          sum, out[1], out[2]);

    /* Graph capture: two replays of one captured launch add 2. */
    OK(p_hipMemcpyHtoDAsync(dy, x, 32 * sizeof(float), stream));
    OK(p_hipStreamBeginCapture(stream, 0));
    void *bparams[] = {&dy};
    OK(p_hipModuleLaunchKernel(bump, 1, 1, 1, 32, 1, 1, 0, stream, bparams, NULL));
    hipGraph_t graph = NULL;
    OK(p_hipStreamEndCapture(stream, &graph));
    hipGraphExec_t exec = NULL;
    hipGraphNode_t node = (hipGraphNode_t)(uintptr_t)1;
    char glog[64] = "x";
    OK(p_hipGraphInstantiate(&exec, graph, &node, glog, sizeof glog));
    CHECK(node == NULL && glog[0] == '\0', "instantiate outputs");
    OK(p_hipGraphLaunch(exec, stream));
    OK(p_hipGraphLaunch(exec, stream));
    OK(p_hipMemcpyDtoHAsync(y, dy, 32 * sizeof(float), stream));
    OK(p_hipStreamSynchronize(stream));
    bad = 0;
    for (int i = 0; i < 32; ++i) bad += y[i] != x[i] + 2.0f;
    CHECK(bad == 0, "graph replays: %d wrong", bad);
    OK(p_hipGraphExecDestroy(exec));
    OK(p_hipGraphDestroy(graph));

    /* Cooperative launch within and beyond the co-residency limit. */
    int per_cu = 0;
    OK(p_hipModuleOccupancyMaxActiveBlocksPerMultiprocessor(&per_cu, bump, 32, 0));
    CHECK(per_cu > 0, "occupancy %d", per_cu);
    OK(p_hipModuleLaunchCooperativeKernel(bump, 1, 1, 1, 32, 1, 1, 0, stream, bparams));
    OK(p_hipStreamSynchronize(stream));
    unsigned too_many = (unsigned)(per_cu * sms + 1);
    e = p_hipModuleLaunchCooperativeKernel(bump, too_many, 1, 1, 32, 1, 1, 0, stream, bparams);
    CHECK(e == hipErrorCooperativeLaunchTooLarge, "oversized cooperative launch gave %d", e);

    /* Failures keep HIP's codes. */
    void *huge = NULL;
    e = p_hipMalloc(&huge, total * 2);
    CHECK(e == hipErrorOutOfMemory && huge == NULL, "oversized hipMalloc gave %d", e);
    e = p_hipMalloc(&huge, SIZE_MAX / 2);
    CHECK(e == hipErrorOutOfMemory, "hipMalloc(SIZE_MAX / 2) gave %d", e);
    CHECK(strstr(p_hipGetErrorString(e), "hipshim") != NULL, "%s", p_hipGetErrorString(e));
    hipModule_t junk = NULL;
    e = p_hipModuleLoadData(&junk, "not a code object\n");
    CHECK(e == hipErrorInvalidImage || e == hipErrorInvalidKernelFile ||
              e == hipErrorNoBinaryForGpu || e == hipErrorInvalidSource,
          "garbage image gave %d (%s)", e, p_hipGetErrorString(e));

    OK(p_hipFree(dx));
    OK(p_hipFree(dy));
    OK(p_hipFree(dz));
    OK(p_hipModuleUnload(mod));
    OK(p_hipStreamDestroy(stream));
    free(code);

    /* A compile error is HIPRTC_ERROR_COMPILATION with the compiler's message. */
    log = NULL;
    char *none = compile("extern \"C\" __global__ void k(float* p) { p[0] = undefined_q7; }",
                         &size, &log);
    CHECK(none == NULL && log && strstr(log, "undefined_q7"), "broken kernel:\n%s", log);
    free(log);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: selftest LIBRARY [--no-device]\n");
        return 2;
    }
    if (!load(argv[1])) return 1;
    if (argc > 2 && strcmp(argv[2], "--no-device") == 0) {
        no_device();
    } else {
        device();
    }
    printf("hipshim selftest: %d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
