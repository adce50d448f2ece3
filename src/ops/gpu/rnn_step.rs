//! The fused Elman time steps: one launch per step and direction (geometry `S`), the recurrent
//! GEMM and its epilogue in one kernel.

use super::GpuOps;
use super::launch::{self, Args};
use crate::backend::Device;
use crate::buffer::View;
use crate::error::Result;
use crate::ops::{Activation, check};

impl<D: Device> GpuOps<D> {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn rnn_step_forward_impl(
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
        let op = "rnn_step_forward";
        self.mine(op, &[&pre, &h_prev, &w_hh, &b_ih, &b_hh, &h])?;
        let n = batch.saturating_mul(hidden);
        let inputs = [
            ("pre", &pre, n),
            ("h_prev", &h_prev, n),
            ("w_hh", &w_hh, hidden.saturating_mul(hidden)),
            ("b_ih", &b_ih, hidden),
            ("b_hh", &b_hh, hidden),
        ];
        // `rnn_step` rejects overflowing shapes before the saturated lengths above matter.
        let n = check::rnn_step(op, act, batch, hidden, &inputs, ("h", &h))?;
        if n == 0 {
            return Ok(());
        }
        let args = Args::new()
            .buf(&pre)?
            .buf(&h_prev)?
            .buf(&w_hh)?
            .buf(&b_ih)?
            .buf(&b_hh)?
            .buf(&h)?
            .u32(batch as u32)
            .u32(hidden as u32)
            .u32(act.code())
            .f32(act.param());
        self.run(op, launch::rnn_step(batch, hidden), args)
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn rnn_step_backward_impl(
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
        let op = "rnn_step_backward";
        self.mine(op, &[&dh, &w_hh, &h, &dpre])?;
        if let Some(next) = &dpre_next {
            self.mine(op, &[next])?;
        }
        let n = batch.saturating_mul(hidden);
        let mut inputs = vec![
            ("dh", &dh, n),
            ("w_hh", &w_hh, hidden.saturating_mul(hidden)),
            ("h", &h, n),
        ];
        if let Some(next) = &dpre_next {
            inputs.push(("dpre_next", next, n));
        }
        let n = check::rnn_step(op, act, batch, hidden, &inputs, ("dpre", &dpre))?;
        if n == 0 {
            return Ok(());
        }
        // Without a next step the kernel reads no `dpre_next`; any valid buffer fills the slot.
        let next = dpre_next.unwrap_or(dh);
        let args = Args::new()
            .buf(&dh)?
            .buf(&next)?
            .buf(&w_hh)?
            .buf(&h)?
            .buf(&dpre)?
            .u32(batch as u32)
            .u32(hidden as u32)
            .u32(dpre_next.is_some() as u32)
            .u32(act.code())
            .f32(act.param());
        self.run(op, launch::rnn_step(batch, hidden), args)
    }
}
