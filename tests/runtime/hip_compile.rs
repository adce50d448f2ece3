//! HIP without an AMD GPU: the op set compiles with hiprtc for the AMD targets we ship for, each
//! code object is an AMDGPU ELF exporting every entry point of docs/kernel-abi.md, compile errors
//! carry the log, a runtime with no device is reported as available with zero devices, and the
//! HIP sources compile with NVRTC behind the HIP-to-CUDA prelude.

use rnn::{BackendKind, Error, GpuManager};

use crate::support;

/// gfx908 (MI100) and gfx90a (MI200) are wave64 CDNA; gfx1030 (RX 6800) is wave32 RDNA.
const TARGETS: [&str; 3] = ["gfx908", "gfx90a", "gfx1030"];

/// `EM_AMDGPU` in the ELF header's `e_machine`.
const EM_AMDGPU: u16 = 224;
/// `EM_CUDA`: a CUBIN.
pub(crate) const EM_CUDA: u16 = 190;

/// True when hiprtc is usable; otherwise prints SKIP (or panics when `RNN_REQUIRE_BACKENDS`
/// names `hiprtc`).
fn hiprtc_present(test: &str) -> bool {
    match rnn::backend::hip::hiprtc_version() {
        Ok(_) => true,
        Err(e) => skip_unless_required(test, &e.to_string()),
    }
}

/// [`hiprtc_present`], and the hiprtc is AMD's: it turns a trivial kernel into an AMDGPU code
/// object. The `tests/hip-shim` fixture (`RNN_HIP_LIBRARY`) is a hiprtc that emits CUBINs; the
/// tests of AMD code objects SKIP under it (they fail when `hiprtc` is required).
fn amd_hiprtc(test: &str) -> bool {
    static AMD: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    if !hiprtc_present(test) {
        return false;
    }
    let amd = AMD.get_or_init(|| {
        let probe = "extern \"C\" __global__ void probe() {}";
        match rnn::backend::hip::compile_for_arch(probe, "gfx90a") {
            Ok(b) if is_elf(amdgpu_elf(&b)) && u16_at(amdgpu_elf(&b), 18) == EM_AMDGPU => Ok(()),
            Ok(_) => Err("the hiprtc loaded does not emit AMDGPU code objects".to_string()),
            // A real hiprtc that fails here fails the test itself, with the log.
            Err(_) => Ok(()),
        }
    });
    match amd {
        Ok(()) => true,
        Err(why) => skip_unless_required(test, why),
    }
}

fn skip_unless_required(test: &str, why: &str) -> bool {
    if support::required().iter().any(|r| r == "hiprtc") {
        panic!("{test}: hiprtc required (RNN_REQUIRE_BACKENDS) but unusable: {why}");
    }
    println!("SKIP {test}: {why}");
    false
}

fn is_elf(b: &[u8]) -> bool {
    b.len() > 64 && b.starts_with(b"\x7fELF")
}

/// Entry points listed in the kernel table of docs/kernel-abi.md.
pub(crate) fn abi_entries() -> Vec<String> {
    // Embedded: the test binaries also run on machines where this checkout's path does not exist.
    let doc = include_str!("../../docs/kernel-abi.md");
    let table = doc
        .split("## Kernels")
        .nth(1)
        .expect("kernel-abi.md has a '## Kernels' section")
        // The sections after it (CUDA-only kernels) are not in every dialect.
        .split("\n## ")
        .next()
        .unwrap_or_default();
    let entries: Vec<String> = table
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split('`').next())
        .map(str::to_string)
        .collect();
    assert!(entries.len() >= 20, "too few entries parsed: {entries:?}");
    entries
}

pub(crate) fn u16_at(b: &[u8], off: usize) -> u16 {
    u16::from_le_bytes(b[off..off + 2].try_into().unwrap())
}
pub(crate) fn u32_at(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes(b[off..off + 4].try_into().unwrap())
}
pub(crate) fn u64_at(b: &[u8], off: usize) -> u64 {
    u64::from_le_bytes(b[off..off + 8].try_into().unwrap())
}

const BUNDLE_MAGIC: &[u8] = b"__CLANG_OFFLOAD_BUNDLE__";

/// The AMDGPU ELF inside `binary`: the binary itself, or the `amdgcn` entry of an uncompressed
/// clang offload bundle (magic, entry count, then per entry offset, size, triple length, triple).
fn amdgpu_elf(binary: &[u8]) -> &[u8] {
    if !binary.starts_with(BUNDLE_MAGIC) {
        return binary;
    }
    let n = u64_at(binary, BUNDLE_MAGIC.len()) as usize;
    let mut pos = BUNDLE_MAGIC.len() + 8;
    for _ in 0..n {
        let (off, size, tlen) = (
            u64_at(binary, pos) as usize,
            u64_at(binary, pos + 8) as usize,
            u64_at(binary, pos + 16) as usize,
        );
        let triple = String::from_utf8_lossy(&binary[pos + 24..pos + 24 + tlen]);
        pos += 24 + tlen;
        if triple.contains("amdgcn") && size > 0 {
            return &binary[off..off + size];
        }
    }
    panic!("offload bundle without an amdgcn entry");
}

/// `binary` is a CUBIN (the HIP op set compiled by NVRTC) defining every ABI entry point.
pub(crate) fn assert_cubin_with_every_entry(binary: &[u8]) {
    let (machine, symbols) = elf_symbols(binary);
    assert_eq!(machine, EM_CUDA, "not a CUBIN");
    let missing: Vec<String> = abi_entries()
        .into_iter()
        .filter(|e| !symbols.contains(e))
        .collect();
    assert!(
        missing.is_empty(),
        "entry points missing from the CUBIN: {missing:?}"
    );
}

/// Names in the ELF64 symbol tables (`SHT_SYMTAB` and `SHT_DYNSYM`), with the `e_machine`.
pub(crate) fn elf_symbols(elf: &[u8]) -> (u16, Vec<String>) {
    assert!(elf.len() > 64, "code object too short: {} bytes", elf.len());
    assert_eq!(&elf[..4], b"\x7fELF", "not an ELF file");
    assert_eq!(elf[4], 2, "not ELF64");
    assert_eq!(elf[5], 1, "not little-endian");
    let machine = u16_at(elf, 18);
    let shoff = u64_at(elf, 0x28) as usize;
    let shentsize = u16_at(elf, 0x3a) as usize;
    let shnum = u16_at(elf, 0x3c) as usize;
    let section = |i: usize| -> (u32, usize, usize, u32) {
        let h = shoff + i * shentsize;
        (
            u32_at(elf, h + 4),
            u64_at(elf, h + 0x18) as usize,
            u64_at(elf, h + 0x20) as usize,
            u32_at(elf, h + 0x28),
        )
    };
    let mut names = Vec::new();
    for i in 0..shnum {
        let (kind, off, size, link) = section(i);
        if kind != 2 && kind != 11 {
            continue;
        }
        let (_, str_off, str_size, _) = section(link as usize);
        let strtab = &elf[str_off..str_off + str_size];
        for sym in elf[off..off + size].chunks_exact(24) {
            let name_off = u32_at(sym, 0) as usize;
            if name_off == 0 || name_off >= strtab.len() {
                continue;
            }
            let end = strtab[name_off..]
                .iter()
                .position(|&c| c == 0)
                .map_or(strtab.len(), |p| name_off + p);
            names.push(String::from_utf8_lossy(&strtab[name_off..end]).into_owned());
        }
    }
    (machine, names)
}

#[test]
fn hip_op_set_compiles_for_amd_targets_with_every_entry_point() {
    let test = "hip_op_set_compiles_for_amd_targets_with_every_entry_point";
    if !amd_hiprtc(test) {
        return;
    }
    let source = rnn::backend::hip::op_set_source();
    let entries = abi_entries();
    for arch in TARGETS {
        let binary = match rnn::backend::hip::compile_for_arch(&source, arch) {
            Ok(b) => b,
            Err(e) => panic!("{arch}: op set failed to compile:\n{e}"),
        };
        let elf = amdgpu_elf(&binary);
        let (machine, symbols) = elf_symbols(elf);
        assert_eq!(machine, EM_AMDGPU, "{arch}: e_machine");
        let missing: Vec<&String> = entries.iter().filter(|e| !symbols.contains(e)).collect();
        assert!(
            missing.is_empty(),
            "{arch}: entry points missing from the code object: {missing:?}"
        );
        println!(
            "{arch}: {} bytes, {} ABI entry points present",
            binary.len(),
            entries.len()
        );
    }
}

/// Each module of the HIP op set compiles alone for gfx90a (a context compiles them one by one)
/// with the entries its table lists.
#[test]
fn hip_op_set_modules_compile_alone_with_their_entries() {
    let test = "hip_op_set_modules_compile_alone_with_their_entries";
    if !amd_hiprtc(test) {
        return;
    }
    let modules = rnn::backend::hip::op_set_modules();
    let built: Vec<_> = std::thread::scope(|s| {
        let jobs: Vec<_> = modules
            .iter()
            .map(|m| s.spawn(move || (m, rnn::backend::hip::compile_for_arch(&m.source, "gfx90a"))))
            .collect();
        jobs.into_iter().map(|j| j.join().unwrap()).collect()
    });
    for (m, binary) in built {
        let binary = binary.unwrap_or_else(|e| panic!("module {}: {e}", m.name));
        let (_, symbols) = elf_symbols(amdgpu_elf(&binary));
        let entries = m
            .entries
            .as_deref()
            .expect("a family module lists its entries");
        // The tensor-core and warpgroup GEMMs and the epilogues of cuBLAS's bf16/f16 products
        // are CUDA-only: not in the HIP build.
        let cuda_only = [
            "sgemm_tc",
            "sgemm_wg",
            "hgemm_tc",
            "hgemm_lo_tc",
            "hgemm_epilogue",
        ];
        for e in entries
            .iter()
            .filter(|e| !cuda_only.iter().any(|p| e.starts_with(p)))
        {
            assert!(
                symbols.iter().any(|s| s == e),
                "module {}: no entry {e}",
                m.name
            );
        }
        if m.name == "tier0" {
            for (e, copied) in crate::support::TIER0_SAMPLE {
                assert_eq!(symbols.iter().any(|s| s == e), copied, "tier0: {e}");
            }
        }
    }
}

#[test]
fn hip_broken_kernel_is_a_compile_error_with_the_log() {
    let test = "hip_broken_kernel_is_a_compile_error_with_the_log";
    if !hiprtc_present(test) {
        return;
    }
    let device = support::broken_kernel_is_a_compile_error(|src| {
        rnn::backend::hip::compile_for_arch(src, "gfx90a")
    });
    assert!(device.contains("gfx90a"), "{device}");
}

#[test]
fn hip_runtime_without_device_is_available_with_zero_devices() {
    let test = "hip_runtime_without_device_is_available_with_zero_devices";
    if !hiprtc_present(test) {
        return;
    }
    let m = GpuManager::with_backends(&[BackendKind::Hip]);
    let status = m.backend(BackendKind::Hip).clone();
    let devices: Vec<_> = m
        .devices()
        .iter()
        .filter(|d| d.backend == BackendKind::Hip)
        .collect();
    assert_eq!(status.devices, devices.len());
    if devices.is_empty() {
        // The runtime loaded (hiprtc resolved through it), so no device is not "unavailable".
        assert!(status.available, "runtime present but reported: {status}");
        assert_eq!(status.devices, 0);
        let err = m
            .create_context(rnn::DeviceId::Hip(0))
            .expect_err("no HIP device 0 here");
        assert!(matches!(err, Error::UnknownDevice { .. }), "{err}");
    } else {
        for d in devices {
            assert!(d.arch.starts_with("gfx"), "{d}");
            assert!(d.memory > 0 && d.compute_units > 0, "{d}");
        }
    }
}

#[test]
fn hip_wave_width_is_64_on_cdna_and_32_on_rdna() {
    let test = "hip_wave_width_is_64_on_cdna_and_32_on_rdna";
    if !amd_hiprtc(test) {
        return;
    }
    // The block reductions index shared memory by WARP_SIZE; it must be the hardware width.
    for (arch, width) in [("gfx90a", 64), ("gfx1030", 32)] {
        let src = format!(
            "{}\nstatic_assert(WARP_SIZE == {width}, \"wave width\");\n",
            rnn::backend::hip::op_set_source()
        );
        if let Err(e) = rnn::backend::hip::compile_for_arch(&src, arch) {
            panic!("{arch}: WARP_SIZE is not {width}:\n{e}");
        }
    }
}

#[cfg(feature = "cuda")]
#[test]
fn hip_sources_compile_with_nvrtc_behind_the_prelude() {
    let test = "hip_sources_compile_with_nvrtc_behind_the_prelude";
    let source = rnn::backend::hip::op_set_source_for_nvrtc();
    let cubin = match rnn::backend::cuda::compile_for_arch(&source, "sm_90") {
        Ok(c) => c,
        Err(e @ Error::BackendUnavailable { .. }) => {
            if support::required().iter().any(|r| r == "nvrtc") {
                panic!("{test}: NVRTC required (RNN_REQUIRE_BACKENDS) but unusable: {e}");
            }
            println!("SKIP {test}: {e}");
            return;
        }
        Err(e) => panic!("NVRTC rejected the HIP sources:\n{e}"),
    };
    assert_cubin_with_every_entry(&cubin);
    // A context in hip_sources_via_nvrtc mode also pre-includes the prelude as
    // <hip/hip_runtime.h>; its include guard keeps the inlined copy from clashing.
    if let Err(e) = rnn::backend::cuda::compile_hip_for_arch(&source, "sm_90") {
        panic!("the op set does not compile the way a HIP-on-CUDA context builds it:\n{e}");
    }
}

/// A user's HIP kernel as a HIP programmer writes it: the runtime header, the two-argument
/// wavefront shuffle and a wave vote, which NVRTC only accepts through the prelude.
const USER_HIP_KERNEL: &str = r#"#include <hip/hip_runtime.h>
extern "C" __global__ void user_wave_sum(const float* x, unsigned long long xo, float* out,
                                         unsigned long long oo, unsigned n) {
    extern __shared__ float scratch[];
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = i < n ? x[xo + i] : 0.0f;
    const unsigned long long active = __ballot(i < n);
    v = active != 0ull ? v : 0.0f;
    for (int d = warpSize / 2; d > 0; d >>= 1) v += __shfl_xor(v, d);
    scratch[threadIdx.x] = v;
    __syncthreads();
    if (threadIdx.x == 0) out[oo + blockIdx.x] = scratch[0];
}
"#;

#[cfg(feature = "cuda")]
/// NVRTC of a CUDA context in `hip_sources_via_nvrtc` mode, or SKIP (fail when
/// `RNN_REQUIRE_BACKENDS` names nvrtc).
fn nvrtc_hip(test: &str, source: &str) -> Option<rnn::Result<Vec<u8>>> {
    match rnn::backend::cuda::compile_hip_for_arch(source, "sm_90") {
        Err(e @ Error::BackendUnavailable { .. }) => {
            if support::required().iter().any(|r| r == "nvrtc") {
                panic!("{test}: NVRTC required (RNN_REQUIRE_BACKENDS) but unusable: {e}");
            }
            println!("SKIP {test}: {e}");
            None
        }
        r => Some(r),
    }
}

#[cfg(feature = "cuda")]
#[test]
fn hip_user_kernel_compiles_with_nvrtc_through_the_runtime_header() {
    let test = "hip_user_kernel_compiles_with_nvrtc_through_the_runtime_header";
    let Some(r) = nvrtc_hip(test, USER_HIP_KERNEL) else {
        return;
    };
    let cubin = r.unwrap_or_else(|e| panic!("NVRTC rejected a HIP user kernel:\n{e}"));
    let (machine, symbols) = elf_symbols(&cubin);
    assert_eq!(machine, EM_CUDA, "not a CUBIN");
    assert!(
        symbols.iter().any(|s| s == "user_wave_sum"),
        "entry point missing: {symbols:?}"
    );
    // hiprtc pre-includes the runtime, so HIP sources often leave the include out: that
    // compiles too.
    let bare = USER_HIP_KERNEL.replace("#include <hip/hip_runtime.h>\n", "");
    let r = nvrtc_hip(test, &bare).expect("NVRTC was present a moment ago");
    assert!(r.is_ok(), "HIP source without the include: {r:?}");
    // Without the prelude header, plain NVRTC cannot even find the include.
    assert!(matches!(
        rnn::backend::cuda::compile_for_arch(USER_HIP_KERNEL, "sm_90"),
        Err(Error::Compile { .. })
    ));
}

#[cfg(feature = "cuda")]
#[test]
fn hip_user_kernel_error_under_nvrtc_is_a_compile_error_with_the_log() {
    let test = "hip_user_kernel_error_under_nvrtc_is_a_compile_error_with_the_log";
    let broken = USER_HIP_KERNEL.replace("float v =", "float v = not_declared_q9 +");
    let Some(r) = nvrtc_hip(test, &broken) else {
        return;
    };
    match r {
        Err(Error::Compile { log, .. }) => {
            assert!(
                log.contains("not_declared_q9"),
                "log lacks the error:\n{log}"
            )
        }
        Err(e) => panic!("expected Error::Compile, got {e}"),
        Ok(_) => panic!("a broken HIP kernel compiled"),
    }
}

#[test]
fn hip_user_kernel_compiles_with_hiprtc() {
    let test = "hip_user_kernel_compiles_with_hiprtc";
    if !amd_hiprtc(test) {
        return;
    }
    let binary = rnn::backend::hip::compile_for_arch(USER_HIP_KERNEL, "gfx90a")
        .unwrap_or_else(|e| panic!("hiprtc rejected the HIP user kernel:\n{e}"));
    let (machine, symbols) = elf_symbols(amdgpu_elf(&binary));
    assert_eq!(machine, EM_AMDGPU);
    assert!(
        symbols.iter().any(|s| s == "user_wave_sum"),
        "entry point missing: {symbols:?}"
    );
}
