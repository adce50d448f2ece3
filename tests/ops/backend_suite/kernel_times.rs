//! The kernel timer (`ContextOptions::profile_kernels`): on OpenCL it names every kernel launched
//! and device-side copy with its launch count, reading resets it, results are unchanged by it,
//! and more launches than its event list holds between two reads are all counted. Without the
//! option, and on every other backend (profiled with Nsight Compute instead), there is no table.

use rnn::ops::GruGateGrads;
use rnn::ops::GruSequenceBackward;
use rnn::ops::GruSequenceForward;
use rnn::ops::LstmSequenceBackward;
use rnn::ops::LstmSequenceForward;
use rnn::ops::RecurrentWeights;
use rnn::ops::RnnSequenceBackward;
use rnn::ops::RnnSequenceForward;
use rnn::ops::SeqShape;
use rnn::ops::TypedMemory;
use std::collections::BTreeMap;

use half::bf16;
use rnn::{Context, DType, KernelTime, Ops};

use crate::support::{self, Target, rel_err};

const N: usize = 1000;
/// More launches than the timer keeps events for between two reads (its `MAX_PENDING`, 4096), so
/// the launch that fills the list folds it.
const MANY: u64 = 4100;

fn by_name(times: &[KernelTime]) -> BTreeMap<&str, u64> {
    times
        .iter()
        .map(|t| (t.entry.as_str(), t.launches))
        .collect()
}

/// fill x3, scale x2, copy, axpy, a synchronize (the timer folds there), fill again; checks the
/// values and returns the table, if any.
fn some_ops(ctx: &Context) -> rnn::Result<Option<Vec<KernelTime>>> {
    let ops = ctx.ops();
    let x = ops.alloc(N)?;
    let y = ops.alloc(N)?;
    let z = ops.alloc(N)?;
    ops.fill(x.view(), 1.0)?;
    ops.fill(y.view(), 0.5)?;
    ops.fill(z.view(), -1.0)?;
    ops.scale(x.view(), 3.0)?;
    ops.scale(x.view(), 2.0)?;
    ops.copy(x.view(), y.view())?;
    ops.axpy(0.25, y.view(), z.view())?;
    ops.synchronize()?;
    ops.fill(x.view(), 7.0)?;
    let mut got = vec![f32::NAN; 3 * N];
    ops.download(x.view(), &mut got[..N])?;
    ops.download(y.view(), &mut got[N..2 * N])?;
    ops.download(z.view(), &mut got[2 * N..])?;
    let want: Vec<f32> = [7.0, 6.0, 0.5]
        .iter()
        .flat_map(|&v| std::iter::repeat_n(v, N))
        .collect();
    let err = rel_err(&got, &want);
    assert!(err < 1e-6, "{}: values off by {err:e}", ctx.id());
    ctx.kernel_times()
}

fn assert_timed(ctx: &Context) -> rnn::Result<()> {
    let ops: &dyn Ops = ctx.ops();
    // Whatever compiling the op set or allocating launched is not part of what is checked.
    ops.warm_up()?;
    ctx.kernel_times()?.expect("the timer is on");
    let times = some_ops(ctx)?.expect("the timer is on");
    let expected = BTreeMap::from([("axpy", 1), ("copy", 1), ("fill", 4), ("scale", 2)]);
    assert_eq!(by_name(&times), expected, "{}: {times:?}", ctx.id());
    assert!(
        times.windows(2).all(|w| w[0].nanos >= w[1].nanos),
        "{}: not most time first: {times:?}",
        ctx.id()
    );
    assert_eq!(
        ctx.kernel_times()?,
        Some(vec![]),
        "{}: reading resets the table",
        ctx.id()
    );
    let one = ops.alloc(1)?;
    for _ in 0..MANY {
        ops.fill(one.view(), 1.0)?;
    }
    let times = ctx.kernel_times()?.expect("the timer is on");
    assert_eq!(
        by_name(&times),
        BTreeMap::from([("fill", MANY)]),
        "{}",
        ctx.id()
    );
    // Each launch takes some device time; a zero sum means the timestamps were not read.
    assert!(times[0].nanos > 0, "{}: {times:?}", ctx.id());
    Ok(())
}

pub fn kernel_times(t: Target) {
    // RNN_PROFILE_KERNELS=1 in the test's environment turns the timer on everywhere.
    let env_on = std::env::var("RNN_PROFILE_KERNELS")
        .is_ok_and(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "1" | "on" | "true"));
    for ctx in support::contexts(t, "gpu_kernel_times_off") {
        let times = some_ops(&ctx).unwrap_or_else(|e| panic!("{}: {e}", ctx.id()));
        if !env_on {
            assert_eq!(times, None, "{}: no timer without the option", ctx.id());
        }
    }
    for ctx in support::contexts_with(t, "gpu_kernel_times", |o| o.profile_kernels = true) {
        if t == Target::OpenCl {
            assert_timed(&ctx).unwrap_or_else(|e| panic!("{}: {e}", ctx.id()));
        } else {
            // Only OpenCL has the timer; the option is ignored elsewhere.
            let times = some_ops(&ctx).unwrap_or_else(|e| panic!("{}: {e}", ctx.id()));
            assert_eq!(times, None, "{}", ctx.id());
        }
    }
}

/// Whether an OpenCL context runs the persistent sequence kernels: NVIDIA's own OpenCL on an
/// NVIDIA GPU, unless `RNN_OPENCL_PERSISTENT` turns them off (src/backend/opencl/persistent.rs).
fn persistent_opencl(ctx: &Context) -> bool {
    let info = ctx.info();
    let off = std::env::var("RNN_OPENCL_PERSISTENT").is_ok_and(|v| {
        matches!(
            v.trim().to_ascii_lowercase().as_str(),
            "0" | "off" | "false" | "no"
        )
    });
    info.kind == rnn::DeviceKind::Gpu
        && info.vendor.to_ascii_uppercase().contains("NVIDIA")
        && info.driver.contains("NVIDIA")
        && !off
}

/// Elman, LSTM and GRU sequences (forward and backward, 6 steps), twice, and the kernels they
/// launched.
fn launched_by_sequences(ctx: &Context) -> rnn::Result<BTreeMap<String, u64>> {
    let ops = ctx.ops();
    let (steps, batch, hidden) = (6usize, 5usize, 24usize);
    let n = batch * hidden;
    let buf = |len: usize, v: f32| -> rnn::Result<rnn::Buffer> {
        let b = ops.alloc(len)?;
        ops.fill(b.view(), v)?;
        Ok(b)
    };
    let pre = buf(steps * n, 0.1)?;
    let hs = buf((steps + 1) * n, 0.2)?;
    let cs = buf((steps + 1) * n, 0.3)?;
    let w = buf(4 * hidden * hidden, 0.01)?;
    let b = buf(4 * hidden, 0.05)?;
    let dh = buf(steps * n, 0.5)?;
    let gates = buf(steps * 4 * n, 0.1)?;
    let dgates = buf((steps + 1) * 4 * n, 0.0)?;
    let cache = buf(steps * 4 * n, 0.0)?;
    let dgh = buf((steps + 1) * 3 * n, 0.0)?;
    let act = rnn::Activation::Tanh;
    let w1 = w.slice(0, hidden * hidden)?;
    let w3 = w.slice(0, 3 * hidden * hidden)?;
    let b1 = b.slice(0, hidden)?;
    let b3 = b.slice(0, 3 * hidden)?;
    ops.synchronize()?;
    ctx.kernel_times()?;
    // Twice: a launch must not make the next one of the same kernel take another path.
    for _ in 0..2 {
        ops.rnn_sequence_forward(RnnSequenceForward::new(
            pre.view(),
            hs.view(),
            RecurrentWeights::new(w1, b1, b1),
            act,
            SeqShape::new(steps, batch, hidden),
        ))?;
        ops.rnn_sequence_backward(RnnSequenceBackward::new(
            dh.view(),
            hs.view(),
            w1,
            pre.view(),
            act,
            SeqShape::new(steps, batch, hidden),
        ))?;
        ops.lstm_sequence_forward(LstmSequenceForward::new(
            gates.view(),
            hs.view(),
            cs.view(),
            RecurrentWeights::new(w.view(), b.view(), b.view()),
            SeqShape::new(steps, batch, hidden),
        ))?;
        ops.lstm_sequence_backward(LstmSequenceBackward::new(
            dh.view(),
            gates.view(),
            cs.view(),
            w.view(),
            dgates.slice(0, steps * 4 * n)?,
            None,
            SeqShape::new(steps, batch, hidden),
        ))?;
        let gx = gates.slice(0, steps * 3 * n)?;
        ops.gru_sequence_forward(GruSequenceForward::new(
            gx,
            hs.view(),
            RecurrentWeights::new(w3, b3, b3),
            cache.view(),
            SeqShape::new(steps, batch, hidden),
        ))?;
        ops.gru_sequence_backward(GruSequenceBackward::new(
            dh.view(),
            hs.view(),
            cache.view(),
            w3,
            GruGateGrads::new(gates.slice(0, steps * 3 * n)?, dgh.slice(0, steps * 3 * n)?),
            None,
            SeqShape::new(steps, batch, hidden),
        ))?;
    }
    let times = ctx.kernel_times()?.expect("the timer is on");
    Ok(times.into_iter().map(|t| (t.entry, t.launches)).collect())
}

/// OpenCL only: which kernels a sequence op launches: one persistent launch per op where the
/// device runs them (NVIDIA), one step kernel per time step elsewhere (PoCL here and in CI).
/// The numbers of both paths are checked against the CPU by `gpu_rnn_sequence` and
/// `gpu_gated_sequence`; this pins down which path those tests exercised.
pub fn sequence_launches(t: Target) {
    let test = "gpu_sequence_launches (block-local off)";
    let options = |o: &mut rnn::ContextOptions| {
        o.profile_kernels = true;
        o.recurrent_block_local = Some(false);
    };
    for ctx in support::contexts_with(t, test, options) {
        let got = launched_by_sequences(&ctx).unwrap_or_else(|e| panic!("{}: {e}", ctx.id()));
        // The Elman entries keep their W slices in registers at this hidden size (<= 256).
        let persistent = [
            "rnn_seq_forward_regs",
            "rnn_seq_backward_regs",
            "lstm_seq_forward",
            "lstm_seq_backward",
            "gru_seq_forward",
            "gru_seq_backward",
        ];
        if persistent_opencl(&ctx) {
            for entry in persistent {
                assert_eq!(got.get(entry), Some(&2), "{}: {entry} in {got:?}", ctx.id());
            }
            assert!(
                got.keys().all(|k| !k.contains("_step_")),
                "{}: step kernels ran: {got:?}",
                ctx.id()
            );
        } else {
            assert!(
                got.keys().all(|k| !k.contains("_seq_")),
                "{}: {got:?}",
                ctx.id()
            );
            // Every step of both Elman forwards.
            assert_eq!(
                got.get("rnn_step_forward"),
                Some(&12),
                "{}: {got:?}",
                ctx.id()
            );
        }
    }
    // By default every device whose groups hold W_hh (any OpenCL device at hidden 24: 9 KB for
    // the LSTM) runs each op as one block-local launch, and nothing else of the recurrence:
    // the Elman cell with W_hh in registers, the gated cells in shared memory.
    let test = "gpu_sequence_launches (block-local)";
    for ctx in support::contexts_with(t, test, |o| o.profile_kernels = true) {
        let got = launched_by_sequences(&ctx).unwrap_or_else(|e| panic!("{}: {e}", ctx.id()));
        assert!(ran_automatic(&got), "{}: {got:?}", ctx.id());
    }
    forced_sequence_launches(t);
}

/// Whether `got` (launches by entry) is what the automatic choice runs at hidden 24: every
/// sequence op once a sequence, block-local (Elman W_hh in registers, the gated cells' in
/// shared memory), and nothing else of the recurrence.
fn ran_automatic(got: &BTreeMap<String, u64>) -> bool {
    let suffix = |cell: &str| {
        if cell == "rnn" {
            "_local_regs"
        } else {
            "_local"
        }
    };
    let each = ["rnn", "lstm", "gru"].iter().all(|cell| {
        ["forward", "backward"]
            .iter()
            .all(|pass| got.get(&format!("{cell}_seq_{pass}{}", suffix(cell))) == Some(&2))
    });
    let recurrent = got
        .keys()
        .filter(|k| k.contains("_step_") || k.contains("_seq_"))
        .count();
    each && recurrent == 6
}

/// Each forced recurrent algorithm (`ContextOptions::recurrent_algorithm`) launches its own
/// kernels and no other recurrence; one this device cannot run (persistent, off NVIDIA) falls
/// back to the automatic choice (block-local at this size).
fn forced_sequence_launches(t: Target) {
    use rnn::RecurrentAlgorithm as A;
    for algorithm in A::FORCIBLE {
        let test = format!("gpu_sequence_launches ({algorithm})");
        let options = |o: &mut rnn::ContextOptions| {
            o.profile_kernels = true;
            o.recurrent_algorithm = Some(algorithm);
        };
        for ctx in support::contexts_with(t, &test, options) {
            let got = launched_by_sequences(&ctx).unwrap_or_else(|e| panic!("{}: {e}", ctx.id()));
            let ran = |suffix: &str| {
                ["rnn", "lstm", "gru"].iter().all(|cell| {
                    ["forward", "backward"]
                        .iter()
                        .all(|pass| got.get(&format!("{cell}_seq_{pass}{suffix}")) == Some(&2))
                })
            };
            let count = |part: &str| got.keys().filter(|k| k.contains(part)).count();
            let ok = match algorithm {
                A::BlockLocal => ran("_local") && count("_seq_") == 6 && count("_step_") == 0,
                A::BlockLocalRegisters => {
                    ran("_local_regs") && count("_seq_") == 6 && count("_step_") == 0
                }
                A::BlockLocalL1 => {
                    ran("_l1")
                        && count("_seq_") == 6
                        && count("_step_") == 0
                        && got.get("bl_pack_w") == Some(&12)
                }
                A::Persistent if persistent_opencl(&ctx) => {
                    count("_seq_") == 6 && count("_local") == 0 && count("_step_") == 0
                }
                A::Persistent => ran_automatic(&got),
                // One cell launch a step, no copies or bias adds: the step without a later
                // product (the last backward) runs the plain cell or activation backward.
                A::Gemm => {
                    let each = |entry: &str| got.get(entry).copied().unwrap_or(0);
                    count("_seq_") == 0
                        && count("_step_") == 0
                        && each("rnn_cell_forward") == 12
                        && each("rnn_cell_backward") == 10
                        && each("lstm_cell_forward") == 12
                        && each("lstm_cell_backward_sum") == 10
                        && each("lstm_cell_backward") == 2
                        && each("gru_cell_forward_bias") == 12
                        && each("gru_cell_backward_carry") == 12
                        && each("bias_act_forward") == 4
                }
                A::Steps => count("_seq_") == 0 && got.get("rnn_step_forward") == Some(&12),
                _ => false,
            };
            assert!(ok, "{}: {algorithm}: {got:?}", ctx.id());
        }
    }
}

/// Whether the tensor-core kernels are allowed (`RNN_OPENCL_TENSOR_CORES` not off).
fn tensor_cores_allowed() -> bool {
    !std::env::var("RNN_OPENCL_TENSOR_CORES").is_ok_and(|v| {
        matches!(
            v.trim().to_ascii_lowercase().as_str(),
            "0" | "off" | "false" | "no"
        )
    })
}

/// A GPU on NVIDIA's OpenCL platform.
fn nvidia_opencl(ctx: &Context) -> bool {
    let info = ctx.info();
    info.kind == rnn::DeviceKind::Gpu && info.driver.contains("NVIDIA")
}

/// An NVIDIA Hopper GPU (compute capability 9.0: H100, H200, H800, H20, GH200), by name: the
/// public API does not report compute capabilities.
fn hopper(ctx: &Context) -> bool {
    let name = &ctx.info().name;
    ["H100", "H200", "H800", "H20"]
        .iter()
        .any(|h| name.contains(h))
}

/// The GEMM kernels one of W1's products (4096 x 512 over k = 784) launches.
fn launched_by_gemm(ctx: &Context) -> rnn::Result<BTreeMap<String, u64>> {
    let ops = ctx.ops();
    let (m, n, k) = (4096usize, 512usize, 784usize);
    let a = ops.alloc(m * k)?;
    let b = ops.alloc(k * n)?;
    let c = ops.alloc(m * n)?;
    ops.fill(a.view(), 0.5)?;
    ops.fill(b.view(), 0.25)?;
    ops.warm_up()?;
    ctx.kernel_times()?;
    ops.gemm(rnn::Gemm::new(m, n, k), a.view(), b.view(), c.view())?;
    let mut got = vec![f32::NAN; m * n];
    ops.download(c.view(), &mut got)?;
    let want = 0.5 * 0.25 * k as f32;
    let err = rel_err(&got, &vec![want; m * n]);
    assert!(err < 1e-6, "{}: values off by {err:e}", ctx.id());
    let times = ctx.kernel_times()?.expect("the timer is on");
    Ok(by_name(&times)
        .into_iter()
        .filter(|(name, _)| name.starts_with("sgemm"))
        .map(|(name, n)| (name.to_string(), n))
        .collect())
}

/// On a Hopper GPU through NVIDIA's OpenCL, W1's products run `sgemm_wg64` (PTX retargeted to
/// sm_90a), and `sgemm_tc64` with `warpgroup_gemm` off; other NVIDIA GPUs never run
/// `sgemm_wg64` (and run `sgemm_tc64` from sm_80 on, which the public API cannot tell); other
/// OpenCL devices run neither. Fails where the sm_90a build step fell back, which would
/// otherwise pass unnoticed.
pub fn gemm_launches(t: Target) {
    for warpgroup in [true, false] {
        let ctxs = support::contexts_with(t, "gpu_gemm_launches", |o| {
            o.profile_kernels = true;
            o.warpgroup_gemm = warpgroup;
        });
        for ctx in ctxs {
            let got = launched_by_gemm(&ctx).unwrap_or_else(|e| panic!("{}: {e}", ctx.id()));
            let what = format!("{} (warpgroup {warpgroup}): {got:?}", ctx.id());
            let ran = |entry: &str| got.contains_key(entry);
            assert!(!ran("sgemm_tc128"), "{what}");
            if !(nvidia_opencl(&ctx) && tensor_cores_allowed()) {
                assert!(!ran("sgemm_wg64") && !ran("sgemm_tc64"), "{what}");
            } else if hopper(&ctx) {
                let entry = if warpgroup {
                    "sgemm_wg64"
                } else {
                    "sgemm_tc64"
                };
                assert_eq!(got.get(entry), Some(&1), "{what}");
            } else {
                assert!(!ran("sgemm_wg64"), "{what}");
            }
        }
    }
}

/// The bf16 products one W1 step at batch 4096 launches, by kernel name (`hgemm*` only): the
/// forward of the first layer (4096 x 512 over k = 784, bf16 out), its weight gradient (512 x 784
/// over k = 4096, f32 out), and that forward again with x at an element offset of 3 (not
/// 16-byte aligned). Each result is checked.
fn launched_by_half_gemms(ctx: &Context) -> rnn::Result<BTreeMap<String, u64>> {
    let ops = ctx.ops();
    let (rows, inputs, outputs) = (4096usize, 784usize, 512usize);
    let filled = |n: usize, v: f32| -> rnn::Result<rnn::Buffer> {
        let b = ops.alloc_as(DType::Bf16, n)?;
        ops.upload_as(b.view(), &vec![bf16::from_f32(v); n])?;
        Ok(b)
    };
    let x = filled(rows * inputs + 3, 0.5)?;
    let w = filled(inputs * outputs, 0.25)?;
    let dz = filled(rows * outputs, 0.25)?;
    let z = ops.alloc_as(DType::Bf16, rows * outputs)?;
    let dw = ops.alloc(outputs * inputs)?;
    let forward = rnn::Gemm::new(rows, outputs, inputs);
    let weight_grad = rnn::Gemm {
        trans_a: true,
        ..rnn::Gemm::new(outputs, inputs, rows)
    };
    let check_z = |what: &str| -> rnn::Result<()> {
        let mut got = vec![bf16::NAN; rows * outputs];
        ops.download_as(z.view(), &mut got)?;
        // 0.5 * 0.25 * 784 = 98: exact in bf16.
        let bad = got.iter().filter(|v| v.to_f32() != 98.0).count();
        assert_eq!(bad, 0, "{}: {what}: {bad} values not 98", ctx.id());
        Ok(())
    };
    let poison = vec![bf16::NAN; rows * outputs];
    ops.warm_up()?;
    ctx.kernel_times()?;
    ops.upload_as(z.view(), &poison)?;
    ops.gemm(forward, x.slice(0, rows * inputs)?, w.view(), z.view())?;
    check_z("forward")?;
    ops.fill(dw.view(), f32::NAN)?;
    ops.gemm(
        weight_grad,
        dz.view(),
        x.slice(0, rows * inputs)?,
        dw.view(),
    )?;
    let mut got = vec![f32::NAN; outputs * inputs];
    ops.download(dw.view(), &mut got)?;
    let err = rel_err(&got, &vec![0.25 * 0.5 * rows as f32; outputs * inputs]);
    assert!(err < 1e-6, "{}: weight gradient off by {err:e}", ctx.id());
    ops.upload_as(z.view(), &poison)?;
    ops.gemm(forward, x.slice(3, rows * inputs)?, w.view(), z.view())?;
    check_z("forward at offset 3")?;
    let times = ctx.kernel_times()?.expect("the timer is on");
    Ok(by_name(&times)
        .into_iter()
        .filter(|(name, _)| name.starts_with("hgemm"))
        .map(|(name, n)| (name.to_string(), n))
        .collect())
}

/// On a Hopper GPU through NVIDIA's OpenCL (tensor cores allowed), W1's aligned bf16 products
/// run the tensor-core kernels of kernels-cl/hgemm_tc.cl (`hgemm_lo_tc*` for the bf16 output,
/// `hgemm_tc*` for the f32 one) and the unaligned one the portable `hgemm_lo_bf16`; every other
/// OpenCL device runs the portable kernels only. Fails where the device claims
/// `half_tensor_cores` but its op set lacks a kernel (the launch is an error) or where the
/// products never reach the tensor cores; other sm_80+ NVIDIA GPUs, which the public API cannot
/// tell from older ones, are checked for results only.
pub fn half_gemm_launches(t: Target) {
    let ctxs = support::contexts_with(t, "gpu_half_gemm_launches", |o| {
        o.profile_kernels = true;
    });
    for ctx in ctxs {
        let got = launched_by_half_gemms(&ctx).unwrap_or_else(|e| panic!("{}: {e}", ctx.id()));
        let what = format!("{}: {got:?}", ctx.id());
        let ran_tc = |prefix: &str| got.keys().any(|e| e.starts_with(prefix));
        assert!(got.contains_key("hgemm_lo_bf16"), "{what}");
        if !(nvidia_opencl(&ctx) && tensor_cores_allowed()) {
            assert!(!ran_tc("hgemm_lo_tc") && !ran_tc("hgemm_tc"), "{what}");
            assert!(got.contains_key("hgemm_bf16"), "{what}");
        } else if hopper(&ctx) {
            assert!(ran_tc("hgemm_lo_tc") && ran_tc("hgemm_tc"), "{what}");
            assert_eq!(got.get("hgemm_lo_bf16"), Some(&1), "{what}");
            assert!(!got.contains_key("hgemm_bf16"), "{what}");
        }
    }
}
