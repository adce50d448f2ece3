//! `Gru`: PyTorch's GRU (one direction, one layer, zero initial state), gates stacked r, z, n
//! in `weight_ih_l0 [3H, I]`, `weight_hh_l0 [3H, H]`, `bias_ih_l0 [3H]`, `bias_hh_l0 [3H]`:
//!
//! ```text
//! gx = x_t W_ih^T + b_ih,   gh = h_{t-1} W_hh^T + b_hh
//! r = σ(gx_r + gh_r),  z = σ(gx_z + gh_z),  n = tanh(gx_n + r * gh_n)
//! h_t = (1 - z) * n + z * h_{t-1}
//! ```
//!
//! The two projections stay apart because `r` multiplies only the recurrent part of `n`. Rows
//! are time-major: the input projection of all steps is one GEMM, each step one recurrent GEMM
//! and one fused cell launch, and the weight gradients of all steps are single GEMMs.

use crate::buffer::{Buffer, View};
use crate::error::Result;
use crate::ops::{Activation, Gemm, Ops};

use super::layer::Flat;
use super::params::ParamLayout;
use super::recurrent::{GateGrads, GateParams, HiddenSeq};
use super::rnn::RnnOutput;
use super::size;

/// A GRU layer.
#[derive(Debug, Clone)]
pub(crate) struct Gru {
    pub inputs: usize,
    pub hidden: usize,
    pub steps: usize,
    pub output: RnnOutput,
    p: GateParams,
}

/// Per-batch-size buffers of one GRU layer.
pub(crate) struct GruWs {
    seq: HiddenSeq,
    /// `steps * batch x 3H`: `gx` in the forward pass. The cell's backward step reads only
    /// `cache`, so the backward pass reuses this buffer for the gradient w.r.t. `gx`.
    gx: Buffer,
    /// `steps * batch x 3H`: `gh` of every step in the forward pass, its gradient in the
    /// backward pass (same reasoning as `gx`).
    gh: Buffer,
    /// `steps * batch x 4H`: `[r, z, n, gh_n]` of every step, written by the forward cell.
    cache: Buffer,
    /// The direct part of the gradient reaching `h_{t-1}` (`dh_t * z`), one step at a time.
    dh_direct: Buffer,
}

impl Gru {
    pub fn new(
        layout: &mut ParamLayout,
        name: &str,
        inputs: usize,
        hidden: usize,
        steps: usize,
        output: RnnOutput,
    ) -> Self {
        Gru {
            inputs,
            hidden,
            steps,
            output,
            p: GateParams::new(layout, name, inputs, hidden, 3),
        }
    }

    pub fn workspace(&self, ops: &dyn Ops, batch: usize) -> Result<GruWs> {
        let seq = HiddenSeq::new(ops, batch, self.hidden, self.steps)?;
        let block = seq.block();
        // `HiddenSeq::new` checked `steps * block`; only the gate buffers are larger.
        let n = self.steps * block;
        let cache = size::mul(n, 4, "GRU gate cache")?;
        Ok(GruWs {
            seq,
            gx: ops.alloc(3 * n)?,
            gh: ops.alloc(3 * n)?,
            cache: ops.alloc(cache)?,
            dh_direct: ops.alloc(block)?,
        })
    }

    pub fn output<'a>(&self, ws: &'a GruWs) -> Result<View<'a>> {
        ws.seq.output(self.output)
    }

    pub fn grad_output<'a>(&self, ws: &'a GruWs) -> Result<View<'a>> {
        ws.seq.grad_output(self.output)
    }

    /// `x` is time-major, `steps * batch x inputs`.
    pub fn forward(&self, f: &Flat<'_>, ws: &GruWs, x: View<'_>) -> Result<()> {
        let (b, h, t_n) = (ws.seq.batch, self.hidden, self.steps);
        let block = ws.seq.block();
        let rows = t_n * b;
        let (gx, gh) = (ws.gx.view(), ws.gh.view());
        f.ops.gemm(
            Gemm::new(rows, 3 * h, self.inputs).tb(),
            x,
            self.p.w_ih.view(f.params)?,
            gx,
        )?;
        let id = Activation::Identity;
        f.ops
            .bias_act_forward(gx, self.p.b_ih.view(f.params)?, gx, id, rows, 3 * h)?;
        // Every step's gh starts as b_hh (a broadcast: zero plus bias); each step's GEMM then
        // accumulates onto it, and the first step (h_0 = 0) needs no GEMM at all.
        f.ops.fill(gh, 0.0)?;
        f.ops
            .bias_act_forward(gh, self.p.b_hh.view(f.params)?, gh, id, rows, 3 * h)?;
        let w_hh = self.p.w_hh.view(f.params)?;
        for t in 0..t_n {
            let gh_t = ws.gh.slice(t * 3 * block, 3 * block)?;
            if t > 0 {
                f.ops.gemm(
                    Gemm::new(b, 3 * h, h).tb().scaled(1.0, 1.0),
                    ws.seq.h_prev(t)?,
                    w_hh,
                    gh_t,
                )?;
            }
            f.ops.gru_cell_forward(
                ws.gx.slice(t * 3 * block, 3 * block)?,
                gh_t,
                ws.seq.h_prev(t)?,
                ws.seq.h(t)?,
                ws.cache.slice(t * 4 * block, 4 * block)?,
                b,
                h,
            )?;
        }
        Ok(())
    }

    /// Backpropagation through time from the gradient the next layer left in the hidden-state
    /// gradients; overwrites this layer's parameter gradients.
    pub fn backward(
        &self,
        f: &Flat<'_>,
        ws: &GruWs,
        x: View<'_>,
        dx: Option<View<'_>>,
    ) -> Result<()> {
        let (b, h, t_n) = (ws.seq.batch, self.hidden, self.steps);
        let block = ws.seq.block();
        ws.seq.clear_unfed_grads(f.ops, self.output)?;
        let w_hh = self.p.w_hh.view(f.params)?;
        for t in (0..t_n).rev() {
            let dgh_t = ws.gh.slice(t * 3 * block, 3 * block)?;
            f.ops.gru_cell_backward(
                ws.cache.slice(t * 4 * block, 4 * block)?,
                ws.seq.h_prev(t)?,
                ws.seq.dh(t)?,
                ws.gx.slice(t * 3 * block, 3 * block)?,
                dgh_t,
                ws.dh_direct.view(),
                b,
                h,
            )?;
            if t > 0 {
                let dh_prev = ws.seq.dh(t - 1)?;
                f.ops.gemm(
                    Gemm::new(b, h, 3 * h).scaled(1.0, 1.0),
                    dgh_t,
                    w_hh,
                    dh_prev,
                )?;
                f.ops.axpy(1.0, ws.dh_direct.view(), dh_prev)?;
            }
        }
        let d = GateGrads {
            input_side: ws.gx.view(),
            hidden_side: ws.gh.view(),
        };
        let prev = ws.seq.prev_states()?;
        self.p
            .backward_weights(f, &d, x, prev, dx, t_n * b, self.inputs, h, 3)?;
        Ok(())
    }
}
