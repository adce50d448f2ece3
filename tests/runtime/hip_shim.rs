//! The `tests/hip-shim` fixture (the HIP runtime and hiprtc over CUDA and NVRTC) and HIP library
//! selection (`RNN_HIP_LIBRARY`, `RNN_HIPRTC_LIBRARY`):
//! - it builds with `-Wall -Wextra -Werror` and exports exactly the symbols `ffi.rs` binds;
//! - without a CUDA driver it answers like ROCm without a GPU, and the backend reports an
//!   available runtime with 0 devices;
//! - its hiprtc compiles the HIP op set through NVRTC (no GPU needed with `HIPSHIM_ARCH`);
//! - a bad `RNN_HIP_LIBRARY` / `RNN_HIPRTC_LIBRARY` is "unavailable" with the reason;
//! - with a CUDA GPU, both of its `hipDeviceProp_t` layouts give the backend the same arch.
//!
//! The library choice is made once per process, so each case runs in a child process: this test
//! binary started again on one test, with the scenario in `RNN_HIPSHIM_TEST_CHILD`.

use std::collections::BTreeSet;
use std::ffi::{OsStr, c_int};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use rnn::{BackendKind, DeviceId, Error, GpuManager};

use crate::hip_compile::{assert_cubin_with_every_entry, u16_at, u32_at, u64_at};
use crate::support;

/// A prebuilt fixture directory (`scripts/bundle.sh` puts one in `.gpu-bundle/hipshim`), used
/// instead of building one.
const DIR_ENV: &str = "RNN_HIPSHIM_DIR";
/// The scenario a child process runs.
const CHILD_ENV: &str = "RNN_HIPSHIM_TEST_CHILD";
/// The name in `RNN_REQUIRE_BACKENDS` that makes a missing C compiler a failure.
const REQUIRED_NAME: &str = "hip-shim";
/// A CUDA driver path that does not exist: the shim then sees no GPU on any machine.
const NO_CUDA: &str = "/nonexistent/libcuda.so.1";
/// Variables a child must not inherit: each scenario sets its own.
const SCENARIO_VARS: [&str; 6] = [
    "RNN_HIP_LIBRARY",
    "RNN_HIPRTC_LIBRARY",
    "RNN_HIP_ARCH",
    "HIPSHIM_CUDA_LIBRARY",
    "HIPSHIM_NVRTC_LIBRARY",
    "HIPSHIM_ARCH",
];

/// The fixture directory (`rocm6/`, `rocm5/`, `selftest`): `$RNN_HIPSHIM_DIR`, else built once
/// per process with `tests/hip-shim/build.sh`. `None` (SKIP) when there is no C compiler, unless
/// `hip-shim` is required; a compile error always fails.
fn fixture(test: &str) -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os(DIR_ENV).filter(|v| !v.is_empty()) {
        let dir = PathBuf::from(dir);
        assert!(
            dir.join("rocm6/libamdhip64.so").is_file(),
            "{DIR_ENV}={} holds no rocm6/libamdhip64.so",
            dir.display()
        );
        return Some(dir);
    }
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let built = BUILT.get_or_init(|| {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/hip-shim/build.sh");
        let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
        let has_cc = Command::new(&cc)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
        if !script.is_file() || !has_cc {
            return Err(format!(
                "cannot build the fixture here ({} present: {}, C compiler `{cc}`: {has_cc}); \
                 set {DIR_ENV} to a prebuilt one",
                script.display(),
                script.is_file()
            ));
        }
        let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("hipshim");
        let run = Command::new("bash")
            .arg(&script)
            .arg(&out)
            .output()
            .expect("bash runs");
        assert!(
            run.status.success(),
            "tests/hip-shim/build.sh failed:\n{}{}",
            String::from_utf8_lossy(&run.stdout),
            String::from_utf8_lossy(&run.stderr)
        );
        Ok(out)
    });
    match built {
        Ok(dir) => Some(dir.clone()),
        Err(why) if support::required().iter().any(|r| r == REQUIRED_NAME) => {
            panic!("{test}: {REQUIRED_NAME} required (RNN_REQUIRE_BACKENDS) but {why}")
        }
        Err(why) => {
            println!("SKIP {test}: {why}");
            None
        }
    }
}

fn shim(dir: &Path, flavour: &str) -> PathBuf {
    dir.join(flavour).join("libamdhip64.so")
}

/// Runs `scenario` of `test` in a child process with `env`; returns its stdout. The child must
/// succeed.
fn child(test: &str, scenario: &str, env: &[(&str, &OsStr)]) -> String {
    let mut cmd = Command::new(std::env::current_exe().expect("test binary path"));
    cmd.args(["--exact", &format!("hip_shim::{test}"), "--nocapture"])
        .env(CHILD_ENV, scenario)
        .env("RNN_BACKENDS", "hip");
    for var in SCENARIO_VARS {
        cmd.env_remove(var);
    }
    cmd.envs(env.iter().copied());
    let out = cmd.output().expect("the test binary starts");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success() && stdout.contains(&format!("child {scenario} done")),
        "{test}: child {scenario} failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The string literals of `src` that are HIP or hiprtc symbol names (`"hipInit"`, ...).
fn bound_symbols(src: &str) -> BTreeSet<String> {
    src.split('"')
        .filter(|piece| {
            piece.starts_with("hip")
                && piece.len() > 3
                && piece.bytes().all(|b| b.is_ascii_alphanumeric())
        })
        .map(str::to_string)
        .collect()
}

/// The defined, global functions in the dynamic symbol table of ELF64 file `path` (what
/// `nm -D --defined-only` lists as `T`).
fn dynamic_exports(path: &Path) -> BTreeSet<String> {
    let elf = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(elf.starts_with(b"\x7fELF") && elf[4] == 2, "not ELF64");
    let shoff = u64_at(&elf, 0x28) as usize;
    let (shentsize, shnum) = (u16_at(&elf, 0x3a) as usize, u16_at(&elf, 0x3c) as usize);
    let section = |i: usize| {
        let h = shoff + i * shentsize;
        let (kind, link) = (u32_at(&elf, h + 4), u32_at(&elf, h + 0x28) as usize);
        let (off, size) = (
            u64_at(&elf, h + 0x18) as usize,
            u64_at(&elf, h + 0x20) as usize,
        );
        (kind, off, size, link)
    };
    let mut out = BTreeSet::new();
    for i in 0..shnum {
        let (kind, off, size, link) = section(i);
        if kind != 11 {
            continue; // SHT_DYNSYM only
        }
        let (_, str_off, str_size, _) = section(link);
        let strtab = &elf[str_off..str_off + str_size];
        for sym in elf[off..off + size].chunks_exact(24) {
            let (info, shndx) = (sym[4], u16_at(sym, 6));
            let global_func = info >> 4 == 1 && info & 0xf == 2; // STB_GLOBAL, STT_FUNC
            if !global_func || shndx == 0 {
                continue;
            }
            let name = &strtab[u32_at(sym, 0) as usize..];
            let end = name.iter().position(|&c| c == 0).unwrap_or(name.len());
            out.insert(String::from_utf8_lossy(&name[..end]).into_owned());
        }
    }
    out
}

#[test]
fn hip_shim_exports_exactly_the_symbols_ffi_binds() {
    let test = "hip_shim_exports_exactly_the_symbols_ffi_binds";
    let Some(dir) = fixture(test) else { return };
    let bound = bound_symbols(include_str!("../../src/backend/hip/ffi.rs"));
    assert!(
        bound.len() >= 40
            && bound.contains("hipModuleLaunchKernel")
            && bound.contains("hiprtcCompileProgram")
            && bound.contains("hipGraphInstantiate"),
        "symbol names not found in ffi.rs: {bound:?}"
    );
    // ROCm 5 has no hipGetDevicePropertiesR0600; ffi.rs then reads the pre-6 layout.
    for (flavour, absent) in [
        ("rocm6", None),
        ("rocm5", Some("hipGetDevicePropertiesR0600")),
    ] {
        let mut want = bound.clone();
        if let Some(name) = absent {
            want.remove(name);
        }
        let got = dynamic_exports(&shim(&dir, flavour));
        assert_eq!(
            got,
            want,
            "{flavour}: exported but not bound: {:?}; bound but not exported: {:?}",
            got.difference(&want).collect::<Vec<_>>(),
            want.difference(&got).collect::<Vec<_>>()
        );
    }
}

type FnInit = unsafe extern "C" fn(u32) -> c_int;
type FnCount = unsafe extern "C" fn(*mut c_int) -> c_int;

/// `(hipInit(0), hipGetDeviceCount, count)` of the runtime at `path`.
fn no_device_answers(path: &Path) -> Result<(c_int, c_int, c_int), libloading::Error> {
    // SAFETY: a HIP runtime (the fixture, or ROCm's); its initializers only set up state.
    let lib = unsafe { libloading::Library::new(path) }?;
    // SAFETY: the prototypes of hipInit and hipGetDeviceCount in hip_runtime_api.h.
    unsafe {
        let init: libloading::Symbol<FnInit> = lib.get(b"hipInit\0")?;
        let count_fn: libloading::Symbol<FnCount> = lib.get(b"hipGetDeviceCount\0")?;
        let mut count: c_int = -1;
        let init_code = init(0);
        let count_code = count_fn(&mut count);
        Ok((init_code, count_code, count))
    }
}

/// In the child: the shim (with `HIPSHIM_CUDA_LIBRARY` pointing nowhere) against ROCm's answers,
/// then the backend's view of it.
fn no_device_child() {
    let path = PathBuf::from(std::env::var_os("RNN_HIP_LIBRARY").expect("set by the parent"));
    let shim = no_device_answers(&path).expect("the shim loads");
    // ROCm without a usable GPU: hipInit gives hipErrorInvalidDevice (101), hipGetDeviceCount
    // hipErrorNoDevice (100) with a count of 0.
    assert_eq!(shim, (101, 100, 0), "hipInit, hipGetDeviceCount, count");
    // Where Debian's ROCm runtime is installed and sees no GPU, it must answer the same.
    match no_device_answers(Path::new("libamdhip64.so.5")) {
        Ok(real) if real.2 == 0 => {
            assert_eq!(shim, real, "the shim differs from ROCm's libamdhip64.so.5");
            println!("same answers as ROCm's libamdhip64.so.5: {real:?}");
        }
        Ok(real) => println!("real ROCm sees a GPU here ({real:?}); not compared"),
        Err(e) => println!("no real ROCm runtime to compare with ({e})"),
    }
    let m = GpuManager::with_backends(&[BackendKind::Hip]);
    let status = m.backend(BackendKind::Hip);
    assert!(status.available && status.devices == 0, "{status}");
    assert!(
        status.detail.contains("no devices") && status.detail.contains(&*path.to_string_lossy()),
        "the status names the runtime: {status}"
    );
    assert!(
        matches!(
            m.create_context(DeviceId::Hip(0)),
            Err(Error::UnknownDevice { .. })
        ),
        "hip:0 must not exist"
    );
}

/// The shim fixture for `test`'s parent half; `None` where the test skips, or where this process
/// is the test's child (`CHILD_ENV` set): there it runs the child's half, `child_half`, first.
fn parent_fixture(test: &str, child_half: fn()) -> Option<PathBuf> {
    if let Ok(which) = std::env::var(CHILD_ENV) {
        child_half();
        println!("child {which} done");
        return None;
    }
    fixture(test)
}

#[test]
fn hip_shim_without_cuda_answers_like_rocm_without_a_gpu() {
    let test = "hip_shim_without_cuda_answers_like_rocm_without_a_gpu";
    let Some(dir) = parent_fixture(test, no_device_child) else {
        return;
    };
    for flavour in ["rocm6", "rocm5"] {
        let lib = shim(&dir, flavour);
        child(
            test,
            flavour,
            &[
                ("RNN_HIP_LIBRARY", lib.as_os_str()),
                ("HIPSHIM_CUDA_LIBRARY", OsStr::new(NO_CUDA)),
            ],
        );
        let selftest = Command::new(dir.join("selftest"))
            .arg(&lib)
            .arg("--no-device")
            .env("HIPSHIM_CUDA_LIBRARY", NO_CUDA)
            .output()
            .expect("selftest runs");
        assert!(
            selftest.status.success(),
            "selftest --no-device ({flavour}):\n{}",
            String::from_utf8_lossy(&selftest.stdout)
        );
    }
}

/// In the child: the shim's hiprtc (NVRTC, for `HIPSHIM_ARCH`) through the backend's compile.
fn hiprtc_child() {
    let (major, _) = rnn::backend::hip::hiprtc_version().expect("hiprtc from the shim");
    if major == 0 {
        // The shim's hiprtcVersion reports NVRTC's; 0 means it found none.
        if support::required().iter().any(|r| r == "nvrtc") {
            panic!("NVRTC required (RNN_REQUIRE_BACKENDS) but the shim found none");
        }
        return println!("SKIP: the shim found no NVRTC");
    }
    let source = rnn::backend::hip::op_set_source();
    let cubin = rnn::backend::hip::compile_for_arch(&source, "gfx90a")
        .unwrap_or_else(|e| panic!("the HIP op set through the shim's hiprtc:\n{e}"));
    assert_cubin_with_every_entry(&cubin);
    let broken = "extern \"C\" __global__ void k(float* p) { p[0] = not_declared_q5; }";
    match rnn::backend::hip::compile_for_arch(broken, "gfx90a") {
        Err(Error::Compile { log, .. }) => assert!(
            log.contains("not_declared_q5") && log.contains("hipshim"),
            "log:\n{log}"
        ),
        r => panic!("a broken kernel gave {r:?}"),
    }
}

#[test]
fn hip_shim_hiprtc_compiles_the_hip_op_set_through_nvrtc() {
    let test = "hip_shim_hiprtc_compiles_the_hip_op_set_through_nvrtc";
    let Some(dir) = parent_fixture(test, hiprtc_child) else {
        return;
    };
    let out = child(
        test,
        "hiprtc",
        &[
            ("RNN_HIP_LIBRARY", shim(&dir, "rocm6").as_os_str()),
            ("HIPSHIM_CUDA_LIBRARY", OsStr::new(NO_CUDA)),
            ("HIPSHIM_ARCH", OsStr::new("sm_80")),
        ],
    );
    if let Some(line) = out.lines().find(|l| l.starts_with("SKIP")) {
        println!("{line}");
    }
}

/// In the child: the HIP status and hiprtc under one library-selection scenario.
fn selection_child(scenario: &str) {
    let m = GpuManager::with_backends(&[BackendKind::Hip]);
    let status = m.backend(BackendKind::Hip).clone();
    let rtc = rnn::backend::hip::hiprtc_version();
    match scenario {
        "missing-runtime" => {
            assert!(!status.available, "{status}");
            assert!(
                status
                    .detail
                    .contains("RNN_HIP_LIBRARY=/nonexistent/rocm/libamdhip64.so"),
                "{status}"
            );
            assert!(rtc.is_err());
        }
        "not-a-runtime" => {
            assert!(!status.available, "{status}");
            assert!(status.detail.contains("lacks hipInit"), "{status}");
        }
        "missing-hiprtc" => {
            // No device needs no compiler: the runtime is available, hiprtc says why it is not.
            assert!(status.available && status.devices == 0, "{status}");
            assert!(status.detail.contains("hiprtc missing"), "{status}");
            let e = rtc.expect_err("hiprtc cannot load").to_string();
            assert!(
                e.contains("RNN_HIPRTC_LIBRARY=/nonexistent/libhiprtc.so"),
                "{e}"
            );
        }
        "explicit-hiprtc" => {
            assert!(status.available, "{status}");
            assert!(rtc.is_ok(), "{rtc:?}");
        }
        other => panic!("unknown scenario {other}"),
    }
    println!("{scenario}: {status}");
}

#[test]
fn hip_library_overrides_are_used_and_failures_are_reasons() {
    let test = "hip_library_overrides_are_used_and_failures_are_reasons";
    if let Ok(scenario) = std::env::var(CHILD_ENV) {
        selection_child(&scenario);
        return println!("child {scenario} done");
    }
    let missing = OsStr::new("/nonexistent/rocm/libamdhip64.so");
    child(test, "missing-runtime", &[("RNN_HIP_LIBRARY", missing)]);
    // Found by the loader, loads, but is no HIP runtime.
    child(
        test,
        "not-a-runtime",
        &[("RNN_HIP_LIBRARY", OsStr::new("libm.so.6"))],
    );
    let Some(dir) = fixture(test) else { return };
    let lib = shim(&dir, "rocm6");
    let no_cuda = ("HIPSHIM_CUDA_LIBRARY", OsStr::new(NO_CUDA));
    child(
        test,
        "missing-hiprtc",
        &[
            ("RNN_HIP_LIBRARY", lib.as_os_str()),
            (
                "RNN_HIPRTC_LIBRARY",
                OsStr::new("/nonexistent/libhiprtc.so"),
            ),
            no_cuda,
        ],
    );
    child(
        test,
        "explicit-hiprtc",
        &[
            ("RNN_HIP_LIBRARY", lib.as_os_str()),
            ("RNN_HIPRTC_LIBRARY", lib.as_os_str()),
            no_cuda,
        ],
    );
}

/// In the child: the arch and facts the backend reads through the shim on a CUDA GPU.
fn layout_child() {
    let m = GpuManager::with_backends(&[BackendKind::Hip]);
    let devices: Vec<_> = m
        .devices()
        .iter()
        .filter(|d| d.backend == BackendKind::Hip)
        .collect();
    if devices.is_empty() {
        let why = m.backend(BackendKind::Hip).to_string();
        if support::is_required(support::Target::Hip) {
            panic!("hip required (RNN_REQUIRE_BACKENDS) but the shim found no CUDA GPU: {why}");
        }
        return println!("SKIP: no CUDA GPU for the shim: {why}");
    }
    for d in devices {
        assert_eq!(d.arch, "gfx90a:sramecc+:xnack-", "{d}");
        assert!(d.name.contains("hipshim"), "{d}");
        assert!(d.memory > 0 && d.compute_units > 0, "{d}");
        println!("{d}");
    }
}

#[test]
fn hip_shim_gcn_arch_reads_the_same_in_both_prop_layouts() {
    let test = "hip_shim_gcn_arch_reads_the_same_in_both_prop_layouts";
    let Some(dir) = parent_fixture(test, layout_child) else {
        return;
    };
    for flavour in ["rocm6", "rocm5"] {
        let out = child(
            test,
            flavour,
            &[("RNN_HIP_LIBRARY", shim(&dir, flavour).as_os_str())],
        );
        for line in out
            .lines()
            .filter(|l| l.starts_with("SKIP") || l.starts_with("hip:"))
        {
            println!("{flavour}: {line}");
        }
    }
}
