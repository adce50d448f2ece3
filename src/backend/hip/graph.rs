//! Stream capture into HIP graphs (`hipStreamBeginCapture` ... `hipGraphLaunch`), as
//! `backend/cuda/graph.rs` does for CUDA: a whole training step recorded once and replayed with
//! one launch. The entry points are optional in `ffi.rs`; a runtime without them records no
//! graphs (`capture_begin` answers `None`) and steps run op by op.

use std::ffi::c_int;

use super::device::{HipDevice, set_device};
use super::error::check;
use super::ffi::{self, GraphApi, HipApi, STREAM_CAPTURE_MODE_THREAD_LOCAL, Stream};
use crate::error::{Error, Result};
use crate::graph::GraphExec;

/// An instantiated graph and the stream it replays on.
struct HipGraph {
    api: &'static HipApi,
    graphs: GraphApi,
    ordinal: c_int,
    exec: ffi::GraphExec,
    graph: ffi::Graph,
    stream: Stream,
}

// SAFETY: graph and executable-graph handles are runtime handles that any host thread may use
// (HIP API calls are thread-safe; the device is selected before each use); launches of one
// executable graph are serialized by the runtime on its stream, and destruction happens once,
// in Drop, when no other reference exists.
unsafe impl Send for HipGraph {}
// SAFETY: `launch` only reads the handles; see Send.
unsafe impl Sync for HipGraph {}

impl GraphExec for HipGraph {
    fn launch(&self) -> Result<()> {
        set_device(self.api, self.ordinal)?;
        // SAFETY: `exec` is a live executable graph (destroyed only in Drop). `stream` is the
        // recording device's stream: `crate::graph::Graph` drops this value before the pool
        // blocks it holds, and those keep the device, which owns the stream, alive.
        let code = unsafe { (self.graphs.graph_launch)(self.exec, self.stream) };
        check(self.api, code, "hipGraphLaunch")
    }
}

impl Drop for HipGraph {
    fn drop(&mut self) {
        if let Err(e) = set_device(self.api, self.ordinal) {
            log::warn!("cannot select hip:{} to destroy a graph: {e}", self.ordinal);
        }
        // SAFETY: both handles were created by `end_capture` and are destroyed exactly once,
        // here; a replay still queued completes first (the runtime keeps its own reference).
        unsafe {
            let code = (self.graphs.graph_exec_destroy)(self.exec);
            if let Err(e) = check(self.api, code, "hipGraphExecDestroy") {
                log::warn!("{e}");
            }
            let code = (self.graphs.graph_destroy)(self.graph);
            if let Err(e) = check(self.api, code, "hipGraphDestroy") {
                log::warn!("{e}");
            }
        }
    }
}

impl HipDevice {
    /// `Err(Unsupported)` for `what` while a capture records this device's stream.
    pub(super) fn refuse_while_capturing(&self, what: &str) -> Result<()> {
        self.capturing.refuse(&self.info, what)
    }

    /// `None` when the runtime has no graph entry points.
    pub(super) fn begin_capture(&self) -> Option<Result<()>> {
        let graphs = self.api.optional.graphs?;
        Some(self.begin_capture_with(&graphs))
    }

    fn begin_capture_with(&self, graphs: &GraphApi) -> Result<()> {
        self.bind()?;
        // Thread-local mode, as on CUDA: a call of this thread that cannot be recorded fails
        // instead of running outside the graph; other threads (other contexts) are unaffected.
        self.capturing.begin(&self.info)?;
        // SAFETY: the stream is live (owned by `self`) and not being captured (the flag above).
        let code =
            unsafe { (graphs.stream_begin_capture)(self.stream, STREAM_CAPTURE_MODE_THREAD_LOCAL) };
        check(self.api, code, "hipStreamBeginCapture").inspect_err(|_| self.capturing.abandon())
    }

    pub(super) fn end_capture(&self) -> Result<Box<dyn GraphExec>> {
        let graphs = self.api.optional.graphs.ok_or_else(|| Error::Unsupported {
            op: "capture_end".into(),
            backend: self.info.backend,
            reason: "this HIP runtime has no graph entry points".into(),
        })?;
        // Whatever happens next, the stream stops capturing: end the recording first.
        let bound = self.bind();
        let mut graph: ffi::Graph = std::ptr::null_mut();
        // SAFETY: the stream is live; `graph` is a valid out-pointer. Ending a capture that
        // failed part way returns an error and leaves the stream not capturing.
        let code = unsafe { (graphs.stream_end_capture)(self.stream, &mut graph) };
        self.capturing.end();
        bound?;
        check(self.api, code, "hipStreamEndCapture")?;
        if graph.is_null() {
            return Err(Error::InvalidArgument(format!(
                "{}: the recording ended without a graph",
                self.info.id
            )));
        }
        let mut exec: ffi::GraphExec = std::ptr::null_mut();
        let mut log = [0u8; 512];
        // SAFETY: `graph` is the live graph just returned; `exec` is a valid out-pointer; the
        // error node may be null; `log` is writable for its length.
        let code = unsafe {
            (graphs.graph_instantiate)(
                &mut exec,
                graph,
                std::ptr::null_mut(),
                log.as_mut_ptr().cast(),
                log.len(),
            )
        };
        if let Err(e) = check(self.api, code, "hipGraphInstantiate") {
            // SAFETY: the graph was not instantiated and is destroyed once, here.
            let _ = unsafe { (graphs.graph_destroy)(graph) };
            let text = std::ffi::CStr::from_bytes_until_nul(&log)
                .map(|t| t.to_string_lossy().into_owned())
                .unwrap_or_default();
            return Err(match (e, text.trim()) {
                (e, "") => e,
                (
                    Error::Backend {
                        backend,
                        call,
                        code,
                        message,
                    },
                    detail,
                ) => Error::Backend {
                    backend,
                    call,
                    code,
                    message: format!("{message} ({detail})"),
                },
                (e, _) => e,
            });
        }
        Ok(Box::new(HipGraph {
            api: self.api,
            graphs,
            ordinal: self.ordinal,
            exec,
            graph,
            stream: self.stream,
        }))
    }
}
