//! CUDA without a GPU: the whole op set compiles with NVRTC to CUBINs for sm_80 and sm_90, every
//! entry point of docs/kernel-abi.md is in each CUBIN's symbol table, and a broken kernel is a
//! compile error carrying NVRTC's log.

use rnn::backend::cuda::{compile_for_arch, op_set_source};
use rnn::{BackendKind, Error, GpuManager};

use crate::support;

/// NVRTC is usable here, or the test should SKIP (fail when `RNN_REQUIRE_BACKENDS` names nvrtc).
pub(crate) fn nvrtc_or_skip(test: &str) -> bool {
    match compile_for_arch("extern \"C\" __global__ void probe_kernel() {}", "sm_80") {
        Ok(_) => true,
        Err(Error::BackendUnavailable { reason, .. }) => {
            if support::required().iter().any(|r| r == "nvrtc") {
                panic!("{test}: NVRTC required (RNN_REQUIRE_BACKENDS) but missing: {reason}");
            }
            println!("SKIP {test}: {reason}");
            false
        }
        Err(e) => panic!("{test}: NVRTC present but a trivial kernel failed: {e}"),
    }
}

/// Section of docs/kernel-abi.md whose entries only sm_90a op sets have.
const HOPPER_SECTION: &str = "## Hopper-only kernels (sm_90a)";

/// Section of docs/kernel-abi.md whose entries only OpenCL op sets have (after the sm_90a one).
const OPENCL_SECTION: &str = "OpenCL-only kernels";

/// Entry points listed in the kernel tables of `doc`.
fn table_entries(doc: &str) -> Vec<String> {
    doc.lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split('`').next())
        .map(str::to_string)
        .collect()
}

/// Entry points listed in the kernel tables of docs/kernel-abi.md: `(every CUDA op set,
/// sm_90a only)`.
fn abi_entries() -> (Vec<String>, Vec<String>) {
    // Embedded: the test binaries also run on machines where this checkout's path does not exist.
    let doc = include_str!("../../docs/kernel-abi.md");
    let (all, hopper) = doc
        .split_once(HOPPER_SECTION)
        .expect("kernel-abi.md has the sm_90a section");
    let (hopper, rest) = hopper.split_once("\n## ").unwrap_or((hopper, ""));
    let mut entries = table_entries(all);
    for section in rest.split("\n## ") {
        if !section.starts_with(OPENCL_SECTION) {
            entries.extend(table_entries(section));
        }
    }
    assert!(entries.len() >= 25, "kernel table not found: {entries:?}");
    let hopper = table_entries(hopper);
    assert!(!hopper.is_empty(), "sm_90a table not found");
    (entries, hopper)
}

fn u16_at(b: &[u8], o: usize) -> usize {
    u16::from_le_bytes(b[o..o + 2].try_into().unwrap()) as usize
}
fn u32_at(b: &[u8], o: usize) -> usize {
    u32::from_le_bytes(b[o..o + 4].try_into().unwrap()) as usize
}
fn u64_at(b: &[u8], o: usize) -> usize {
    u64::from_le_bytes(b[o..o + 8].try_into().unwrap()) as usize
}

/// Names of the defined function symbols of a little-endian ELF64 file (a CUBIN).
pub(crate) fn elf_functions(elf: &[u8]) -> Vec<String> {
    assert!(
        elf.len() > 64 && elf.starts_with(b"\x7fELF"),
        "not an ELF file"
    );
    assert_eq!(elf[4], 2, "not ELF64");
    assert_eq!(elf[5], 1, "not little-endian");
    let shoff = u64_at(elf, 0x28);
    let shentsize = u16_at(elf, 0x3a);
    let shnum = u16_at(elf, 0x3c);
    let section = |i: usize| &elf[shoff + i * shentsize..shoff + (i + 1) * shentsize];
    let mut names = Vec::new();
    for i in 0..shnum {
        let sh = section(i);
        if u32_at(sh, 4) != 2 {
            continue; // not SHT_SYMTAB
        }
        let (off, size, link, entsize) = (
            u64_at(sh, 0x18),
            u64_at(sh, 0x20),
            u32_at(sh, 0x28),
            u64_at(sh, 0x38),
        );
        let strtab = section(link);
        let str_off = u64_at(strtab, 0x18);
        for s in (off..off + size).step_by(entsize.max(24)) {
            let sym = &elf[s..s + 24];
            let is_func = sym[4] & 0xf == 2;
            let defined = u16_at(sym, 6) != 0;
            if !(is_func && defined) {
                continue;
            }
            let start = str_off + u32_at(sym, 0);
            let end = start + elf[start..].iter().position(|&c| c == 0).unwrap();
            names.push(String::from_utf8_lossy(&elf[start..end]).into_owned());
        }
    }
    names
}

#[test]
fn cuda_op_set_compiles_to_cubin_with_every_abi_entry() {
    let test = "cuda_op_set_compiles_to_cubin_with_every_abi_entry";
    if !nvrtc_or_skip(test) {
        return;
    }
    let source = op_set_source();
    let (entries, hopper) = abi_entries();
    for arch in ["sm_80", "sm_90", "sm_90a"] {
        let cubin = compile_for_arch(&source, arch)
            .unwrap_or_else(|e| panic!("op set does not compile for {arch}: {e}"));
        let functions = elf_functions(&cubin);
        let missing: Vec<&String> = entries.iter().filter(|e| !functions.contains(e)).collect();
        assert!(
            missing.is_empty(),
            "{arch}: CUBIN lacks entry points {missing:?}; it has {functions:?}"
        );
        // The sm_90a kernels are there exactly when the build targets sm_90a.
        for e in &hopper {
            assert_eq!(
                functions.contains(e),
                arch == "sm_90a",
                "{arch}: entry {e} present: {}",
                functions.contains(e)
            );
        }
    }
}

/// Each module of the op set compiles alone (a context compiles them one by one, on first use)
/// and defines exactly the entries the table gives it; the compile time of each is printed.
#[test]
fn cuda_op_set_modules_compile_alone_with_their_entries() {
    let test = "cuda_op_set_modules_compile_alone_with_their_entries";
    if !nvrtc_or_skip(test) {
        return;
    }
    let (_, hopper) = abi_entries();
    let modules = rnn::backend::cuda::op_set_modules();
    assert!(modules.len() > 1, "the op set is split by family");
    let results: Vec<_> = std::thread::scope(|s| {
        let jobs: Vec<_> = modules
            .iter()
            .flat_map(|m| ["sm_80", "sm_90a"].map(|arch| (m, arch)))
            .map(|(m, arch)| {
                s.spawn(move || {
                    let t = std::time::Instant::now();
                    let cubin = compile_for_arch(&m.source, arch);
                    (m, arch, cubin, t.elapsed().as_secs_f64())
                })
            })
            .collect();
        jobs.into_iter().map(|j| j.join().unwrap()).collect()
    });
    for (m, arch, cubin, secs) in results {
        let cubin = cubin.unwrap_or_else(|e| panic!("module {} for {arch}: {e}", m.name));
        println!(
            "module {} {arch}: {secs:.2} s (compiled in parallel)",
            m.name
        );
        let functions = elf_functions(&cubin);
        let entries = m
            .entries
            .as_deref()
            .expect("a family module lists its entries");
        if m.name == "tier0" {
            // Its copies of the dense step's kernels, and none of their families' others.
            for (e, copied) in crate::support::TIER0_SAMPLE {
                assert_eq!(
                    functions.iter().any(|f| f == e),
                    copied,
                    "tier0 for {arch}: {e}; it has {functions:?}"
                );
            }
        }
        for e in entries {
            // The sm_90a kernels are there exactly when the build targets sm_90a.
            let expected = arch == "sm_90a" || !hopper.iter().any(|h| h == e);
            assert_eq!(
                functions.iter().any(|f| f == e),
                expected,
                "module {} for {arch}: entry {e}; it has {functions:?}",
                m.name
            );
        }
    }
}

#[test]
fn cuda_broken_kernel_is_a_compile_error_with_the_log() {
    let test = "cuda_broken_kernel_is_a_compile_error_with_the_log";
    if !nvrtc_or_skip(test) {
        return;
    }
    support::broken_kernel_is_a_compile_error(|src| compile_for_arch(src, "sm_90"));
}

#[test]
fn cuda_bad_arch_is_an_error_not_a_panic() {
    assert!(matches!(
        compile_for_arch("", "gfx90a"),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
fn cuda_probe_reports_a_reason_or_real_devices() {
    let m = GpuManager::with_backends(&[BackendKind::Cuda]);
    let status = m.backend(BackendKind::Cuda);
    if status.available {
        for d in m
            .devices()
            .iter()
            .filter(|d| d.backend == BackendKind::Cuda)
        {
            assert!(d.arch.starts_with("sm_"), "{d}");
            assert!(d.memory > 0 && d.compute_units > 0, "{d}");
        }
    } else {
        assert!(!status.detail.is_empty());
        println!("cuda unavailable here: {}", status.detail);
    }
}

/// Compile time of each op-set module alone, one build at a time (NVRTC to CUBIN for sm_80,
/// sm_90 and sm_90a), for docs/performance.md's cold-start figures: `cargo test --release
/// --test runtime cuda_module_compile_times -- --ignored --nocapture`. Prints, asserts only that
/// each module compiles.
#[test]
#[ignore = "prints compile times; run on demand with --nocapture"]
fn cuda_module_compile_times() {
    let test = "cuda_module_compile_times";
    if !nvrtc_or_skip(test) {
        return;
    }
    for m in rnn::backend::cuda::op_set_modules() {
        let times: Vec<String> = ["sm_80", "sm_90", "sm_90a"]
            .iter()
            .map(|arch| {
                let t = std::time::Instant::now();
                let cubin = compile_for_arch(&m.source, arch)
                    .unwrap_or_else(|e| panic!("module {} for {arch}: {e}", m.name));
                format!(
                    "{arch} {:.2} s ({} KB)",
                    t.elapsed().as_secs_f64(),
                    cubin.len() / 1024
                )
            })
            .collect();
        println!("module {}: {}", m.name, times.join(", "));
    }
}
