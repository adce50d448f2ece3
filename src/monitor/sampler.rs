//! [`EpochSampler`]: a background thread that samples the training device ten times a second,
//! so an epoch's peak memory and mean utilization cost the training loop nothing (the
//! management libraries answer from the host; no device queue is touched).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::Mutex;

use crate::device::{DeviceId, DeviceInfo};

use super::GpuFigures;

const PERIOD: Duration = Duration::from_millis(100);

#[derive(Default)]
struct Acc {
    peak_memory: Option<u64>,
    util_sum: f64,
    util_samples: u32,
    last: Option<GpuFigures>,
}

struct Shared {
    device: DeviceInfo,
    acc: Mutex<Acc>,
    stop: AtomicBool,
}

impl Shared {
    /// One sample: this process's device memory (the device's, when the library does not
    /// break it down by process) and the utilization.
    fn sample(&self) {
        let (memory, util, figures) = if self.device.id == DeviceId::Cpu {
            (super::process_rss(), None, None)
        } else {
            match super::figures(&self.device) {
                Some(f) => (
                    f.process_memory.or(f.memory_used),
                    f.utilization_percent,
                    Some(f),
                ),
                None => (None, None, None),
            }
        };
        let mut acc = self.acc.lock();
        if let Some(m) = memory {
            acc.peak_memory = Some(acc.peak_memory.map_or(m, |p| p.max(m)));
        }
        if let Some(u) = util {
            acc.util_sum += u as f64;
            acc.util_samples += 1;
        }
        if figures.is_some() {
            acc.last = figures;
        }
    }
}

/// Samples one device while training runs; stopped when dropped.
pub(crate) struct EpochSampler {
    shared: Option<Arc<Shared>>,
    thread: Option<JoinHandle<()>>,
}

impl EpochSampler {
    /// A sampler for `device`; inert when nothing reports figures for it (OpenCL devices, a
    /// GPU without its management library).
    pub(crate) fn new(device: &DeviceInfo) -> Self {
        let useful = match device.id {
            DeviceId::Cpu => super::process_rss().is_some(),
            _ => super::figures(device).is_some(),
        };
        if !useful {
            return EpochSampler {
                shared: None,
                thread: None,
            };
        }
        let shared = Arc::new(Shared {
            device: device.clone(),
            acc: Mutex::new(Acc::default()),
            stop: AtomicBool::new(false),
        });
        let worker = shared.clone();
        let thread = std::thread::Builder::new()
            .name("rnn-monitor".into())
            .spawn(move || {
                while !worker.stop.load(Ordering::Relaxed) {
                    worker.sample();
                    std::thread::park_timeout(PERIOD);
                }
            })
            .ok();
        EpochSampler {
            shared: thread.as_ref().map(|_| shared),
            thread,
        }
    }

    /// Starts a new epoch's figures.
    pub(crate) fn start(&self) {
        if let Some(s) = &self.shared {
            let last = s.acc.lock().last.take();
            *s.acc.lock() = Acc {
                last,
                ..Acc::default()
            };
            s.sample();
        }
    }

    /// The epoch's peak memory of this process (bytes) and mean utilization (percent).
    pub(crate) fn finish(&self) -> (Option<u64>, Option<f32>) {
        let Some(s) = &self.shared else {
            return (None, None);
        };
        s.sample();
        let acc = s.acc.lock();
        let util = (acc.util_samples > 0).then(|| (acc.util_sum / acc.util_samples as f64) as f32);
        (acc.peak_memory, util)
    }

    /// The latest figures, for the progress bar.
    pub(crate) fn now(&self) -> Option<String> {
        let s = self.shared.as_ref()?;
        let acc = s.acc.lock();
        match (&acc.last, acc.peak_memory) {
            (Some(f), _) => Some(f.to_string()),
            (None, Some(p)) => Some(format!("rss {:.0} MiB", p as f64 / (1u64 << 20) as f64)),
            (None, None) => None,
        }
    }
}

impl Drop for EpochSampler {
    fn drop(&mut self) {
        if let (Some(s), Some(t)) = (&self.shared, self.thread.take()) {
            s.stop.store(true, Ordering::Relaxed);
            t.thread().unpark();
            let _ = t.join();
        }
    }
}
