//! The optimizer steps: one launch each over the flat buffers, reading the learning rate and
//! step count from the device-side state and advancing it (geometry `E` with an `L` ticket).

use super::GpuOps;
use super::launch::{self, Args};
use super::scratch::Ticket;
use crate::backend::Device;
use crate::buffer::View;
use crate::error::Result;
use crate::ops::prelude::*;
use crate::ops::{AdamStep, OptimBuffers, SgdStep, check};

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
}
