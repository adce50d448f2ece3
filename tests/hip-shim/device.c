/* HIP device discovery and facts over the CUDA driver: init, count, name, attributes, memory
 * size, versions, hipDeviceProp_t in the ROCm 5 and ROCm 6 layouts, the current device. */
#include <stdio.h>
#include <string.h>

#include "shim.h"

/* hipSuccess, or init's failure (with its cause kept for hipGetErrorString). */
static hipError_t ready(void) {
    hipError_t e = shim_init();
    return e == hipSuccess ? e : shim_fail(e, shim_init_failure());
}

static hipError_t check_ordinal(int ordinal) {
    hipError_t e = ready();
    if (e != hipSuccess) return e;
    if (ordinal < 0 || ordinal >= shim_device_count()) {
        return shim_fail(hipErrorInvalidDevice, "device ordinal out of range");
    }
    return hipSuccess;
}

static int cu_attr(int attr, int ordinal, int *value) {
    return cu.cuDeviceGetAttribute(value, attr, shim_cu_device(ordinal)) == CUDA_SUCCESS;
}

HIPSHIM_API hipError_t hipInit(unsigned int flags) {
    if (flags != 0) return shim_fail(hipErrorInvalidValue, "hipInit: flags must be 0");
    return ready();
}

/* Without a device ROCm answers hipErrorNoDevice with a count of 0 (hipInit's answer is
 * hipErrorInvalidDevice), and so does the shim. */
HIPSHIM_API hipError_t hipGetDeviceCount(int *count) {
    if (!count) return shim_fail(hipErrorInvalidValue, "hipGetDeviceCount: null count");
    *count = shim_device_count();
    if (*count == 0) return shim_fail(hipErrorNoDevice, shim_init_failure());
    return hipSuccess;
}

HIPSHIM_API hipError_t hipSetDevice(int ordinal) {
    hipError_t e = check_ordinal(ordinal);
    if (e != hipSuccess) return e;
    shim_set_current_device(ordinal);
    return shim_bind_device(ordinal);
}

/* The CUDA device's name, marked so that no log or listing can take it for an AMD GPU. */
static hipError_t device_name(int ordinal, char *out, size_t len) {
    char name[200];
    CUresult r = cu.cuDeviceGetName(name, (int)sizeof name, shim_cu_device(ordinal));
    if (r != CUDA_SUCCESS) return shim_map(r, "cuDeviceGetName");
    snprintf(out, len, "%s (hipshim over CUDA)", name);
    return hipSuccess;
}

HIPSHIM_API hipError_t hipDeviceGetName(char *name, int len, hipDevice_t ordinal) {
    hipError_t e = check_ordinal(ordinal);
    if (e != hipSuccess) return e;
    if (!name || len <= 0) return shim_fail(hipErrorInvalidValue, "hipDeviceGetName: no buffer");
    return device_name(ordinal, name, (size_t)len);
}

HIPSHIM_API hipError_t hipDeviceTotalMem(size_t *bytes, hipDevice_t ordinal) {
    hipError_t e = check_ordinal(ordinal);
    if (e != hipSuccess) return e;
    if (!bytes) return shim_fail(hipErrorInvalidValue, "hipDeviceTotalMem: null bytes");
    return shim_map(cu.cuDeviceTotalMem_v2(bytes, shim_cu_device(ordinal)), "cuDeviceTotalMem");
}

/* HIP attribute -> CUDA attribute, for those with a CUDA counterpart of the same meaning. */
static const int attribute_map[][2] = {
    {hipDeviceAttributeEccEnabled, CU_DEVICE_ATTRIBUTE_ECC_ENABLED},
    {hipDeviceAttributeAsyncEngineCount, CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT},
    {hipDeviceAttributeCanMapHostMemory, CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY},
    {hipDeviceAttributeClockRate, CU_DEVICE_ATTRIBUTE_CLOCK_RATE},
    {hipDeviceAttributeComputeMode, CU_DEVICE_ATTRIBUTE_COMPUTE_MODE},
    {hipDeviceAttributeConcurrentKernels, CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS},
    {hipDeviceAttributeCooperativeLaunch, CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH},
    {hipDeviceAttributeCooperativeMultiDeviceLaunch,
     CU_DEVICE_ATTRIBUTE_COOPERATIVE_MULTI_DEVICE_LAUNCH},
    {hipDeviceAttributeIntegrated, CU_DEVICE_ATTRIBUTE_INTEGRATED},
    {hipDeviceAttributeIsMultiGpuBoard, CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD},
    {hipDeviceAttributeKernelExecTimeout, CU_DEVICE_ATTRIBUTE_KERNEL_EXEC_TIMEOUT},
    {hipDeviceAttributeL2CacheSize, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE},
    {hipDeviceAttributeManagedMemory, CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY},
    {hipDeviceAttributeMaxBlocksPerMultiProcessor, CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR},
    {hipDeviceAttributeMaxBlockDimX, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X},
    {hipDeviceAttributeMaxBlockDimY, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y},
    {hipDeviceAttributeMaxBlockDimZ, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z},
    {hipDeviceAttributeMaxGridDimX, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X},
    {hipDeviceAttributeMaxGridDimY, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y},
    {hipDeviceAttributeMaxGridDimZ, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z},
    {hipDeviceAttributeMaxThreadsPerBlock, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK},
    {hipDeviceAttributeMaxThreadsPerMultiProcessor,
     CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR},
    {hipDeviceAttributeMaxPitch, CU_DEVICE_ATTRIBUTE_MAX_PITCH},
    {hipDeviceAttributeMemoryBusWidth, CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH},
    {hipDeviceAttributeMemoryClockRate, CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE},
    {hipDeviceAttributeMultiGpuBoardGroupID, CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD_GROUP_ID},
    {hipDeviceAttributeMultiprocessorCount, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT},
    {hipDeviceAttributePciBusId, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID},
    {hipDeviceAttributePciDeviceId, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID},
    {hipDeviceAttributePciDomainId, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID},
    {hipDeviceAttributeMaxRegistersPerBlock, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK},
    {hipDeviceAttributeMaxRegistersPerMultiprocessor,
     CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR},
    {hipDeviceAttributeMaxSharedMemoryPerBlock, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK},
    {hipDeviceAttributeSharedMemPerBlockOptin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN},
    {hipDeviceAttributeSharedMemPerMultiprocessor,
     CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR},
    {hipDeviceAttributeTextureAlignment, CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT},
    {hipDeviceAttributeTotalConstantMemory, CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY},
    {hipDeviceAttributeUnifiedAddressing, CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING},
    {hipDeviceAttributeWarpSize, CU_DEVICE_ATTRIBUTE_WARP_SIZE},
};

HIPSHIM_API hipError_t hipDeviceGetAttribute(int *value, int attr, int ordinal) {
    hipError_t e = check_ordinal(ordinal);
    if (e != hipSuccess) return e;
    if (!value) return shim_fail(hipErrorInvalidValue, "hipDeviceGetAttribute: null value");
    /* gfx90a's compute capability as ROCm reports it, consistent with gcnArchName. */
    if (attr == hipDeviceAttributeComputeCapabilityMajor) return *value = 9, hipSuccess;
    if (attr == hipDeviceAttributeComputeCapabilityMinor) return *value = 0, hipSuccess;
    for (size_t i = 0; i < sizeof attribute_map / sizeof attribute_map[0]; ++i) {
        if (attribute_map[i][0] == attr) {
            return shim_map(cu.cuDeviceGetAttribute(value, attribute_map[i][1],
                                                    shim_cu_device(ordinal)),
                            "cuDeviceGetAttribute");
        }
    }
    return shim_fail(hipErrorInvalidValue, "attribute not provided by hipshim");
}

/* HIP packs versions as major * 10000000 + minor * 100000 + patch. */
HIPSHIM_API hipError_t hipRuntimeGetVersion(int *version) {
    if (!version) return shim_fail(hipErrorInvalidValue, "hipRuntimeGetVersion: null");
    *version = HIPSHIM_ROCM_MAJOR == 6 ? 60200000 : 50700000;
    return hipSuccess;
}

/* The CUDA driver's version (CUDA packs major * 1000 + minor * 10), in HIP's packing: the
 * "driver" of this runtime is the CUDA driver, and reporting it says so. */
HIPSHIM_API hipError_t hipDriverGetVersion(int *version) {
    hipError_t e = ready();
    if (e != hipSuccess) return e;
    if (!version) return shim_fail(hipErrorInvalidValue, "hipDriverGetVersion: null");
    int v = 0;
    e = shim_map(cu.cuDriverGetVersion(&v), "cuDriverGetVersion");
    if (e == hipSuccess) *version = v / 1000 * 10000000 + (v % 1000) / 10 * 100000;
    return e;
}

/* The facts both hipDeviceProp_t layouts share. */
struct facts {
    char name[256];
    size_t total;
    int shared_per_block, regs_per_block, warp, threads_per_block, block[3], grid[3], clock,
        mem_clock, bus_width, const_mem, sms, l2, threads_per_sm, concurrent, pci_domain, pci_bus,
        pci_device, shared_per_sm, integrated, cooperative, ecc, shared_optin, regs_per_sm;
};

static hipError_t read_facts(int ordinal, struct facts *f) {
    hipError_t e = check_ordinal(ordinal);
    if (e != hipSuccess) return e;
    memset(f, 0, sizeof *f);
    e = device_name(ordinal, f->name, sizeof f->name);
    if (e != hipSuccess) return e;
    e = shim_map(cu.cuDeviceTotalMem_v2(&f->total, shim_cu_device(ordinal)), "cuDeviceTotalMem");
    if (e != hipSuccess) return e;
    const struct {
        int attr;
        int *out;
    } reads[] = {
        {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, &f->shared_per_block},
        {CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK, &f->regs_per_block},
        {CU_DEVICE_ATTRIBUTE_WARP_SIZE, &f->warp},
        {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, &f->threads_per_block},
        {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, &f->block[0]},
        {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y, &f->block[1]},
        {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z, &f->block[2]},
        {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, &f->grid[0]},
        {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y, &f->grid[1]},
        {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z, &f->grid[2]},
        {CU_DEVICE_ATTRIBUTE_CLOCK_RATE, &f->clock},
        {CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, &f->mem_clock},
        {CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, &f->bus_width},
        {CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY, &f->const_mem},
        {CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, &f->sms},
        {CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, &f->l2},
        {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, &f->threads_per_sm},
        {CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS, &f->concurrent},
        {CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, &f->pci_domain},
        {CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, &f->pci_bus},
        {CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, &f->pci_device},
        {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, &f->shared_per_sm},
        {CU_DEVICE_ATTRIBUTE_INTEGRATED, &f->integrated},
        {CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH, &f->cooperative},
        {CU_DEVICE_ATTRIBUTE_ECC_ENABLED, &f->ecc},
        {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, &f->shared_optin},
        {CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR, &f->regs_per_sm},
    };
    for (size_t i = 0; i < sizeof reads / sizeof reads[0]; ++i) {
        /* An attribute this driver does not know stays 0, as ROCm leaves unknown fields. */
        cu_attr(reads[i].attr, ordinal, reads[i].out);
    }
    return hipSuccess;
}

/* Both layouts name their fields alike; this fills the shared ones of either. */
#define HIPSHIM_FILL_COMMON(p, f)                                                             \
    do {                                                                                      \
        memcpy((p)->name, (f).name, sizeof (p)->name);                                        \
        (p)->totalGlobalMem = (f).total;                                                      \
        (p)->sharedMemPerBlock = (size_t)(f).shared_per_block;                                \
        (p)->regsPerBlock = (f).regs_per_block;                                               \
        (p)->warpSize = (f).warp;                                                             \
        (p)->maxThreadsPerBlock = (f).threads_per_block;                                      \
        memcpy((p)->maxThreadsDim, (f).block, sizeof (f).block);                              \
        memcpy((p)->maxGridSize, (f).grid, sizeof (f).grid);                                  \
        (p)->clockRate = (f).clock;                                                           \
        (p)->memoryClockRate = (f).mem_clock;                                                 \
        (p)->memoryBusWidth = (f).bus_width;                                                  \
        (p)->totalConstMem = (size_t)(f).const_mem;                                           \
        (p)->major = 9;                                                                       \
        (p)->minor = 0;                                                                       \
        (p)->multiProcessorCount = (f).sms;                                                   \
        (p)->l2CacheSize = (f).l2;                                                            \
        (p)->maxThreadsPerMultiProcessor = (f).threads_per_sm;                                \
        (p)->clockInstructionRate = (f).clock;                                                \
        (p)->concurrentKernels = (f).concurrent;                                              \
        (p)->pciDomainID = (f).pci_domain;                                                    \
        (p)->pciBusID = (f).pci_bus;                                                          \
        (p)->pciDeviceID = (f).pci_device;                                                    \
        (p)->maxSharedMemoryPerMultiProcessor = (size_t)(f).shared_per_sm;                    \
        (p)->integrated = (f).integrated;                                                     \
        (p)->cooperativeLaunch = (f).cooperative;                                             \
        (p)->ECCEnabled = (f).ecc;                                                            \
        snprintf((p)->gcnArchName, sizeof (p)->gcnArchName, "%s", HIPSHIM_GCN_ARCH_NAME);     \
    } while (0)

/* What both property layouts start with: a set `prop` (else `null_prop`, the error's text), the
 * device's facts in `f`, and the `size` bytes of `prop` zeroed. */
static hipError_t props_start(void *prop, size_t size, int ordinal, const char *null_prop,
                              struct facts *f) {
    if (!prop) return shim_fail(hipErrorInvalidValue, null_prop);
    hipError_t e = read_facts(ordinal, f);
    if (e == hipSuccess) memset(prop, 0, size);
    return e;
}

/* The pre-6 layout. ROCm 6 still exports this symbol for binaries built against ROCm 5. */
HIPSHIM_API hipError_t hipGetDeviceProperties(hipDeviceProp_tR0000 *prop, int ordinal) {
    struct facts f;
    hipError_t e = props_start(prop, sizeof *prop, ordinal,
                                "hipGetDeviceProperties: null prop", &f);
    if (e != hipSuccess) return e;
    HIPSHIM_FILL_COMMON(prop, f);
    prop->gcnArch = HIPSHIM_GCN_ARCH;
    return hipSuccess;
}

#if HIPSHIM_ROCM_MAJOR >= 6
HIPSHIM_API hipError_t hipGetDevicePropertiesR0600(hipDeviceProp_tR0600 *prop, int ordinal) {
    struct facts f;
    hipError_t e = props_start(prop, sizeof *prop, ordinal,
                                "hipGetDevicePropertiesR0600: null prop", &f);
    if (e != hipSuccess) return e;
    HIPSHIM_FILL_COMMON(prop, f);
    prop->sharedMemPerBlockOptin = (size_t)f.shared_optin;
    prop->sharedMemPerMultiprocessor = (size_t)f.shared_per_sm;
    prop->regsPerMultiprocessor = f.regs_per_sm;
    return hipSuccess;
}
#endif
