//! Which op-set modules a context builds ahead of their first use, in what order and at what
//! pace ([`super::modules::OpSet`]), and which entries get a module per activation.

use std::time::{Duration, Instant};

use parking_lot::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::kernel::Dialect;

/// The entries launched per activation: their kernels instantiate their loop once per
/// activation (`RNN_WITH_ACT`, kernels-cu/stream.cuh and kernels-cl/stream.cl), so a module for
/// one activation (`RNN_ONLY_ACT`) compiles a sixth of the code. `bias_act_backward_product`'s
/// six product loops made it the slowest kernel of a dense training step to compile.
const PER_ACTIVATION: &[&str] = &[
    "bias_act_forward",
    "activation",
    "act_backward",
    "bias_act_backward",
    "bias_act_backward_product",
];

/// The activation codes (`Activation::code`), ReLU first: the order a prefetch builds an
/// entry's modules in.
pub(super) const ACTIVATION_CODES: [u32; 6] = [1, 0, 3, 2, 4, 5];

/// Whether module `name` with `source` is built per activation: a [`PER_ACTIVATION`] entry
/// whose kernel in this dialect uses `RNN_WITH_ACT` (a use, not the macro's definition).
pub(super) fn per_activation(name: &str, source: &str) -> bool {
    PER_ACTIVATION.contains(&name)
        && source
            .lines()
            .any(|l| l.contains("RNN_WITH_ACT(") && !l.trim_start().starts_with("#define"))
}

/// The entries a training run is likely to launch first, in that order: a dense network's step
/// (forward, loss, backward, optimizer; CUDA's small products go to cuBLAS, so the tensor-core
/// GEMMs come after), its evaluation, then the recurrent layers' steps and cells. A prefetch
/// builds their modules first, then the rest in table order, then the warpgroup GEMMs, which
/// only large products take and which compile slowest. Names of every dialect; a dialect
/// without one skips it.
const LIKELY_ORDER: &[&str] = &[
    "fill",
    "gather_rows",
    "one_hot",
    "bias_act_forward",
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
    "sgemm_tc64",
    "sgemm_tc128",
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

/// The order a prefetch builds modules named `names` (their entries) in, as indices:
/// [`LIKELY_ORDER`]'s first, then the others in table order, [`LIKELY_LAST`]'s last.
pub(super) fn prefetch_order(names: &[&str]) -> Vec<usize> {
    let rank = |name: &str| {
        if let Some(at) = LIKELY_ORDER.iter().position(|l| *l == name) {
            (0, at)
        } else if let Some(at) = LIKELY_LAST.iter().position(|l| *l == name) {
            (2, at)
        } else {
            (1, 0)
        }
    };
    let mut order: Vec<usize> = (0..names.len()).collect();
    // Stable: the unlisted keep their table order, an entry's modules theirs.
    order.sort_by_key(|&i| rank(names[i]));
    order
}

/// How a background prefetch goes on a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Pace {
    /// Builds run in parallel (NVRTC, hiprtc): every thread starts at once.
    AtOnce,
    /// The driver builds one program at a time whatever the threads (NVIDIA's OpenCL; PoCL
    /// under `PROGRAM_LOCK`), so a prefetched build would hold up a first use behind it: one
    /// thread, which builds a module only while no first use has built one for [`QUIET`].
    WhenQuiet,
}

impl Pace {
    pub(super) fn of(dialect: Dialect) -> Self {
        match dialect {
            Dialect::OpenCl => Pace::WhenQuiet,
            _ => Pace::AtOnce,
        }
    }
}

/// How long first uses must have built nothing before a [`Pace::WhenQuiet`] prefetch builds
/// a module: longer than the gaps between a step's launches (host work and waits on the GPU),
/// short next to the step's compiles.
pub(super) const QUIET: Duration = Duration::from_millis(500);

/// How often a waiting [`Pace::WhenQuiet`] prefetch looks again (and at `stop`).
pub(super) const QUIET_POLL: Duration = Duration::from_millis(25);

/// First-use builds: how many are running, and when the last one ended.
#[derive(Default)]
pub(super) struct FirstUses {
    running: AtomicUsize,
    last_end: Mutex<Option<Instant>>,
}

/// Marks a first-use build from its start (before it waits for the module's lock) to its end.
pub(super) struct FirstUse<'a>(&'a FirstUses);

impl FirstUses {
    pub(super) fn begin(&self) -> FirstUse<'_> {
        self.running.fetch_add(1, Ordering::SeqCst);
        FirstUse(self)
    }

    /// Whether at least one first use has built a module, none is building one, and the last
    /// ended `period` ago or longer.
    pub(super) fn quiet_for(&self, period: Duration) -> bool {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefetch_builds_the_likely_kernels_first_and_the_warpgroup_gemms_last() {
        use crate::backend::{cuda, opencl};
        let names = |modules: Vec<crate::kernel::OpModule>| -> Vec<&'static str> {
            modules.into_iter().map(|m| m.name).collect()
        };
        let cuda = names(cuda::kernels::op_set_modules());
        let cl = names(opencl::kernels::op_set_modules(""));
        for name in LIKELY_ORDER.iter().chain(LIKELY_LAST) {
            assert!(
                cuda.iter().chain(&cl).any(|m| m == name),
                "{name} is no module's entry"
            );
        }
        for modules in [&cuda, &cl] {
            let order = prefetch_order(modules);
            let names: Vec<&str> = order.iter().map(|&i| modules[i]).collect();
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
                .copied()
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

    #[test]
    fn per_activation_reads_uses_not_the_definition() {
        let uses = "#define RNN_WITH_ACT(act, BODY) x\n  RNN_WITH_ACT(act, f<K>());\n";
        assert!(per_activation("act_backward", uses));
        assert!(!per_activation("softmax", uses));
        assert!(!per_activation(
            "act_backward",
            "#define RNN_WITH_ACT(act, BODY) x\n"
        ));
        let mut codes = ACTIVATION_CODES;
        codes.sort_unstable();
        assert_eq!(codes, [0, 1, 2, 3, 4, 5]);
        assert_eq!(ACTIVATION_CODES[0], crate::ops::Activation::Relu.code());
    }
}
