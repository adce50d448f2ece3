//! A network's precision and the bf16/f16 low copy of its parameters that a mixed-precision
//! forward reads ([`super::Precision`]). The f32 parameter buffer stays the master: the low copy
//! is made from it by `cast` whenever the host writes it (building, loading, setting, moving)
//! and refreshed by every mixed optimizer step.

use crate::error::Result;
use crate::ops::Ops;

use super::network::Network;
use super::precision::Precision;

impl Network {
    /// The precision evaluation, prediction and [`Network::forward`] compute in, and the one
    /// the last training ran in ([`super::TrainingConfig::precision`]).
    pub fn precision(&self) -> Precision {
        self.precision
    }

    /// Sets the precision of evaluation, prediction and [`Network::forward`] (training sets
    /// it to [`super::TrainingConfig::precision`] and leaves it there). `Bf16`/`F16` make the
    /// low copy of the parameters and rebuild the workspaces with activations of that type;
    /// every backend takes them (the CPU backend computes in f32 over bf16/f16 storage).
    /// `Tf32` stores f32 and uses TF32 GEMMs (on CUDA with cuBLAS). `Tf32`, `Bf16` and `F16`
    /// turn the context's TF32 switch on ([`crate::ops::Execution::set_tf32`]); `F32` returns
    /// it to the context's [`crate::ContextOptions::allow_tf32`]. A [`super::Stepper`]
    /// stores f32 whatever the precision.
    pub fn set_precision(&mut self, precision: Precision) -> Result<()> {
        // The f32 products of Tf32, Bf16 and F16 networks (all of a Tf32 network's; the
        // f32-only layers' of the others, which PyTorch's autocast runs in bf16/f16) may use
        // TF32; an F32 network's follow the context's `allow_tf32`.
        let tf32 = precision != Precision::F32;
        if self.ctx.execution().set_tf32(tf32) != tf32 {
            log::debug!(
                "{}: TF32 products {}",
                self.ctx.id(),
                if tf32 { "on" } else { "off" }
            );
        }
        if precision == self.precision && (self.low.is_some() == precision.low_dtype().is_some()) {
            return self.refresh_low();
        }
        self.low = match precision.low_dtype() {
            Some(t) => Some(self.ctx.ops().alloc_as(t, self.layout.total)?),
            None => None,
        };
        self.precision = precision;
        self.workspaces.clear();
        self.refresh_low()
    }

    /// Rounds the f32 parameters into the low copy (when there is one): after any write of
    /// the parameters that is not a mixed optimizer step.
    pub(crate) fn refresh_low(&self) -> Result<()> {
        match &self.low {
            Some(low) => self.ctx.ops().cast(self.params.view(), low.view()),
            None => Ok(()),
        }
    }

    /// A low copy on `ops`' device for a network of this precision moved or copied there
    /// (filled by [`Network::refresh_low`] once the parameters are in place).
    pub(crate) fn low_on(&self, ops: &dyn Ops) -> Result<Option<crate::buffer::Buffer>> {
        self.precision
            .low_dtype()
            .map(|t| ops.alloc_as(t, self.layout.total))
            .transpose()
    }
}
