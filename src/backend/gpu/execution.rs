//! Execution control of the GPU backends: graph recording and replay over the device's
//! stream capture, the native streams collective libraries queue on, and profiling.

use super::{GpuOps, launch};
use crate::backend::Device;
use crate::buffer::View;
use crate::error::Result;
use crate::graph::Graph;
use crate::ops::{Execution, HostBlock};
use std::ops::Range;

impl<D: Device> Execution for GpuOps<D> {
    fn capture_begin(&self) -> Result<bool> {
        // Modules are built on first use; one first used while recording is built on another
        // thread (`modules.rs`), so the recording sees no module load.
        let mut recording = self.recording.lock();
        if recording.is_some() {
            return Err(crate::Error::InvalidArgument(format!(
                "{}: a graph is already being recorded",
                self.info.id
            )));
        }
        match self.device.capture_begin() {
            None => Ok(false),
            Some(r) => {
                r?;
                self.pool.hold_begin();
                *recording = Some(0);
                Ok(true)
            }
        }
    }

    fn capture_end(&self) -> Result<Graph> {
        let kernels = self.recording.lock().take().ok_or_else(|| {
            crate::Error::InvalidArgument(format!("{}: no graph is being recorded", self.info.id))
        })?;
        // On an error the held blocks go straight back to the pool (no graph uses them).
        let temporaries = self.pool.hold_end();
        let exec = self.device.capture_end()?;
        Ok(Graph::new(
            self.context,
            kernels,
            exec,
            Box::new(temporaries),
        ))
    }

    fn graph_launch(&self, graph: &Graph) -> Result<()> {
        if graph.context_id() != self.context {
            return Err(crate::Error::ForeignBuffer(format!(
                "a graph recorded by context {} launched on context {}",
                graph.context_id(),
                self.context
            )));
        }
        graph.exec().launch()
    }

    fn kernels_final(&self) -> bool {
        self.op_set.kernels_final()
    }

    fn profiler_range(&self, on: bool) -> Result<()> {
        self.device.profiler_range(on)
    }

    fn set_tf32(&self, on: bool) -> bool {
        self.device.set_tf32(on)
    }

    fn kernel_times(&self) -> Result<Option<Vec<crate::ops::KernelTime>>> {
        self.device.kernel_times()
    }

    fn native_side_queue(&self, x: View<'_>) -> Result<(u64, u64)> {
        self.queue_of(x, self.device.native_side_stream())
    }

    fn order_streams(&self, to_side: bool) -> Result<()> {
        self.device.order_streams(to_side)
    }

    fn side_uploads(&self) -> bool {
        self.device.side_writes()
    }

    fn host_block(&self, bytes: usize, read_back: bool) -> Result<Box<dyn HostBlock>> {
        self.device.host_block(bytes, read_back)
    }

    fn upload_block_on_side(
        &self,
        dst: View<'_>,
        block: &mut dyn HostBlock,
        range: Range<usize>,
    ) -> Result<()> {
        let bytes = range.len();
        if range.start > range.end || range.end > block.len() {
            return Err(crate::Error::InvalidArgument(format!(
                "upload_block_on_side: range {range:?} outside a host block of {} bytes",
                block.len()
            )));
        }
        crate::ops::check::transfer("upload_block_on_side", self.context, &dst, bytes)?;
        if bytes == 0 {
            return Ok(());
        }
        let size = dst.dtype().size();
        let ptr = launch::device_ptr(&dst)?;
        self.device
            .write_block_on_side(ptr, dst.offset() * size, block, range)
    }

    fn native_queue(&self, x: View<'_>) -> Result<(u64, u64)> {
        self.queue_of(x, self.device.native_stream())
    }
}

impl<D: Device> GpuOps<D> {
    /// `(stream, address of x)` for a collective library, `stream` from the device.
    fn queue_of(&self, x: View<'_>, stream: Option<Result<u64>>) -> Result<(u64, u64)> {
        if x.buffer().context_id() != self.context {
            return Err(crate::Error::ForeignBuffer(format!(
                "a buffer of another context was passed to {}",
                self.info.id
            )));
        }
        let base = launch::device_ptr(&x)?;
        let stream = stream.unwrap_or_else(|| {
            Err(crate::Error::Unsupported {
                op: "native_queue".into(),
                backend: self.info.backend,
                reason: "this device has no native stream a collective library can use".into(),
            })
        })?;
        Ok((
            stream,
            base + (x.offset() * std::mem::size_of::<f32>()) as u64,
        ))
    }
}
