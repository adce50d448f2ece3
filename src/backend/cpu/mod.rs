//! The CPU backend: every op natively, parallel with Rayon, GEMM through the `gemm` crate.
//! It is the reference every GPU backend is tested against.
//!
//! Buffers are `Storage::Host` vectors behind a `RwLock`; [`access`] turns an op's views into
//! slices (one lock per buffer), and each op family lives in its own module.

mod access;
mod activation;
mod cells;
mod data;
mod elementwise;
mod fastmath;
mod gated_seq;
mod gemm;
mod norm;
mod optim;
mod packed;
mod par;
mod random;
mod reduce;
mod rnn_step;
mod row_groups;
mod simd;
mod softmax;

use std::sync::Arc;

use parking_lot::RwLock;

use crate::buffer::{Buffer, Storage, View};
use crate::device::{BackendKind, DeviceId, DeviceInfo, DeviceKind};
use crate::error::{Error, Result};
use crate::kernel::{Kernel, KernelArg, KernelSource, LaunchConfig};
use crate::ops::{Activation, AdamStep, Gemm, Ops, SgdStep, check, rnn_seq};

/// The CPU backend's device description.
pub(crate) fn device_info() -> DeviceInfo {
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    DeviceInfo {
        id: DeviceId::Cpu,
        backend: BackendKind::Cpu,
        name: format!("CPU ({threads} threads, Rayon)"),
        vendor: String::new(),
        kind: DeviceKind::Cpu,
        memory: system_memory().unwrap_or(0),
        compute_units: threads as u32,
        arch: std::env::consts::ARCH.to_string(),
        driver: format!("rnn {}", env!("CARGO_PKG_VERSION")),
    }
}

/// Total RAM in bytes from `/proc/meminfo` (Linux); `None` elsewhere or when unreadable.
fn system_memory() -> Option<u64> {
    meminfo_bytes("MemTotal:")
}

/// Available and total RAM in bytes from `/proc/meminfo` (Linux); `None` elsewhere or when
/// unreadable.
pub(crate) fn host_memory() -> Option<(u64, u64)> {
    Some((meminfo_bytes("MemAvailable:")?, meminfo_bytes("MemTotal:")?))
}

/// One `/proc/meminfo` field (given in KiB) in bytes.
fn meminfo_bytes(field: &str) -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with(field))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// A new CPU context's ops.
pub(crate) fn create_ops() -> Arc<dyn Ops> {
    Arc::new(CpuOps {
        info: device_info(),
        context: crate::buffer::next_context_id(),
    })
}

struct CpuOps {
    info: DeviceInfo,
    context: u64,
}

fn unsupported(op: &str) -> Error {
    Error::Unsupported {
        op: op.into(),
        backend: BackendKind::Cpu,
        reason: "the CPU backend runs native ops and compiles no kernels".into(),
    }
}

impl Ops for CpuOps {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn context_id(&self) -> u64 {
        self.context
    }

    fn alloc(&self, len: usize) -> Result<Buffer> {
        // The host's available and total memory; both 0 (and left out of the message) where
        // the platform does not say.
        let oom = || {
            let (free, total) = host_memory().unwrap_or((0, 0));
            Error::OutOfMemory {
                device: "cpu".into(),
                requested: len.saturating_mul(std::mem::size_of::<f32>()),
                free: free as usize,
                total: total as usize,
            }
        };
        let mut data = Vec::new();
        data.try_reserve_exact(len).map_err(|_| oom())?;
        data.resize(len, 0.0);
        Ok(Buffer::new(
            len,
            self.context,
            Storage::Host(RwLock::new(data)),
        ))
    }

    fn upload(&self, dst: View<'_>, src: &[f32]) -> Result<()> {
        if src.len() != dst.len() {
            return Err(Error::shape(
                "upload",
                format!("{} host elements into a view of {}", src.len(), dst.len()),
            ));
        }
        access::lock("upload", self.context, [], [dst], |[], [d]| {
            d.copy_from_slice(src)
        })
    }

    fn download(&self, src: View<'_>, dst: &mut [f32]) -> Result<()> {
        if src.len() != dst.len() {
            return Err(Error::shape(
                "download",
                format!(
                    "a view of {} elements into {} host elements",
                    src.len(),
                    dst.len()
                ),
            ));
        }
        access::lock("download", self.context, [src], [], |[s], []| {
            dst.copy_from_slice(s)
        })
    }

    fn synchronize(&self) -> Result<()> {
        // Ops run to completion before returning, so nothing is ever queued.
        Ok(())
    }

    fn warm_up(&self) -> Result<()> {
        Ok(())
    }

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

    fn fill(&self, x: View<'_>, value: f32) -> Result<()> {
        elementwise::fill(self.context, x, value)
    }

    fn copy(&self, src: View<'_>, dst: View<'_>) -> Result<()> {
        elementwise::copy(self.context, src, dst)
    }

    fn scale(&self, x: View<'_>, alpha: f32) -> Result<()> {
        elementwise::scale(self.context, x, alpha)
    }

    fn axpy(&self, alpha: f32, x: View<'_>, y: View<'_>) -> Result<()> {
        elementwise::axpy(self.context, alpha, x, y)
    }

    fn add(&self, a: View<'_>, b: View<'_>, out: View<'_>) -> Result<()> {
        elementwise::add(self.context, a, b, out)
    }

    fn mul(&self, a: View<'_>, b: View<'_>, out: View<'_>) -> Result<()> {
        elementwise::mul(self.context, a, b, out)
    }

    fn gemm(&self, g: Gemm, a: View<'_>, b: View<'_>, c: View<'_>) -> Result<()> {
        gemm::gemm(self.context, g, a, b, c)
    }

    fn bias_act_forward(
        &self,
        z: View<'_>,
        bias: View<'_>,
        y: View<'_>,
        act: Activation,
        rows: usize,
        cols: usize,
    ) -> Result<()> {
        activation::bias_act_forward(self.context, z, bias, y, act, rows, cols)
    }

    fn activation(&self, x: View<'_>, y: View<'_>, act: Activation) -> Result<()> {
        activation::activation(self.context, x, y, act)
    }

    fn act_backward(
        &self,
        dy: View<'_>,
        z: View<'_>,
        y: View<'_>,
        dz: View<'_>,
        act: Activation,
    ) -> Result<()> {
        activation::act_backward(self.context, dy, z, y, dz, act)
    }

    fn softmax(&self, x: View<'_>, y: View<'_>, rows: usize, cols: usize) -> Result<()> {
        softmax::softmax(self.context, x, y, rows, cols)
    }

    fn log_softmax(&self, x: View<'_>, y: View<'_>, rows: usize, cols: usize) -> Result<()> {
        softmax::log_softmax(self.context, x, y, rows, cols)
    }

    fn softmax_cross_entropy(
        &self,
        logits: View<'_>,
        labels: View<'_>,
        dlogits: View<'_>,
        row_loss: View<'_>,
        row_correct: View<'_>,
        totals: Option<View<'_>>,
        rows: usize,
        cols: usize,
        grad_scale: f32,
    ) -> Result<()> {
        softmax::softmax_cross_entropy(
            self.context,
            logits,
            labels,
            dlogits,
            row_loss,
            row_correct,
            totals,
            rows,
            cols,
            grad_scale,
        )
    }

    fn mse(
        &self,
        pred: View<'_>,
        target: View<'_>,
        dpred: View<'_>,
        row_loss: View<'_>,
        totals: Option<View<'_>>,
        rows: usize,
        cols: usize,
        grad_scale: f32,
    ) -> Result<()> {
        softmax::mse(
            self.context,
            pred,
            target,
            dpred,
            row_loss,
            totals,
            rows,
            cols,
            grad_scale,
        )
    }

    fn sum_rows(
        &self,
        x: View<'_>,
        out: View<'_>,
        rows: usize,
        cols: usize,
        beta: f32,
    ) -> Result<()> {
        reduce::sum_rows(self.context, x, out, rows, cols, beta)
    }

    fn sum_cols(
        &self,
        x: View<'_>,
        out: View<'_>,
        rows: usize,
        cols: usize,
        beta: f32,
    ) -> Result<()> {
        reduce::sum_cols(self.context, x, out, rows, cols, beta)
    }

    fn sum_all(&self, x: View<'_>, out: View<'_>, beta: f32) -> Result<()> {
        reduce::sum_all(self.context, x, out, beta)
    }

    fn clip_grad_norm(&self, grads: View<'_>, max_norm: f32, norm_out: View<'_>) -> Result<()> {
        reduce::clip_grad_norm(self.context, grads, max_norm, norm_out)
    }

    fn gather_rows(
        &self,
        src: View<'_>,
        indices: View<'_>,
        dst: View<'_>,
        cols: usize,
    ) -> Result<()> {
        data::gather_rows(self.context, src, indices, dst, cols)
    }

    fn scatter_add_rows(
        &self,
        src: View<'_>,
        indices: View<'_>,
        dst: View<'_>,
        cols: usize,
    ) -> Result<()> {
        data::scatter_add_rows(self.context, src, indices, dst, cols)
    }

    fn one_hot(&self, indices: View<'_>, out: View<'_>, classes: usize) -> Result<()> {
        data::one_hot(self.context, indices, out, classes)
    }

    fn dropout(
        &self,
        x: View<'_>,
        y: View<'_>,
        state: View<'_>,
        p: f32,
        stream: u32,
    ) -> Result<()> {
        random::dropout(self.context, x, y, state, p, stream)
    }

    fn rng_advance(&self, state: View<'_>) -> Result<()> {
        random::rng_advance(self.context, state)
    }

    fn layer_norm_forward(
        &self,
        x: View<'_>,
        weight: View<'_>,
        bias: View<'_>,
        y: View<'_>,
        stats: View<'_>,
        rows: usize,
        cols: usize,
        eps: f32,
    ) -> Result<()> {
        norm::layer_norm_forward(self.context, x, weight, bias, y, stats, rows, cols, eps)
    }

    fn layer_norm_backward(
        &self,
        dy: View<'_>,
        x: View<'_>,
        weight: View<'_>,
        stats: View<'_>,
        dx: View<'_>,
        dweight: View<'_>,
        dbias: View<'_>,
        rows: usize,
        cols: usize,
    ) -> Result<()> {
        norm::layer_norm_backward(
            self.context,
            dy,
            x,
            weight,
            stats,
            dx,
            dweight,
            dbias,
            rows,
            cols,
        )
    }

    fn rnn_step_forward(
        &self,
        pre: View<'_>,
        h_prev: View<'_>,
        w_hh: View<'_>,
        b_ih: View<'_>,
        b_hh: View<'_>,
        h: View<'_>,
        act: Activation,
        batch: usize,
        hidden: usize,
    ) -> Result<()> {
        let ctx = self.context;
        rnn_step::rnn_step_forward(ctx, pre, h_prev, w_hh, b_ih, b_hh, h, act, batch, hidden)
    }

    fn rnn_step_backward(
        &self,
        dh: View<'_>,
        dpre_next: Option<View<'_>>,
        w_hh: View<'_>,
        h: View<'_>,
        dpre: View<'_>,
        act: Activation,
        batch: usize,
        hidden: usize,
    ) -> Result<()> {
        let ctx = self.context;
        rnn_step::rnn_step_backward(ctx, dh, dpre_next, w_hh, h, dpre, act, batch, hidden)
    }

    fn rnn_sequence_forward(
        &self,
        pre: View<'_>,
        hs: View<'_>,
        w_hh: View<'_>,
        b_ih: View<'_>,
        b_hh: View<'_>,
        act: Activation,
        steps: usize,
        batch: usize,
        hidden: usize,
    ) -> Result<()> {
        let op = "rnn_sequence_forward";
        check::same_context(op, self.context, &[&pre, &hs, &w_hh, &b_ih, &b_hh])?;
        if check::rnn_sequence_forward(pre, hs, w_hh, b_ih, b_hh, act, steps, batch, hidden)? == 0 {
            return Ok(());
        }
        rnn_seq::forward_by_steps(self, pre, hs, w_hh, b_ih, b_hh, act, steps, batch, hidden)
    }

    fn rnn_sequence_backward(
        &self,
        dh: View<'_>,
        hs: View<'_>,
        w_hh: View<'_>,
        dpre: View<'_>,
        act: Activation,
        steps: usize,
        batch: usize,
        hidden: usize,
    ) -> Result<()> {
        let op = "rnn_sequence_backward";
        check::same_context(op, self.context, &[&dh, &hs, &w_hh, &dpre])?;
        if check::rnn_sequence_backward(dh, hs, w_hh, dpre, act, steps, batch, hidden)? == 0 {
            return Ok(());
        }
        rnn_seq::backward_by_steps(self, dh, hs, w_hh, dpre, act, steps, batch, hidden)
    }

    fn lstm_cell_forward(
        &self,
        gates: View<'_>,
        c_prev: View<'_>,
        c: View<'_>,
        h: View<'_>,
        batch: usize,
        hidden: usize,
    ) -> Result<()> {
        cells::lstm_cell_forward(self.context, gates, c_prev, c, h, batch, hidden)
    }

    fn lstm_cell_backward(
        &self,
        gates: View<'_>,
        c_prev: View<'_>,
        c: View<'_>,
        dh: View<'_>,
        dc: View<'_>,
        dgates: View<'_>,
        batch: usize,
        hidden: usize,
    ) -> Result<()> {
        cells::lstm_cell_backward(
            self.context,
            gates,
            c_prev,
            c,
            dh,
            dc,
            dgates,
            batch,
            hidden,
        )
    }

    fn gru_cell_forward(
        &self,
        gx: View<'_>,
        gh: View<'_>,
        h_prev: View<'_>,
        h: View<'_>,
        cache: View<'_>,
        batch: usize,
        hidden: usize,
    ) -> Result<()> {
        cells::gru_cell_forward(self.context, gx, gh, h_prev, h, cache, batch, hidden)
    }

    fn gru_cell_backward(
        &self,
        cache: View<'_>,
        h_prev: View<'_>,
        dh: View<'_>,
        dgx: View<'_>,
        dgh: View<'_>,
        dh_prev: View<'_>,
        batch: usize,
        hidden: usize,
    ) -> Result<()> {
        cells::gru_cell_backward(
            self.context,
            cache,
            h_prev,
            dh,
            dgx,
            dgh,
            dh_prev,
            batch,
            hidden,
        )
    }

    fn lstm_sequence_forward(
        &self,
        gates: View<'_>,
        hs: View<'_>,
        cs: View<'_>,
        w_hh: View<'_>,
        b_ih: View<'_>,
        b_hh: View<'_>,
        steps: usize,
        batch: usize,
        hidden: usize,
    ) -> Result<()> {
        let op = "lstm_sequence_forward";
        check::same_context(op, self.context, &[&gates, &hs, &cs, &w_hh, &b_ih, &b_hh])?;
        let n =
            check::lstm_sequence_forward(gates, hs, cs, w_hh, b_ih, b_hh, steps, batch, hidden)?;
        if n == 0 || steps == 0 {
            return Ok(());
        }
        let ctx = self.context;
        gated_seq::lstm_forward(ctx, gates, hs, cs, w_hh, b_ih, b_hh, steps, batch, hidden)
    }

    fn lstm_sequence_backward(
        &self,
        dh: View<'_>,
        gates: View<'_>,
        cs: View<'_>,
        w_hh: View<'_>,
        dgates: View<'_>,
        steps: usize,
        batch: usize,
        hidden: usize,
    ) -> Result<()> {
        let op = "lstm_sequence_backward";
        check::same_context(op, self.context, &[&dh, &gates, &cs, &w_hh, &dgates])?;
        let n = check::lstm_sequence_backward(dh, gates, cs, w_hh, dgates, steps, batch, hidden)?;
        if n == 0 || steps == 0 {
            return Ok(());
        }
        let ctx = self.context;
        gated_seq::lstm_backward(ctx, dh, gates, cs, w_hh, dgates, steps, batch, hidden)
    }

    fn gru_sequence_forward(
        &self,
        gx: View<'_>,
        hs: View<'_>,
        w_hh: View<'_>,
        b_ih: View<'_>,
        b_hh: View<'_>,
        cache: View<'_>,
        steps: usize,
        batch: usize,
        hidden: usize,
    ) -> Result<()> {
        let op = "gru_sequence_forward";
        check::same_context(op, self.context, &[&gx, &hs, &w_hh, &b_ih, &b_hh, &cache])?;
        let n = check::gru_sequence_forward(gx, hs, w_hh, b_ih, b_hh, cache, steps, batch, hidden)?;
        if n == 0 || steps == 0 {
            return Ok(());
        }
        let ctx = self.context;
        gated_seq::gru_forward(ctx, gx, hs, w_hh, b_ih, b_hh, cache, steps, batch, hidden)
    }

    fn gru_sequence_backward(
        &self,
        dh: View<'_>,
        hs: View<'_>,
        cache: View<'_>,
        w_hh: View<'_>,
        dgx: View<'_>,
        dgh: View<'_>,
        steps: usize,
        batch: usize,
        hidden: usize,
    ) -> Result<()> {
        let op = "gru_sequence_backward";
        check::same_context(op, self.context, &[&dh, &hs, &cache, &w_hh, &dgx, &dgh])?;
        let n = check::gru_sequence_backward(dh, hs, cache, w_hh, dgx, dgh, steps, batch, hidden)?;
        if n == 0 || steps == 0 {
            return Ok(());
        }
        let ctx = self.context;
        gated_seq::gru_backward(ctx, dh, hs, cache, w_hh, dgx, dgh, steps, batch, hidden)
    }

    fn sgd_step(
        &self,
        params: View<'_>,
        grads: View<'_>,
        velocity: View<'_>,
        state: View<'_>,
        s: SgdStep,
    ) -> Result<()> {
        optim::sgd_step(self.context, params, grads, velocity, state, s)
    }

    fn adam_step(
        &self,
        params: View<'_>,
        grads: View<'_>,
        m: View<'_>,
        v: View<'_>,
        state: View<'_>,
        s: AdamStep,
    ) -> Result<()> {
        optim::adam_step(self.context, params, grads, m, v, state, s)
    }

    fn capture_begin(&self) -> Result<bool> {
        // Nothing to record: the CPU runs each op as it is called.
        Ok(false)
    }

    fn capture_end(&self) -> Result<crate::graph::Graph> {
        Err(Error::InvalidArgument(
            "the CPU backend records no graphs (capture_begin returned false)".into(),
        ))
    }

    fn graph_launch(&self, _graph: &crate::graph::Graph) -> Result<()> {
        Err(Error::ForeignBuffer(
            "a graph cannot be launched on the CPU backend".into(),
        ))
    }

    fn profiler_range(&self, _on: bool) -> Result<()> {
        Ok(())
    }
}
