//! What a context's background prefetch builds, and in what order ([`super::modules::OpSet`]).
//!
//! A cold start pays twice for a module the run never launches: the prefetch's build competes
//! with the modules the first steps need (NVIDIA's OpenCL compiler builds one program at a time),
//! and the context's drop waits for a build in progress (a thread left inside a compiler at
//! process exit may crash). So each family is prefetched early, late, or not at all, by what
//! launches its kernels ([`family_prefetch`]); a family left to its first use is built then, as
//! without a prefetch, or, where another route can carry its launches (cuBLAS, or NVIDIA
//! OpenCL's portable GEMMs), in the background once they have carried enough work
//! (`OpSet::carried`).

use crate::backend_kind::BackendKind;

/// When a background prefetch builds a module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Prefetch {
    /// Before the `Late` ones: what a dense training step and the small recurrent kernels need.
    Early,
    /// After every `Early` one: families only some models launch, cheap to build (not on a
    /// cold OpenCL start: [`plan`]).
    Late,
    /// Never: built on the first launch of one of its kernels.
    FirstUse,
    /// A family tier 0's stand-ins carry on a cold OpenCL start (as `FirstUse`, up to
    /// [`PORTABLE_WORK`]), which the prefetch of a later start builds, one at a time, after
    /// loading what the disk cache has ([`plan`]): the start after a cold one builds it (unless
    /// the context is dropped first), and the next finds it cached.
    AfterCold,
}

/// When the prefetch of a device of `backend` builds family `family`; `vendor_gemm`: the device
/// has a vendor GEMM library (cuBLAS) that takes the f32 products.
pub(super) fn family_prefetch(family: &str, backend: BackendKind, vendor_gemm: bool) -> Prefetch {
    match family {
        // bf16/f16 kernels: only mixed-precision work launches them; the LSTM and GRU
        // block-local kernels with W_hh in registers: only a forced algorithm does (the
        // Elman cell's, taken by default, are in `small_seq_rnn`); the paired ones: only
        // bidirectional layers do.
        "hgemm" | "mixed" | "optim_mixed" | "small_seq_regs" | "small_seq_pair" => {
            Prefetch::FirstUse
        }
        // The per-step kernels (`rnn_step_*`, `lstm_step_*`, `gru_step_*`) and the cells of
        // the per-step GEMM route (`lstm_cell_*`, `gru_cell_*`, LSTM/GRU from hidden 384): a
        // sequence runs them only where neither the persistent nor the block-local kernels take
        // it. The slowest family but one to build (CUDA 6.3 s of NVRTC on the H100).
        "rnn" => Prefetch::FirstUse,
        // The tile kernels: with cuBLAS only the products that `sgemm_wg128` takes (those that
        // fill the GPU), and on OpenCL only the tensor-core kernels (24-27 s to build on
        // NVIDIA's compiler; the tier-0 stand-ins carry their products while they build). HIP,
        // and CUDA without cuBLAS, take every tile product here.
        "gemm_tc" if vendor_gemm || backend == BackendKind::OpenCl => Prefetch::FirstUse,
        // NVIDIA's OpenCL compiler builds one program at a time, and a context's drop waits for
        // the one in progress: on a cold start the tier-0 stand-ins carry the portable and thin
        // products until they have done PORTABLE_WORK, which the example's never reach; a later
        // start builds them after its loads (left to their first use, every start of a short
        // run stood in for them: the example's Elman part took 0.70-0.79 s so on the H100
        // against 0.46-0.51 with them, 2026-11-27).
        "gemm" | "gemm_thin" if backend == BackendKind::OpenCl => Prefetch::AfterCold,
        // Persistent sequence kernels, dropout's generator, embeddings, variable lengths, layer
        // norm: models that have them need them on their first step, others never.
        "seq" | "rnn_seq" | "random" | "embedding" | "varlen" | "norm" => Prefetch::Late,
        _ => Prefetch::Early,
    }
}

/// Work (flops) the portable kernels carry for a first-use family before it is built in the
/// background: NVIDIA OpenCL's tensor-core GEMMs took 24-27 s to build (H100, driver 580.159),
/// during which its compiler builds nothing else, and a context's drop waits for the build. 2^40
/// flops, about 67 training steps of W1 at batch 4096 (784-512-512-10): a run that does less
/// (the example's evaluation products, about 5 GFLOP in all) never builds them.
pub(super) const PORTABLE_WORK: u64 = 1 << 40;

/// One module as a plan sees it.
#[derive(Debug, Clone, Copy)]
pub(super) struct PlanSlot {
    pub(super) prefetch: Prefetch,
    /// A family the tier-0 stand-ins cover.
    pub(super) covered: bool,
    /// Its binary is in the disk cache: a prefetch loads it rather than compiling it.
    pub(super) cached: bool,
}

/// The modules a prefetch builds, in order (indices into the op set's table), on how many
/// threads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct PrefetchPlan {
    pub(super) order: Vec<usize>,
    pub(super) threads: usize,
}

/// Prefetch threads on a cold start of an OpenCL device: NVIDIA's compiler builds one program at
/// a time however many threads ask, and two builds at once each take as long as both
/// (`gemm_thin` 0.76 s alone, 18.98 s beside the tensor-core `gemm`, H100, driver 580.159): one
/// thread keeps the order of need.
const OPENCL_COLD_PREFETCH_THREADS: usize = 1;

/// The plan for `slots` (in table order) on up to `threads` threads. `cold` with `tier0` (the
/// tier-0 family's index): tier 0 first, then the early families the stand-ins do not cover,
/// the covered ones, the late ones; on OpenCL tier 0 alone on [`OPENCL_COLD_PREFETCH_THREADS`]
/// (one build at a time: any other would come before a first use that needs another family,
/// and the context's drop would wait for the one in progress; on the H200, 2026-11-27, tier 0
/// with its copies built in 1.1 s, `elementwise`, `reduce` and `optim` in 2.4); where tier 0 is
/// in the disk cache (a start after a cold one), then every other family the cache holds (not
/// a first-use one) and the [`Prefetch::AfterCold`] ones it lacks, still one at a time. Warm (or no
/// tier 0): the early families, then the late ones, on every thread; on OpenCL only those in
/// the disk cache (a start after a cold one that skipped some would compile them one at a
/// time, and its exit wait for the one in progress: 2.84 s against 1.10 for the whole example
/// warm, H100, 2026-11-27). Never tier 0 when warm, never a first-use family.
pub(super) fn plan(
    slots: &[PlanSlot],
    tier0: Option<usize>,
    cold: bool,
    backend: BackendKind,
    threads: usize,
) -> PrefetchPlan {
    let with = |prefetch: Prefetch, covered: Option<bool>| {
        (0..slots.len()).filter(move |&i| {
            Some(i) != tier0
                && slots[i].prefetch == prefetch
                && covered.is_none_or(|c| slots[i].covered == c)
        })
    };
    let mut order = Vec::with_capacity(slots.len());
    let opencl = backend == BackendKind::OpenCl;
    let serial = cold && tier0.is_some() && opencl;
    // Tier 0 in the disk cache: an earlier start was cold.
    let after_cold = serial && tier0.is_some_and(|t0| slots[t0].cached);
    // A warm OpenCL start loads what the disk cache has and leaves the rest to its first use.
    let warm_opencl = !cold && tier0.is_some() && opencl;
    match tier0 {
        // One build at a time: tier 0 alone, every other family on its first use (a build
        // ahead would hold up the first use of another, and the context's drop would wait for
        // it). Tier 0's stand-ins and copies carry a dense model's first steps.
        Some(t0) if serial => {
            order.push(t0);
            // After a cold start: what the disk cache has (loads, quick), then the families
            // the stand-ins carried, built one at a time (a load behind a build waits for it:
            // a build the stand-ins' first launch started held up the Elman part's cached
            // modules by 1.07 s, H100, 2026-12-07).
            if after_cold {
                order.extend((0..slots.len()).filter(|&i| {
                    i != t0 && slots[i].cached && slots[i].prefetch != Prefetch::FirstUse
                }));
                order.extend(with(Prefetch::AfterCold, None).filter(|&i| !slots[i].cached));
            }
        }
        Some(t0) if cold => {
            order.push(t0);
            order.extend(with(Prefetch::Early, Some(false)));
            order.extend(with(Prefetch::Early, Some(true)));
        }
        _ => order.extend(with(Prefetch::Early, None).filter(|&i| !warm_opencl || slots[i].cached)),
    }
    if !serial {
        order.extend(with(Prefetch::Late, None).filter(|&i| !opencl || slots[i].cached));
    }
    let threads = if serial {
        threads.min(OPENCL_COLD_PREFETCH_THREADS)
    } else {
        threads
    };
    PrefetchPlan {
        order,
        threads: threads.max(1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The OpenCL families in table order (src/backend/opencl/kernels.rs).
    const OPENCL: [&str; 21] = [
        "elementwise",
        "reduce",
        "optim",
        "optim_mixed",
        "gemm",
        "gemm_tc",
        "gemm_thin",
        "hgemm",
        "rnn",
        "seq",
        "small_seq",
        "small_seq_rnn",
        "small_seq_lstm",
        "small_seq_gru",
        "small_seq_regs",
        "small_seq_pair",
        "random",
        "embedding",
        "varlen",
        "mixed",
        "tier0",
    ];
    const OPENCL_TIER0: usize = 20;

    fn slots(names: &[&str], backend: BackendKind, vendor_gemm: bool) -> Vec<PlanSlot> {
        names
            .iter()
            .map(|n| PlanSlot {
                prefetch: family_prefetch(n, backend, vendor_gemm),
                covered: super::super::tier0::COVERED.contains(n),
                cached: true,
            })
            .collect()
    }

    fn names<'a>(table: &[&'a str], plan: &PrefetchPlan) -> Vec<&'a str> {
        plan.order.iter().map(|&i| table[i]).collect()
    }

    #[test]
    fn families_only_some_runs_launch_are_left_to_their_first_use() {
        use BackendKind::{Cuda, Hip, OpenCl};
        for backend in [Cuda, Hip, OpenCl] {
            for family in [
                "hgemm",
                "mixed",
                "optim_mixed",
                "rnn",
                "small_seq_regs",
                "small_seq_pair",
            ] {
                assert_eq!(family_prefetch(family, backend, true), Prefetch::FirstUse);
                assert_eq!(family_prefetch(family, backend, false), Prefetch::FirstUse);
            }
            for family in [
                "elementwise",
                "reduce",
                "optim",
                "small_seq",
                "small_seq_rnn",
                "small_seq_gru",
            ] {
                assert_eq!(family_prefetch(family, backend, false), Prefetch::Early);
            }
        }
        // The tile family: first use where cuBLAS takes the products or where it holds only
        // the OpenCL tensor-core kernels; HIP's and cuBLAS-less CUDA's tile GEMM is early.
        assert_eq!(family_prefetch("gemm_tc", Cuda, true), Prefetch::FirstUse);
        assert_eq!(
            family_prefetch("gemm_tc", OpenCl, false),
            Prefetch::FirstUse
        );
        assert_eq!(family_prefetch("gemm_tc", Cuda, false), Prefetch::Early);
        assert_eq!(family_prefetch("gemm_tc", Hip, false), Prefetch::Early);
        // The portable and thin GEMMs: tier 0 carries them on a cold OpenCL start and a later
        // start's prefetch builds them; NVRTC builds them early.
        for family in ["gemm", "gemm_thin"] {
            assert_eq!(family_prefetch(family, OpenCl, false), Prefetch::AfterCold);
            assert_eq!(family_prefetch(family, Cuda, true), Prefetch::Early);
            assert_eq!(family_prefetch(family, Hip, false), Prefetch::Early);
        }
        assert_eq!(family_prefetch("random", Cuda, true), Prefetch::Late);
        // A device that builds its op set as one module prefetches it.
        assert_eq!(family_prefetch("op_set", OpenCl, false), Prefetch::Early);
    }

    #[test]
    fn a_cold_opencl_start_prefetches_tier0_alone_and_a_warm_one_what_is_cached() {
        let table = slots(&OPENCL, BackendKind::OpenCl, false);
        let mut empty = table.clone();
        for slot in &mut empty {
            slot.cached = false;
        }
        let cold = plan(&empty, Some(OPENCL_TIER0), true, BackendKind::OpenCl, 16);
        assert_eq!(names(&OPENCL, &cold), ["tier0"]);
        assert_eq!(cold.threads, 1);
        // The start after it (tier 0 and what the cold run built in the cache, `optim` not:
        // tier 0's copy ran): tier 0, the cached families, then the GEMM families the stand-ins
        // carried, one at a time.
        let mut after = empty.clone();
        for name in ["tier0", "small_seq", "small_seq_rnn"] {
            after[OPENCL.iter().position(|o| *o == name).unwrap()].cached = true;
        }
        let second = plan(&after, Some(OPENCL_TIER0), true, BackendKind::OpenCl, 16);
        assert_eq!(
            names(&OPENCL, &second),
            ["tier0", "small_seq", "small_seq_rnn", "gemm", "gemm_thin"]
        );
        assert_eq!(second.threads, 1);
        // Warm: no tier 0, the early families in table order, then the late ones, on every
        // thread; never a first-use family.
        let warm = plan(&table, Some(OPENCL_TIER0), false, BackendKind::OpenCl, 16);
        let early = [
            "elementwise",
            "reduce",
            "optim",
            "small_seq",
            "small_seq_rnn",
            "small_seq_lstm",
            "small_seq_gru",
        ];
        let warm_names = names(&OPENCL, &warm);
        assert_eq!(warm_names[..early.len()], early[..]);
        assert_eq!(
            warm_names[early.len()..],
            ["seq", "random", "embedding", "varlen"]
        );
        assert_eq!(warm.threads, 16);
        // A warm start after a cold one that skipped some families: OpenCL leaves those not in
        // the cache to their first use; CUDA builds them on its parallel threads.
        let mut partly = table.clone();
        let missing =
            ["random", "small_seq_lstm"].map(|n| OPENCL.iter().position(|o| *o == n).unwrap());
        for &i in &missing {
            partly[i].cached = false;
        }
        let warm_names = names(
            &OPENCL,
            &plan(&partly, Some(OPENCL_TIER0), false, BackendKind::OpenCl, 16),
        );
        assert!(
            !warm_names.contains(&"random") && !warm_names.contains(&"small_seq_lstm"),
            "{warm_names:?}"
        );
        assert!(warm_names.contains(&"small_seq_gru") && warm_names.contains(&"seq"));
        let cuda = plan(&partly, Some(OPENCL_TIER0), false, BackendKind::Cuda, 16);
        assert!(missing.iter().all(|i| cuda.order.contains(i)));
        // Without tier 0 (`RNN_KERNEL_TIER0=off`) an OpenCL start builds every early family.
        let no_tier0 = plan(&partly, None, false, BackendKind::OpenCl, 16);
        assert!(no_tier0.order.contains(&missing[1]));
    }

    #[test]
    fn cuda_with_cublas_prefetches_neither_the_tile_nor_the_step_kernels() {
        let cuda = [
            "elementwise",
            "reduce",
            "bias_grad",
            "bias_grad_product",
            "optim",
            "gemm",
            "gemm_tc",
            "hgemm",
            "rnn",
            "rnn_seq",
            "small_seq",
            "small_seq_rnn",
            "random",
            "norm",
            "embedding",
            "varlen",
            "mixed",
            "tier0",
        ];
        let cuda_plan = |blas, cold| {
            plan(
                &slots(&cuda, BackendKind::Cuda, blas),
                Some(17),
                cold,
                BackendKind::Cuda,
                16,
            )
        };
        assert_eq!(
            names(&cuda, &cuda_plan(true, false)),
            [
                "elementwise",
                "reduce",
                "bias_grad",
                "bias_grad_product",
                "optim",
                "gemm",
                "small_seq",
                "small_seq_rnn",
                "rnn_seq",
                "random",
                "norm",
                "embedding",
                "varlen",
            ]
        );
        assert!(names(&cuda, &cuda_plan(false, false)).contains(&"gemm_tc"));
        // A cold CUDA plan starts with tier 0 and keeps every thread.
        let cold = cuda_plan(true, true);
        assert_eq!(cold.order[0], 17);
        assert_eq!(cold.threads, 16);
    }
}
