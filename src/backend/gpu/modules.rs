//! The built-in op set as independent modules, one per kernel family
//! ([`crate::backend::Device::op_set_modules`]): a launch compiles (or loads from the disk cache)
//! only the module holding its entry, on first use; each module has its own lock, so concurrent
//! first uses of one module compile it once and different modules compile at the same time.
//! `warm_up` compiles every module on a few threads; a context may also prefetch them in the
//! background as it is created ([`PREFETCH`]; which ones, in what order: [`super::prefetch`]);
//! dropping the context stops the prefetch and waits for the modules it is compiling. On a cold
//! start the f32 GEMMs launch the `tier0` family's stand-ins until their own families are built
//! ([`super::tier0`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use parking_lot::Mutex;

use super::prefetch::{self, PORTABLE_WORK, PlanSlot, Prefetch, PrefetchPlan};
use super::tier0::{self, TierMode};
use crate::backend::Device;
use crate::cache::{CacheKey, KernelCache};
use crate::device::DeviceKind;
use crate::env_switch::Switch;
use crate::error::{Error, Result};
use crate::kernel::{OpModule, TIER0, TIER0_COPIES};

/// `RNN_KERNEL_PREFETCH`: `1`/`on` makes every new context compile (or load) the op set's
/// modules on background threads while it starts working, `0`/`off` leaves each to its first
/// use. Unset: on for GPUs, off for OpenCL CPU devices (PoCL), whose programs build one at a
/// time.
pub(crate) const PREFETCH: Switch = Switch {
    name: "RNN_KERNEL_PREFETCH",
    unset: true,
    empty: true,
    yes_no: true,
};

/// Whether a new context on a device of `kind` prefetches its modules (see [`PREFETCH`]).
pub(super) fn prefetch_wanted(kind: DeviceKind) -> Result<bool> {
    match std::env::var_os(PREFETCH.name) {
        None => Ok(kind == DeviceKind::Gpu),
        Some(v) => PREFETCH.parse(Some(&v)),
    }
}

/// `f` of the disk-cache key of `source` built with `options` for `device`.
fn with_key<D: Device, R>(
    device: &D,
    source: &str,
    options: &[String],
    f: impl FnOnce(&CacheKey<'_>) -> R,
) -> R {
    let info = device.info();
    let compiler = device.compiler_identity();
    f(&CacheKey {
        source,
        options,
        device: &info.name,
        arch: &info.arch,
        compiler: &compiler,
    })
}

/// Compiles (or loads from the kernel cache) `source` for `device`; `Ok(true)` in the second
/// element when it was compiled, not loaded.
pub(super) fn build<D: Device>(
    device: &D,
    source: &str,
    options: &[String],
) -> Result<(D::Module, bool)> {
    let compiled = AtomicBool::new(false);
    let module = with_key(device, source, options, |key| {
        KernelCache::from_env().get_or_build(
            key,
            || {
                compiled.store(true, Ordering::Relaxed);
                device.build(source, options)
            },
            |binary| device.load(binary),
        )
    })?;
    Ok((module, compiled.into_inner()))
}

/// One module: its source and, once built, the loaded module.
struct Slot<M> {
    name: &'static str,
    source: String,
    /// The module, once built: read without waiting for a build in progress.
    loaded: OnceLock<Arc<M>>,
    /// Held while the module is built, so that it is built once.
    building: Mutex<()>,
    /// A family tier 0 stands in for ([`tier0::COVERED`]).
    covered: bool,
    /// A family some of whose kernels tier 0 holds copies of ([`TIER0_COPIES`]).
    copied: bool,
    /// When a background prefetch builds it.
    prefetch: Prefetch,
    /// Whether its binary was in the disk cache when first asked (asked once).
    on_disk: OnceLock<bool>,
    /// A stand-in was launched in its place (tier 0), or carried it while it builds
    /// ([`OpSet::carried`]): step graphs wait for it.
    stood_in: AtomicBool,
    /// Flops of the launches carried for this first-use module.
    carried_work: AtomicU64,
    /// A background build of this first-use module was started.
    background: AtomicBool,
}

/// The op set of one device as modules, built on first use.
///
/// Field order is drop order: the modules go before the device they were loaded on. A
/// background prefetch holds the set through an `Arc`, so whichever of the context and the
/// prefetch lets go last drops the modules, then the device.
pub(super) struct OpSet<D: Device> {
    slots: Vec<Slot<D::Module>>,
    /// Entry point -> index in `slots`.
    by_entry: HashMap<&'static str, usize>,
    /// The module of a device that builds its op set as one (`OpModule::entries` is `None`).
    catch_all: Option<usize>,
    /// The tier-0 family's module, if the device's op set has one.
    tier0: Option<usize>,
    tier_mode: TierMode,
    /// A background prefetch was started: a family tier 0 stands in for will be built.
    prefetching: AtomicBool,
    /// Cleared when the prefetch finds every family tier 0 covers in the disk cache: from then
    /// on a GEMM launch asks no more than this flag.
    maybe_cold: AtomicBool,
    /// Set when the context is dropped: a prefetch starts no further module.
    stop: AtomicBool,
    /// The background prefetch threads (and those building a first-use module a stand-in
    /// carries), joined when the context is dropped.
    prefetchers: Mutex<Vec<std::thread::JoinHandle<()>>>,
    /// Modules built so far (compiled, or loaded from the disk cache), for tests.
    builds: AtomicUsize,
    device: Arc<D>,
}

impl<D: Device> OpSet<D> {
    /// The op set `device` compiles, as modules, none built yet; the GEMMs always take the
    /// tier-0 stand-ins with `force_tier0`, else as `RNN_KERNEL_TIER0` says.
    pub(super) fn new(device: Arc<D>, force_tier0: bool) -> Result<Self> {
        let tier_mode = if force_tier0 {
            TierMode::Force
        } else {
            TierMode::from_env(device.info().backend)?
        };
        let modules = device.op_set_modules();
        Self::from_modules(device, modules, tier_mode)
    }

    /// The op set of `modules` on `device`, none built yet, its tier 0 used as `tier_mode` says.
    fn from_modules(device: Arc<D>, modules: Vec<OpModule>, tier_mode: TierMode) -> Result<Self> {
        let mut by_entry = HashMap::new();
        let mut catch_all = None;
        for (i, m) in modules.iter().enumerate() {
            let Some(entries) = &m.entries else {
                catch_all = Some(i);
                continue;
            };
            for &entry in entries {
                if let Some(other) = by_entry.insert(entry, i) {
                    return Err(Error::InvalidArgument(format!(
                        "op-set modules {} and {} both define '{entry}'",
                        modules[other].name, m.name
                    )));
                }
            }
        }
        let tier0 = modules.iter().position(|m| m.name == TIER0);
        let backend = device.info().backend;
        let vendor_gemm = device.has_vendor_gemm();
        let slots = modules
            .into_iter()
            .map(|m| Slot {
                name: m.name,
                prefetch: prefetch::family_prefetch(m.name, backend, vendor_gemm),
                source: m.source,
                loaded: OnceLock::new(),
                building: Mutex::new(()),
                covered: tier0.is_some() && tier0::COVERED.contains(&m.name),
                copied: tier0.is_some()
                    && m.entries.iter().flatten().any(|e| TIER0_COPIES.contains(e)),
                on_disk: OnceLock::new(),
                stood_in: AtomicBool::new(false),
                carried_work: AtomicU64::new(0),
                background: AtomicBool::new(false),
            })
            .collect();
        Ok(OpSet {
            slots,
            by_entry,
            catch_all,
            tier0,
            tier_mode,
            prefetching: AtomicBool::new(false),
            maybe_cold: AtomicBool::new(true),
            stop: AtomicBool::new(false),
            prefetchers: Mutex::new(Vec::new()),
            builds: AtomicUsize::new(0),
            device,
        })
    }

    /// The index of the module that defines `entry`.
    fn index_of(&self, entry: &str) -> Result<usize> {
        self.by_entry
            .get(entry)
            .copied()
            .or(self.catch_all)
            .ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "{}: no module of the op set defines a kernel named '{entry}'",
                    self.device.info().id
                ))
            })
    }

    /// The module holding `entry`, built (or loaded from the disk cache) on first use. While
    /// `recording` a graph, a module still to build is built on another thread: the recording
    /// thread makes no driver call that a recording could refuse (a module load), and the
    /// load from another thread leaves the recording intact (see `capture_gate.rs`).
    pub(super) fn module_for(
        &self,
        entry: &str,
        recording: impl Fn() -> bool,
    ) -> Result<Arc<D::Module>> {
        let index = self.index_of(entry)?;
        if let Some(m) = self.slots[index].loaded.get() {
            return Ok(m.clone());
        }
        if let Some(t0) = self.copy_source(index, entry) {
            match self.module_at(t0, &recording) {
                Ok(module) => return Ok(module),
                Err(e) => log::debug!(
                    "{}: no tier-0 copy of {entry} ({e}); waiting for {}",
                    self.device.info().id,
                    self.slots[index].name
                ),
            }
        }
        self.module_at(index, recording)
    }

    /// The tier-0 module's index when a launch of `entry` (of module `index`, not built) is to
    /// run tier 0's copy of it: always with tier 0 forced; on (not `force`), on a cold start with
    /// a prefetch while `entry`'s family is not in the disk cache (one look per family).
    fn copy_source(&self, index: usize, entry: &str) -> Option<usize> {
        let t0 = self.tier0?;
        if !self.slots[index].copied || !TIER0_COPIES.contains(&entry) {
            return None;
        }
        match self.tier_mode {
            TierMode::Off => None,
            TierMode::Force => Some(t0),
            TierMode::Auto => (self.prefetching.load(Ordering::Relaxed)
                && self.maybe_cold.load(Ordering::Relaxed)
                && !self.cached(index))
            .then_some(t0),
        }
    }

    /// Module `index`, as [`OpSet::module_for`] gets it.
    fn module_at(&self, index: usize, recording: impl FnOnce() -> bool) -> Result<Arc<D::Module>> {
        if let Some(m) = self.slots[index].loaded.get() {
            return Ok(m.clone());
        }
        if recording() {
            return std::thread::scope(|s| {
                s.spawn(|| self.ensure(index))
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            });
        }
        self.ensure(index)
    }

    /// The tier-0 module when a launch of `entry` is to use its stand-in (`sgemm_tier0`) now,
    /// `None` when it launches `entry` itself ([`OpSet::module_for`]). With the stand-ins on
    /// (not `force`): while `entry`'s family is one tier 0 covers, is not built yet, no graph is
    /// `recording`, and its binary was not in the disk cache (one look per family; a warm start
    /// loads the family as ever), on a cold start with a prefetch. A family the prefetch builds
    /// (marked stood in: step graphs wait for it) is stood in for until built; a first-use one
    /// (NVIDIA OpenCL's, [`prefetch::family_prefetch`]) until the stand-ins have carried
    /// [`PORTABLE_WORK`] flops (`work` is this launch's), when it starts building in the
    /// background; one the prefetch builds after a cold start (`Prefetch::AfterCold`) as a
    /// first-use one on the cold start itself, as an early one once tier 0 is in the disk
    /// cache. A stand-in that fails to build leaves the launch to its family.
    pub(super) fn tier0_for(
        self: &Arc<Self>,
        entry: &str,
        work: u64,
        recording: impl FnOnce() -> bool,
    ) -> Result<Option<Arc<D::Module>>> {
        match self.tier_mode {
            TierMode::Off => return Ok(None),
            TierMode::Force => {
                // A device that builds its op set as one module has the stand-ins in it.
                return match self.tier0.or(self.catch_all) {
                    Some(index) => self.module_at(index, recording).map(Some),
                    None => Ok(None),
                };
            }
            TierMode::Auto => {}
        }
        let Some(t0) = self.tier0 else {
            return Ok(None);
        };
        if !self.prefetching.load(Ordering::Relaxed) || !self.maybe_cold.load(Ordering::Relaxed) {
            return Ok(None);
        }
        let index = self.index_of(entry)?;
        let slot = &self.slots[index];
        if !slot.covered || slot.loaded.get().is_some() || recording() || self.cached(index) {
            return Ok(None);
        }
        match self.ensure(t0) {
            Ok(module) => {
                match slot.prefetch {
                    Prefetch::FirstUse => self.carry(index, work, PORTABLE_WORK),
                    // Built by the prefetch of a start after a cold one (tier 0 was cached),
                    // carried as a first-use family on the cold start itself.
                    Prefetch::AfterCold if !self.cached(t0) => {
                        self.carry(index, work, PORTABLE_WORK)
                    }
                    _ => slot.stood_in.store(true, Ordering::Relaxed),
                }
                Ok(Some(module))
            }
            Err(e) => {
                log::debug!(
                    "{}: no tier-0 stand-in for {entry} ({e}); waiting for {}",
                    self.device.info().id,
                    slot.name
                );
                Ok(None)
            }
        }
    }

    /// Whether the vendor library is to take a product of `entry` now, in place of a kernel of
    /// a family the prefetch builds early: on a cold start with a prefetch while that family is
    /// one the tier-0 stand-ins cover (the f32 GEMMs), is not built yet and was not in the disk
    /// cache, and no graph is `recording` (a recording waits for the family). The family is
    /// then marked stood in: step graphs wait for it ([`OpSet::kernels_final`]). Never with
    /// tier 0 forced (the stand-ins take every launch they cover) or without a vendor library.
    /// cuBLAS runs any product at once, so a first step waits for neither the thin kernels
    /// (CUDA's slowest early family to build: 2.09 s of NVRTC on an H100 machine against 1.14
    /// for the next, 2026-11-27) nor a stand-in (first step 1.42 s against 1.60, H100,
    /// 2026-12-07).
    pub(super) fn vendor_stands_in(
        &self,
        entry: &str,
        recording: impl FnOnce() -> bool,
    ) -> Result<bool> {
        if self.tier_mode == TierMode::Force
            || !self.prefetching.load(Ordering::Relaxed)
            || !self.device.has_vendor_gemm()
        {
            return Ok(false);
        }
        let index = self.index_of(entry)?;
        let slot = &self.slots[index];
        if !slot.covered
            || slot.prefetch != Prefetch::Early
            || slot.loaded.get().is_some()
            || recording()
            || self.cached(index)
        {
            return Ok(false);
        }
        slot.stood_in.store(true, Ordering::Relaxed);
        Ok(true)
    }

    /// Whether a launch of `entry` is to take a route that can carry it (the vendor library, or
    /// a portable kernel) because `entry`'s family is a first-use one
    /// ([`prefetch::family_prefetch`]) that is neither built nor in the disk cache, and no graph
    /// is `recording` (a recording waits for the family). Adds `work` (the launch's flops) to
    /// what the family's carriers did; once that reaches `build_after`, starts building the
    /// family in the background, and from then on step graphs wait for it
    /// ([`OpSet::kernels_final`]). The first launch after the build runs the family's kernel.
    pub(super) fn carried(
        self: &Arc<Self>,
        entry: &str,
        work: u64,
        build_after: u64,
        recording: impl FnOnce() -> bool,
    ) -> Result<bool> {
        let index = self.index_of(entry)?;
        let slot = &self.slots[index];
        if slot.prefetch != Prefetch::FirstUse
            || slot.loaded.get().is_some()
            || recording()
            || self.cached(index)
        {
            return Ok(false);
        }
        self.carry(index, work, build_after);
        Ok(true)
    }

    /// Adds `work` to what module `index`'s carriers did; once that reaches `build_after`,
    /// starts building it in the background, and from then on step graphs wait for it.
    fn carry(self: &Arc<Self>, index: usize, work: u64, build_after: u64) {
        let slot = &self.slots[index];
        let carried = slot
            .carried_work
            .fetch_add(work, Ordering::Relaxed)
            .saturating_add(work);
        if carried >= build_after && self.build_in_background(index) {
            slot.stood_in.store(true, Ordering::Relaxed);
        }
    }

    /// Starts building module `index` on a thread of its own, once (later calls report whether
    /// the first started it); false when none could be started or the context is going.
    fn build_in_background(self: &Arc<Self>, index: usize) -> bool {
        let slot = &self.slots[index];
        // Under the threads' lock: `stop` sets its flag before taking them, so a thread
        // started here is one it joins.
        let mut threads = self.prefetchers.lock();
        if self.stop.load(Ordering::Relaxed) {
            return false;
        }
        if slot.background.swap(true, Ordering::Relaxed) {
            return true;
        }
        let set = self.clone();
        let spawned = std::thread::Builder::new()
            .name("rnn-kernel-build".into())
            .spawn(move || {
                if let Err(e) = set.ensure(index) {
                    log::debug!(
                        "{}: building op-set module {} in the background failed (its next \
                         use reports it): {e}",
                        set.device.info().id,
                        set.slots[index].name
                    );
                }
            });
        match spawned {
            Ok(handle) => {
                threads.push(handle);
                true
            }
            Err(e) => {
                // The launch waits for the module instead; a later one may try again.
                slot.background.store(false, Ordering::Relaxed);
                log::debug!("no background kernel build thread: {e}");
                false
            }
        }
    }

    /// False while a family that a tier-0 stand-in ran for, or whose carried launches started
    /// its build ([`OpSet::carried`]), is still being built: a graph recorded now would keep
    /// the stand-in (or wait for the family), so step graphs wait. In any tier mode: cuBLAS
    /// carries `sgemm_wg128`'s products, and on a cold start the thin ones
    /// ([`OpSet::vendor_stands_in`]), with tier 0 off.
    pub(super) fn kernels_final(&self) -> bool {
        !self
            .slots
            .iter()
            .any(|s| s.stood_in.load(Ordering::Relaxed) && s.loaded.get().is_none())
    }

    /// Whether module `index`'s binary is in the disk cache (looked up once).
    fn cached(&self, index: usize) -> bool {
        let slot = &self.slots[index];
        *slot.on_disk.get_or_init(|| {
            with_key(&*self.device, &slot.source, &[], |key| {
                KernelCache::from_env().contains(key)
            })
        })
    }

    /// What a prefetch builds, in what order, on how many threads ([`prefetch::plan`]): cold
    /// when tier 0 is forced, or on with a family it covers or holds copies of that the prefetch
    /// builds missing from the disk cache (first-use families do not count: a run that never
    /// launches them would find every later start cold).
    fn prefetch_plan(&self, threads: usize) -> PrefetchPlan {
        let cold = match (self.tier0, self.tier_mode) {
            (Some(_), TierMode::Force) => true,
            (Some(_), TierMode::Auto) => (0..self.slots.len()).any(|i| {
                let slot = &self.slots[i];
                (slot.covered || slot.copied)
                    && slot.prefetch != Prefetch::FirstUse
                    && !self.cached(i)
            }),
            _ => false,
        };
        if !cold {
            self.maybe_cold.store(false, Ordering::Relaxed);
        }
        let slots: Vec<PlanSlot> = self
            .slots
            .iter()
            .enumerate()
            .map(|(i, s)| PlanSlot {
                prefetch: s.prefetch,
                covered: s.covered,
                cached: self.cached(i),
            })
            .collect();
        prefetch::plan(
            &slots,
            self.tier0,
            cold,
            self.device.info().backend,
            threads,
        )
    }

    /// Module `index`, built (or loaded) now if it is not yet.
    fn ensure(&self, index: usize) -> Result<Arc<D::Module>> {
        let slot = &self.slots[index];
        if let Some(m) = slot.loaded.get() {
            return Ok(m.clone());
        }
        let _building = slot.building.lock();
        if let Some(m) = slot.loaded.get() {
            return Ok(m.clone());
        }
        let started = Instant::now();
        let (module, compiled) = build(&*self.device, &slot.source, &[])?;
        self.builds.fetch_add(1, Ordering::Relaxed);
        log::debug!(
            "{}: op-set module {} {} in {:.2} s",
            self.device.info().id,
            slot.name,
            if compiled {
                "compiled"
            } else {
                "loaded from the kernel cache"
            },
            started.elapsed().as_secs_f64()
        );
        let module = Arc::new(module);
        // Only this thread sets it, under `building`.
        let _ = slot.loaded.set(module.clone());
        Ok(module)
    }

    /// Builds every module not yet built (tier 0 only when `RNN_KERNEL_TIER0` forces it: a
    /// warm cache never needs it), on up to `threads` threads at once; the first error (in
    /// module order) is returned once all have been tried.
    pub(super) fn build_all(&self, threads: usize) -> Result<()> {
        let next = AtomicUsize::new(0);
        let errors: Mutex<Vec<(usize, Error)>> = Mutex::new(Vec::new());
        let work = || {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= self.slots.len() {
                    return;
                }
                if Some(i) == self.tier0 && self.tier_mode != TierMode::Force {
                    continue;
                }
                if let Err(e) = self.ensure(i) {
                    errors.lock().push((i, e));
                }
            }
        };
        std::thread::scope(|s| {
            for _ in 1..threads.clamp(1, self.slots.len().max(1)) {
                s.spawn(work);
            }
            work();
        });
        let mut errors = errors.into_inner();
        errors.sort_by_key(|(i, _)| *i);
        match errors.into_iter().next() {
            Some((_, e)) => Err(e),
            None => Ok(()),
        }
    }

    /// Starts building the modules on background threads (at most `threads`, in the order
    /// and on the threads of [`OpSet::prefetch_plan`], which the first thread draws up) and
    /// returns at once. The threads hold the set until they finish; [`OpSet::stop`] makes them
    /// start no further module and waits for them. A failed build is logged and left unbuilt:
    /// the first use builds it again and returns the error, with the compiler's full log.
    pub(super) fn prefetch(self: &Arc<Self>, threads: usize) {
        self.prefetching.store(true, Ordering::Relaxed);
        let threads = threads.clamp(1, self.slots.len().max(1));
        let next = Arc::new(AtomicUsize::new(0));
        let plan = Arc::new(OnceLock::new());
        for ordinal in 0..threads {
            let set = self.clone();
            let next = next.clone();
            let plan = plan.clone();
            let spawned = std::thread::Builder::new()
                .name("rnn-kernel-prefetch".into())
                .spawn(move || {
                    let plan: &PrefetchPlan = plan.get_or_init(|| set.prefetch_plan(threads));
                    if ordinal >= plan.threads {
                        return;
                    }
                    while !set.stop.load(Ordering::Relaxed) {
                        let Some(&i) = plan.order.get(next.fetch_add(1, Ordering::Relaxed)) else {
                            return;
                        };
                        if let Err(e) = set.ensure(i) {
                            log::debug!(
                                "{}: prefetching op-set module {} failed (its first use \
                                 reports it): {e}",
                                set.device.info().id,
                                set.slots[i].name
                            );
                        }
                    }
                });
            match spawned {
                Ok(handle) => self.prefetchers.lock().push(handle),
                Err(e) => {
                    // Every module still builds on first use.
                    log::debug!("no kernel prefetch thread: {e}");
                    return;
                }
            }
        }
    }

    /// Makes a running prefetch start no further module, and waits for the modules it is
    /// building: when the context goes, no thread of it is left inside a compiler or driver (a
    /// process exiting under such a thread may crash in the library's teardown). Called from
    /// the context's drop, never from a prefetch thread.
    pub(super) fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
        let threads = std::mem::take(&mut *self.prefetchers.lock());
        for t in threads {
            if t.join().is_err() {
                log::warn!(
                    "{}: a kernel prefetch thread panicked",
                    self.device.info().id
                );
            }
        }
    }

    /// The names of the modules built so far (compiled or loaded), in table order.
    #[cfg(all(test, feature = "cuda", feature = "opencl", feature = "hip"))]
    pub(super) fn built(&self) -> Vec<&'static str> {
        self.slots
            .iter()
            .filter(|s| s.loaded.get().is_some())
            .map(|s| s.name)
            .collect()
    }

    /// How many module builds (compiles or disk-cache loads) this set has done.
    #[cfg(all(test, feature = "cuda", feature = "opencl", feature = "hip"))]
    pub(super) fn builds(&self) -> usize {
        self.builds.load(Ordering::Relaxed)
    }
}

/// Threads for building modules at once: the cores this process may use.
pub(super) fn build_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

// The tables are checked against the sources with the kernel contract's reader, which every
// dialect's sources build.
#[cfg(all(test, feature = "cuda", feature = "opencl", feature = "hip"))]
mod tests {
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
}
