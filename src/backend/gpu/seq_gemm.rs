//! Recurrent sequences (Elman, LSTM, GRU) as per-step GEMMs and cell kernels, where the
//! persistent kernels do not fit: each step's recurrent product runs through the op set's GEMM
//! (tensor cores, 3xTF32, where the device has them) and the gate math through the cell (or
//! bias-activation) kernels. The fused step kernels (`rnn_step_*`, `lstm_step_*`,
//! `gru_step_*`) do both in one launch, but their product runs on the
//! CUDA cores from a small register tile: at hidden 1024 and batch 64 it reached about a sixth
//! of the FP32 bound on an H100 (2026-11-26), and the GEMM path ran the whole training step two
//! to four times faster from hidden 640 to 2048 and batch 1 to 512 on CUDA, and 1.3 to 1.9
//! times at hidden 384 and 512 on NVIDIA OpenCL. An Elman step's product is a quarter of an
//! LSTM's, and its GEMM path (three launches a step) lost to the fused kernel at hidden 384 and
//! 512 on NVIDIA OpenCL (1.5 to 2.4 times slower) while it won at 2048 on CUDA (1.5 times
//! faster). Hence the thresholds [`MIN_GATED_HIDDEN`] and [`MIN_ELMAN_HIDDEN`]; below them the
//! fused kernels keep the sequence.

use super::GpuOps;
use crate::backend::Device;
use crate::buffer::View;
use crate::error::{Error, Result};
use crate::ops::prelude::*;
use crate::ops::{Activated, Activation, Gemm, GruGateGrads, MatShape, RecurrentWeights, SeqShape};

/// The smallest hidden size at which an LSTM or GRU sequence takes the GEMM path when neither
/// the context nor [`ENV`] decides.
pub(crate) const MIN_GATED_HIDDEN: usize = 384;
/// The same for an Elman sequence.
pub(crate) const MIN_ELMAN_HIDDEN: usize = 1024;

/// `RNN_RECURRENT_GEMM_STEPS`: `1` sends every recurrent sequence that the persistent kernels
/// do not take to the GEMM path, `0` none (`ContextOptions::recurrent_gemm_steps` where unset).
pub(crate) const ENV: &str = "RNN_RECURRENT_GEMM_STEPS";

/// The context's choice (`ContextOptions::recurrent_gemm_steps`), else [`ENV`]'s, else `None`
/// (by hidden size). Read once, when the context is created.
pub(crate) fn choice(option: Option<bool>) -> Result<Option<bool>> {
    if option.is_some() {
        return Ok(option);
    }
    match std::env::var(ENV).as_deref() {
        Err(_) => Ok(None),
        Ok("1") => Ok(Some(true)),
        Ok("0") => Ok(Some(false)),
        Ok(other) => Err(Error::InvalidArgument(format!(
            "{ENV} must be 0 or 1, got '{other}'"
        ))),
    }
}

fn block(v: View<'_>, t: usize, len: usize) -> Result<View<'_>> {
    v.slice(t * len, len)
}

impl<D: Device> GpuOps<D> {
    /// Whether a recurrent sequence of `shape` with `gates` gate blocks (1 for Elman) that the
    /// persistent kernels do not take runs as per-step GEMMs and cells (see the module docs).
    pub(crate) fn seq_gemm_wanted(&self, shape: SeqShape, gates: usize) -> bool {
        let least = if gates == 1 {
            MIN_ELMAN_HIDDEN
        } else {
            MIN_GATED_HIDDEN
        };
        self.seq_gemm_steps.unwrap_or(shape.hidden >= least)
    }

    /// `lstm_sequence_forward` with one GEMM and one cell launch per step, after the two biases
    /// are added to every step's gates (the sequence checks have run).
    pub(crate) fn lstm_forward_by_gemm(
        &self,
        [gates, hs, cs]: [View<'_>; 3],
        weights: RecurrentWeights<'_>,
        shape: SeqShape,
    ) -> Result<()> {
        let (b, h) = (shape.batch, shape.hidden);
        let (n, g) = (shape.block(), 4 * shape.block());
        let rows = MatShape::new(shape.steps * b, 4 * h);
        for bias in [weights.b_ih, weights.b_hh] {
            self.bias_act_forward(
                Activated::new(gates, gates, Activation::Identity),
                bias,
                rows,
            )?;
        }
        for t in 0..shape.steps {
            let gt = block(gates, t, g)?;
            let product = Gemm::new(b, 4 * h, h).tb().scaled(1.0, 1.0);
            self.gemm(product, block(hs, t, n)?, weights.w_hh, gt)?;
            let (c_prev, c, h_t) = (block(cs, t, n)?, block(cs, t + 1, n)?, block(hs, t + 1, n)?);
            self.lstm_cell_forward(gt, c_prev, c, h_t, SeqShape::step(b, h))?;
        }
        Ok(())
    }

    /// `lstm_sequence_backward` with one copy, one GEMM and one cell launch per step; `scratch`
    /// is `2 * batch * hidden` (the total gradient reaching `h_t`, then the cell-state carry).
    pub(crate) fn lstm_backward_by_gemm(
        &self,
        [dh, gates, cs, w_hh, dgates]: [View<'_>; 5],
        scratch: View<'_>,
        shape: SeqShape,
    ) -> Result<()> {
        let (b, h) = (shape.batch, shape.hidden);
        let (n, g) = (shape.block(), 4 * shape.block());
        let (total, carry) = (scratch.slice(0, n)?, scratch.slice(n, n)?);
        self.fill(carry, 0.0)?;
        for t in (0..shape.steps).rev() {
            self.copy(block(dh, t, n)?, total)?;
            if t + 1 < shape.steps {
                let product = Gemm::new(b, h, 4 * h).scaled(1.0, 1.0);
                self.gemm(product, block(dgates, t + 1, g)?, w_hh, total)?;
            }
            let (c_prev, c) = (block(cs, t, n)?, block(cs, t + 1, n)?);
            let (gt, dgt) = (block(gates, t, g)?, block(dgates, t, g)?);
            self.lstm_cell_backward(gt, c_prev, c, total, carry, dgt, SeqShape::step(b, h))?;
        }
        Ok(())
    }

    /// `gru_sequence_forward` with five launches per step: `gx_t + b_ih` and
    /// `h_prev W_hh^T + b_hh` into `scratch` (`6 * batch * hidden`; `gx` is read only), then the
    /// cell.
    pub(crate) fn gru_forward_by_gemm(
        &self,
        [gx, hs, cache]: [View<'_>; 3],
        weights: RecurrentWeights<'_>,
        scratch: View<'_>,
        shape: SeqShape,
    ) -> Result<()> {
        let (b, h) = (shape.batch, shape.hidden);
        let n = shape.block();
        let (gxb, gh) = (scratch.slice(0, 3 * n)?, scratch.slice(3 * n, 3 * n)?);
        let rows = MatShape::new(b, 3 * h);
        let plus =
            |v, bias| self.bias_act_forward(Activated::new(v, v, Activation::Identity), bias, rows);
        for t in 0..shape.steps {
            self.copy(block(gx, t, 3 * n)?, gxb)?;
            plus(gxb, weights.b_ih)?;
            self.gemm(
                Gemm::new(b, 3 * h, h).tb(),
                block(hs, t, n)?,
                weights.w_hh,
                gh,
            )?;
            plus(gh, weights.b_hh)?;
            let (h_prev, h_t) = (block(hs, t, n)?, block(hs, t + 1, n)?);
            let cache_t = block(cache, t, 4 * n)?;
            self.gru_cell_forward(gxb, gh, h_prev, h_t, cache_t, SeqShape::step(b, h))?;
        }
        Ok(())
    }

    /// `gru_sequence_backward` with three launches per step; `scratch` is `2 * batch * hidden`
    /// (the total gradient reaching `h_t`, and what flows on to `h_{t-1}`).
    pub(crate) fn gru_backward_by_gemm(
        &self,
        [dh, hs, cache, w_hh]: [View<'_>; 4],
        grads: GruGateGrads<'_>,
        scratch: View<'_>,
        shape: SeqShape,
    ) -> Result<()> {
        let (b, h) = (shape.batch, shape.hidden);
        let n = shape.block();
        let (total, carry) = (scratch.slice(0, n)?, scratch.slice(n, n)?);
        self.fill(carry, 0.0)?;
        for t in (0..shape.steps).rev() {
            self.add(block(dh, t, n)?, carry, total)?;
            let (dgx_t, dgh_t) = (block(grads.dgx, t, 3 * n)?, block(grads.dgh, t, 3 * n)?);
            let (cache_t, h_prev) = (block(cache, t, 4 * n)?, block(hs, t, n)?);
            let step = GruGateGrads::new(dgx_t, dgh_t);
            self.gru_cell_backward(cache_t, h_prev, total, step, carry, SeqShape::step(b, h))?;
            let product = Gemm::new(b, h, 3 * h).scaled(1.0, 1.0);
            self.gemm(product, dgh_t, w_hh, carry)?;
        }
        Ok(())
    }

    /// `rnn_sequence_forward` with three launches per step: the step's input projection copied
    /// into its state block, the product added there, then the summed biases and the
    /// activation; `bias` (`hidden`) is scratch.
    pub(crate) fn elman_forward_by_gemm(
        &self,
        [pre, hs]: [View<'_>; 2],
        weights: RecurrentWeights<'_>,
        bias: View<'_>,
        act: Activation,
        shape: SeqShape,
    ) -> Result<()> {
        let (b, h) = (shape.batch, shape.hidden);
        let n = shape.block();
        self.add(weights.b_ih, weights.b_hh, bias)?;
        for t in 0..shape.steps {
            let h_t = block(hs, t + 1, n)?;
            self.copy(block(pre, t, n)?, h_t)?;
            let product = Gemm::new(b, h, h).tb().scaled(1.0, 1.0);
            self.gemm(product, block(hs, t, n)?, weights.w_hh, h_t)?;
            self.bias_act_forward(Activated::new(h_t, h_t, act), bias, MatShape::new(b, h))?;
        }
        Ok(())
    }

    /// `rnn_sequence_backward` with three launches per step; `total` (`batch x hidden`) is
    /// scratch for the gradient reaching `h_t`.
    pub(crate) fn elman_backward_by_gemm(
        &self,
        [dh, hs, w_hh, dpre]: [View<'_>; 4],
        total: View<'_>,
        act: Activation,
        shape: SeqShape,
    ) -> Result<()> {
        let (b, h) = (shape.batch, shape.hidden);
        let n = shape.block();
        for t in (0..shape.steps).rev() {
            self.copy(block(dh, t, n)?, total)?;
            if t + 1 < shape.steps {
                let product = Gemm::new(b, h, h).scaled(1.0, 1.0);
                self.gemm(product, block(dpre, t + 1, n)?, w_hh, total)?;
            }
            let h_t = block(hs, t + 1, n)?;
            self.act_backward(total, Activated::new(h_t, h_t, act), block(dpre, t, n)?)?;
        }
        Ok(())
    }
}
