//! The CPU backend: every op natively, parallel with Rayon, GEMM through the `gemm` crate.
//! It is the reference every GPU backend is tested against.
// SKELETON: replaced by the CPU backend implementation.

use std::sync::Arc;

use crate::buffer::{Buffer, View};
use crate::device::{BackendKind, DeviceId, DeviceInfo, DeviceKind};
use crate::error::{Error, Result};
use crate::kernel::{Kernel, KernelArg, KernelSource, LaunchConfig};
use crate::ops::{Activation, AdamStep, Gemm, Ops, SgdStep};

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
        memory: 0,
        compute_units: threads as u32,
        arch: std::env::consts::ARCH.to_string(),
        driver: format!("rnn {}", env!("CARGO_PKG_VERSION")),
    }
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

impl CpuOps {
    fn not_yet(&self, op: &str) -> Error {
        Error::Unsupported {
            op: op.into(),
            backend: BackendKind::Cpu,
            reason: "skeleton".into(),
        }
    }
}

impl Ops for CpuOps {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn context_id(&self) -> u64 {
        self.context
    }

    fn alloc(&self, _len: usize) -> Result<Buffer> {
        Err(self.not_yet("alloc"))
    }

    fn upload(&self, _dst: View<'_>, _src: &[f32]) -> Result<()> {
        Err(self.not_yet("upload"))
    }

    fn download(&self, _src: View<'_>, _dst: &mut [f32]) -> Result<()> {
        Err(self.not_yet("download"))
    }

    fn synchronize(&self) -> Result<()> {
        Err(self.not_yet("synchronize"))
    }

    fn warm_up(&self) -> Result<()> {
        Err(self.not_yet("warm_up"))
    }

    fn compile(&self, _source: &KernelSource) -> Result<Kernel> {
        Err(self.not_yet("compile"))
    }

    fn launch(
        &self,
        _kernel: &Kernel,
        _config: &LaunchConfig,
        _args: &[KernelArg<'_>],
    ) -> Result<()> {
        Err(self.not_yet("launch"))
    }

    fn fill(&self, _x: View<'_>, _value: f32) -> Result<()> {
        Err(self.not_yet("fill"))
    }

    fn copy(&self, _src: View<'_>, _dst: View<'_>) -> Result<()> {
        Err(self.not_yet("copy"))
    }

    fn scale(&self, _x: View<'_>, _alpha: f32) -> Result<()> {
        Err(self.not_yet("scale"))
    }

    fn axpy(&self, _alpha: f32, _x: View<'_>, _y: View<'_>) -> Result<()> {
        Err(self.not_yet("axpy"))
    }

    fn add(&self, _a: View<'_>, _b: View<'_>, _out: View<'_>) -> Result<()> {
        Err(self.not_yet("add"))
    }

    fn mul(&self, _a: View<'_>, _b: View<'_>, _out: View<'_>) -> Result<()> {
        Err(self.not_yet("mul"))
    }

    fn gemm(&self, _g: Gemm, _a: View<'_>, _b: View<'_>, _c: View<'_>) -> Result<()> {
        Err(self.not_yet("gemm"))
    }

    fn bias_act_forward(
        &self,
        _z: View<'_>,
        _bias: View<'_>,
        _y: View<'_>,
        _act: Activation,
        _rows: usize,
        _cols: usize,
    ) -> Result<()> {
        Err(self.not_yet("bias_act_forward"))
    }

    fn activation(&self, _x: View<'_>, _y: View<'_>, _act: Activation) -> Result<()> {
        Err(self.not_yet("activation"))
    }

    fn act_backward(
        &self,
        _dy: View<'_>,
        _z: View<'_>,
        _y: View<'_>,
        _dz: View<'_>,
        _act: Activation,
    ) -> Result<()> {
        Err(self.not_yet("act_backward"))
    }

    fn softmax(&self, _x: View<'_>, _y: View<'_>, _rows: usize, _cols: usize) -> Result<()> {
        Err(self.not_yet("softmax"))
    }

    fn log_softmax(&self, _x: View<'_>, _y: View<'_>, _rows: usize, _cols: usize) -> Result<()> {
        Err(self.not_yet("log_softmax"))
    }

    fn softmax_cross_entropy(
        &self,
        _logits: View<'_>,
        _labels: View<'_>,
        _dlogits: View<'_>,
        _row_loss: View<'_>,
        _row_correct: View<'_>,
        _rows: usize,
        _cols: usize,
        _grad_scale: f32,
    ) -> Result<()> {
        Err(self.not_yet("softmax_cross_entropy"))
    }

    fn mse(
        &self,
        _pred: View<'_>,
        _target: View<'_>,
        _dpred: View<'_>,
        _row_loss: View<'_>,
        _rows: usize,
        _cols: usize,
        _grad_scale: f32,
    ) -> Result<()> {
        Err(self.not_yet("mse"))
    }

    fn sum_rows(
        &self,
        _x: View<'_>,
        _out: View<'_>,
        _rows: usize,
        _cols: usize,
        _beta: f32,
    ) -> Result<()> {
        Err(self.not_yet("sum_rows"))
    }

    fn sum_cols(
        &self,
        _x: View<'_>,
        _out: View<'_>,
        _rows: usize,
        _cols: usize,
        _beta: f32,
    ) -> Result<()> {
        Err(self.not_yet("sum_cols"))
    }

    fn sum_all(&self, _x: View<'_>, _out: View<'_>, _beta: f32) -> Result<()> {
        Err(self.not_yet("sum_all"))
    }

    fn clip_grad_norm(&self, _grads: View<'_>, _max_norm: f32, _norm_out: View<'_>) -> Result<()> {
        Err(self.not_yet("clip_grad_norm"))
    }

    fn gather_rows(
        &self,
        _src: View<'_>,
        _indices: View<'_>,
        _dst: View<'_>,
        _cols: usize,
    ) -> Result<()> {
        Err(self.not_yet("gather_rows"))
    }

    fn one_hot(&self, _indices: View<'_>, _out: View<'_>, _classes: usize) -> Result<()> {
        Err(self.not_yet("one_hot"))
    }

    fn rnn_cell_forward(
        &self,
        _pre: View<'_>,
        _b_ih: View<'_>,
        _b_hh: View<'_>,
        _h: View<'_>,
        _act: Activation,
        _batch: usize,
        _hidden: usize,
    ) -> Result<()> {
        Err(self.not_yet("rnn_cell_forward"))
    }

    fn lstm_cell_forward(
        &self,
        _gates: View<'_>,
        _c_prev: View<'_>,
        _c: View<'_>,
        _h: View<'_>,
        _batch: usize,
        _hidden: usize,
    ) -> Result<()> {
        Err(self.not_yet("lstm_cell_forward"))
    }

    fn lstm_cell_backward(
        &self,
        _gates: View<'_>,
        _c_prev: View<'_>,
        _c: View<'_>,
        _dh: View<'_>,
        _dc: View<'_>,
        _dgates: View<'_>,
        _batch: usize,
        _hidden: usize,
    ) -> Result<()> {
        Err(self.not_yet("lstm_cell_backward"))
    }

    fn gru_cell_forward(
        &self,
        _gx: View<'_>,
        _gh: View<'_>,
        _h_prev: View<'_>,
        _h: View<'_>,
        _cache: View<'_>,
        _batch: usize,
        _hidden: usize,
    ) -> Result<()> {
        Err(self.not_yet("gru_cell_forward"))
    }

    fn gru_cell_backward(
        &self,
        _cache: View<'_>,
        _h_prev: View<'_>,
        _dh: View<'_>,
        _dgx: View<'_>,
        _dgh: View<'_>,
        _dh_prev: View<'_>,
        _batch: usize,
        _hidden: usize,
    ) -> Result<()> {
        Err(self.not_yet("gru_cell_backward"))
    }

    fn sgd_step(
        &self,
        _params: View<'_>,
        _grads: View<'_>,
        _velocity: View<'_>,
        _s: SgdStep,
    ) -> Result<()> {
        Err(self.not_yet("sgd_step"))
    }

    fn adam_step(
        &self,
        _params: View<'_>,
        _grads: View<'_>,
        _m: View<'_>,
        _v: View<'_>,
        _s: AdamStep,
    ) -> Result<()> {
        Err(self.not_yet("adam_step"))
    }
}
const _: Option<(
    Activation,
    AdamStep,
    Gemm,
    SgdStep,
    &Buffer,
    View<'static>,
    &Kernel,
    KernelArg<'static>,
    &KernelSource,
    LaunchConfig,
)> = None;
