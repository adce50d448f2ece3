//! The optimizer steps: one launch each over the flat buffers, reading the learning rate and
//! step count from the device-side state and advancing it (geometry `E` with an `L` ticket).

use super::GpuOps;
use super::launch::{self, Args};
use super::scratch::Ticket;
use crate::backend::Device;
use crate::buffer::View;
use crate::dtype::DType;
use crate::error::Result;
use crate::kernel::LaunchConfig;
use crate::ops::prelude::*;
use crate::ops::{AdamStep, MixedUpdate, OptimBuffers, ScaleUpdate, SgdStep, check};

impl<D: Device> OptimOps for GpuOps<D> {
    fn sgd_step(&self, b: OptimBuffers<'_>, velocity: View<'_>, s: SgdStep) -> Result<()> {
        let op = "sgd_step";
        let bufs = [&b.params, &b.grads, &velocity, &b.state];
        self.mine(op, &bufs)?;
        let n = check::sgd_step(&b.params, &b.grads, &velocity, &b.state, &s)?;
        // Launched even for n == 0: the state still advances.
        self.with_scratch(|scratch| {
            let args = Args::new()
                .bufs(&bufs)?
                .buf(&scratch.ticket(Ticket::Optimizer)?)?
                .u32(n)
                .u32(s.nesterov as u32)
                .f32(s.momentum)
                .f32(s.weight_decay);
            self.run(op, launch::elementwise(n as usize), args)
        })
    }

    fn adam_step(&self, b: OptimBuffers<'_>, m: View<'_>, v: View<'_>, s: AdamStep) -> Result<()> {
        let op = "adam_step";
        let bufs = [&b.params, &b.grads, &m, &v, &b.state];
        self.mine(op, &bufs)?;
        let n = check::adam_step(&b.params, &b.grads, &m, &v, &b.state)?;
        self.with_scratch(|scratch| {
            let args = Args::new()
                .bufs(&bufs)?
                .buf(&scratch.ticket(Ticket::Optimizer)?)?
                .u32(n)
                .u32(s.decoupled as u32)
                .f32(s.beta1)
                .f32(s.beta2)
                .f32(s.eps)
                .f32(s.weight_decay);
            self.run(op, self.streaming(n as usize), args)
        })
    }

    fn unscale_and_check(
        &self,
        grads: View<'_>,
        scaler: View<'_>,
        found_inf: View<'_>,
    ) -> Result<()> {
        let op = "unscale_and_check";
        let n = check::loss_scale(op, self.context, &grads, &scaler, &found_inf)?;
        // Two launches, no host sync: the flag is zeroed, then only set by the kernel.
        self.fill(found_inf, 0.0)?;
        if n == 0 {
            return Ok(());
        }
        let args = Args::new().bufs(&[&grads, &scaler, &found_inf])?.u32(n);
        self.run("unscale_check", launch::elementwise(n as usize), args)
    }

    fn update_scale(&self, scaler: View<'_>, found_inf: View<'_>, u: ScaleUpdate) -> Result<()> {
        let op = "update_scale";
        check::scale_update(&u)?;
        let none = scaler.buffer().slice(0, 0)?;
        check::loss_scale(op, self.context, &none, &scaler, &found_inf)?;
        let args = Args::new()
            .bufs(&[&scaler, &found_inf])?
            .u32(u.interval)
            .f32(u.growth)
            .f32(u.backoff);
        self.run(op, LaunchConfig::linear(1, 1), args)
    }

    fn sgd_step_mixed(
        &self,
        b: OptimBuffers<'_>,
        velocity: View<'_>,
        s: SgdStep,
        mp: MixedUpdate<'_>,
    ) -> Result<()> {
        let op = "sgd_step_mixed";
        let bufs = [&b.params, &b.grads, &velocity, &b.state];
        self.mine(op, &bufs)?;
        let n = check::sgd_step(&b.params, &b.grads, &velocity, &b.state, &s)?;
        check::mixed_update(op, self.context, &mp, n as usize, &bufs)?;
        let entry = low_entry(mp.low.dtype(), "sgd_step_bf16", "sgd_step_f16");
        self.with_scratch(|scratch| {
            let args = Args::new()
                .bufs(&bufs)?
                .buf(&scratch.ticket(Ticket::Optimizer)?)?
                .buf_as(&mp.low, mp.low.dtype())?
                .buf(&mp.found_inf)?
                .u32(n)
                .u32(s.nesterov as u32)
                .f32(s.momentum)
                .f32(s.weight_decay);
            self.run(entry, launch::elementwise(n as usize), args)
        })
    }

    fn adam_step_mixed(
        &self,
        b: OptimBuffers<'_>,
        m: View<'_>,
        v: View<'_>,
        s: AdamStep,
        mp: MixedUpdate<'_>,
    ) -> Result<()> {
        let op = "adam_step_mixed";
        let bufs = [&b.params, &b.grads, &m, &v, &b.state];
        self.mine(op, &bufs)?;
        let n = check::adam_step(&b.params, &b.grads, &m, &v, &b.state)?;
        check::mixed_update(op, self.context, &mp, n as usize, &bufs)?;
        let entry = low_entry(mp.low.dtype(), "adam_step_bf16", "adam_step_f16");
        self.with_scratch(|scratch| {
            let args = Args::new()
                .bufs(&bufs)?
                .buf(&scratch.ticket(Ticket::Optimizer)?)?
                .buf_as(&mp.low, mp.low.dtype())?
                .buf(&mp.found_inf)?
                .u32(n)
                .u32(s.decoupled as u32)
                .f32(s.beta1)
                .f32(s.beta2)
                .f32(s.eps)
                .f32(s.weight_decay);
            self.run(entry, self.streaming(n as usize), args)
        })
    }
}

/// The entry of a mixed-precision step for a low copy of `low` (bf16 or f16, checked).
fn low_entry(low: DType, bf16: &'static str, f16: &'static str) -> &'static str {
    if low == DType::Bf16 { bf16 } else { f16 }
}
