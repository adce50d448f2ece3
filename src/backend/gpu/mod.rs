//! The op set written once for every GPU backend, over [`crate::backend::Device`]: each op
//! validates its arguments (shared checks in [`crate::ops::check`]) and launches the kernels of
//! docs/kernel-abi.md, which every dialect defines with the same names and parameters. This
//! module holds [`GpuOps`], its construction and the launch helpers; each family trait is
//! implemented in its own module (`impl<D: Device> NormOps for GpuOps<D>` in `norm.rs`, ...).

mod activation;
mod cells;
// The kernel contract needs every dialect's sources and launch rules.
#[cfg(all(test, feature = "cuda", feature = "opencl", feature = "hip"))]
mod contract;
mod elementwise;
mod embedding;
mod execution;
mod gated_seq;
mod gemm_thin;
mod half_gemm;
mod launch;
mod linalg;
mod loss;
mod mixed;
mod modules;
mod norm;
mod optim;
mod persistent;
mod pool;
mod prefetch;
mod random;
mod reduce;
mod rnn_seq;
mod scratch;
mod seq_gemm;
mod seq_pair;
mod seq_route;
mod small_seq;
mod tier0;
mod user;
mod varlen;

pub use half_gemm::{HalfGemmDevice, half_gemm_route};

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::backend::Device;
use crate::buffer::{Buffer, View};
use crate::context::ContextOptions;
use crate::device::DeviceInfo;
use crate::error::Result;
use crate::kernel::LaunchConfig;
use crate::ops::{Engine, check};

use launch::Args;
use modules::OpSet;
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
    /// The built-in op set, one module per kernel family, each compiled on first use (or by
    /// `warm_up`, or a background prefetch that shares it).
    op_set: Arc<OpSet<D>>,
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
    /// W_hh packed for the L1 variant of the block-local kernels (`small_seq`), grow-only like
    /// `seq_carry`.
    seq_packed_w: Mutex<Vec<Buffer>>,
    /// The bf16/f16 copies of W_hh and of a step's product operand on the per-step GEMM path
    /// in low precision (`seq_gemm`), grow-only like `seq_carry`.
    seq_low: Mutex<Vec<Buffer>>,
    /// Partials and tickets of the one-launch grid reductions, allocated on first use.
    scratch: Mutex<Option<scratch::Scratch>>,
    /// Partial products of split-k GEMMs ([`scratch::GEMM_PARTS`] floats), allocated on first use.
    gemm_parts: Mutex<Option<Buffer>>,
    /// Whether thin products go to the thin GEMM kernels (`ContextOptions::thin_gemm`).
    thin_gemm: bool,
    /// `ContextOptions::recurrent_gemm_steps` or its environment variable (`seq_gemm`).
    seq_gemm_steps: Option<bool>,
    /// `ContextOptions::recurrent_block_local` or its environment variable (`small_seq`).
    seq_block_local: bool,
    /// Whether two sequence ops of one shape may share a launch (`RNN_RECURRENT_PAIR`,
    /// `seq_pair`).
    seq_pair: bool,
    /// The algorithm every sequence op tries first (`ContextOptions::recurrent_algorithm` or
    /// its environment variable, `seq_route`); `None`: the automatic choice.
    seq_forced: Option<crate::RecurrentAlgorithm>,
    /// Launches queued since the current graph recording began (`None`: not recording).
    recording: Mutex<Option<usize>>,
    pool: Arc<Pool<D>>,
    /// The cap on the bytes live buffers hold (`MemoryOps::set_memory_limit`).
    limit: crate::memory_limit::MemoryLimit,
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
        // No prefetch thread outlives the context (it holds the op set and the device).
        self.op_set.stop();
    }
}

/// The op set of `device`, for a backend's `create_ops`. The options that change what runs
/// (vendor BLAS, TF32, HIP sources through NVRTC) are applied by the backend's [`Device`]
/// (`vendor_gemm`, `op_set_modules`); the generic ops route thin GEMMs by `thin_gemm`. A GPU
/// starts building its op-set modules in the background (`modules::PREFETCH`).
pub(crate) fn create<D: Device>(device: D, options: &ContextOptions) -> Result<Engine> {
    let prefetch = modules::prefetch_wanted(device.info().kind)?;
    let ops = GpuOps::new(device, options)?;
    if prefetch {
        ops.op_set.prefetch(modules::build_threads());
    }
    Ok(Engine::new(Arc::new(ops)))
}

impl<D: Device> GpuOps<D> {
    /// The op set of `device`, nothing compiled yet.
    fn new(device: D, options: &ContextOptions) -> Result<Self> {
        let device = Arc::new(device);
        Ok(GpuOps {
            info: device.info().clone(),
            context: crate::buffer::next_context_id(),
            limit: Default::default(),
            pool: Arc::new(Pool::new(device.clone())),
            op_set: Arc::new(OpSet::new(device.clone(), options.force_tier0)?),
            device,
            user: Mutex::new(HashMap::new()),
            seq_barrier: Mutex::new(None),
            seq_carry: Mutex::new(Vec::new()),
            seq_exchange: Mutex::new(Vec::new()),
            seq_packed_w: Mutex::new(Vec::new()),
            seq_low: Mutex::new(Vec::new()),
            scratch: Mutex::new(None),
            gemm_parts: Mutex::new(None),
            thin_gemm: options.thin_gemm,
            seq_gemm_steps: seq_gemm::choice(options.recurrent_gemm_steps)?,
            seq_block_local: small_seq::choice(options.recurrent_block_local)?,
            seq_pair: seq_pair::choice()?,
            seq_forced: crate::recurrent_algorithm::forced(options.recurrent_algorithm)?,
            recording: Mutex::new(None),
        })
    }

    /// Compiles (or loads from the kernel cache) a user's `source`.
    fn build_module(&self, source: &str, options: &[String]) -> Result<Arc<D::Module>> {
        let (module, _) = modules::build(&*self.device, source, options)?;
        Ok(Arc::new(module))
    }

    /// The op-set module that holds built-in kernel `entry`, compiled (or loaded from the disk
    /// cache) on its first use.
    fn module_for(&self, entry: &str) -> Result<Arc<D::Module>> {
        self.op_set
            .module_for(entry, || self.recording.lock().is_some())
    }

    /// The tier-0 module when a launch of `entry` (a product of `work` flops) is to use its
    /// stand-in now (a cold start; see `tier0.rs`), `None` when it launches `entry` itself.
    fn tier0_for(&self, entry: &str, work: u64) -> Result<Option<Arc<D::Module>>> {
        self.op_set
            .tier0_for(entry, work, || self.recording.lock().is_some())
    }

    /// Whether the vendor library is to take a product of `entry` while its family builds (a
    /// cold start; `OpSet::vendor_stands_in`).
    fn vendor_stands_in(&self, entry: &str) -> Result<bool> {
        self.op_set
            .vendor_stands_in(entry, || self.recording.lock().is_some())
    }

    /// Launches built-in kernel `entry`.
    fn run(&self, entry: &str, config: LaunchConfig, args: Args) -> Result<()> {
        let module = self.module_for(entry)?;
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
}
