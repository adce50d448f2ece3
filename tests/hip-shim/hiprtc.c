/* hiprtc over NVRTC: a HIP source is compiled exactly as the crate's `hip-nvrtc` path compiles
 * one (src/backend/cuda/compile.rs: hip_environment): kernels-hip/nvrtc_prelude.h, embedded at
 * build time, is the in-memory <hip/hip_runtime.h> and is pre-included, with -default-device and
 * C++17. The code object is a CUBIN for the CUDA device's sm_XY (PTX where this NVRTC cannot emit
 * one), which hipModuleLoadData hands to cuModuleLoadData.
 *
 * AMD-only options (--offload-arch, -O<n>, -m..., -f... except -ffast-math) are dropped and
 * named in the log; the target is the device's, or $HIPSHIM_ARCH (sm_XY / compute_XY) when set,
 * which lets hiprtc compile without a GPU. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shim.h"

/* kernels-hip/nvrtc_prelude.h, NUL-terminated (HIPSHIM_PRELUDE_PATH comes from build.sh). */
extern const char hipshim_prelude[] __attribute__((visibility("hidden")));
__asm__(".section .rodata\n"
        ".hidden hipshim_prelude\n"
        ".type hipshim_prelude, @object\n"
        "hipshim_prelude:\n"
        ".incbin \"" HIPSHIM_PRELUDE_PATH "\"\n"
        ".byte 0\n"
        ".size hipshim_prelude, . - hipshim_prelude\n"
        ".previous\n");

#define RUNTIME_HEADER "hip/hip_runtime.h"

struct _hiprtcProgram {
    char *source;
    char *name;
    int headers;
    char **header_texts;
    char **header_names;
    char *log;
    char *code;
    size_t code_size;
};

static char *copy(const char *s) {
    size_t n = strlen(s) + 1;
    char *out = malloc(n);
    if (out) memcpy(out, s, n);
    return out;
}

static void release(struct _hiprtcProgram *p) {
    if (!p) return;
    for (int i = 0; i < p->headers; ++i) {
        free(p->header_texts[i]);
        free(p->header_names[i]);
    }
    free(p->header_texts);
    free(p->header_names);
    free(p->source);
    free(p->name);
    free(p->log);
    free(p->code);
    free(p);
}

HIPSHIM_API hiprtcResult hiprtcCreateProgram(hiprtcProgram *prog, const char *src,
                                             const char *name, int num_headers,
                                             const char *const *headers,
                                             const char *const *names) {
    if (!prog || !src || num_headers < 0 || (num_headers > 0 && (!headers || !names))) {
        return HIPRTC_ERROR_INVALID_INPUT;
    }
    struct _hiprtcProgram *p = calloc(1, sizeof *p);
    if (!p) return HIPRTC_ERROR_OUT_OF_MEMORY;
    p->source = copy(src);
    p->name = copy(name ? name : "default_program");
    p->log = copy("");
    /* One slot more than given: the runtime header is added when the caller has none. */
    p->header_texts = calloc((size_t)num_headers + 1, sizeof(char *));
    p->header_names = calloc((size_t)num_headers + 1, sizeof(char *));
    int ok = p->source && p->name && p->log && p->header_texts && p->header_names;
    for (int i = 0; ok && i < num_headers; ++i) {
        if (!headers[i] || !names[i]) {
            release(p);
            return HIPRTC_ERROR_INVALID_INPUT;
        }
        p->header_texts[i] = copy(headers[i]);
        p->header_names[i] = copy(names[i]);
        p->headers = i + 1;
        ok = p->header_texts[i] && p->header_names[i];
    }
    if (!ok) {
        release(p);
        return HIPRTC_ERROR_OUT_OF_MEMORY;
    }
    *prog = p;
    return HIPRTC_SUCCESS;
}

/* A growing NUL-terminated string. */
struct text {
    char *s;
    size_t len, cap;
};

static void append(struct text *t, const char *s) {
    size_t n = strlen(s);
    if (t->len + n + 1 > t->cap) {
        size_t cap = (t->len + n + 1) * 2;
        char *grown = realloc(t->s, cap);
        if (!grown) return;
        t->s = grown;
        t->cap = cap;
    }
    memcpy(t->s + t->len, s, n + 1);
    t->len += n;
}

static int starts(const char *s, const char *prefix) {
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* Options with no meaning for NVRTC or an NVIDIA GPU: the AMD target, clang's optimization level
 * (NVRTC always optimizes), AMD code generation flags (-mwavefrontsize64, -mcumode...) and clang
 * -f flags; -ffast-math is NVRTC's --use_fast_math. */
static const char *translate_option(const char *o, int *dropped) {
    *dropped = 0;
    if (strcmp(o, "-ffast-math") == 0) return "--use_fast_math";
    if (starts(o, "--offload-arch") || starts(o, "-offload-arch") ||
        starts(o, "--gpu-architecture") || starts(o, "-arch") || starts(o, "-O") ||
        starts(o, "-m") || starts(o, "-f") || starts(o, "-save-temps") ||
        starts(o, "--save-temps")) {
        *dropped = 1;
        return NULL;
    }
    return o;
}

/* The NVRTC target: sm_XY (CUBIN) or compute_XY (PTX), from $HIPSHIM_ARCH or the current
 * device, mirroring the crate's CUDA backend (CUBIN for the exact arch where this NVRTC emits
 * one, else PTX for the newest older virtual arch it has). 0 with `why` on failure. */
static int choose_target(const struct nvrtc_api *nv, char *arch, size_t len, int *cubin,
                         struct text *why) {
    const char *env = getenv("HIPSHIM_ARCH");
    int cc = 0, want_ptx = 0;
    if (env && *env) {
        if (sscanf(env, "sm_%d", &cc) != 1 && sscanf(env, "compute_%d", &cc) == 1) want_ptx = 1;
        if (cc <= 0) {
            append(why, "hipshim: HIPSHIM_ARCH must be sm_XY or compute_XY\n");
            return 0;
        }
    } else {
        hipError_t e = shim_init();
        int major = 0, minor = 0;
        CUdevice d = e == hipSuccess ? shim_cu_device(shim_current_device()) : 0;
        if (e != hipSuccess ||
            cu.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d) ||
            cu.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d)) {
            append(why, "hipshim: no CUDA device to compile for (");
            append(why, e == hipSuccess ? "cuDeviceGetAttribute failed" : shim_init_failure());
            append(why, "); set HIPSHIM_ARCH=sm_XY to compile without one\n");
            return 0;
        }
        cc = major * 10 + minor;
    }
    int can_cubin = nv->nvrtcGetCUBIN && nv->nvrtcGetCUBINSize && !want_ptx;
    int target = cc, n = 0;
    if (nv->nvrtcGetNumSupportedArchs && nv->nvrtcGetSupportedArchs &&
        nv->nvrtcGetNumSupportedArchs(&n) == NVRTC_SUCCESS && n > 0) {
        int *archs = calloc((size_t)n, sizeof(int));
        int exact = 0, older = 0;
        if (archs && nv->nvrtcGetSupportedArchs(archs) == NVRTC_SUCCESS) {
            for (int i = 0; i < n; ++i) {
                if (archs[i] == cc) exact = 1;
                if (archs[i] <= cc && archs[i] > older) older = archs[i];
            }
        }
        free(archs);
        if (!exact) can_cubin = 0;
        target = exact ? cc : older;
        if (target == 0) {
            append(why, "hipshim: this NVRTC has no target the device can run\n");
            return 0;
        }
    }
    *cubin = can_cubin;
    snprintf(arch, len, "--gpu-architecture=%s_%d", can_cubin ? "sm" : "compute", target);
    return 1;
}

static hiprtcResult result_of(nvrtcResult r) {
    return r >= 0 && r <= HIPRTC_ERROR_INTERNAL_ERROR ? r : HIPRTC_ERROR_INTERNAL_ERROR;
}

static void set_log(struct _hiprtcProgram *p, struct text *t) {
    free(p->log);
    p->log = t->s ? t->s : copy("");
    t->s = NULL;
}

/* Compiles with NVRTC; fills the program's code and log. */
static hiprtcResult compile(struct _hiprtcProgram *p, const struct nvrtc_api *nv, int n,
                            const char *const *given, struct text *log) {
    char arch[64];
    int cubin = 0;
    if (!choose_target(nv, arch, sizeof arch, &cubin, log)) return HIPRTC_ERROR_INVALID_OPTION;

    const char **opts = calloc((size_t)n + 4, sizeof(char *));
    if (!opts) return HIPRTC_ERROR_OUT_OF_MEMORY;
    int count = 0, has_std = 0;
    struct text dropped = {0};
    for (int i = 0; i < n; ++i) {
        int drop = 0;
        const char *o = translate_option(given[i], &drop);
        if (drop) {
            append(&dropped, " ");
            append(&dropped, given[i]);
            continue;
        }
        has_std |= starts(o, "-std") || starts(o, "--std");
        opts[count++] = o;
    }
    opts[count++] = arch;
    opts[count++] = "-default-device";
    opts[count++] = "--pre-include=" RUNTIME_HEADER;
    if (!has_std) opts[count++] = "--std=c++17";

    /* The caller's headers, with <hip/hip_runtime.h> (hiprtc's own runtime header, which the
     * backend stands in for with an empty one) being the prelude. */
    int headers = p->headers, has_runtime = 0;
    const char **texts = calloc((size_t)headers + 1, sizeof(char *));
    const char **names = calloc((size_t)headers + 1, sizeof(char *));
    if (!texts || !names) {
        free(opts), free(texts), free(names), free(dropped.s);
        return HIPRTC_ERROR_OUT_OF_MEMORY;
    }
    for (int i = 0; i < headers; ++i) {
        int runtime = strcmp(p->header_names[i], RUNTIME_HEADER) == 0;
        has_runtime |= runtime;
        texts[i] = runtime ? hipshim_prelude : p->header_texts[i];
        names[i] = p->header_names[i];
    }
    if (!has_runtime) {
        texts[headers] = hipshim_prelude;
        names[headers++] = RUNTIME_HEADER;
    }

    nvrtcProgram prog = NULL;
    nvrtcResult r = nv->nvrtcCreateProgram(&prog, p->source, p->name, headers, texts, names);
    if (r == NVRTC_SUCCESS) r = nv->nvrtcCompileProgram(prog, count, opts);
    size_t size = 0;
    if (prog && nv->nvrtcGetProgramLogSize(prog, &size) == NVRTC_SUCCESS && size > 1) {
        char *text = malloc(size);
        if (text && nv->nvrtcGetProgramLog(prog, text) == NVRTC_SUCCESS) append(log, text);
        free(text);
    }
    if (r == NVRTC_SUCCESS) {
        nvrtcResult (*get_size)(nvrtcProgram, size_t *) =
            cubin ? nv->nvrtcGetCUBINSize : nv->nvrtcGetPTXSize;
        nvrtcResult (*get)(nvrtcProgram, char *) = cubin ? nv->nvrtcGetCUBIN : nv->nvrtcGetPTX;
        r = get_size(prog, &size);
        free(p->code);
        p->code = r == NVRTC_SUCCESS ? malloc(size ? size : 1) : NULL;
        if (r == NVRTC_SUCCESS && !p->code) r = HIPRTC_ERROR_OUT_OF_MEMORY; /* same number */
        if (r == NVRTC_SUCCESS) r = get(prog, p->code);
        p->code_size = r == NVRTC_SUCCESS ? size : 0;
    } else {
        append(log, "hipshim: NVRTC failed: ");
        append(log, nv->nvrtcGetErrorString(r));
        append(log, "\n");
    }
    if (prog) nv->nvrtcDestroyProgram(&prog);

    int major = 0, minor = 0;
    char note[160];
    nv->nvrtcVersion(&major, &minor);
    snprintf(note, sizeof note, "hipshim: NVRTC %d.%d, %s (%s)", major, minor, arch + 19,
             cubin ? "cubin" : "ptx");
    append(log, note);
    if (dropped.s) {
        append(log, "; AMD-only options ignored:");
        append(log, dropped.s);
    }
    append(log, "\n");
    free(opts), free(texts), free(names), free(dropped.s);
    return result_of(r);
}

HIPSHIM_API hiprtcResult hiprtcCompileProgram(hiprtcProgram prog, int n,
                                              const char *const *options) {
    if (!prog) return HIPRTC_ERROR_INVALID_PROGRAM;
    if (n < 0 || (n > 0 && !options)) return HIPRTC_ERROR_INVALID_INPUT;
    for (int i = 0; i < n; ++i) {
        if (!options[i]) return HIPRTC_ERROR_INVALID_INPUT;
    }
    struct text log = {0};
    const char *why = NULL;
    const struct nvrtc_api *nv = shim_nvrtc(&why);
    hiprtcResult r;
    if (!nv) {
        append(&log, "hipshim: ");
        append(&log, why);
        append(&log, "\n");
        r = HIPRTC_ERROR_INTERNAL_ERROR;
    } else {
        r = compile(prog, nv, n, options, &log);
    }
    set_log(prog, &log);
    return r;
}

HIPSHIM_API hiprtcResult hiprtcGetProgramLogSize(hiprtcProgram prog, size_t *size) {
    if (!prog) return HIPRTC_ERROR_INVALID_PROGRAM;
    if (!size) return HIPRTC_ERROR_INVALID_INPUT;
    *size = strlen(prog->log) + 1;
    return HIPRTC_SUCCESS;
}

HIPSHIM_API hiprtcResult hiprtcGetProgramLog(hiprtcProgram prog, char *log) {
    if (!prog) return HIPRTC_ERROR_INVALID_PROGRAM;
    if (!log) return HIPRTC_ERROR_INVALID_INPUT;
    memcpy(log, prog->log, strlen(prog->log) + 1);
    return HIPRTC_SUCCESS;
}

HIPSHIM_API hiprtcResult hiprtcGetCodeSize(hiprtcProgram prog, size_t *size) {
    if (!prog || !prog->code) return HIPRTC_ERROR_INVALID_PROGRAM;
    if (!size) return HIPRTC_ERROR_INVALID_INPUT;
    *size = prog->code_size;
    return HIPRTC_SUCCESS;
}

HIPSHIM_API hiprtcResult hiprtcGetCode(hiprtcProgram prog, char *code) {
    if (!prog || !prog->code) return HIPRTC_ERROR_INVALID_PROGRAM;
    if (!code) return HIPRTC_ERROR_INVALID_INPUT;
    memcpy(code, prog->code, prog->code_size);
    return HIPRTC_SUCCESS;
}

HIPSHIM_API hiprtcResult hiprtcDestroyProgram(hiprtcProgram *prog) {
    if (!prog || !*prog) return HIPRTC_ERROR_INVALID_PROGRAM;
    release(*prog);
    *prog = NULL;
    return HIPRTC_SUCCESS;
}

/* The version of the NVRTC that compiles (what decides the code objects, so what the crate's
 * kernel-cache key should see), not a HIP version. */
HIPSHIM_API hiprtcResult hiprtcVersion(int *major, int *minor) {
    if (!major || !minor) return HIPRTC_ERROR_INVALID_INPUT;
    *major = *minor = 0;
    const char *why = NULL;
    const struct nvrtc_api *nv = shim_nvrtc(&why);
    if (!nv) return HIPRTC_ERROR_INTERNAL_ERROR;
    return result_of(nv->nvrtcVersion(major, minor));
}

HIPSHIM_API const char *hiprtcGetErrorString(hiprtcResult result) {
    static const char *const names[] = {
        "HIPRTC_SUCCESS",
        "HIPRTC_ERROR_OUT_OF_MEMORY",
        "HIPRTC_ERROR_PROGRAM_CREATION_FAILURE",
        "HIPRTC_ERROR_INVALID_INPUT",
        "HIPRTC_ERROR_INVALID_PROGRAM",
        "HIPRTC_ERROR_INVALID_OPTION",
        "HIPRTC_ERROR_COMPILATION",
        "HIPRTC_ERROR_BUILTIN_OPERATION_FAILURE",
        "HIPRTC_ERROR_NO_NAME_EXPRESSIONS_AFTER_COMPILATION",
        "HIPRTC_ERROR_NO_LOWERED_NAMES_BEFORE_COMPILATION",
        "HIPRTC_ERROR_NAME_EXPRESSION_NOT_VALID",
        "HIPRTC_ERROR_INTERNAL_ERROR",
    };
    if (result >= 0 && result <= HIPRTC_ERROR_INTERNAL_ERROR) return names[result];
    if (result == HIPRTC_ERROR_LINKING) return "HIPRTC_ERROR_LINKING";
    return "Invalid HIPRTC error code";
}
