//! The whole-sequence Elman ops. Where the device runs persistent kernels (CUDA's cooperative
//! launch; NVIDIA GPUs under OpenCL, see src/backend/opencl/persistent.rs) and the grid fits
//! the co-residency limit, ONE launch of the persistent `rnn_seq_forward` / `rnn_seq_backward`
//! kernels (geometry `Q`, kernels-cu/rnn_seq.cu, kernels-cl/seq.cl) runs every time step, the
//! blocks passing the state to each other as tagged words through an exchange buffer; everywhere
//! else (other OpenCL devices, HIP, shapes that do not fit) the fused step kernels run once per
//! step. Which of these (or the block-local kernels, or the per-step GEMMs) runs a sequence is
//! decided by `seq_route`.

use super::GpuOps;
use super::launch::{self, Args};
use super::persistent::{CoopPlan, SeqTile};
use super::seq_route::{SeqOp, SeqRoute};
use crate::backend::Device;
use crate::buffer::View;
use crate::error::Result;
use crate::ops::Activation;
use crate::ops::SeqShape;
use crate::ops::prelude::*;
use crate::ops::{RnnSequenceBackward, RnnSequenceForward, RnnStepBackward, RnnStepForward};

/// Batch rows of a block tile (`RQ_ROWS` in kernels-cu/rnn_seq.cu).
const RQ_ROWS: usize = 8;
/// Hidden units a block owns (`RQ_UNITS`).
const RQ_UNITS: usize = 16;
/// Threads per block (`RQ_THREADS`).
const RQ_THREADS: u32 = 256;
/// The largest hidden size whose W slice the `_regs` entries keep in registers (`RQ_REG_K`).
const RQ_REG_K: usize = 256;

/// The entry of `base` (`rnn_seq_forward` or `rnn_seq_backward`) for `hidden` and its block
/// tile: two staging areas of `RQ_ROWS` state rows in shared memory, and the W slice there too
/// unless it fits in registers.
fn entry_and_tile(base: &'static str, hidden: usize) -> (String, SeqTile) {
    let (entry, slice) = if hidden <= RQ_REG_K {
        (format!("{base}_regs"), 0)
    } else {
        (base.to_string(), RQ_UNITS)
    };
    let tile = SeqTile {
        rows: RQ_ROWS,
        units: RQ_UNITS,
        threads: RQ_THREADS,
        shared_floats: (slice + 2 * RQ_ROWS).checked_mul(hidden),
    };
    (entry, tile)
}

impl<D: Device> GpuOps<D> {
    /// Runs `f` with the exchange words of a `batch x hidden` state (`state` elements): two
    /// slots of one 64-bit word per element, 4 `state` floats, zero. Grow-only, like the gated
    /// ops' carry (`with_grow_only`). Only called once a persistent launch is certain, so
    /// devices that loop the step kernels allocate none. A new buffer is zeroed; the kernels
    /// leave every word zero again when they finish (kernels-cu/rnn_seq.cu).
    fn with_exchange<R>(&self, state: usize, f: impl FnOnce(View<'_>) -> Result<R>) -> Result<R> {
        let words = state.checked_mul(4).ok_or_else(|| {
            crate::Error::InvalidArgument(format!(
                "{}: an exchange buffer for {state} state elements overflows",
                self.info.id
            ))
        })?;
        self.with_grow_only(&self.seq_exchange, words, true, f)
    }
}

impl<D: Device> GpuOps<D> {
    /// The step kernel `op` (geometry `S`) with `bufs`, the shape, whether a next step exists
    /// (backward only) and the activation.
    fn elman_step(
        &self,
        op: &str,
        bufs: &[&View<'_>],
        has_next: Option<bool>,
        act: Activation,
        shape: SeqShape,
    ) -> Result<()> {
        let mut args = Args::new().bufs(bufs)?.dims(&[shape.batch, shape.hidden]);
        if let Some(has_next) = has_next {
            args = args.u32(has_next as u32);
        }
        let args = args.u32(act.code()).f32(act.param());
        self.run(op, launch::rnn_step(shape.batch, shape.hidden), args)
    }

    /// One launch of the persistent kernel of `plan` with `bufs`, the barrier and the exchange
    /// words of `n` state elements.
    fn elman_persistent(
        &self,
        plan: &CoopPlan,
        bufs: &[&View<'_>],
        n: usize,
        act: Activation,
        shape: SeqShape,
    ) -> Result<()> {
        self.cooperative(plan, |barrier| {
            self.with_exchange(n, |xch| {
                let args = Args::new().bufs(bufs)?.bufs(&[barrier, &xch])?;
                let args = args.dims(&[shape.steps, shape.batch, shape.hidden]);
                Ok(args.u32(act.code()).f32(act.param()))
            })
        })
    }

    /// The route of the Elman sequence op named by its persistent kernel `base`.
    pub(super) fn elman_route(&self, base: &'static str, shape: SeqShape) -> Result<SeqRoute> {
        let op = SeqOp {
            base,
            gates: 1,
            persistent: entry_and_tile(base, shape.hidden),
        };
        self.seq_route(&op, shape)
    }
}

impl<D: Device> ElmanOps for GpuOps<D> {
    fn rnn_step_forward(&self, a: RnnStepForward<'_>) -> Result<()> {
        if a.check(self.context)? == 0 {
            return Ok(());
        }
        let bufs = a.views();
        self.elman_step(RnnStepForward::OP, &bufs.each_ref(), None, a.act, a.shape)
    }

    fn rnn_step_backward(&self, a: RnnStepBackward<'_>) -> Result<()> {
        if a.check(self.context)? == 0 {
            return Ok(());
        }
        let (bufs, has_next) = (a.views(), Some(a.dpre_next.is_some()));
        self.elman_step(
            RnnStepBackward::OP,
            &bufs.each_ref(),
            has_next,
            a.act,
            a.shape,
        )
    }

    fn rnn_sequence_forward(&self, a: RnnSequenceForward<'_>) -> Result<()> {
        let n = a.check(self.context)?;
        if n == 0 {
            return Ok(());
        }
        let bufs = a.views();
        let act = |args: Args| args.u32(a.act.code()).f32(a.act.param());
        match self.elman_route("rnn_seq_forward", a.shape)? {
            SeqRoute::Local(plan) => self.block_local(&plan, &bufs.each_ref(), a.shape, act),
            SeqRoute::Persistent(plan) => {
                self.elman_persistent(&plan, &bufs.each_ref(), n, a.act, a.shape)
            }
            SeqRoute::Gemm => {
                self.with_carry(a.shape.hidden, |bias| self.elman_forward_by_gemm(&a, bias))
            }
            SeqRoute::Steps => crate::ops::rnn_seq::forward_by_steps(self, a),
        }
    }

    fn rnn_sequence_backward(&self, a: RnnSequenceBackward<'_>) -> Result<()> {
        let n = a.check(self.context)?;
        if n == 0 {
            return Ok(());
        }
        let bufs = a.views();
        let act = |args: Args| args.u32(a.act.code()).f32(a.act.param());
        match self.elman_route("rnn_seq_backward", a.shape)? {
            SeqRoute::Local(plan) => self.block_local(&plan, &bufs.each_ref(), a.shape, act),
            SeqRoute::Persistent(plan) => {
                self.elman_persistent(&plan, &bufs.each_ref(), n, a.act, a.shape)
            }
            SeqRoute::Gemm => self.with_carry(n, |total| self.elman_backward_by_gemm(&a, total)),
            SeqRoute::Steps => crate::ops::rnn_seq::backward_by_steps(self, a),
        }
    }
}
