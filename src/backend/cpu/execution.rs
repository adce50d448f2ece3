//! What the CPU backend does not have: user kernels, graphs, native streams and kernel
//! timers. Every op runs to completion when called, so there is nothing to record or order.

use super::CpuOps;
use crate::buffer::View;
use crate::device::BackendKind;
use crate::error::{Error, Result};
use crate::graph::Graph;
use crate::kernel::{Kernel, KernelArg, KernelSource, LaunchConfig};
use crate::ops::HostBlock;
use crate::ops::prelude::*;

fn unsupported(op: &str) -> Error {
    Error::Unsupported {
        op: op.into(),
        backend: BackendKind::Cpu,
        reason: "the CPU backend runs native ops and compiles no kernels".into(),
    }
}

impl KernelOps for CpuOps {
    fn compile(&self, _source: &KernelSource) -> Result<Kernel> {
        Err(unsupported("compile"))
    }

    fn launch(
        &self,
        _kernel: &Kernel,
        _config: &LaunchConfig,
        _args: &[KernelArg<'_>],
    ) -> Result<()> {
        Err(unsupported("launch"))
    }
}

impl Execution for CpuOps {
    fn capture_begin(&self) -> Result<bool> {
        // Nothing to record: the CPU runs each op as it is called.
        Ok(false)
    }

    fn capture_end(&self) -> Result<Graph> {
        Err(Error::InvalidArgument(
            "the CPU backend records no graphs (capture_begin returned false)".into(),
        ))
    }

    fn graph_launch(&self, _graph: &Graph) -> Result<()> {
        Err(Error::ForeignBuffer(
            "a graph cannot be launched on the CPU backend".into(),
        ))
    }

    fn profiler_range(&self, _on: bool) -> Result<()> {
        Ok(())
    }

    fn native_side_queue(&self, _x: View<'_>) -> Result<(u64, u64)> {
        Err(Error::Unsupported {
            op: "native_side_queue".into(),
            backend: BackendKind::Cpu,
            reason: "this backend has no side stream".into(),
        })
    }

    fn order_streams(&self, _to_side: bool) -> Result<()> {
        Err(Error::Unsupported {
            op: "order_streams".into(),
            backend: BackendKind::Cpu,
            reason: "this backend has no side stream".into(),
        })
    }

    fn upload_block_on_side(
        &self,
        _dst: View<'_>,
        _block: &mut dyn HostBlock,
        _range: std::ops::Range<usize>,
    ) -> Result<()> {
        Err(Error::Unsupported {
            op: "upload_block_on_side".into(),
            backend: BackendKind::Cpu,
            reason: "this backend has no side stream".into(),
        })
    }

    fn native_queue(&self, _x: View<'_>) -> Result<(u64, u64)> {
        Err(Error::Unsupported {
            op: "native_queue".into(),
            backend: BackendKind::Cpu,
            reason: "this backend has no native stream a collective library can use".into(),
        })
    }
}
