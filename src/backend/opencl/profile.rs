//! The opt-in kernel timer (`ContextOptions::profile_kernels`, `RNN_PROFILE_KERNELS`): each
//! launch and device-side copy keeps its event, and the device's start/end timestamps are summed
//! per entry name once the queue has finished.
//!
//! Memory stays bounded: the events wait in a list of at most [`MAX_PENDING`]; a synchronize
//! folds them into the per-name sums, and a full list makes the launch that fills it wait for the
//! queue and fold first (a wait only a profiled run pays).

use std::collections::HashMap;
use std::sync::Arc;

use opencl3::event::{CL_PROFILING_COMMAND_END, CL_PROFILING_COMMAND_START};
use opencl3::event::{cl_ulong, get_event_profiling_info};
use opencl3::types::cl_event;
use parking_lot::Mutex;

use super::error::cl_error;
use super::event::release;
use crate::env_switch::Switch;
use crate::error::Result;
use crate::ops::KernelTime;

/// Events kept before a launch waits for the queue and folds them (a few training steps).
pub(super) const MAX_PENDING: usize = 4096;

/// `RNN_PROFILE_KERNELS`, which turns the timer on for every OpenCL context: `1`, `on`,
/// `true` do; unset, empty, `0`, `off`, `false` do not; anything else is an error.
const SWITCH: Switch = Switch {
    name: VAR,
    unset: false,
    empty: false,
    yes_no: false,
};
const VAR: &str = "RNN_PROFILE_KERNELS";

/// Whether this process's `RNN_PROFILE_KERNELS` turns the timer on (see [`SWITCH`]).
pub(super) fn enabled_by_env() -> Result<bool> {
    SWITCH.read_env()
}

/// An event of a finished or queued command, released when dropped.
struct Owned(cl_event);

impl Drop for Owned {
    fn drop(&mut self) {
        release(self.0);
    }
}

// SAFETY: an OpenCL event handle may be used and released from any thread (the API is
// thread-safe for every call but clSetKernelArg); this one is owned by exactly one `Owned`.
unsafe impl Send for Owned {}

#[derive(Default)]
struct State {
    /// Commands whose events have not been read yet, with their names.
    pending: Vec<(Arc<str>, Owned)>,
    /// Per name: completed launches and summed nanoseconds.
    totals: HashMap<Arc<str>, (u64, u64)>,
    /// Interned names, so recording a launch allocates nothing after its name's first launch.
    names: HashMap<String, Arc<str>>,
}

/// The collected times of one device.
#[derive(Default)]
pub(super) struct KernelTimer {
    state: Mutex<State>,
}

fn timestamp(event: cl_event, what: u32, name: &str) -> Result<cl_ulong> {
    get_event_profiling_info(event, what)
        .map(cl_ulong::from)
        .map_err(|code| cl_error(&format!("clGetEventProfilingInfo({name})"), code))
}

impl State {
    /// Reads every pending event into the sums. Only after the queue finished: an event's
    /// timestamps exist once its command completed.
    fn fold(&mut self) -> Result<()> {
        for (name, event) in std::mem::take(&mut self.pending) {
            let start = timestamp(event.0, CL_PROFILING_COMMAND_START, &name)?;
            let end = timestamp(event.0, CL_PROFILING_COMMAND_END, &name)?;
            let t = self.totals.entry(name).or_default();
            t.0 += 1;
            t.1 += end.saturating_sub(start);
        }
        Ok(())
    }
}

impl KernelTimer {
    /// Keeps the event of a command just queued as `name`. With [`MAX_PENDING`] events waiting,
    /// calls `finish` (the queue's `clFinish`) and folds them first.
    pub(super) fn record(
        &self,
        name: &str,
        event: cl_event,
        finish: impl FnOnce() -> Result<()>,
    ) -> Result<()> {
        let event = Owned(event);
        let mut s = self.state.lock();
        if s.pending.len() >= MAX_PENDING {
            // Under the lock: no other thread adds an event between the wait and the fold.
            finish()?;
            s.fold()?;
        }
        let name = match s.names.get(name) {
            Some(n) => n.clone(),
            None => {
                let n: Arc<str> = Arc::from(name);
                s.names.insert(name.to_string(), n.clone());
                n
            }
        };
        s.pending.push((name, event));
        Ok(())
    }

    /// Waits for the queue (`finish`) and folds the waiting events into the sums. The lock is
    /// held across both, so every event in the list was queued before the wait.
    pub(super) fn finish_and_fold(&self, finish: impl FnOnce() -> Result<()>) -> Result<()> {
        let mut s = self.state.lock();
        finish()?;
        s.fold()
    }

    /// Waits, folds, and hands out the sums (most time first), leaving them empty.
    pub(super) fn take(&self, finish: impl FnOnce() -> Result<()>) -> Result<Vec<KernelTime>> {
        let mut s = self.state.lock();
        finish()?;
        s.fold()?;
        let mut out: Vec<KernelTime> = s
            .totals
            .drain()
            .map(|(name, (launches, nanos))| KernelTime {
                entry: name.to_string(),
                launches,
                nanos,
            })
            .collect();
        out.sort_by(|a, b| b.nanos.cmp(&a.nanos).then_with(|| a.entry.cmp(&b.entry)));
        Ok(out)
    }

    /// Events still waiting to be read (for tests of the bound).
    #[cfg(test)]
    fn pending(&self) -> usize {
        self.state.lock().pending.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use std::ffi::{OsStr, OsString};

    #[test]
    fn the_variable_is_a_switch() {
        for (v, on) in [
            ("1", true),
            ("on", true),
            (" TRUE ", true),
            ("", false),
            ("0", false),
            ("off", false),
            ("False", false),
        ] {
            assert_eq!(SWITCH.parse(Some(OsStr::new(v))).unwrap(), on, "{v:?}");
        }
        assert!(!SWITCH.parse(None).unwrap());
        for bad in ["2", "yes", "kernels", "1,2"] {
            match SWITCH.parse(Some(OsStr::new(bad))) {
                Err(Error::InvalidEnv { name, value, .. }) => {
                    assert_eq!(name, VAR);
                    assert_eq!(value, bad);
                }
                r => panic!("{bad:?} gave {r:?}"),
            }
        }
        #[cfg(unix)]
        {
            use std::os::unix::ffi::OsStringExt;
            let not_utf8 = OsString::from_vec(vec![0x31, 0xff]);
            assert!(matches!(
                SWITCH.parse(Some(&not_utf8)),
                Err(Error::InvalidEnv { .. })
            ));
        }
    }

    #[test]
    fn an_empty_timer_reads_empty() {
        let t = KernelTimer::default();
        let mut waits = 0;
        assert!(
            t.take(|| {
                waits += 1;
                Ok(())
            })
            .unwrap()
            .is_empty()
        );
        assert_eq!(waits, 1, "reading waits for the queue first");
        assert_eq!(t.pending(), 0);
    }
}
