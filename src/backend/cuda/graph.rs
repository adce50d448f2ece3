//! Stream capture into CUDA graphs, and the profiler range (`cuProfilerStart`/`Stop`).

use std::sync::Arc;

use cudarc::driver::sys::{self, CUstreamCaptureMode};
use cudarc::driver::{CudaContext, CudaStream, result};

use super::device::CudaDevice;
use super::error;
use crate::error::{Error, Result};
use crate::graph::GraphExec;

/// An instantiated graph and the stream it replays on.
struct CudaGraph {
    exec: sys::CUgraphExec,
    graph: sys::CUgraph,
    stream: Arc<CudaStream>,
    ctx: Arc<CudaContext>,
}

// SAFETY: graph and executable-graph handles are plain driver handles that any thread may use
// once the owning context is current (every use below binds it first); launches of one
// executable graph are serialized by the driver on its stream, and destruction happens once,
// in Drop, when no other reference exists.
unsafe impl Send for CudaGraph {}
// SAFETY: `launch` only reads the handles; see Send.
unsafe impl Sync for CudaGraph {}

impl GraphExec for CudaGraph {
    fn launch(&self) -> Result<()> {
        self.ctx
            .bind_to_thread()
            .map_err(|e| error::driver("cuCtxSetCurrent", e))?;
        // SAFETY: `exec` is a live executable graph of this context (destroyed only in Drop);
        // the stream belongs to the same context and is kept alive by `self.stream`.
        unsafe { result::graph::launch(self.exec, self.stream.cu_stream()) }
            .map_err(|e| error::driver("cuGraphLaunch", e))
    }
}

impl Drop for CudaGraph {
    fn drop(&mut self) {
        if let Err(e) = self.ctx.bind_to_thread() {
            log::warn!("cannot bind the context to destroy a CUDA graph: {e:?}");
            return;
        }
        // SAFETY: both handles were created by capture_end, are destroyed exactly once, here;
        // a replay still queued keeps its own reference inside the driver (destroying an
        // executable graph with launches in flight is allowed and completes them first).
        unsafe {
            if let Err(e) = result::graph::exec_destroy(self.exec) {
                log::warn!("cuGraphExecDestroy: {}", error::driver_message(&e));
            }
            if let Err(e) = result::graph::destroy(self.graph) {
                log::warn!("cuGraphDestroy: {}", error::driver_message(&e));
            }
        }
    }
}

impl CudaDevice {
    /// `Err(Unsupported)` for `what` while a capture records this device's stream.
    pub(super) fn refuse_while_capturing(&self, what: &str) -> Result<()> {
        self.capturing.refuse(&self.info, what)
    }

    pub(super) fn begin_capture(&self) -> Result<()> {
        self.bind()?;
        self.capturing.begin(&self.info)?;
        // Thread-local mode: a call of this thread that cannot be recorded (a synchronization,
        // an allocation) fails instead of silently running outside the graph, while other
        // threads, with other contexts, are not affected.
        // SAFETY: the stream belongs to the bound context and is not being captured (checked
        // by the flag above).
        let r = unsafe {
            result::stream::begin_capture(
                self.stream.cu_stream(),
                CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
            )
        };
        r.map_err(|e| {
            self.capturing.abandon();
            error::driver("cuStreamBeginCapture", e)
        })
    }

    pub(super) fn end_capture(&self) -> Result<Box<dyn GraphExec>> {
        let graph = self.bind().and_then(|()| {
            // SAFETY: the stream belongs to the bound context; ending a capture that failed
            // part way returns an error and leaves the stream not capturing, which is what we
            // want.
            unsafe { result::stream::end_capture(self.stream.cu_stream()) }
                .map_err(|e| error::driver("cuStreamEndCapture", e))
        });
        self.capturing.end();
        let graph = graph?;
        if graph.is_null() {
            return Err(Error::InvalidArgument(format!(
                "{}: the recording ended without a graph",
                self.info.id
            )));
        }
        // SAFETY: `graph` is the live graph just returned by the driver.
        let exec =
            match unsafe { result::graph::instantiate(graph, sys::CUgraphInstantiate_flags(0)) } {
                Ok(exec) => exec,
                Err(e) => {
                    // SAFETY: the graph was not instantiated and is destroyed once.
                    let _ = unsafe { result::graph::destroy(graph) };
                    return Err(error::driver("cuGraphInstantiateWithFlags", e));
                }
            };
        Ok(Box::new(CudaGraph {
            exec,
            graph,
            stream: self.stream.clone(),
            ctx: self.ctx.clone(),
        }))
    }

    pub(super) fn profiler(&self, on: bool) -> Result<()> {
        self.bind()?;
        // SAFETY: both calls take no arguments and act on the current (bound) context.
        let r = unsafe {
            if on {
                sys::cuProfilerStart()
            } else {
                sys::cuProfilerStop()
            }
        };
        r.result().map_err(|e| {
            error::driver(
                if on {
                    "cuProfilerStart"
                } else {
                    "cuProfilerStop"
                },
                e,
            )
        })
    }
}
