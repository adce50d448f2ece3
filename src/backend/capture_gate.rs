//! The process-wide count of graph captures underway (CUDA and HIP), which calls that may
//! synchronize the whole device wait out. The driver cannot synchronize a stream while it
//! records, so a device-wide synchronization from any thread invalidates every recording in
//! progress, thread-local capture mode or not: on the H100 (driver 580) a `cuCtxSynchronize`
//! from a second thread fails with `CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED` and the recording
//! ends in `CUDA_ERROR_STREAM_CAPTURE_INVALIDATED` (while `cuMemAlloc`, `cuMemFree`,
//! `cuModuleLoadData` and `cuModuleUnload` there did not). The calls gated here are the ones
//! documented to synchronize or that may: cuBLAS handle setup and teardown, `cuMemFree` and
//! `hipFree`, module unloads.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, PoisonError};

use crate::device::DeviceInfo;
use crate::error::{Error, Result};

/// Captures underway in this process, on any context, and the condition their ends signal.
static CAPTURES: (Mutex<usize>, Condvar) = (Mutex::new(0), Condvar::new());

thread_local! {
    /// Captures this thread has begun and not ended.
    static CAPTURING_HERE: Cell<usize> = const { Cell::new(0) };
}

/// Runs `f`, a call that may synchronize the whole device, once no stream of this process is
/// being recorded. Such a call from another thread (a context made or dropped while a second
/// one records its training step) would invalidate the recording.
/// A thread that is itself recording runs `f` at once: it would otherwise wait for itself, and
/// the driver refuses the call in its own recording with a clear error.
pub(crate) fn outside_captures<R>(f: impl FnOnce() -> R) -> R {
    if CAPTURING_HERE.with(Cell::get) > 0 {
        return f();
    }
    let (count, ended) = &CAPTURES;
    let mut n = count.lock().unwrap_or_else(PoisonError::into_inner);
    while *n > 0 {
        n = ended.wait(n).unwrap_or_else(PoisonError::into_inner);
    }
    // Holding the lock keeps a new capture from beginning until `f` returns.
    f()
}

/// Whether a free of `ptr` on `device` is skipped because `recording` (a graph is being
/// recorded from the device's stream). Only the pool frees, and only when it trims after an
/// allocation failed, which cannot happen while recording (allocations are refused): the block
/// is kept rather than a free recorded into the graph.
pub(crate) fn keeps_block_while_recording(
    recording: bool,
    device: crate::DeviceId,
    ptr: crate::backend::DevicePtr,
) -> bool {
    if recording {
        log::warn!("{device}: not freeing {ptr:#x} while recording a graph");
    }
    recording
}

/// Counts a capture of this thread in; called before the driver starts recording, so a
/// device-wide synchronization of another thread cannot slip in between.
pub(crate) fn capture_started() {
    let mut n = CAPTURES.0.lock().unwrap_or_else(PoisonError::into_inner);
    *n += 1;
    CAPTURING_HERE.with(|c| c.set(c.get() + 1));
}

/// Counts a capture of this thread out (once per [`capture_started`]) and wakes the waiters.
pub(crate) fn capture_ended() {
    let mut n = CAPTURES.0.lock().unwrap_or_else(PoisonError::into_inner);
    *n = n.saturating_sub(1);
    CAPTURING_HERE.with(|c| c.set(c.get().saturating_sub(1)));
    CAPTURES.1.notify_all();
}

/// Whether a graph is being recorded from one device's stream (CUDA and HIP alike): while it
/// is, allocations, host copies and waits are refused, and the process-wide count above
/// includes the recording.
#[derive(Debug, Default)]
pub(crate) struct CaptureFlag(AtomicBool);

impl CaptureFlag {
    /// `Err(Unsupported)` for `what` while the device's stream is being recorded.
    pub(crate) fn refuse(&self, device: &DeviceInfo, what: &str) -> Result<()> {
        if self.0.load(Ordering::Acquire) {
            return Err(Error::Unsupported {
                op: what.to_string(),
                backend: device.backend,
                reason: "not allowed while a graph is being recorded".into(),
            });
        }
        Ok(())
    }

    /// Marks a recording of `device` begun and counts it in, before the driver starts it;
    /// `Err` when one is already underway.
    pub(crate) fn begin(&self, device: &DeviceInfo) -> Result<()> {
        if self.0.swap(true, Ordering::AcqRel) {
            return Err(Error::InvalidArgument(format!(
                "{}: a graph is already being recorded",
                device.id
            )));
        }
        capture_started();
        Ok(())
    }

    /// Undoes [`CaptureFlag::begin`] when the driver would not start the recording.
    pub(crate) fn abandon(&self) {
        self.0.store(false, Ordering::Release);
        capture_ended();
    }

    /// Marks the recording ended. Only a recording this flag began is counted off: an unmatched
    /// end is an error from the driver, and must not release another thread's capture.
    pub(crate) fn end(&self) {
        if self.0.swap(false, Ordering::AcqRel) {
            capture_ended();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, mpsc};

    #[test]
    fn synchronizing_calls_wait_for_other_threads_captures() {
        let ended = Arc::new(AtomicBool::new(false));
        let (started_tx, started_rx) = mpsc::channel();
        let recorder = {
            let ended = ended.clone();
            std::thread::spawn(move || {
                capture_started();
                started_tx.send(()).unwrap();
                // Long enough that an ungated call would run inside the capture.
                std::thread::sleep(std::time::Duration::from_millis(100));
                ended.store(true, Ordering::SeqCst);
                capture_ended();
            })
        };
        started_rx.recv().unwrap();
        let saw_end = outside_captures(|| ended.load(Ordering::SeqCst));
        recorder.join().unwrap();
        assert!(saw_end, "the call ran while another thread was recording");
    }

    #[test]
    fn the_recording_thread_does_not_wait_for_itself() {
        capture_started();
        let ran = outside_captures(|| 7);
        capture_ended();
        assert_eq!(ran, 7);
    }
}
