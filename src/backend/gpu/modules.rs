//! The built-in op set as independent modules, one per kernel
//! ([`crate::backend::Device::op_set_modules`]): a launch compiles (or loads from the disk cache)
//! only the module holding its entry, on first use; each module has its own lock, so concurrent
//! first uses of one module compile it once and different modules compile at the same time.
//! `warm_up` compiles every module on a few threads; a context may also prefetch them all in
//! the background ([`PREFETCH`]), in the order a training run is likely to need them
//! ([`LIKELY_ORDER`]): at once where builds run in parallel (NVRTC, hiprtc), one at a time once
//! first uses have gone quiet where the driver builds one program at a time (OpenCL), so that
//! the kernels a step launches are not queued behind others. Dropping the context stops the
//! prefetch and waits for the modules it is compiling.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::backend::Device;
use crate::cache::{CacheKey, KernelCache};
use crate::device::DeviceKind;
use crate::env_switch::Switch;
use crate::error::{Error, Result};
use crate::kernel::{Dialect, OpModule};

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

/// Compiles (or loads from the kernel cache) `source` for `device`; `Ok(true)` in the second
/// element when it was compiled, not loaded.
pub(super) fn build<D: Device>(
    device: &D,
    source: &str,
    options: &[String],
) -> Result<(D::Module, bool)> {
    let info = device.info();
    let compiler = device.compiler_identity();
    let key = CacheKey {
        source,
        options,
        device: &info.name,
        arch: &info.arch,
        compiler: &compiler,
    };
    let compiled = AtomicBool::new(false);
    let module = KernelCache::from_env().get_or_build(
        &key,
        || {
            compiled.store(true, Ordering::Relaxed);
            device.build(source, options)
        },
        |binary| device.load(binary),
    )?;
    Ok((module, compiled.into_inner()))
}

/// The entries a training run is likely to launch first, in that order: a dense network's step
/// (forward, loss, backward, optimizer), its evaluation, then the recurrent layers' steps and
/// cells. A prefetch builds their modules first, then the rest in table order, then the
/// warpgroup GEMMs, which only large products take and which compile slowest. Names of every
/// dialect; a dialect without one skips it.
const LIKELY_ORDER: &[&str] = &[
    "fill",
    "gather_rows",
    "one_hot",
    "bias_act_forward",
    "sgemm_tc64",
    "sgemm_tc128",
    "sgemm",
    "sgemm_split_sum",
    "sgemm_thin",
    "sgemm_thin_k",
    "sgemm_split",
    "sgemm_tile64_split",
    "softmax_xent",
    "mse",
    "bias_act_backward",
    "bias_act_backward_product",
    "act_backward",
    "sum_cols",
    "sum_partial",
    "sum_final",
    "clip_final",
    "clip_scale",
    "adam_step",
    "sgd_step",
    "softmax",
    "log_softmax",
    "activation",
    "scale",
    "axpy",
    "add",
    "mul",
    "rnn_step_forward",
    "rnn_step_backward",
    "lstm_step_forward",
    "lstm_step_backward",
    "gru_step_forward",
    "gru_step_backward",
    "lstm_cell_forward",
    "lstm_cell_backward",
    "gru_cell_forward",
    "gru_cell_backward",
];

/// The entries a prefetch builds last.
const LIKELY_LAST: &[&str] = &["sgemm_wg64", "sgemm_wg128"];

/// The order a prefetch builds `modules` in (indices): [`LIKELY_ORDER`]'s first, then the
/// others in table order, [`LIKELY_LAST`]'s last.
fn prefetch_order(modules: &[OpModule]) -> Vec<usize> {
    let rank = |m: &OpModule| {
        let first = |list: &[&str]| {
            m.entries
                .iter()
                .flatten()
                .filter_map(|e| list.iter().position(|l| l == e))
                .min()
        };
        if let Some(at) = first(LIKELY_ORDER) {
            (0, at)
        } else if let Some(at) = first(LIKELY_LAST) {
            (2, at)
        } else {
            (1, 0)
        }
    };
    let mut order: Vec<usize> = (0..modules.len()).collect();
    // Stable: the unlisted keep their table order.
    order.sort_by_key(|&i| rank(&modules[i]));
    order
}

/// How a background prefetch goes on a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pace {
    /// Builds run in parallel (NVRTC, hiprtc): every thread starts at once.
    AtOnce,
    /// The driver builds one program at a time whatever the threads (NVIDIA's OpenCL; PoCL
    /// under `PROGRAM_LOCK`), so a prefetched build would hold up a first use behind it: one
    /// thread, which builds a module only while no first use has built one for [`QUIET`].
    WhenQuiet,
}

impl Pace {
    fn of(dialect: Dialect) -> Self {
        match dialect {
            Dialect::OpenCl => Pace::WhenQuiet,
            _ => Pace::AtOnce,
        }
    }
}

/// How long first uses must have built nothing before a [`Pace::WhenQuiet`] prefetch builds
/// a module: longer than the gaps between a step's launches (host work and waits on the GPU),
/// short next to the step's compiles.
const QUIET: Duration = Duration::from_millis(500);

/// How often a waiting [`Pace::WhenQuiet`] prefetch looks again (and at `stop`).
const QUIET_POLL: Duration = Duration::from_millis(25);

/// First-use builds: how many are running, and when the last one ended.
#[derive(Default)]
struct FirstUses {
    running: AtomicUsize,
    last_end: Mutex<Option<Instant>>,
}

/// Marks a first-use build from its start (before it waits for the module's lock) to its end.
struct FirstUse<'a>(&'a FirstUses);

impl FirstUses {
    fn begin(&self) -> FirstUse<'_> {
        self.running.fetch_add(1, Ordering::SeqCst);
        FirstUse(self)
    }

    /// Whether at least one first use has built a module, none is building one, and the last
    /// ended `period` ago or longer.
    fn quiet_for(&self, period: Duration) -> bool {
        self.running.load(Ordering::SeqCst) == 0
            && self.last_end.lock().is_some_and(|t| t.elapsed() >= period)
    }
}

impl Drop for FirstUse<'_> {
    fn drop(&mut self) {
        *self.0.last_end.lock() = Some(Instant::now());
        self.0.running.fetch_sub(1, Ordering::SeqCst);
    }
}

/// One module: its source and, once built, the loaded module.
struct Slot<M> {
    name: &'static str,
    source: String,
    /// Held while the module is built, so that it is built once.
    loaded: Mutex<Option<Arc<M>>>,
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
    /// Module indices in the order a prefetch builds them ([`prefetch_order`]).
    order: Vec<usize>,
    /// First-use builds, which a [`Pace::WhenQuiet`] prefetch waits for.
    first_uses: FirstUses,
    /// Set when the context is dropped: a prefetch starts no further module.
    stop: AtomicBool,
    /// The background prefetch threads, joined when the context is dropped.
    prefetchers: Mutex<Vec<std::thread::JoinHandle<()>>>,
    /// Modules built so far (compiled, or loaded from the disk cache), for tests.
    builds: AtomicUsize,
    device: Arc<D>,
}

impl<D: Device> OpSet<D> {
    /// The op set `device` compiles, as modules, none built yet.
    pub(super) fn new(device: Arc<D>) -> Result<Self> {
        let modules = device.op_set_modules();
        Self::with_modules(device, modules)
    }

    /// `modules` for `device`, none built yet.
    fn with_modules(device: Arc<D>, modules: Vec<OpModule>) -> Result<Self> {
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
        let order = prefetch_order(&modules);
        let slots = modules
            .into_iter()
            .map(|m| Slot {
                name: m.name,
                source: m.source,
                loaded: Mutex::new(None),
            })
            .collect();
        Ok(OpSet {
            slots,
            by_entry,
            catch_all,
            order,
            first_uses: FirstUses::default(),
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
        recording: impl FnOnce() -> bool,
    ) -> Result<Arc<D::Module>> {
        let index = self.index_of(entry)?;
        if let Some(m) = self.slots[index].loaded.lock().as_ref() {
            return Ok(m.clone());
        }
        let _first_use = self.first_uses.begin();
        if recording() {
            return std::thread::scope(|s| {
                s.spawn(|| self.ensure(index))
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            });
        }
        self.ensure(index)
    }

    /// Module `index`, built (or loaded) now if it is not yet.
    fn ensure(&self, index: usize) -> Result<Arc<D::Module>> {
        let slot = &self.slots[index];
        let mut loaded = slot.loaded.lock();
        if let Some(m) = loaded.as_ref() {
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
        *loaded = Some(module.clone());
        Ok(module)
    }

    /// Builds every module not yet built, on up to `threads` threads at once; the first error
    /// (in module order) is returned once all have been tried.
    pub(super) fn build_all(&self, threads: usize) -> Result<()> {
        let next = AtomicUsize::new(0);
        let errors: Mutex<Vec<(usize, Error)>> = Mutex::new(Vec::new());
        let work = || {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= self.slots.len() {
                    return;
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

    /// Starts building every module on background threads (at most `threads`; one where the
    /// device builds one program at a time, see [`Pace`]) in [`prefetch_order`], and returns at
    /// once. The threads hold the set until they finish; [`OpSet::stop`] makes them start no
    /// further module and waits for them. A failed build is logged and left unbuilt: the first
    /// use builds it again and returns the error, with the compiler's full log.
    pub(super) fn prefetch(self: &Arc<Self>, threads: usize) {
        let pace = Pace::of(self.device.dialect());
        let threads = match pace {
            Pace::AtOnce => threads.clamp(1, self.slots.len().max(1)),
            Pace::WhenQuiet => 1,
        };
        let next = Arc::new(AtomicUsize::new(0));
        for _ in 0..threads {
            let set = self.clone();
            let next = next.clone();
            let spawned = std::thread::Builder::new()
                .name("rnn-kernel-prefetch".into())
                .spawn(move || {
                    while !set.stop.load(Ordering::Relaxed) {
                        if pace == Pace::WhenQuiet && !set.first_uses.quiet_for(QUIET) {
                            std::thread::sleep(QUIET_POLL);
                            continue;
                        }
                        let at = next.fetch_add(1, Ordering::Relaxed);
                        let Some(&i) = set.order.get(at) else {
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
            .filter(|s| s.loaded.lock().is_some())
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

    /// Each dialect's modules define one kernel each, the one they are named after and list,
    /// read back from the module's source: every entry of the op set is in exactly one module.
    #[test]
    fn every_module_defines_exactly_its_own_kernel() {
        use crate::backend::{cuda, hip, opencl};
        let dialects = [
            (
                cuda::kernels::op_set_modules(),
                cuda::kernels::op_set_source(),
                false,
            ),
            (
                hip::kernels::op_set_modules(),
                hip::kernels::op_set_source(),
                false,
            ),
            (
                opencl::kernels::op_set_modules(""),
                opencl::kernels::op_set_source(),
                true,
            ),
        ];
        for (modules, whole, opencl) in dialects {
            let mut seen = BTreeSet::new();
            for m in &modules {
                let defined: Vec<String> = signatures::kernels(&m.source, opencl)
                    .into_iter()
                    .map(|s| s.entry)
                    .collect();
                assert_eq!(defined, [m.name], "module {} ({})", m.name, m.family);
                assert_eq!(m.entries.as_deref(), Some(&[m.name][..]));
                assert!(seen.insert(m.name), "{} is two modules", m.name);
            }
            let all: BTreeSet<String> = signatures::kernels(&whole, opencl)
                .into_iter()
                .map(|s| s.entry)
                .collect();
            assert_eq!(
                seen.iter().map(|e| e.to_string()).collect::<BTreeSet<_>>(),
                all
            );
        }
    }

    #[test]
    fn a_prefetch_builds_the_likely_kernels_first_and_the_warpgroup_gemms_last() {
        use crate::backend::{cuda, opencl};
        let cuda = cuda::kernels::op_set_modules();
        let cl = opencl::kernels::op_set_modules("");
        for name in LIKELY_ORDER.iter().chain(LIKELY_LAST) {
            assert!(
                cuda.iter().chain(&cl).any(|m| m.name == *name),
                "{name} is no module's entry"
            );
        }
        for modules in [&cuda, &cl] {
            let order = prefetch_order(modules);
            let names: Vec<&str> = order.iter().map(|&i| modules[i].name).collect();
            let mut sorted = order.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, (0..modules.len()).collect::<Vec<_>>());
            assert_eq!(names[..3], ["fill", "gather_rows", "one_hot"]);
            let last = names.last().unwrap();
            assert!(LIKELY_LAST.contains(last), "{last}");
            // The unlisted keep their table order.
            let unlisted: Vec<&str> = names
                .iter()
                .copied()
                .filter(|n| !LIKELY_ORDER.contains(n) && !LIKELY_LAST.contains(n))
                .collect();
            let in_table: Vec<&str> = modules
                .iter()
                .map(|m| m.name)
                .filter(|n| unlisted.contains(n))
                .collect();
            assert_eq!(unlisted, in_table);
        }
    }

    #[test]
    fn first_uses_go_quiet_only_after_one_has_ended() {
        let uses = FirstUses::default();
        assert!(!uses.quiet_for(Duration::ZERO), "none yet");
        let one = uses.begin();
        let two = uses.begin();
        drop(one);
        assert!(!uses.quiet_for(Duration::ZERO), "one still running");
        drop(two);
        assert!(uses.quiet_for(Duration::ZERO));
        assert!(!uses.quiet_for(Duration::from_secs(3600)));
        assert_eq!(Pace::of(Dialect::OpenCl), Pace::WhenQuiet);
        assert_eq!(Pace::of(Dialect::Cuda), Pace::AtOnce);
    }

    fn recording_device(dialect: Dialect) -> Arc<RecordingDevice> {
        let (device, _) = RecordingDevice::new(Imitate {
            dialect,
            compute_units: 4,
            sgemm: Box::new(|_, _, _| crate::backend::SGEMM_TC64),
            co_resident: None,
        });
        Arc::new(device)
    }

    fn recording_set() -> OpSet<RecordingDevice> {
        OpSet::new(recording_device(Dialect::OpenCl)).unwrap()
    }

    /// The CUDA op set's modules on a device that reads kernels from sources.
    fn per_kernel_set(dialect: Dialect) -> Arc<OpSet<RecordingDevice>> {
        let modules = crate::backend::cuda::kernels::op_set_modules();
        Arc::new(OpSet::with_modules(recording_device(dialect), modules).unwrap())
    }

    #[test]
    fn a_first_use_builds_only_its_kernel_once_however_many_threads_ask() {
        let set = per_kernel_set(Dialect::Cuda);
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| set.module_for("softmax", || false).unwrap());
                s.spawn(|| set.module_for("adam_step", || false).unwrap());
            }
        });
        assert_eq!(set.builds(), 2);
        assert_eq!(set.built(), ["softmax", "adam_step"]);
        set.module_for("softmax", || true).unwrap();
        assert_eq!(set.builds(), 2);
    }

    #[test]
    fn a_quiet_prefetch_waits_for_a_first_use_to_end() {
        let set = per_kernel_set(Dialect::OpenCl);
        set.prefetch(4);
        std::thread::sleep(QUIET_POLL * 4);
        assert_eq!(set.builds(), 0, "no first use yet: the prefetch waits");
        set.module_for("fill", || false).unwrap();
        let all = set.slots.len();
        let deadline = Instant::now() + Duration::from_secs(60);
        while set.builds() < all && Instant::now() < deadline {
            std::thread::sleep(QUIET_POLL);
        }
        set.stop();
        assert_eq!(
            set.builds(),
            all,
            "each module once, after the quiet period"
        );
        assert_eq!(Arc::strong_count(&set), 1);
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
