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
mod tests;
