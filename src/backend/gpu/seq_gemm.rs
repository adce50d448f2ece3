//! Recurrent sequences (Elman, LSTM, GRU) as per-step GEMMs and cell kernels: each step's
//! recurrent product runs through the op set's GEMM (tensor cores, 3xTF32, where the device has
//! them) and the gate math through one cell kernel, which also adds what the step's inputs
//! bring unsummed (input projection, biases, the gradient arriving at `h_t`): two launches a
//! step, one at the backward's last step.
//!
//! Where the persistent kernels do not fit, the fused step kernels (`rnn_step_*`,
//! `lstm_step_*`, `gru_step_*`) do both in one launch, but their product runs on the CUDA cores
//! from a small register tile: at hidden 1024 and batch 64 it reached about a sixth of the FP32
//! bound on an H100 (2026-11-26), and the GEMM path ran the whole training step two to four
//! times faster from hidden 640 to 2048 and batch 1 to 512 on CUDA, and 1.3 to 1.9 times at
//! hidden 384 and 512 on NVIDIA OpenCL. An Elman step's product is a quarter of an LSTM's, and
//! its GEMM path (three launches a step then) lost to the fused kernel at hidden 384 and 512 on
//! NVIDIA OpenCL (1.5 to 2.4 times slower) while it won at 2048 on CUDA (1.5 times faster).
//! Hence the thresholds [`MIN_GATED_HIDDEN`] and [`MIN_ELMAN_HIDDEN`]; below them the fused
//! kernels keep the sequence.
//!
//! The persistent kernels keep their blocks on the recurrence however many rows a step has; from
//! [`GEMM_OVER_PERSISTENT_BLOCK`] outputs a step's product is a GEMM the tensor cores run
//! faster (for Elman at hidden >= [`ELMAN_GEMM_OVER_PERSISTENT_HIDDEN`] from a quarter of
//! that), and the GEMM path takes the sequence first: 1.9 to 3.8 times faster training steps on
//! the H100 from batch 256 to 1024 and hidden 256 to 1024 (Elman hidden 1024, batch 512, 512
//! steps: 180.0 -> 47.3 ms), and the same below that size (GRU hidden 512, batch 128).
//!
//! In Bf16/F16 precision (`SeqShape::product_type`) the per-step products take T operands and
//! sum in f32, as cuDNN's bf16 RNNs do: at batch 64 a step's product reads all of W_hh from L2
//! and is bound by that read and its launch, and T halves the bytes and doubles the tensor-core
//! rate. A T copy of W_hh is made once per op call (one cast into scratch); the `_lo` cells
//! write, next to their f32 outputs, a T copy of what the next step's product reads (`h_t`
//! forward, the gate gradients backward) into one scratch block, which that product reads
//! before the next cell overwrites it; each product is an f32-output T GEMM of the op set
//! (`half_gemm.rs`: cuBLAS GemmEx where present, the tensor-core or portable kernels
//! elsewhere). Cell math, states, gates and outputs stay f32. The other routes ignore the type
//! (f32 products).

use super::GpuOps;
use crate::backend::Device;
use crate::buffer::View;
use crate::dtype::DType;
use crate::env_switch::Switch;
use crate::error::Result;
use crate::ops::prelude::*;
use crate::ops::{
    Activated, Activation, Gemm, GruSequenceBackward, GruSequenceForward, LstmCellBackward,
    LstmSequenceBackward, LstmSequenceForward, MatShape, RnnSequenceBackward, RnnSequenceForward,
    SeqShape,
};

/// A GEMM-path cell (kernels-cu/rnn.cu, kernels-cl/rnn.cl): the f32 entry, and the `_lo` one
/// that also writes the T copy the next product reads. The cells take unsummed what the cell
/// ops take summed, so that a step is its GEMM and one cell launch.
type CellEntry = (&'static str, &'static str);
/// See [`CellEntry`].
const LSTM_CELL_FORWARD: CellEntry = ("lstm_cell_forward", "lstm_cell_forward_lo");
/// See [`CellEntry`].
const GRU_CELL_FORWARD_BIAS: CellEntry = ("gru_cell_forward_bias", "gru_cell_forward_bias_lo");
/// See [`CellEntry`].
const GRU_CELL_BACKWARD_CARRY: CellEntry =
    ("gru_cell_backward_carry", "gru_cell_backward_carry_lo");
/// See [`CellEntry`].
const LSTM_CELL_BACKWARD_SUM: CellEntry = ("lstm_cell_backward_sum", "lstm_cell_backward_sum_lo");
/// See [`CellEntry`].
const RNN_CELL_FORWARD: CellEntry = ("rnn_cell_forward", "rnn_cell_forward_lo");
/// See [`CellEntry`].
const RNN_CELL_BACKWARD: CellEntry = ("rnn_cell_backward", "rnn_cell_backward_lo");

/// What a sequence's per-step products read: W_hh and the state or gradient blocks themselves
/// (f32), or T copies (`low`: the block the `_lo` cells write and the next product reads).
#[derive(Clone, Copy)]
struct Operands<'a> {
    w_hh: View<'a>,
    low: Option<View<'a>>,
}

impl<'a> Operands<'a> {
    /// The A operand of a product over the f32 `block`: `block`, or its T copy.
    fn a(&self, block: View<'a>) -> View<'a> {
        self.low.unwrap_or(block)
    }

    /// The cell of `entry` that fits these operands.
    fn entry(&self, entry: CellEntry) -> &'static str {
        if self.low.is_some() { entry.1 } else { entry.0 }
    }

    /// The cell's optional arguments: the activation `act` (Elman) and the T copy it writes.
    fn cell_tail(&self, act: Option<Activation>) -> (Option<Activation>, Option<View<'a>>) {
        (act, self.low)
    }

    /// Rounds `block` into the T copy where there is one: the initial state before the first
    /// forward product, or the last step's gradients where a cell without a T output wrote
    /// them.
    fn round<D: Device>(&self, ops: &GpuOps<D>, block: View<'a>) -> Result<()> {
        match self.low {
            Some(low) => ops.cast(block, low),
            None => Ok(()),
        }
    }
}

/// The T of a sequence's products ([`SeqShape::product_type`]; the op checks rejected any
/// other type).
fn low_type(shape: SeqShape) -> Option<DType> {
    shape
        .product_type
        .filter(|t| matches!(t, DType::Bf16 | DType::F16))
}

/// The smallest hidden size at which an LSTM or GRU sequence takes the GEMM path when neither
/// the context nor [`ENV`] decides.
pub(crate) const MIN_GATED_HIDDEN: usize = 384;
/// The same for an Elman sequence.
pub(crate) const MIN_ELMAN_HIDDEN: usize = 1024;

/// `RNN_RECURRENT_GEMM_STEPS`: on (`1`, `on`, `true`, `yes`) sends every recurrent sequence
/// that the persistent kernels do not take to the GEMM path, off (`0`, `off`, `false`, `no`)
/// none; unset or empty, `ContextOptions::recurrent_gemm_steps` or the hidden-size rule decides.
const ENV: Switch = Switch {
    name: "RNN_RECURRENT_GEMM_STEPS",
    unset: false,
    empty: false,
    yes_no: true,
};

/// The context's choice (`ContextOptions::recurrent_gemm_steps`), else [`ENV`]'s, else `None`
/// (by hidden size). Read once, when the context is created.
pub(crate) fn choice(option: Option<bool>) -> Result<Option<bool>> {
    if option.is_some() {
        return Ok(option);
    }
    match std::env::var_os(ENV.name) {
        Some(v) if !v.is_empty() => ENV.parse(Some(&v)).map(Some),
        _ => Ok(None),
    }
}

fn block(v: View<'_>, t: usize, len: usize) -> Result<View<'_>> {
    v.slice(t * len, len)
}

/// The outputs of a step's product (`gates x batch x hidden`) from which a sequence takes the
/// GEMM path even where the persistent kernels would run, at hidden >=
/// [`GEMM_OVER_PERSISTENT_HIDDEN`]: a persistent grid keeps its blocks on the recurrence however
/// many rows there are, and with hundreds of rows a step's product is a GEMM that the tensor
/// cores run faster. Counted in product outputs rather than state elements: an LSTM step is
/// four times an Elman one at the same batch and hidden size (H100, 2026-12-07, training steps
/// of 64 steps at hidden 256, persistent / GEMM path: LSTM batch 256 4679 / 4299 us, batch 384
/// 3529 / 2897 (t = 64), batch 512 9033 / 6409 (t = 128); GRU batch 384 2779 / 2568, batch 512
/// 7116 / 5622, while GRU at batch 256 and Elman to batch 512 stay persistent).
pub(crate) const GEMM_OVER_PERSISTENT_BLOCK: usize = 1 << 18;
/// See [`GEMM_OVER_PERSISTENT_BLOCK`].
pub(crate) const GEMM_OVER_PERSISTENT_HIDDEN: usize = 256;

/// From this hidden size an Elman sequence takes the GEMM path from
/// [`GEMM_OVER_PERSISTENT_BLOCK_TF32`] state elements in f32 as well: its persistent grid
/// spreads a W_hh of 2.3 MB and more over the SMs and loses to the per-step GEMMs from batch
/// 64 at hidden 1024 (5807 / 4131 us, 128 steps) and batch 128 at hidden 768 (3510 / 2298, 64
/// steps), while batch 16 and 32 at hidden 1024 stay persistent (1764 / 2764, 2998 / 3347;
/// H100, 2026-12-07).
pub(crate) const ELMAN_GEMM_OVER_PERSISTENT_HIDDEN: usize = 768;

/// [`GEMM_OVER_PERSISTENT_BLOCK`] while the context runs f32 products in TF32
/// (`Device::tf32`): one tensor-core pass a product instead of three (or the CUDA cores), so
/// the GEMM path wins from a quarter of the state block. H200, 2026-11-26, training steps of
/// 128 steps, TF32 on, persistent / GEMM path (us): LSTM hidden 256 batch 256 4367 / 3431,
/// batch 512 8420 / 4361; GRU 3472 / 3887 and 6543 / 4697; GRU hidden 1024 batch 64 6951 /
/// 4681; Elman hidden 1024 batch 64 5603 / 3219, while Elman's lighter step keeps the
/// persistent kernels at hidden 256 (batch 256: 1264 / 3004; batch 512: 2399 / 3337) and 512.
pub(crate) const GEMM_OVER_PERSISTENT_BLOCK_TF32: usize = 1 << 16;

/// Whether a sequence of `shape` with `gates` gate blocks (1 for Elman) is large enough for
/// the GEMM path to beat the persistent kernels ([`GEMM_OVER_PERSISTENT_BLOCK`] product
/// outputs; [`GEMM_OVER_PERSISTENT_BLOCK_TF32`] state elements with TF32 products, for Elman
/// only at the hidden size from which its GEMM path runs at all, [`MIN_ELMAN_HIDDEN`], and in
/// f32 too for Elman from [`ELMAN_GEMM_OVER_PERSISTENT_HIDDEN`]).
fn gemm_over_persistent(shape: SeqShape, gates: usize, tf32: bool) -> bool {
    let block = shape.batch.saturating_mul(shape.hidden);
    let outputs = block.saturating_mul(gates);
    let tf32_wins = tf32
        && block >= GEMM_OVER_PERSISTENT_BLOCK_TF32
        && (gates > 1 || shape.hidden >= MIN_ELMAN_HIDDEN);
    let wide_elman = gates == 1
        && shape.hidden >= ELMAN_GEMM_OVER_PERSISTENT_HIDDEN
        && block >= GEMM_OVER_PERSISTENT_BLOCK_TF32;
    shape.hidden >= GEMM_OVER_PERSISTENT_HIDDEN
        && (outputs >= GEMM_OVER_PERSISTENT_BLOCK || tf32_wins || wide_elman)
}

impl<D: Device> GpuOps<D> {
    /// Runs `f` with the operands of `shape`'s products over `w_hh`: f32, or in low precision a
    /// T copy of `w_hh` and a T block of `width * batch * hidden` elements, both in grow-only
    /// scratch (the block starts on 8 elements, as the tensor-core GEMMs want it).
    fn with_operands<R>(
        &self,
        shape: SeqShape,
        (w_hh, width): (View<'_>, usize),
        f: impl FnOnce(Operands<'_>) -> Result<R>,
    ) -> Result<R> {
        let Some(t) = low_type(shape) else {
            return f(Operands { w_hh, low: None });
        };
        let w_len = w_hh.len();
        let at = w_len.next_multiple_of(8);
        let low_len = width * shape.block();
        self.with_grow_only_as(&self.seq_low, (t, at + low_len), |scratch| {
            let w_low = scratch.slice(0, w_len)?;
            self.cast(w_hh, w_low)?;
            f(Operands {
                w_hh: w_low,
                low: Some(scratch.slice(at, low_len)?),
            })
        })
    }

    /// Whether the persistent kernels may take a sequence of `shape` (false where the GEMM
    /// path runs it faster whether they fit or not; `RNN_RECURRENT_GEMM_STEPS=0` keeps them).
    pub(crate) fn seq_persistent_wanted(&self, shape: SeqShape, gates: usize) -> bool {
        self.seq_gemm_steps == Some(false)
            || !gemm_over_persistent(shape, gates, self.device.tf32())
    }

    /// Whether a recurrent sequence of `shape` with `gates` gate blocks (1 for Elman) that the
    /// persistent kernels do not take runs as per-step GEMMs and cells (see the module docs).
    pub(crate) fn seq_gemm_wanted(&self, shape: SeqShape, gates: usize) -> bool {
        let least = if gates == 1 {
            MIN_ELMAN_HIDDEN
        } else {
            MIN_GATED_HIDDEN
        };
        self.seq_gemm_steps
            .unwrap_or(shape.hidden >= least || !self.seq_persistent_wanted(shape, gates))
    }

    /// `lstm_sequence_forward` with one GEMM and one cell launch per step, after the two biases
    /// are added to every step's gates (the sequence checks have run).
    pub(crate) fn lstm_forward_by_gemm(&self, a: &LstmSequenceForward<'_>) -> Result<()> {
        let (b, h) = (a.shape.batch, a.shape.hidden);
        let (n, g) = (a.shape.block(), 4 * a.shape.block());
        let step = (n, SeqShape::step(b, h));
        let rows = MatShape::new(a.shape.steps * b, 4 * h);
        let gates = Activated::new(a.gates, a.gates, Activation::Identity);
        for bias in [a.weights.b_ih, a.weights.b_hh] {
            self.bias_act_forward(gates, bias, rows)?;
        }
        self.with_operands(a.shape, (a.weights.w_hh, 1), |ops| {
            ops.round(self, block(a.hs, 0, n)?)?;
            for t in 0..a.shape.steps {
                let gates = block(a.gates, t, g)?;
                let product = Gemm::new(b, 4 * h, h).tb().scaled(1.0, 1.0);
                self.gemm(product, ops.a(block(a.hs, t, n)?), ops.w_hh, gates)?;
                let views = [
                    gates,
                    block(a.cs, t, n)?,
                    block(a.cs, t + 1, n)?,
                    block(a.hs, t + 1, n)?,
                ];
                self.cell(
                    ops.entry(LSTM_CELL_FORWARD),
                    step,
                    views,
                    ops.cell_tail(None),
                )?;
            }
            Ok(())
        })
    }

    /// `lstm_sequence_backward` with one GEMM and one cell launch per step (the cell alone at
    /// the last step, which no later step's product reaches); `scratch` is
    /// `2 * batch * hidden`: the cell-state carry (`dc_state` instead where given), then the
    /// recurrent product reaching `h_t`, which the cell adds to `dh_t`.
    pub(crate) fn lstm_backward_by_gemm(
        &self,
        a: &LstmSequenceBackward<'_>,
        scratch: View<'_>,
    ) -> Result<()> {
        let (b, h) = (a.shape.batch, a.shape.hidden);
        let (n, g) = (a.shape.block(), 4 * a.shape.block());
        let step = (n, SeqShape::step(b, h));
        let product = scratch.slice(n, n)?;
        let carry = match a.dc_state {
            Some(dc) => dc,
            None => {
                let carry = scratch.slice(0, n)?;
                self.fill(carry, 0.0)?;
                carry
            }
        };
        self.with_operands(a.shape, (a.w_hh, 4), |ops| {
            for t in (0..a.shape.steps).rev() {
                let (gates, dh) = (block(a.gates, t, g)?, block(a.dh, t, n)?);
                let (c_prev, c) = (block(a.cs, t, n)?, block(a.cs, t + 1, n)?);
                let dgates = block(a.dgates, t, g)?;
                if t + 1 == a.shape.steps {
                    self.lstm_cell_backward(LstmCellBackward {
                        gates,
                        c_prev,
                        c,
                        dh,
                        dc: carry,
                        dgates,
                        shape: step.1,
                    })?;
                    if t > 0 {
                        ops.round(self, dgates)?;
                    }
                    continue;
                }
                let next = ops.a(block(a.dgates, t + 1, g)?);
                self.gemm(Gemm::new(b, h, 4 * h), next, ops.w_hh, product)?;
                let views = [gates, c_prev, c, dh, product, carry, dgates];
                let entry = ops.entry(LSTM_CELL_BACKWARD_SUM);
                self.cell(entry, step, views, ops.cell_tail(None))?;
            }
            Ok(())
        })
    }

    /// `gru_sequence_forward` with two launches per step: `h_prev W_hh^T` into `scratch`
    /// (`3 * batch * hidden`), then the cell, which adds `gx_t` (read only) and the biases
    /// itself.
    pub(crate) fn gru_forward_by_gemm(
        &self,
        a: &GruSequenceForward<'_>,
        scratch: View<'_>,
    ) -> Result<()> {
        let (b, h) = (a.shape.batch, a.shape.hidden);
        let n = a.shape.block();
        let step = (n, SeqShape::step(b, h));
        let gh = scratch.slice(0, 3 * n)?;
        self.with_operands(a.shape, (a.weights.w_hh, 1), |ops| {
            ops.round(self, block(a.hs, 0, n)?)?;
            for t in 0..a.shape.steps {
                let h_prev = block(a.hs, t, n)?;
                self.gemm(Gemm::new(b, 3 * h, h).tb(), ops.a(h_prev), ops.w_hh, gh)?;
                let views = [
                    block(a.gx, t, 3 * n)?,
                    a.weights.b_ih,
                    gh,
                    a.weights.b_hh,
                    h_prev,
                    block(a.hs, t + 1, n)?,
                    block(a.cache, t, 4 * n)?,
                ];
                let entry = ops.entry(GRU_CELL_FORWARD_BIAS);
                self.cell(entry, step, views, ops.cell_tail(None))?;
            }
            Ok(())
        })
    }

    /// `gru_sequence_backward` with two launches per step (the cell alone at the first time
    /// step, whose product would reach no step); `scratch` is `batch * hidden`: what flows on
    /// to `h_{t-1}` unless `dh_state` is given, to which the cell adds `dh_t`.
    pub(crate) fn gru_backward_by_gemm(
        &self,
        a: &GruSequenceBackward<'_>,
        scratch: View<'_>,
    ) -> Result<()> {
        let (b, h) = (a.shape.batch, a.shape.hidden);
        let n = a.shape.block();
        let step = (n, SeqShape::step(b, h));
        let carry = a.dh_state.map_or_else(|| scratch.slice(0, n), Ok)?;
        self.fill(carry, 0.0)?;
        self.with_operands(a.shape, (a.w_hh, 3), |ops| {
            for t in (0..a.shape.steps).rev() {
                let dgh = block(a.grads.dgh, t, 3 * n)?;
                let views = [
                    block(a.cache, t, 4 * n)?,
                    block(a.hs, t, n)?,
                    block(a.dh, t, n)?,
                    block(a.grads.dgx, t, 3 * n)?,
                    dgh,
                    carry,
                ];
                let entry = ops.entry(GRU_CELL_BACKWARD_CARRY);
                self.cell(entry, step, views, ops.cell_tail(None))?;
                if t > 0 {
                    let product = Gemm::new(b, h, 3 * h).scaled(1.0, 1.0);
                    self.gemm(product, ops.a(dgh), ops.w_hh, carry)?;
                }
            }
            Ok(())
        })
    }

    /// `rnn_sequence_forward` with two launches per step: the product into the step's state
    /// block, then the cell that adds the input projection and the summed biases and applies
    /// the activation; `bias` (`hidden`) is scratch.
    pub(crate) fn elman_forward_by_gemm(
        &self,
        a: &RnnSequenceForward<'_>,
        bias: View<'_>,
    ) -> Result<()> {
        let (b, h) = (a.shape.batch, a.shape.hidden);
        let n = a.shape.block();
        let step = (n, SeqShape::step(b, h));
        self.add(a.weights.b_ih, a.weights.b_hh, bias)?;
        self.with_operands(a.shape, (a.weights.w_hh, 1), |ops| {
            ops.round(self, block(a.hs, 0, n)?)?;
            for t in 0..a.shape.steps {
                let h_t = block(a.hs, t + 1, n)?;
                let product = Gemm::new(b, h, h).tb();
                self.gemm(product, ops.a(block(a.hs, t, n)?), ops.w_hh, h_t)?;
                let views = [block(a.pre, t, n)?, bias, h_t];
                let entry = ops.entry(RNN_CELL_FORWARD);
                self.cell(entry, step, views, ops.cell_tail(Some(a.act)))?;
            }
            Ok(())
        })
    }

    /// `rnn_sequence_backward` with two launches per step (the activation's backward alone at
    /// the last step); `total` (`batch x hidden`) is scratch for the recurrent product reaching
    /// `h_t`, which the cell adds to `dh_t`.
    pub(crate) fn elman_backward_by_gemm(
        &self,
        a: &RnnSequenceBackward<'_>,
        total: View<'_>,
    ) -> Result<()> {
        let (b, h) = (a.shape.batch, a.shape.hidden);
        let n = a.shape.block();
        let step = (n, SeqShape::step(b, h));
        self.with_operands(a.shape, (a.w_hh, 1), |ops| {
            for t in (0..a.shape.steps).rev() {
                let (dh, h_t, dpre) = (
                    block(a.dh, t, n)?,
                    block(a.hs, t + 1, n)?,
                    block(a.dpre, t, n)?,
                );
                if t + 1 == a.shape.steps {
                    self.act_backward(dh, Activated::new(h_t, h_t, a.act), dpre)?;
                    if t > 0 {
                        ops.round(self, dpre)?;
                    }
                    continue;
                }
                let product = Gemm::new(b, h, h);
                self.gemm(product, ops.a(block(a.dpre, t + 1, n)?), ops.w_hh, total)?;
                let views = [dh, total, h_t, dpre];
                let entry = ops.entry(RNN_CELL_BACKWARD);
                self.cell(entry, step, views, ops.cell_tail(Some(a.act)))?;
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::gemm_over_persistent;
    use crate::ops::SeqShape;

    #[test]
    fn large_step_products_take_the_gemm_path_over_the_persistent_kernels() {
        let at = |gates, batch, hidden| {
            gemm_over_persistent(SeqShape::new(64, batch, hidden), gates, false)
        };
        // W2, W5 and W6 (batch 64, hidden 256) stay persistent, as do LSTM and GRU at hidden
        // 512 to batch 127 and 170.
        assert!(!at(1, 64, 256) && !at(4, 64, 256) && !at(3, 64, 256));
        assert!(!at(4, 127, 512) && !at(3, 170, 512));
        // From 2^18 product outputs at hidden >= 256: LSTM from batch 256 at hidden 256, GRU
        // from 342, Elman from 1024.
        assert!(at(4, 256, 256) && !at(3, 256, 256) && at(3, 384, 256));
        assert!(!at(1, 512, 256) && at(1, 1024, 256) && at(4, 128, 512));
        // A narrow hidden keeps the persistent kernels however many rows.
        assert!(!at(4, 4096, 128) && !at(1, 4096, 128));
        assert!(!at(4, usize::MAX, 64) && at(4, usize::MAX, 2048));
    }

    #[test]
    fn wide_elman_sequences_take_the_gemm_path_from_a_quarter_of_the_block() {
        let at = |batch, hidden| gemm_over_persistent(SeqShape::new(64, batch, hidden), 1, false);
        // From 2^16 state elements at hidden >= 768: batch 64 at hidden 1024, 128 at 768.
        assert!(at(64, 1024) && at(86, 768) && at(32, 2048) && at(43, 1536));
        assert!(!at(32, 1024) && !at(16, 1024) && !at(85, 768));
        // Below hidden 768 only from 2^18, as the gated cells.
        assert!(!at(128, 512) && !at(256, 512) && !at(384, 640));
    }

    #[test]
    fn tf32_products_take_the_gemm_path_from_a_quarter_of_the_block() {
        let at = |gates, batch, hidden| {
            gemm_over_persistent(SeqShape::new(64, batch, hidden), gates, true)
        };
        // W5/W6 (batch 64, hidden 256) and hidden 512 at batch 64 stay persistent.
        assert!(!at(4, 64, 256) && !at(3, 64, 256) && !at(4, 64, 512) && !at(3, 127, 512));
        // From 2^16 state elements for LSTM and GRU.
        assert!(at(4, 256, 256) && at(3, 512, 256) && at(3, 64, 1024) && at(4, 128, 512));
        // Elman: only from hidden 1024; its lighter step keeps the persistent kernels below.
        assert!(!at(1, 256, 256) && !at(1, 512, 256) && !at(1, 128, 512) && at(1, 64, 1024));
        // As without TF32 from 2^18, and never at a narrow hidden.
        assert!(at(1, 1024, 256) && !at(4, 4096, 128));
    }
}
