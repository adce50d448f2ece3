//! The whole-sequence LSTM and GRU ops. Where the device runs persistent kernels (CUDA's
//! cooperative launch; NVIDIA GPUs under OpenCL) and the grid fits the co-residency limit, ONE
//! launch of the persistent kernels (`lstm_seq_*`, `gru_seq_*`, geometry `Q`,
//! kernels-cu/gated_seq.cu, kernels-cl/seq.cl) runs every time step; everywhere else (other
//! OpenCL devices, HIP, shapes that do not fit) the fused step kernels (`lstm_step_*`,
//! `gru_step_*`, geometry `S`,
//! recurrent product and gate math in one launch) run once per step, looped by
//! `ops::gated_seq`. Which of these (or the block-local kernels, or the per-step GEMMs) runs a
//! sequence is decided by `seq_route`. The forwards' `_low` entries (`lstm_seq_forward_low`,
//! `gru_seq_forward_low`) also store the outputs in bf16/f16 for a mixed-precision network, on
//! the persistent route only.

use super::GpuOps;
use super::launch::{self, Args};
use super::persistent::{CoopPlan, SeqTile};
use super::seq_route::{SeqOp, SeqRoute};
use crate::backend::Device;
use crate::buffer::View;
use crate::dtype::DType;
use crate::error::Result;
use crate::kernel::Dialect;
use crate::ops::gated_seq::{self, GatedStep, GatedSteps};
use crate::ops::prelude::*;
use crate::ops::{
    GruSequenceBackward, GruSequenceForward, LstmSequenceBackward, LstmSequenceForward,
};
use crate::ops::{SeqShape, check};

/// Batch rows of a block tile (`GQ_ROWS` in kernels-cu/gated_seq.cu, `RQ_ROWS` in
/// kernels-cl/seq.cl).
const GQ_ROWS: usize = 8;
/// Hidden units a block owns, for every gate: `GQ_UNITS` in CUDA and HIP, `PQ_UNITS` in OpenCL
/// (half, so that the W slice fits OpenCL's 48 KB of local memory).
fn units(dialect: Dialect) -> usize {
    match dialect {
        Dialect::OpenCl => 8,
        Dialect::Cuda | Dialect::Hip => 16,
    }
}

/// The block tile of the persistent kernels of a cell with `gates` gates at `hidden` in
/// `dialect`: 8 threads per gate and unit (128 or 64 per gate), and in shared memory the
/// block's W slice (`gates * units` rows or `units` columns of W_hh), the staged rows (`hidden`
/// wide forward; `gates * hidden` backward, which OpenCL reads from global memory instead) and
/// the partial sums.
fn tile(gates: usize, hidden: usize, forward: bool, dialect: Dialect) -> SeqTile {
    let units = units(dialect);
    let staged = match (forward, dialect) {
        (true, _) => Some(hidden),
        (false, Dialect::OpenCl) => Some(0),
        (false, _) => gates.checked_mul(hidden),
    };
    let floats = (gates * units)
        .checked_mul(hidden)
        .zip(staged.and_then(|k| k.checked_mul(GQ_ROWS)))
        .and_then(|(w, a)| w.checked_add(a))
        .and_then(|f| f.checked_add(gates * GQ_ROWS * units));
    SeqTile {
        rows: GQ_ROWS,
        units,
        threads: (8 * units * gates) as u32,
        shared_floats: floats,
    }
}

/// A gated cell's persistent sequence kernel: `entry`, the cell's gate count and direction,
/// and for the LSTM's backward its `carry_in` argument (the carry holds `dc_n` on entry).
#[derive(Clone, Copy)]
struct SeqKernel {
    entry: &'static str,
    gates: usize,
    forward: bool,
    carry_in: Option<bool>,
}

/// The forward kernels of the LSTM and the GRU.
const LSTM_FORWARD: SeqKernel = SeqKernel {
    entry: "lstm_seq_forward",
    gates: 4,
    forward: true,
    carry_in: None,
};
const GRU_FORWARD: SeqKernel = SeqKernel {
    entry: "gru_seq_forward",
    gates: 3,
    forward: true,
    carry_in: None,
};

impl<D: Device> GpuOps<D> {
    /// Runs `f` with `n` elements of this context's carry scratch (also the scratch of the
    /// per-step GEMM path, `seq_gemm`). Not a pooled temporary: a
    /// recorded training step may hold several gated layers of one size, and while recording,
    /// the pool keeps each released temporary for the graph, so the second layer would need a
    /// fresh allocation, which recording refuses. One grow-only buffer serves every call instead
    /// (`with_grow_only`).
    pub(super) fn with_carry(
        &self,
        n: usize,
        f: impl FnOnce(View<'_>) -> Result<()>,
    ) -> Result<()> {
        self.with_grow_only(&self.seq_carry, n, false, f)
    }

    /// One launch of the persistent kernel of `plan` (`k`'s) over every step of `shape` with
    /// `bufs` and then `tail` (ABI order, the barrier appended).
    fn gated_persistent(
        &self,
        (k, plan): (SeqKernel, &CoopPlan),
        bufs: &[&View<'_>],
        tail: &[&View<'_>],
        shape: SeqShape,
    ) -> Result<()> {
        self.cooperative(plan, |barrier| {
            let args = Args::new().bufs(bufs)?.bufs(tail)?.buf(barrier)?;
            let args = args.dims(&[shape.steps, shape.batch, shape.hidden]);
            Ok(match k.carry_in {
                Some(on) => args.u32(on as u32),
                None => args,
            })
        })
    }

    /// The forward of `k` (`lstm_seq_forward`, `gru_seq_forward`; its op's views `bufs`
    /// checked, `n` state elements a step) through its `_low` entry, which also stores the
    /// outputs rounded to `low`'s type into `low`, where a sequence of `shape` runs on the
    /// persistent kernels: true then; false, nothing run, on any other route.
    fn forward_low(
        &self,
        (k, shape, n): (SeqKernel, SeqShape, usize),
        bufs: &[&View<'_>],
        low: &View<'_>,
    ) -> Result<bool> {
        let (entry, op_name) = match k.entry {
            "lstm_seq_forward" => ("lstm_seq_forward_low", LstmSequenceForward::OP),
            "gru_seq_forward" => ("gru_seq_forward_low", GruSequenceForward::OP),
            _ => return Ok(false),
        };
        let t = check::seq_low_outputs(op_name, self.context, (low, bufs), (n, shape.steps))?;
        if n == 0 {
            return Ok(false);
        }
        let op = SeqOp {
            base: k.entry,
            gates: k.gates,
            persistent: (
                entry.to_string(),
                tile(k.gates, shape.hidden, true, self.device.dialect()),
            ),
        };
        let SeqRoute::Persistent(plan) = self.seq_route(&op, shape)? else {
            return Ok(false);
        };
        // half_convert.h's RNN_KIND_BF16 and RNN_KIND_F16.
        let kind = u32::from(t != DType::Bf16);
        self.cooperative(&plan, |barrier| {
            let args = Args::new().bufs(bufs)?.buf(barrier)?.buf_as(low, t)?;
            Ok(args
                .dims(&[shape.steps, shape.batch, shape.hidden])
                .u32(kind))
        })?;
        Ok(true)
    }

    /// The route of the gated sequence op named by its persistent kernel `entry`, of a cell
    /// with `gates` gate blocks, forward or backward.
    pub(super) fn gated_route(
        &self,
        entry: &'static str,
        (gates, forward): (usize, bool),
        shape: SeqShape,
    ) -> Result<SeqRoute> {
        let op = SeqOp {
            base: entry,
            gates,
            persistent: (
                entry.to_string(),
                tile(gates, shape.hidden, forward, self.device.dialect()),
            ),
        };
        self.seq_route(&op, shape)
    }

    /// A gated sequence op with `n` state elements (0: the checks found nothing to compute),
    /// run as [`GpuOps::seq_route`] says: the block-local or persistent counterpart of `k` with
    /// `bufs` (and, backward, the carry appended: `state` where the caller gives one, else
    /// scratch); `by_gemm` with `gemm_blocks * n` elements of scratch; or `by_steps` with the
    /// carry.
    fn gated_sequence(
        &self,
        k: SeqKernel,
        (bufs, state): (&[&View<'_>], Option<View<'_>>),
        (n, shape): (usize, SeqShape),
        (gemm_blocks, by_gemm): (usize, impl FnOnce(View<'_>) -> Result<()>),
        by_steps: impl FnOnce(View<'_>) -> Result<()>,
    ) -> Result<()> {
        if n == 0 {
            return Ok(());
        }
        let route = self.gated_route(k.entry, (k.gates, k.forward), shape)?;
        let blocks = match route {
            SeqRoute::Gemm => gemm_blocks.max(1),
            _ => 1,
        };
        self.with_carry(blocks * n, |scratch| {
            let carry = match state {
                Some(s) => s,
                None => scratch.slice(0, n)?,
            };
            let tail: &[&View<'_>] = if k.forward { &[] } else { &[&carry] };
            match route {
                SeqRoute::Local(plan) => {
                    let all: Vec<&View<'_>> = bufs.iter().chain(tail).copied().collect();
                    let carry_in = |args: Args| match k.carry_in {
                        Some(on) => args.u32(on as u32),
                        None => args,
                    };
                    self.block_local(&plan, &all, shape, carry_in)
                }
                SeqRoute::Persistent(plan) => self.gated_persistent((k, &plan), bufs, tail, shape),
                SeqRoute::Gemm => by_gemm(scratch),
                SeqRoute::Steps => by_steps(carry),
            }
        })
    }
}

/// The step kernels (geometry `S`). The sequence checks ran before the loop that calls these,
/// so the shapes fit the kernels' 32-bit dimensions.
impl<D: Device> GatedSteps for GpuOps<D> {
    fn gated_step(&self, s: &GatedStep<'_, '_>) -> Result<()> {
        let mut args = Args::new();
        for v in s.bufs {
            args = args.buf(v)?;
        }
        args = args.dims(&[s.batch, s.hidden]);
        if let Some(has_next) = s.has_next {
            args = args.u32(has_next);
        }
        self.run(s.entry, launch::rnn_step(s.batch, s.hidden), args)
    }
}

impl<D: Device> GatedSequenceOps for GpuOps<D> {
    fn lstm_sequence_forward(&self, a: LstmSequenceForward<'_>) -> Result<()> {
        let k = LSTM_FORWARD;
        let n = a.check(self.context)?;
        let (gemm, steps) = (
            |_: View<'_>| self.lstm_forward_by_gemm(&a),
            |_: View<'_>| gated_seq::lstm_forward_by_steps(self, a),
        );
        let views = a.views();
        let bufs = (&views.each_ref()[..], None);
        self.gated_sequence(k, bufs, (n, a.shape), (0, gemm), steps)
    }

    fn lstm_sequence_forward_low(&self, a: LstmSequenceForward<'_>, low: View<'_>) -> Result<bool> {
        let n = a.check(self.context)?;
        let views = a.views();
        self.forward_low((LSTM_FORWARD, a.shape, n), &views.each_ref(), &low)
    }

    fn lstm_sequence_backward(&self, a: LstmSequenceBackward<'_>) -> Result<()> {
        let k = SeqKernel {
            entry: "lstm_seq_backward",
            gates: 4,
            forward: false,
            carry_in: Some(a.dc_state.is_some()),
        };
        let n = a.check(self.context)?;
        let gemm = |scratch: View<'_>| self.lstm_backward_by_gemm(&a, scratch);
        let steps = |carry: View<'_>| gated_seq::lstm_backward_by_steps(self, &a, carry);
        let views = a.views();
        let bufs = (&views.each_ref()[..], a.dc_state);
        self.gated_sequence(k, bufs, (n, a.shape), (2, gemm), steps)
    }

    fn gru_sequence_forward(&self, a: GruSequenceForward<'_>) -> Result<()> {
        let k = GRU_FORWARD;
        let n = a.check(self.context)?;
        let (gemm, steps) = (
            |scratch: View<'_>| self.gru_forward_by_gemm(&a, scratch),
            |_: View<'_>| gated_seq::gru_forward_by_steps(self, a),
        );
        let views = a.views();
        let bufs = (&views.each_ref()[..], None);
        self.gated_sequence(k, bufs, (n, a.shape), (3, gemm), steps)
    }

    fn gru_sequence_forward_low(&self, a: GruSequenceForward<'_>, low: View<'_>) -> Result<bool> {
        let n = a.check(self.context)?;
        let views = a.views();
        self.forward_low((GRU_FORWARD, a.shape, n), &views.each_ref(), &low)
    }

    fn gru_sequence_backward(&self, a: GruSequenceBackward<'_>) -> Result<()> {
        let k = SeqKernel {
            entry: "gru_seq_backward",
            gates: 3,
            forward: false,
            carry_in: None,
        };
        let n = a.check(self.context)?;
        let gemm = |scratch: View<'_>| self.gru_backward_by_gemm(&a, scratch);
        let steps = |carry: View<'_>| gated_seq::gru_backward_by_steps(self, &a, carry);
        let views = a.views();
        let bufs = (&views.each_ref()[..], a.dh_state);
        self.gated_sequence(k, bufs, (n, a.shape), (1, gemm), steps)
    }
}

#[cfg(test)]
mod tests {
    use super::tile;
    use crate::kernel::Dialect;

    #[test]
    fn shared_memory_of_the_reference_workloads() {
        // W5 / W6 (hidden 256): W slice + staged rows + partials, in floats.
        let floats = |g, fwd| tile(g, 256, fwd, Dialect::Cuda).shared_floats.unwrap();
        assert_eq!(floats(4, true), 64 * 256 + 8 * 256 + 512);
        assert_eq!(floats(4, false), 16 * 1024 + 8 * 1024 + 512);
        assert_eq!(floats(3, true), 48 * 256 + 8 * 256 + 384);
        assert_eq!(floats(3, false), 16 * 768 + 8 * 768 + 384);
        // 75,776 and 100,352 bytes for the LSTM: within the H100's 227 KB per block.
        assert!(floats(4, false) * 4 <= 227 * 1024);
        assert_eq!(tile(4, 256, true, Dialect::Hip).threads, 512);
        assert_eq!(tile(3, 256, false, Dialect::Cuda).threads, 384);
        assert!(
            tile(4, usize::MAX / 8, true, Dialect::Cuda)
                .shared_floats
                .is_none()
        );
    }

    #[test]
    fn opencl_tiles_fit_48_kb_at_the_reference_workloads() {
        // 8 units a block; the backward reads the gate gradient from global memory.
        let cl = |g, fwd| tile(g, 256, fwd, Dialect::OpenCl);
        assert_eq!(cl(4, true).shared_floats, Some(32 * 256 + 8 * 256 + 256));
        assert_eq!(cl(4, false).shared_floats, Some(8 * 1024 + 256));
        assert_eq!(cl(3, true).shared_floats, Some(24 * 256 + 8 * 256 + 192));
        assert_eq!(cl(3, false).shared_floats, Some(8 * 768 + 192));
        for g in [3, 4] {
            for fwd in [true, false] {
                assert!(cl(g, fwd).shared_floats.unwrap() * 4 <= 48 * 1024);
            }
        }
        assert_eq!((cl(4, true).threads, cl(3, false).threads), (256, 192));
        assert_eq!(cl(4, true).units, 8);
    }
}
