//! Managers and contexts made from several threads at once (as test harnesses and servers do):
//! discovery must neither crash nor lose devices while another thread opens or drops a context.
//!
//! In this binary, not `tests/runtime`: that one compiles with hiprtc, and ROCm 5.2's hiprtc
//! (LLVM inside comgr) and PoCL's LLVM abort when both load into one process ("Option ...
//! registered more than once").

use std::sync::{Arc, Barrier};

use rnn::{BackendKind, DeviceKind, GpuManager};

use crate::support::{self, Target};

fn opencl_device(m: &GpuManager) -> Option<rnn::DeviceId> {
    m.devices()
        .iter()
        .find(|d| d.backend == BackendKind::OpenCl && d.kind != DeviceKind::Accelerator)
        .map(|d| d.id)
}

#[test]
fn opencl_discovery_and_contexts_from_many_threads() {
    let test = "opencl_discovery_and_contexts_from_many_threads";
    const THREADS: usize = 8;
    // No probe before the threads start: the race is in the runtime's first use.
    let start = Arc::new(Barrier::new(THREADS));
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let start = start.clone();
            std::thread::spawn(move || -> bool {
                start.wait();
                for round in 0..20 {
                    let m = GpuManager::with_backends(&[BackendKind::OpenCl]);
                    let Some(id) = opencl_device(&m) else {
                        // Absent here, or lost by a racing probe: the main thread decides.
                        return round == 0;
                    };
                    if t % 2 == 0 {
                        let ctx = m.create_context(id).expect("context");
                        let buf = ctx.alloc(64).expect("alloc");
                        ctx.ops().fill(buf.view(), 1.5).expect("fill");
                        let mut out = vec![0.0; 64];
                        ctx.ops().download(buf.view(), &mut out).expect("download");
                        assert!(out.iter().all(|v| *v == 1.5));
                    }
                }
                true
            })
        })
        .collect();
    let finished: Vec<bool> = workers
        .into_iter()
        .map(|w| w.join().expect("worker thread"))
        .collect();
    let probe = GpuManager::with_backends(&[BackendKind::OpenCl]);
    if opencl_device(&probe).is_none() {
        let reason = probe.backend(BackendKind::OpenCl).detail.clone();
        assert!(
            !support::is_required(Target::OpenCl),
            "{test}: required backend missing (RNN_REQUIRE_BACKENDS): {reason}"
        );
        println!("SKIP {test}: no OpenCL device: {reason}");
        return;
    }
    assert!(
        finished.iter().all(|f| *f),
        "a thread's probe lost the OpenCL device while others opened contexts"
    );
}
