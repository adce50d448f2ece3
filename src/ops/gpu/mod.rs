//! The op set written once for every GPU backend, over [`crate::backend::Device`]: each op
//! validates its arguments (shared checks in [`crate::ops::check`]) and launches the kernels of
//! docs/kernel-abi.md, which every dialect defines with the same names and parameters.

#[cfg(test)]
mod contract;
mod elementwise;
mod embedding;
mod gated_seq;
mod gemm_thin;
mod launch;
mod linalg;
mod nn_ops;
mod norm;
mod optim;
mod persistent;
mod pool;
mod random;
mod rnn_seq;
mod rnn_step;
mod scratch;
mod user;

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::backend::Device;
use crate::buffer::{Buffer, View};
use crate::cache::{CacheKey, KernelCache};
use crate::context::ContextOptions;
use crate::device::DeviceInfo;
use crate::error::Result;
use crate::graph::Graph;
use crate::kernel::{Kernel, KernelArg, KernelSource, LaunchConfig};
use crate::ops::{Activation, AdamStep, Gemm, Ops, SgdStep, check};

use launch::Args;
use pool::Pool;

/// How a split-k GEMM divides k, for backends that pick their GEMM kernel by the launch's grid
/// (`one_block_per_sm`: see [`crate::backend::SgemmKernel`]).
pub(crate) fn gemm_k_splits(
    tiles: usize,
    mn: usize,
    k: usize,
    compute_units: u32,
    one_block_per_sm: bool,
) -> u32 {
    launch::k_splits(
        tiles,
        mn,
        k,
        compute_units,
        scratch::GEMM_PARTS,
        one_block_per_sm,
    )
    .0
}

/// In-memory key of a user kernel: (SHA-256 of the source, options, entry).
type UserKey = ([u8; 32], Vec<String>, String);

/// The generic GPU op set over one device.
///
/// Field order is drop order, and it matters: the modules go first (after [`Drop::drop`] has
/// waited for the queued kernels that use them), then the pool (which frees its cached blocks
/// through the device), then the device itself.
pub(crate) struct GpuOps<D: Device> {
    /// The built-in op set, compiled on first use (or by `warm_up`).
    op_set: Mutex<Option<Arc<D::Module>>>,
    user: Mutex<HashMap<UserKey, Arc<D::Module>>>,
    /// The grid-barrier counter of the persistent sequence kernels (`persistent`), allocated and
    /// zeroed on first use.
    seq_barrier: Mutex<Option<Buffer>>,
    /// The per-(row, unit) carry of the gated sequence backward ops (`gated_seq`), grow-only:
    /// the last is current, earlier ones stay alive for graphs that recorded them.
    seq_carry: Mutex<Vec<Buffer>>,
    /// The Elman sequence kernels' exchange words (`rnn_seq`), grow-only like `seq_carry`;
    /// every word is zero between launches.
    seq_exchange: Mutex<Vec<Buffer>>,
    /// Partials and tickets of the one-launch grid reductions, allocated on first use.
    scratch: Mutex<Option<scratch::Scratch>>,
    /// Partial products of split-k GEMMs ([`scratch::GEMM_PARTS`] floats), allocated on first use.
    gemm_parts: Mutex<Option<Buffer>>,
    /// Whether thin products go to the thin GEMM kernels (`ContextOptions::thin_gemm`).
    thin_gemm: bool,
    /// Launches queued since the current graph recording began (`None`: not recording).
    recording: Mutex<Option<usize>>,
    pool: Arc<Pool<D>>,
    device: Arc<D>,
    info: DeviceInfo,
    context: u64,
}

impl<D: Device> Drop for GpuOps<D> {
    fn drop(&mut self) {
        // Kernels may still be queued; unloading their module under them is undefined (HIP)
        // or an error. A failure here belongs to work nobody waits for any more: log it.
        if let Err(e) = self.device.synchronize() {
            log::warn!("{}: queued work failed at context drop: {e}", self.info.id);
        }
    }
}

/// The op set of `device`, for a backend's `create_ops`. The options that change what runs
/// (vendor BLAS, TF32, HIP sources through NVRTC) are applied by the backend's [`Device`]
/// (`vendor_gemm`, `op_set_source`); the generic ops route thin GEMMs by `thin_gemm`.
pub(crate) fn create<D: Device>(device: D, options: &ContextOptions) -> Result<Arc<dyn Ops>> {
    let device = Arc::new(device);
    Ok(Arc::new(GpuOps {
        info: device.info().clone(),
        context: crate::buffer::next_context_id(),
        pool: Arc::new(Pool::new(device.clone())),
        device,
        op_set: Mutex::new(None),
        user: Mutex::new(HashMap::new()),
        seq_barrier: Mutex::new(None),
        seq_carry: Mutex::new(Vec::new()),
        seq_exchange: Mutex::new(Vec::new()),
        scratch: Mutex::new(None),
        gemm_parts: Mutex::new(None),
        thin_gemm: options.thin_gemm,
        recording: Mutex::new(None),
    }))
}

impl<D: Device> GpuOps<D> {
    /// Compiles (or loads from the kernel cache) `source`.
    fn build_module(&self, source: &str, options: &[String]) -> Result<Arc<D::Module>> {
        let compiler = self.device.compiler_identity();
        let key = CacheKey {
            source,
            options,
            device: &self.info.name,
            arch: &self.info.arch,
            compiler: &compiler,
        };
        let module = KernelCache::from_env().get_or_build(
            &key,
            || self.device.build(source, options),
            |binary| self.device.load(binary),
        )?;
        Ok(Arc::new(module))
    }

    /// The built-in op set, compiled on first use. The lock is held while compiling so that
    /// concurrent first uses compile once.
    fn op_set(&self) -> Result<Arc<D::Module>> {
        let mut slot = self.op_set.lock();
        if let Some(m) = slot.as_ref() {
            return Ok(m.clone());
        }
        log::debug!("{}: compiling the built-in op set", self.info.id);
        let module = self.build_module(&self.device.op_set_source(), &[])?;
        *slot = Some(module.clone());
        Ok(module)
    }

    /// Launches built-in kernel `entry`.
    fn run(&self, entry: &str, config: LaunchConfig, args: Args) -> Result<()> {
        let module = self.op_set()?;
        self.count_recorded();
        self.device.launch(&module, entry, &config, args.as_slice())
    }

    /// Counts a launch into the graph being recorded, if any.
    fn count_recorded(&self) {
        if let Some(n) = self.recording.lock().as_mut() {
            *n += 1;
        }
    }

    /// Rejects views of other contexts.
    fn mine(&self, op: &str, views: &[&View<'_>]) -> Result<()> {
        check::same_context(op, self.context, views)
    }

    fn alloc_buffer(&self, len: usize) -> Result<Buffer> {
        pool::alloc(&self.pool, len, self.context)
    }
}

impl<D: Device> Ops for GpuOps<D> {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn context_id(&self) -> u64 {
        self.context
    }

    fn alloc(&self, len: usize) -> Result<Buffer> {
        self.alloc_buffer(len)
    }

    fn upload(&self, dst: View<'_>, src: &[f32]) -> Result<()> {
        self.upload_impl(dst, src)
    }

    fn download(&self, src: View<'_>, dst: &mut [f32]) -> Result<()> {
        self.download_impl(src, dst)
    }

    fn synchronize(&self) -> Result<()> {
        self.device.synchronize()
    }

    fn warm_up(&self) -> Result<()> {
        self.op_set().map(|_| ())
    }

    fn compile(&self, source: &KernelSource) -> Result<Kernel> {
        self.compile_user(source)
    }

    fn launch(&self, kernel: &Kernel, config: &LaunchConfig, args: &[KernelArg<'_>]) -> Result<()> {
        self.launch_user(kernel, config, args)
    }

    fn fill(&self, x: View<'_>, value: f32) -> Result<()> {
        self.fill_impl(x, value)
    }

    fn copy(&self, src: View<'_>, dst: View<'_>) -> Result<()> {
        self.copy_impl(src, dst)
    }

    fn scale(&self, x: View<'_>, alpha: f32) -> Result<()> {
        self.scale_impl(x, alpha)
    }

    fn axpy(&self, alpha: f32, x: View<'_>, y: View<'_>) -> Result<()> {
        self.axpy_impl(alpha, x, y)
    }

    fn add(&self, a: View<'_>, b: View<'_>, out: View<'_>) -> Result<()> {
        self.binary("add", a, b, out)
    }

    fn mul(&self, a: View<'_>, b: View<'_>, out: View<'_>) -> Result<()> {
        self.binary("mul", a, b, out)
    }

    fn gemm(&self, g: Gemm, a: View<'_>, b: View<'_>, c: View<'_>) -> Result<()> {
        self.gemm_impl(g, a, b, c)
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
        self.bias_act_forward_impl(z, bias, y, act, rows, cols)
    }

    fn activation(&self, x: View<'_>, y: View<'_>, act: Activation) -> Result<()> {
        self.activation_impl(x, y, act)
    }

    fn act_backward(
        &self,
        dy: View<'_>,
        z: View<'_>,
        y: View<'_>,
        dz: View<'_>,
        act: Activation,
    ) -> Result<()> {
        self.act_backward_impl(dy, z, y, dz, act)
    }

    fn dense_forward(
        &self,
        x: View<'_>,
        w: View<'_>,
        bias: View<'_>,
        z: View<'_>,
        y: View<'_>,
        act: Activation,
        rows: usize,
        inputs: usize,
        outputs: usize,
    ) -> Result<()> {
        self.dense_forward_impl([x, w, bias, z, y], act, rows, inputs, outputs)
    }

    fn dense_param_grads(
        &self,
        dz: View<'_>,
        x: View<'_>,
        dw: View<'_>,
        dbias: View<'_>,
        rows: usize,
        inputs: usize,
        outputs: usize,
    ) -> Result<()> {
        self.dense_param_grads_impl([dz, x, dw, dbias], rows, inputs, outputs)
    }

    fn bias_act_backward(
        &self,
        dy: View<'_>,
        z: View<'_>,
        y: View<'_>,
        dz: View<'_>,
        dbias: View<'_>,
        act: Activation,
        rows: usize,
        cols: usize,
    ) -> Result<()> {
        self.bias_act_backward_impl([dy, z, y, dz], dbias, act, rows, cols)
    }

    fn bias_act_backward_product(
        &self,
        g: View<'_>,
        w: View<'_>,
        z: View<'_>,
        y: View<'_>,
        dz: View<'_>,
        dbias: View<'_>,
        act: Activation,
        rows: usize,
        k: usize,
        cols: usize,
    ) -> Result<()> {
        self.bias_act_backward_product_impl([g, w, z, y, dz], dbias, act, rows, k, cols)
    }

    fn softmax(&self, x: View<'_>, y: View<'_>, rows: usize, cols: usize) -> Result<()> {
        self.row_softmax("softmax", x, y, rows, cols)
    }

    fn log_softmax(&self, x: View<'_>, y: View<'_>, rows: usize, cols: usize) -> Result<()> {
        self.row_softmax("log_softmax", x, y, rows, cols)
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
        self.softmax_xent_impl(
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
        self.mse_impl(
            pred, target, dpred, row_loss, totals, rows, cols, grad_scale,
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
        self.sum_rows_impl(x, out, rows, cols, beta)
    }

    fn sum_cols(
        &self,
        x: View<'_>,
        out: View<'_>,
        rows: usize,
        cols: usize,
        beta: f32,
    ) -> Result<()> {
        self.sum_cols_impl(x, out, rows, cols, beta)
    }

    fn sum_all(&self, x: View<'_>, out: View<'_>, beta: f32) -> Result<()> {
        self.sum_all_impl(x, out, beta)
    }

    fn clip_grad_norm(&self, grads: View<'_>, max_norm: f32, norm_out: View<'_>) -> Result<()> {
        self.clip_grad_norm_impl(grads, max_norm, norm_out)
    }

    fn gather_rows(
        &self,
        src: View<'_>,
        indices: View<'_>,
        dst: View<'_>,
        cols: usize,
    ) -> Result<()> {
        self.gather_rows_impl(src, indices, dst, cols)
    }

    fn scatter_add_rows(
        &self,
        src: View<'_>,
        indices: View<'_>,
        dst: View<'_>,
        cols: usize,
    ) -> Result<()> {
        self.scatter_add_rows_impl(src, indices, dst, cols)
    }

    fn one_hot(&self, indices: View<'_>, out: View<'_>, classes: usize) -> Result<()> {
        self.one_hot_impl(indices, out, classes)
    }

    fn dropout(
        &self,
        x: View<'_>,
        y: View<'_>,
        state: View<'_>,
        p: f32,
        stream: u32,
    ) -> Result<()> {
        self.dropout_impl(x, y, state, p, stream)
    }

    fn rng_advance(&self, state: View<'_>) -> Result<()> {
        self.rng_advance_impl(state)
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
        self.layer_norm_forward_impl(x, weight, bias, y, stats, rows, cols, eps)
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
        self.layer_norm_backward_impl(dy, x, weight, stats, dx, dweight, dbias, rows, cols)
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
        self.rnn_step_forward_impl(pre, h_prev, w_hh, b_ih, b_hh, h, act, batch, hidden)
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
        self.rnn_step_backward_impl(dh, dpre_next, w_hh, h, dpre, act, batch, hidden)
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
        self.rnn_sequence_forward_impl(pre, hs, w_hh, b_ih, b_hh, act, steps, batch, hidden)
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
        self.rnn_sequence_backward_impl(dh, hs, w_hh, dpre, act, steps, batch, hidden)
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
        self.lstm_cell_forward_impl(gates, c_prev, c, h, batch, hidden)
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
        self.lstm_cell_backward_impl(gates, c_prev, c, dh, dc, dgates, batch, hidden)
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
        self.gru_cell_forward_impl(gx, gh, h_prev, h, cache, batch, hidden)
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
        self.gru_cell_backward_impl(cache, h_prev, dh, dgx, dgh, dh_prev, batch, hidden)
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
        self.lstm_sequence_forward_impl(gates, hs, cs, w_hh, b_ih, b_hh, steps, batch, hidden)
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
        self.lstm_sequence_backward_impl(dh, gates, cs, w_hh, dgates, steps, batch, hidden)
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
        self.gru_sequence_forward_impl(gx, hs, w_hh, b_ih, b_hh, cache, steps, batch, hidden)
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
        self.gru_sequence_backward_impl(dh, hs, cache, w_hh, dgx, dgh, steps, batch, hidden)
    }

    fn sgd_step(
        &self,
        params: View<'_>,
        grads: View<'_>,
        velocity: View<'_>,
        state: View<'_>,
        s: SgdStep,
    ) -> Result<()> {
        self.sgd_step_impl(params, grads, velocity, state, s)
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
        self.adam_step_impl(params, grads, m, v, state, s)
    }

    fn capture_begin(&self) -> Result<bool> {
        // Compiled before recording: loading a module is not something a graph can record.
        self.op_set()?;
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

    fn profiler_range(&self, on: bool) -> Result<()> {
        self.device.profiler_range(on)
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
