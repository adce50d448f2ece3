//! Dropout masks and the random state's advance (kernels-cu/random.cu, kernels-cl/random.cl).

use super::GpuOps;
use super::launch::{self, Args};
use crate::backend::Device;
use crate::buffer::View;
use crate::error::Result;
use crate::kernel::LaunchConfig;
use crate::ops::prelude::*;
use crate::ops::{DropoutMask, check, dropout_params};

impl<D: Device> RandomOps for GpuOps<D> {
    fn dropout(&self, x: View<'_>, y: View<'_>, mask: DropoutMask<'_>) -> Result<()> {
        let DropoutMask { state, stream, p } = mask;
        let op = "dropout";
        self.mine(op, &[&x, &y, &state])?;
        let n = check::dropout(&x, &y, &state, p)?;
        if n == 0 {
            return Ok(());
        }
        // Threshold and scale are computed here, once, exactly as the CPU backend computes
        // them, so the masks and the kept values agree bit for bit.
        let (threshold, scale) = dropout_params(p);
        let args = Args::new()
            .bufs(&[&x, &y, &state])?
            .u32(n)
            .u32(stream)
            .u32(threshold)
            .f32(scale);
        self.run(op, launch::elementwise(n as usize), args)
    }

    fn rng_advance(&self, state: View<'_>) -> Result<()> {
        let op = "rng_advance";
        self.mine(op, &[&state])?;
        check::rng_state(op, &state)?;
        let args = Args::new().buf(&state)?;
        self.run(op, LaunchConfig::linear(1, 1), args)
    }
}
