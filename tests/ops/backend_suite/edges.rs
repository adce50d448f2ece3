//! User kernels, compile errors, foreign buffers and edge cases (empty and huge requests) on
//! every GPU target; the huge-request checks also run on the CPU backend.

use rnn::{Context, Dialect, Error, Gemm, KernelArg, KernelSource, LaunchConfig};

use super::{contexts, nan};
use crate::support::{Target, rel_err};

/// `y[i] = a * x[i] + 1`, in the dialect of `target` (HIP for both HIP targets: a CUDA context
/// that builds its op set from the HIP sources compiles user kernels as HIP too).
pub(super) fn axpb_source(target: Target) -> KernelSource {
    match target {
        Target::OpenCl => KernelSource::new(
            Dialect::OpenCl,
            "__kernel void axpb(__global const float* xb, ulong xo, __global float* yb, ulong yo, uint n, float a) {\n\
               uint i = get_global_id(0); if (i < n) yb[yo + i] = a * xb[xo + i] + 1.0f; }",
            "axpb",
        ),
        Target::Hip | Target::HipOnCuda => KernelSource::new(
            Dialect::Hip,
            "#include <hip/hip_runtime.h>\nextern \"C\" __global__ void axpb(const float* xb, unsigned long long xo, float* yb, unsigned long long yo, unsigned n, float a) {\n\
               unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) yb[yo + i] = a * xb[xo + i] + 1.0f; }",
            "axpb",
        ),
        Target::Cuda | Target::Cpu => KernelSource::new(
            Dialect::Cuda,
            "extern \"C\" __global__ void axpb(const float* xb, unsigned long long xo, float* yb, unsigned long long yo, unsigned n, float a) {\n\
               unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) yb[yo + i] = a * xb[xo + i] + 1.0f; }",
            "axpb",
        ),
    }
}

pub fn user_kernel(t: Target) {
    let src = axpb_source(t);
    for ctx in contexts(t, "gpu_user_kernel") {
        let k = ctx.compile(&src).expect("user kernel compiles");
        let n = 1000;
        let x: Vec<f32> = (0..n).map(|i| i as f32 * 0.5 - 100.0).collect();
        let xb = ctx.alloc(n + 7).unwrap();
        let yb = ctx.alloc(n + 5).unwrap();
        ctx.ops().upload(xb.slice(7, n).unwrap(), &x).unwrap();
        ctx.ops().upload(yb.view(), &nan(n + 5)).unwrap();
        let args = [
            KernelArg::Buffer(xb.slice(7, n).unwrap()),
            KernelArg::Buffer(yb.slice(5, n).unwrap()),
            KernelArg::U32(n as u32),
            KernelArg::F32(3.0),
        ];
        ctx.launch(&k, LaunchConfig::for_elements(n, 128), &args)
            .unwrap();
        let mut y = vec![0.0; n];
        ctx.ops().download(yb.slice(5, n).unwrap(), &mut y).unwrap();
        let want: Vec<f32> = x.iter().map(|v| 3.0 * v + 1.0).collect();
        assert!(rel_err(&y, &want) < 1e-6, "{}: {:?}", ctx.id(), &y[..4]);
        // The second compile of the same source comes from the context's map.
        assert!(ctx.compile(&src).is_ok());
        // An entry point the source does not define is an error at compile time, on every
        // backend, naming the entry (the module itself is cached: no second build).
        let missing = KernelSource {
            entry: "axpb_missing".into(),
            ..src.clone()
        };
        match ctx.compile(&missing) {
            Err(Error::InvalidArgument(msg)) => {
                assert!(msg.contains("axpb_missing"), "{}: {msg}", ctx.id())
            }
            r => panic!("{}: undefined entry point gave {r:?}", ctx.id()),
        }

        let other = if src.dialect == Dialect::OpenCl {
            Dialect::Cuda
        } else {
            Dialect::OpenCl
        };
        let foreign = KernelSource {
            dialect: other,
            ..src.clone()
        };
        match ctx.compile(&foreign) {
            Err(Error::Unsupported { op, reason, .. }) => {
                let text = format!("{op} {reason}");
                assert!(
                    text.contains(&other.to_string()) && text.contains(&src.dialect.to_string()),
                    "{text}"
                );
            }
            r => panic!("{}: foreign dialect gave {r:?}", ctx.id()),
        }
    }
}

pub fn compile_error(t: Target) {
    for ctx in contexts(t, "gpu_compile_error") {
        let mut src = axpb_source(t);
        src.source = src.source.replace("a * xb", "a * undefined_symbol_q7 * xb");
        match ctx.compile(&src) {
            Err(Error::Compile { log, .. }) => {
                assert!(
                    log.contains("undefined_symbol_q7"),
                    "{}: log lacks the symbol:\n{log}",
                    ctx.id()
                )
            }
            r => panic!("{}: broken source gave {r:?}", ctx.id()),
        }
    }
}

pub fn foreign_and_edge_cases(t: Target) {
    for ctx in contexts(t, "gpu_foreign_and_edge_cases") {
        let ops = ctx.ops();
        let mine = ops.alloc(4).unwrap();
        let cpu = Context::cpu();
        let host = cpu.alloc(4).unwrap();
        assert!(matches!(
            ops.copy(host.view(), mine.view()),
            Err(Error::ForeignBuffer(_))
        ));
        assert!(matches!(
            ops.fill(host.view(), 1.0),
            Err(Error::ForeignBuffer(_))
        ));
        assert!(matches!(
            cpu.ops().fill(mine.view(), 1.0),
            Err(Error::ForeignBuffer(_))
        ));

        // Zero-length buffers work end to end.
        let empty = ops.alloc(0).unwrap();
        ops.upload(empty.view(), &[]).unwrap();
        ops.fill(empty.view(), 1.0).unwrap();
        ops.download(empty.view(), &mut []).unwrap();
        // A request no device can meet is OutOfMemory, not a crash.
        match ops.alloc(usize::MAX / 8) {
            Err(Error::OutOfMemory { requested, .. }) => assert!(requested >= usize::MAX / 8),
            r => panic!("{}: huge alloc gave {r:?}", ctx.id()),
        }
        huge_requests_are_errors(&ctx);
        // Buffers freed and asked for again come back from the pool and still work.
        for _ in 0..3 {
            let b = ops.alloc(1000).unwrap();
            ops.fill(b.view(), 2.0).unwrap();
            let mut out = vec![0.0; 1000];
            ops.download(b.view(), &mut out).unwrap();
            assert!(out.iter().all(|v| *v == 2.0));
        }
        // Mismatched shapes are errors, not panics.
        let a = ops.alloc(6).unwrap();
        assert!(matches!(
            ops.gemm(Gemm::new(2, 3, 4), a.view(), a.view(), mine.view()),
            Err(Error::Shape { .. })
        ));
    }
}

/// Sizes near the top of the address space: errors, never a panic or a tiny allocation
/// behind a huge buffer (rounding a request up to its pool class must not wrap).
fn huge_requests_are_errors(ctx: &Context) {
    let ops = ctx.ops();
    for len in [
        usize::MAX,
        usize::MAX / 4,
        usize::MAX / 4 - 1,
        (1usize << 61) + 1,
    ] {
        match ops.alloc(len) {
            Err(Error::OutOfMemory { .. } | Error::InvalidArgument(_)) => {}
            Ok(b) => panic!("{}: alloc({len}) gave a buffer of {}", ctx.id(), b.len()),
            Err(e) => panic!("{}: alloc({len}) gave {e}", ctx.id()),
        }
    }
    let b = ops.alloc(8).unwrap();
    for (offset, len) in [
        (usize::MAX, 2),
        (1, usize::MAX),
        (usize::MAX, usize::MAX),
        (9, 0),
    ] {
        match b.slice(offset, len) {
            Err(Error::Shape { .. }) => {}
            r => panic!("{}: slice({offset}, {len}) gave {r:?}", ctx.id()),
        }
        assert!(b.view().slice(offset, len).is_err());
    }
}

#[test]
fn cpu_huge_alloc_and_slice_are_errors() {
    huge_requests_are_errors(&Context::cpu());
}
