//! The family tables against the sources, and the op set's module slots: one build per
//! module under concurrent first uses, prefetch, background carry and tier-0 stand-ins.

use std::collections::BTreeSet;

use super::*;
use crate::backend::recording::{Imitate, RecordingDevice, signatures};
use crate::kernel::{Dialect, OpFamily, concatenate};

/// Every entry the families' files define is in exactly one family's list, and each list
/// is what its files define; together they are the whole op set's entries.
fn check(families: &[OpFamily], whole: &str, opencl: bool) {
    let mut seen = BTreeSet::new();
    for f in families {
        let defined: Vec<String> = signatures::kernels(&concatenate(f.files), opencl)
            .into_iter()
            .map(|s| s.entry)
            .collect();
        let entries = f.entries.concat();
        let listed: BTreeSet<String> = entries.iter().map(|e| e.to_string()).collect();
        assert_eq!(
            listed.len(),
            entries.len(),
            "{}: an entry listed twice",
            f.name
        );
        assert_eq!(
            defined.iter().cloned().collect::<BTreeSet<_>>(),
            listed,
            "{}: the table's entries differ from what its files define",
            f.name
        );
        for e in listed {
            assert!(seen.insert(e.clone()), "{e} is in two families");
        }
    }
    let all: BTreeSet<String> = signatures::kernels(whole, opencl)
        .into_iter()
        .map(|s| s.entry)
        .collect();
    assert_eq!(seen, all, "the families cover the whole op set");
}

#[test]
fn family_tables_cover_every_entry_once_and_match_the_sources() {
    use crate::backend::{cuda, opencl};
    check(
        &cuda::kernels::FAMILIES,
        &cuda::kernels::op_set_source(),
        false,
    );
    check(
        &opencl::kernels::FAMILIES,
        &opencl::kernels::op_set_source(),
        true,
    );
    // HIP compiles the CUDA families behind its headers: the same entries per module.
    let hip = crate::backend::hip::kernels::op_set_modules();
    let cuda = cuda::kernels::op_set_modules();
    assert_eq!(hip.len(), cuda.len());
    for (h, c) in hip.iter().zip(&cuda) {
        assert_eq!((h.name, &h.entries), (c.name, &c.entries));
        assert!(h.source.ends_with(&c.source[c.source.len() - 200..]));
    }
}

fn recording_set() -> OpSet<RecordingDevice> {
    let (device, _) = RecordingDevice::new(Imitate {
        dialect: Dialect::OpenCl,
        compute_units: 4,
        sgemm: Box::new(|_, _, _| crate::backend::SGEMM_TC64),
        co_resident: None,
    });
    OpSet::new(Arc::new(device), false).unwrap()
}

#[test]
fn concurrent_first_uses_build_a_module_once() {
    let set = recording_set();
    std::thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(|| set.module_for("fill", || false).unwrap());
        }
    });
    assert_eq!(set.builds(), 1);
    assert_eq!(set.built(), ["op_set"]);
    // Later uses, recording or not, find it built.
    set.module_for("softmax", || true).unwrap();
    assert_eq!(set.builds(), 1);
}

#[test]
fn a_module_first_used_while_recording_is_built_all_the_same() {
    let set = recording_set();
    set.module_for("fill", || true).unwrap();
    assert_eq!(set.builds(), 1);
}

#[test]
fn build_all_builds_each_module_once_and_prefetch_shares_the_set() {
    let set = Arc::new(recording_set());
    set.build_all(4).unwrap();
    assert_eq!(set.builds(), 1);
    set.prefetch(2);
    set.stop();
    set.module_for("adam_step", || false).unwrap();
    assert_eq!(set.builds(), 1);
}

#[test]
fn a_prefetch_builds_each_module_once_and_stop_waits_for_it() {
    let set = Arc::new(recording_set());
    set.prefetch(4);
    set.module_for("adam_step", || false).unwrap();
    set.stop();
    assert_eq!(set.builds(), 1);
    assert!(set.prefetchers.lock().is_empty());
    assert_eq!(
        Arc::strong_count(&set),
        1,
        "a prefetch thread still holds the set"
    );
}

#[test]
fn a_build_in_progress_holds_up_no_look_at_what_is_built() {
    let set = Arc::new(recording_set());
    // A build in progress (a prefetch thread inside the compiler) holds this lock.
    let building = set.slots[0].building.lock();
    let (tx, rx) = std::sync::mpsc::channel();
    let looker = set.clone();
    let handle = std::thread::spawn(move || {
        tx.send((looker.kernels_final(), looker.built().len()))
            .unwrap()
    });
    let answer = rx.recv_timeout(std::time::Duration::from_secs(20));
    drop(building);
    handle.join().unwrap();
    assert_eq!(answer, Ok((true, 0)), "the look waited for the build");
}

/// A set whose one module is a first-use family not in the disk cache.
fn first_use_set() -> Arc<OpSet<RecordingDevice>> {
    let mut set = recording_set();
    set.slots[0].prefetch = Prefetch::FirstUse;
    // Not in the disk cache, whatever other tests stored there.
    set.slots[0].on_disk.set(false).unwrap();
    // As CUDA's default: the carried launches count with tier 0 off too.
    set.tier_mode = TierMode::Off;
    Arc::new(set)
}

#[test]
fn a_carried_first_use_module_builds_in_the_background_once_its_work_pays() {
    let set = first_use_set();
    // Never while recording: the graph waits for the module instead.
    assert!(!set.carried("fill", 10, 100, || true).unwrap());
    // Carried, below the work that pays for a build: nothing builds, graphs may record.
    assert!(set.carried("fill", 60, 100, || false).unwrap());
    assert!(set.prefetchers.lock().is_empty());
    assert!(set.kernels_final());
    // The work reaches it: one build starts, in the background; later launches are still
    // carried until it is done.
    assert!(set.carried("adam_step", 40, 100, || false).unwrap());
    assert!(set.carried("fill", 40, 100, || false).unwrap());
    assert_eq!(set.prefetchers.lock().len(), 1);
    // The stop joins the build, which leaves the module built and the kernels final.
    set.stop();
    assert_eq!(set.builds(), 1);
    assert_eq!(set.built(), ["op_set"]);
    assert!(set.kernels_final());
    assert!(!set.carried("fill", 1, 0, || false).unwrap());
    assert_eq!(Arc::strong_count(&set), 1);
}

#[test]
fn a_first_use_module_carried_from_the_start_keeps_graphs_waiting_until_built() {
    let set = first_use_set();
    // Hold the build back, as a compiler at work would.
    let building = set.slots[0].building.lock();
    assert!(set.carried("fill", 1, 0, || false).unwrap());
    assert!(!set.kernels_final(), "a graph would keep the carrier");
    drop(building);
    set.stop();
    assert!(set.kernels_final());
    // A stopped set starts no build; its launches stay carried.
    let set = first_use_set();
    set.stop();
    assert!(set.carried("fill", 1, 0, || false).unwrap());
    assert!(set.prefetchers.lock().is_empty());
    assert!(set.kernels_final());
}

#[test]
fn an_early_module_is_never_carried() {
    let set = Arc::new(recording_set());
    assert_eq!(set.slots[0].prefetch, Prefetch::Early);
    assert!(!set.carried("fill", 1, 0, || false).unwrap());
    assert!(set.prefetchers.lock().is_empty());
}

/// The OpenCL op set by family on a recording device, tier 0 used as `mode` says, no family
/// in the disk cache.
fn family_set(mode: TierMode) -> Arc<OpSet<RecordingDevice>> {
    let (device, _) = RecordingDevice::new(Imitate {
        dialect: Dialect::OpenCl,
        compute_units: 4,
        sgemm: Box::new(|_, _, _| crate::backend::SGEMM_TC64),
        co_resident: None,
    });
    let modules = crate::backend::opencl::kernels::op_set_modules("");
    let set = OpSet::from_modules(Arc::new(device), modules, mode).unwrap();
    for slot in &set.slots {
        slot.on_disk.set(false).unwrap();
    }
    Arc::new(set)
}

fn slot_of(set: &OpSet<RecordingDevice>, name: &str) -> usize {
    set.slots.iter().position(|s| s.name == name).unwrap()
}

#[test]
fn tier0_copies_carry_a_cold_start_until_their_family_is_built() {
    // Forced: a copied kernel runs from tier 0, another from its family; once that is
    // built, the copied one runs from it too.
    let set = family_set(TierMode::Force);
    let tier0 = set.module_for("adam_step", || false).unwrap();
    set.module_for("bias_act_forward", || false).unwrap();
    assert_eq!(set.built(), ["tier0"]);
    let elementwise = set.module_for("scale", || false).unwrap();
    assert_eq!(set.built(), ["elementwise", "tier0"]);
    let fill = set.module_for("fill", || false).unwrap();
    assert!(Arc::ptr_eq(&fill, &elementwise) && !Arc::ptr_eq(&fill, &tier0));
    // The copies are final kernels: graphs may hold them.
    assert!(set.kernels_final());

    // On: only on a cold start with a prefetch, and only while the family is not in the disk
    // cache.
    {
        let mode = TierMode::Auto;
        let set = family_set(mode);
        set.module_for("softmax_xent", || false).unwrap();
        assert_eq!(set.built(), ["reduce"], "no prefetch: no copies");
        let set = family_set(mode);
        set.prefetching.store(true, Ordering::Relaxed);
        set.module_for("softmax_xent", || false).unwrap();
        set.module_for("adam_step", || true).unwrap();
        assert_eq!(set.built(), ["tier0"]);
        let optim = slot_of(&set, "optim");
        let set = family_set(mode);
        set.prefetching.store(true, Ordering::Relaxed);
        // A family in the disk cache loads rather than waiting for tier 0.
        let mut set = Arc::into_inner(set).unwrap();
        set.slots[optim].on_disk = OnceLock::from(true);
        set.module_for("adam_step", || false).unwrap();
        assert_eq!(set.built(), ["optim"]);
    }
    let set = family_set(TierMode::Off);
    set.prefetching.store(true, Ordering::Relaxed);
    set.module_for("fill", || false).unwrap();
    assert_eq!(set.built(), ["elementwise"]);
}

#[test]
fn tier0_covers_the_gemm_families_and_copies_from_elementwise_reduce_and_optim() {
    let set = family_set(TierMode::Auto);
    for (family, covered, copied) in [
        ("gemm", true, false),
        ("gemm_thin", true, false),
        ("elementwise", false, true),
        ("reduce", false, true),
        ("optim", false, true),
        ("optim_mixed", false, false),
        ("seq", false, false),
    ] {
        let slot = &set.slots[slot_of(&set, family)];
        assert_eq!((slot.covered, slot.copied), (covered, copied), "{family}");
    }
}

#[test]
fn the_prefetch_switch_defaults_to_gpus_only() {
    assert!(PREFETCH.parse(None).unwrap());
    for off in ["0", "off", "no"] {
        assert!(!PREFETCH.parse(Some(std::ffi::OsStr::new(off))).unwrap());
    }
    let err = PREFETCH
        .parse(Some(std::ffi::OsStr::new("soon")))
        .unwrap_err();
    assert!(err.to_string().contains("RNN_KERNEL_PREFETCH"), "{err}");
}
