//! Shared by the integration-test binaries: which backends to test, and the rule that an absent
//! backend is a SKIP unless `RNN_REQUIRE_BACKENDS` names it, in which case it is a failure.
#![allow(dead_code)]

use rnn::{Activation, BackendKind, Context, ContextOptions, DeviceKind, GpuManager};

/// A backend target of the test suite. `HipOnCuda` is the HIP kernel sources compiled by NVRTC
/// with the HIP-to-CUDA prelude on a CUDA device (HIP numerics without an AMD GPU).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Cpu,
    OpenCl,
    Cuda,
    Hip,
    HipOnCuda,
}

impl Target {
    pub fn name(self) -> &'static str {
        match self {
            Target::Cpu => "cpu",
            Target::OpenCl => "opencl",
            Target::Cuda => "cuda",
            Target::Hip => "hip",
            Target::HipOnCuda => "hip-nvrtc",
        }
    }
}

/// The names in `RNN_REQUIRE_BACKENDS` (comma separated): `cpu`, `opencl`, `cuda`; `hip`: a
/// `hip:N` device opened by the HIP backend through a HIP runtime (ROCm, or the tests/hip-shim
/// runtime over CUDA chosen with `RNN_HIP_LIBRARY`); `hip-nvrtc`: the HIP kernel sources
/// compiled by NVRTC on a `cuda:N` device (no HIP runtime involved). The runtime tests also
/// know `nvrtc`, `hiprtc` (compilers, no device) and `hip-shim` (the fixture must build).
pub fn required() -> Vec<String> {
    std::env::var("RNN_REQUIRE_BACKENDS")
        .unwrap_or_default()
        .split(',')
        .map(|s| s.trim().to_ascii_lowercase())
        .filter(|s| !s.is_empty())
        .collect()
}

/// Whether `target` must be present (the test fails instead of skipping when it is not).
pub fn is_required(target: Target) -> bool {
    required().iter().any(|r| r == target.name())
}

fn manager() -> GpuManager {
    GpuManager::new().expect("RNN_BACKENDS is valid")
}

/// One context per device of `target` (every OpenCL device, GPUs and CPUs alike). When there is
/// none, prints `SKIP <test>: <reason>` and returns an empty list — or panics if the target is
/// required.
pub fn contexts(target: Target, test: &str) -> Vec<Context> {
    contexts_with(target, test, |_| {})
}

/// [`contexts`] with `tweak` applied to each context's options (after the target's own, e.g.
/// `vendor_blas = false` to run the built-in `sgemm` kernel where cuBLAS exists).
pub fn contexts_with(
    target: Target,
    test: &str,
    tweak: impl Fn(&mut ContextOptions),
) -> Vec<Context> {
    if target == Target::Cpu {
        return vec![Context::cpu()];
    }
    let m = manager();
    let kind = match target {
        Target::OpenCl => BackendKind::OpenCl,
        Target::Cuda | Target::HipOnCuda => BackendKind::Cuda,
        Target::Hip => BackendKind::Hip,
        Target::Cpu => unreachable!(),
    };
    let mut out = Vec::new();
    let mut errors = Vec::new();
    for d in m.devices().iter().filter(|d| d.backend == kind) {
        if kind == BackendKind::OpenCl && d.kind == DeviceKind::Accelerator {
            continue;
        }
        let mut options = ContextOptions::default();
        options.hip_sources_via_nvrtc = target == Target::HipOnCuda;
        tweak(&mut options);
        match m.create_context_with(d.id, options) {
            Ok(ctx) => out.push(ctx),
            Err(e) => errors.push(format!("{}: {e}", d.id)),
        }
    }
    if !errors.is_empty() {
        panic!(
            "{test}: {} device(s) failed to open a context: {}",
            target.name(),
            errors.join("; ")
        );
    }
    if out.is_empty() {
        let status = m.backend(kind);
        let reason = if status.available {
            format!("{} runtime has no devices", target.name())
        } else {
            format!("{} unavailable: {}", target.name(), status.detail)
        };
        if is_required(target) {
            panic!("{test}: required backend missing (RNN_REQUIRE_BACKENDS): {reason}");
        }
        println!("SKIP {test}: {reason}");
    }
    out
}

/// ‖a − b‖ / ‖b‖ (with a floor on ‖b‖ so an all-small reference does not divide by ~0).
pub fn rel_err(a: &[f32], b: &[f32]) -> f64 {
    assert_eq!(a.len(), b.len(), "length mismatch");
    let mut num = 0.0f64;
    let mut den = 0.0f64;
    for (x, y) in a.iter().zip(b) {
        if !x.is_finite() {
            return f64::INFINITY;
        }
        num += (*x as f64 - *y as f64).powi(2);
        den += (*y as f64).powi(2);
    }
    num.sqrt() / den.sqrt().max(1e-12)
}

/// Every activation, the leaky ReLU with `slope` (each suite picks its own).
pub const fn activations(slope: f32) -> [Activation; 6] {
    [
        Activation::Identity,
        Activation::Relu,
        Activation::Sigmoid,
        Activation::Tanh,
        Activation::Gelu,
        Activation::LeakyRelu { slope },
    ]
}

/// Runs test `name` (its path in this binary, `module::test`) alone in a child process of this
/// test binary with `env` set, and returns what it printed; panics when the child fails.
pub fn run_child(name: &str, env: &[(&str, &std::ffi::OsStr)]) -> String {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", name, "--nocapture"])
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// Compiles a kernel that uses an undeclared name with `compile` (a dialect's compiler, for one
/// target): it must fail with `Error::Compile` whose log names the culprit and the error.
/// Returns that error's device.
pub fn broken_kernel_is_a_compile_error(
    compile: impl FnOnce(&str) -> rnn::Result<Vec<u8>>,
) -> String {
    let src = "extern \"C\" __global__ void broken(float* x) { x[0] = undeclared_name; }";
    match compile(src) {
        Err(rnn::Error::Compile { log, device }) => {
            assert!(
                log.contains("undeclared_name"),
                "log lacks the culprit: {log}"
            );
            assert!(log.contains("error"), "log lacks the error: {log}");
            device
        }
        Err(e) => panic!("expected Error::Compile, got {e}"),
        Ok(b) => panic!("a broken kernel compiled ({} bytes)", b.len()),
    }
}

/// Kernels the tier-0 module holds copies of (true) or not (false): `TIER0_COPIES` of
/// src/kernel.rs against the rest of their families.
pub const TIER0_SAMPLE: [(&str, bool); 6] = [
    ("adam_step", true),
    ("bias_act_forward", true),
    ("softmax_xent", true),
    ("scale", false),
    ("softmax", false),
    ("act_backward", false),
];
