//! The one place that decides how a GPU runs a recurrent sequence op (Elman, LSTM, GRU; forward
//! or backward): [`GpuOps::seq_route`]. Automatically, in this order: the Elman block-local
//! kernels with W_hh in registers where they fit (`small_seq::GpuOps::registers_wanted`); the
//! block-local kernels with W_hh in shared memory where it fits (`small_seq`), else with W_hh
//! read through the L1 cache where the L1 variant exists (OpenCL) and W_hh is within the
//! device's budget; the persistent kernels where wanted (`seq_gemm::gemm_over_persistent`) and the grid fits the
//! co-residency limit (`persistent`); else the per-step GEMMs or the fused step kernels by the
//! hidden-size rule (`seq_gemm`). `RNN_RECURRENT_BLOCK_LOCAL=0` takes every block-local variant
//! out, `RNN_RECURRENT_GEMM_STEPS` steers the last choices, as before.
//!
//! A forced algorithm (`ContextOptions::recurrent_algorithm`, `RNN_RECURRENT_ALGO`) is tried
//! first, whatever those two switches say; where it cannot run the sequence, a debug record
//! says why and the automatic choice runs it. Every op writes one debug record of the
//! algorithm it runs, which benches/recurrent_grid.rs reads on CUDA (no kernel names there).

use super::GpuOps;
use super::persistent::{CoopPlan, SeqTile};
use super::small_seq::{LocalPlan, WPlace};
use crate::backend::Device;
use crate::error::Result;
use crate::ops::SeqShape;
use crate::recurrent_algorithm::RecurrentAlgorithm;

/// A sequence op as the router sees it: the persistent kernel that names it
/// (`lstm_seq_forward`, ...), its cell's gate blocks (1 Elman, 3 GRU, 4 LSTM), and the
/// persistent entry for this hidden size with its block tile.
pub(super) struct SeqOp {
    pub base: &'static str,
    pub gates: usize,
    pub persistent: (String, SeqTile),
}

/// How a sequence op runs.
pub(super) enum SeqRoute {
    /// One block-local launch (W_hh in shared memory, through L1 or in registers).
    Local(LocalPlan),
    /// One cooperative launch of the persistent kernel.
    Persistent(CoopPlan),
    /// A GEMM and a cell launch per step.
    Gemm,
    /// A fused step kernel per step.
    Steps,
}

impl SeqRoute {
    fn algorithm(&self) -> RecurrentAlgorithm {
        match self {
            SeqRoute::Local(p) => match p.kernel.place {
                WPlace::Shared => RecurrentAlgorithm::BlockLocal,
                WPlace::L1 => RecurrentAlgorithm::BlockLocalL1,
                WPlace::Registers => RecurrentAlgorithm::BlockLocalRegisters,
            },
            SeqRoute::Persistent(_) => RecurrentAlgorithm::Persistent,
            SeqRoute::Gemm => RecurrentAlgorithm::Gemm,
            SeqRoute::Steps => RecurrentAlgorithm::Steps,
        }
    }
}

impl<D: Device> GpuOps<D> {
    /// How `op` runs a sequence of `shape` on this device (the module docs), with one debug
    /// record `"{device}: {base} {batch}x{hidden} runs {algorithm}"`.
    pub(super) fn seq_route(&self, op: &SeqOp, shape: SeqShape) -> Result<SeqRoute> {
        let forced = match self.seq_forced {
            Some(a) => match self.forced_route(a, op, shape)? {
                Ok(route) => Some(route),
                Err(why) => {
                    log::debug!(
                        "{}: {} {}x{} cannot run {a} ({why}); choosing automatically",
                        self.info.id,
                        op.base,
                        shape.batch,
                        shape.hidden
                    );
                    None
                }
            },
            None => None,
        };
        let route = match forced {
            Some(r) => r,
            None => self.automatic_route(op, shape)?,
        };
        log::debug!(
            "{}: {} {}x{} runs {}",
            self.info.id,
            op.base,
            shape.batch,
            shape.hidden,
            route.algorithm()
        );
        Ok(route)
    }

    /// The route of algorithm `a`, or why it cannot run this sequence here.
    fn forced_route(
        &self,
        a: RecurrentAlgorithm,
        op: &SeqOp,
        shape: SeqShape,
    ) -> Result<std::result::Result<SeqRoute, &'static str>> {
        Ok(match a {
            RecurrentAlgorithm::BlockLocal => self
                .local_plan(op.base, shape, WPlace::Shared)?
                .map(SeqRoute::Local),
            RecurrentAlgorithm::BlockLocalL1 => self
                .local_plan(op.base, shape, WPlace::L1)?
                .map(SeqRoute::Local),
            RecurrentAlgorithm::BlockLocalRegisters => self
                .local_plan(op.base, shape, WPlace::Registers)?
                .map(SeqRoute::Local),
            RecurrentAlgorithm::Persistent => self
                .persistent_plan(op, shape)?
                .map(SeqRoute::Persistent)
                .ok_or("no cooperative launch of this grid on this device"),
            RecurrentAlgorithm::Gemm => Ok(SeqRoute::Gemm),
            RecurrentAlgorithm::Steps => Ok(SeqRoute::Steps),
            // `seq_forced` never holds it; any later variant chooses automatically too.
            _ => Ok(self.automatic_route(op, shape)?),
        })
    }

    /// The automatic choice (the module docs).
    fn automatic_route(&self, op: &SeqOp, shape: SeqShape) -> Result<SeqRoute> {
        if self.seq_block_local {
            if self.registers_wanted(op.gates, shape.hidden)
                && let Ok(plan) = self.local_plan(op.base, shape, WPlace::Registers)?
            {
                return Ok(SeqRoute::Local(plan));
            }
            if let Ok(plan) = self.local_plan(op.base, shape, WPlace::Shared)? {
                return Ok(SeqRoute::Local(plan));
            }
            if self.l1_wanted(op.gates, shape.hidden)
                && let Ok(plan) = self.local_plan(op.base, shape, WPlace::L1)?
            {
                return Ok(SeqRoute::Local(plan));
            }
        }
        if self.seq_persistent_wanted(shape, op.gates)
            && let Some(plan) = self.persistent_plan(op, shape)?
        {
            return Ok(SeqRoute::Persistent(plan));
        }
        Ok(if self.seq_gemm_wanted(shape, op.gates) {
            SeqRoute::Gemm
        } else {
            SeqRoute::Steps
        })
    }

    fn persistent_plan(&self, op: &SeqOp, shape: SeqShape) -> Result<Option<CoopPlan>> {
        let (entry, tile) = &op.persistent;
        self.cooperative_plan(entry, *tile, shape.batch, shape.hidden)
    }
}
