//! The op calls the kernel-contract test records: every op of the trait that launches a
//! kernel, with shapes that reach each entry point (thin and tiled products, split k, hidden
//! sizes on both sides of the persistent kernels' register limit). Kept in one place so a
//! change of the `Ops` signatures is one edit here.

use crate::buffer::{Buffer, View};
use crate::dtype::DType;
use crate::error::Result;
use crate::ops::BiasActBackward;
use crate::ops::BiasActBackwardProduct;
use crate::ops::DenseForward;
use crate::ops::DenseParamGrads;
use crate::ops::GruCellBackward;
use crate::ops::GruCellForward;
use crate::ops::IndexedRows;
use crate::ops::LayerNormBackward;
use crate::ops::LayerNormForward;
use crate::ops::LstmCellBackward;
use crate::ops::LstmCellForward;
use crate::ops::Mse;
use crate::ops::RnnSequenceBackward;
use crate::ops::RnnSequenceForward;
use crate::ops::RnnStepBackward;
use crate::ops::RnnStepForward;
use crate::ops::SeqCall;
use crate::ops::SoftmaxCrossEntropy;
use crate::ops::prelude::TypedMemory;
use crate::ops::{
    Activated, Activation, AdamStep, BiasActGrads, DenseParams, DenseShape, DropoutMask, Gemm,
    GruGateGrads, GruSequenceBackward, GruSequenceForward, LayerNormGrads, LayerNormParams,
    LengthLayout, LossOutputs, LossWeights, LstmSequenceBackward, LstmSequenceForward, MatShape,
    MixedUpdate, Ops, OptimBuffers, RNG_STATE_LEN, RecurrentWeights, ScaleUpdate, SeqShape,
    SgdStep,
};

/// Runs every launching op of `ops` once or more.
pub(super) fn exercise(ops: &dyn Ops) -> Result<()> {
    let z = |n: usize| -> Result<Buffer> {
        let b = ops.alloc(n)?;
        ops.fill(b.view(), 0.0)?;
        Ok(b)
    };
    let (rows, cols) = (64, 40);
    let shape = MatShape::new(rows, cols);
    let n = rows * cols;
    let (a, b, c, d) = (z(n)?, z(n)?, z(n)?, z(n)?);
    let (v, bias, stats) = (z(rows)?, z(cols)?, z(2 * rows)?);

    // Memory and elementwise.
    ops.scale(a.view(), 2.0)?;
    ops.axpy(0.5, a.view(), b.view())?;
    ops.add(a.view(), b.view(), c.view())?;
    ops.mul(a.view(), b.view(), c.view())?;
    ops.copy(a.view(), b.view())?;
    let halves = [ops.alloc_as(DType::Bf16, n)?, ops.alloc_as(DType::F16, n)?];
    for (i, h) in halves.iter().enumerate() {
        ops.cast(a.view(), h.view())?;
        ops.cast(h.view(), b.view())?;
        ops.cast(h.view(), halves[1 - i].view())?;
        let t = |len: usize| ops.alloc_as(h.dtype(), len);
        let (x, y, o, tb) = (t(n)?, t(n)?, t(n)?, t(cols)?);
        ops.scale(x.view(), 2.0)?;
        ops.axpy(0.5, x.view(), y.view())?;
        ops.add(x.view(), y.view(), o.view())?;
        ops.mul(x.view(), y.view(), o.view())?;
        ops.activation(x.view(), y.view(), Activation::Gelu)?;
        let f = Activated::new(x.view(), y.view(), Activation::Tanh);
        ops.act_backward(o.view(), f, h.view())?;
        ops.bias_act_forward(f, tb.view(), shape)?;
    }

    // Products: tiled, split k, and the thin kernels (with and without a split; 16 and 1
    // wide).
    for (m, nn, k) in [
        (256, 256, 256),
        (512, 512, 512),
        (1024, 1024, 2048),
        (2048, 1024, 512),
        (128, 128, 8192),
        (64, 8, 4096),
        (8, 64, 300),
        (64, 64, 8),
        (3, 512, 600),
        (1, 2048, 1024),
    ] {
        let (ga, gb, gc) = (z(m * k)?, z(k * nn)?, z(m * nn)?);
        ops.gemm(Gemm::new(m, nn, k), ga.view(), gb.view(), gc.view())?;
    }

    // Activations, dense layers and their backward.
    let (small_out, k16) = (8, 16);
    for act in [Activation::Tanh, Activation::Gelu] {
        ops.bias_act_forward(
            Activated::new(a.view(), b.view(), act),
            bias.view(),
            MatShape::new(rows, cols),
        )?;
        ops.activation(a.view(), b.view(), act)?;
        ops.act_backward(a.view(), Activated::new(b.view(), c.view(), act), d.view())?;
        let grads = BiasActGrads::new(d.view(), bias.view());
        ops.bias_act_backward(BiasActBackward::new(
            a.view(),
            Activated::new(b.view(), c.view(), act),
            grads,
            shape,
        ))?;
        let (g, w) = (z(rows * k16)?, z(k16 * cols)?);
        let views = (
            g.view(),
            w.view(),
            a.view(),
            b.view(),
            c.view(),
            bias.view(),
        );
        ops.bias_act_backward_product(BiasActBackwardProduct::new(
            views.0,
            views.1,
            Activated::new(views.2, views.3, act),
            BiasActGrads::new(views.4, views.5),
            MatShape::new(rows, cols),
            k16,
        ))?;
        let (x, wt, zb, yb, bo) = (
            z(rows * 300)?,
            z(small_out * 300)?,
            z(rows * small_out)?,
            z(rows * small_out)?,
            z(small_out)?,
        );
        let dense = DenseShape::new(rows, 300, small_out);
        let params = DenseParams::new(wt.view(), bo.view());
        ops.dense_forward(DenseForward::new(
            x.view(),
            params,
            zb.view(),
            yb.view(),
            act,
            dense,
        ))?;
        ops.dense_param_grads(DenseParamGrads::new(zb.view(), x.view(), params, dense))?;
    }

    // bf16/f16 products and dense layers.
    super::half_calls::exercise(ops)?;

    // Softmax, losses and reductions.
    // Index data is u32 (zeros: valid in any table).
    let u = |n: usize| -> Result<Buffer> {
        let b = ops.alloc_as(DType::U32, n)?;
        ops.upload_as(b.view(), &vec![0u32; n])?;
        Ok(b)
    };
    let (labels, loss, correct, totals) = (u(rows)?, z(rows)?, z(rows)?, z(2)?);
    ops.softmax(a.view(), b.view(), rows, cols)?;
    ops.log_softmax(a.view(), b.view(), rows, cols)?;
    for t in [Some(totals.view()), None] {
        let out = LossOutputs::new(b.view(), loss.view(), t);
        ops.softmax_cross_entropy(SoftmaxCrossEntropy::new(
            a.view(),
            labels.view(),
            out,
            correct.view(),
            shape,
            1.0,
        ))?;
        ops.mse(Mse::new(a.view(), c.view(), out, shape, 1.0))?;
    }
    // Variable lengths: the layout of 8 steps x 8 samples, row masks, both loss-weight entries.
    let (lens, rev, last) = (u(8)?, u(rows)?, u(8)?);
    ops.length_layout(LengthLayout::new(
        lens.view(),
        v.view(),
        rev.view(),
        last.view(),
        8,
    ))?;
    ops.scale_rows(a.view(), v.view(), cols)?;
    for lab in [Some((labels.view(), 7)), None] {
        ops.loss_weights(LossWeights::new(
            loss.view(),
            Some(correct.view()),
            lab,
            Some(v.view()),
            b.slice(0, rows)?,
            Some(totals.view()),
        ))?;
    }
    ops.sum_rows(a.view(), bias.view(), MatShape::new(rows, cols), 0.0)?;
    ops.sum_cols(a.view(), v.view(), MatShape::new(rows, cols), 0.0)?;
    ops.sum_all(a.view(), totals.slice(0, 1)?, 0.0)?;
    ops.clip_grad_norm(a.view(), 1.0, totals.slice(0, 1)?)?;

    // Rows by index, random masks, normalization.
    let idx = u(rows)?;
    ops.gather_rows(IndexedRows::new(a.view(), idx.view(), b.view(), cols))?;
    let (ids, ids_out) = (u(n)?, u(n)?);
    ops.gather_rows(IndexedRows::new(
        ids.view(),
        idx.view(),
        ids_out.view(),
        cols,
    ))?;
    ops.scatter_add_rows(IndexedRows::new(a.view(), idx.view(), b.view(), cols))?;
    let hot = z(rows * 10)?;
    ops.one_hot(idx.view(), hot.view(), 10)?;
    let rng = z(RNG_STATE_LEN)?;
    ops.dropout(a.view(), b.view(), DropoutMask::new(rng.view(), 1, 0.5))?;
    ops.rng_advance(rng.view())?;
    let (w, wb, dw, db) = (z(cols)?, z(cols)?, z(cols)?, z(cols)?);
    let params = LayerNormParams::new(w.view(), wb.view());
    ops.layer_norm_forward(LayerNormForward::new(
        a.view(),
        params,
        b.view(),
        stats.view(),
        shape,
        1e-5,
    ))?;
    let grads = LayerNormGrads::new(d.view(), dw.view(), db.view());
    ops.layer_norm_backward(LayerNormBackward::new(
        c.view(),
        a.view(),
        w.view(),
        stats.view(),
        grads,
        shape,
    ))?;

    // Recurrent cells, steps and sequences: block-local (32), block-local with W_hh through L1
    // on OpenCL where W_hh exceeds 48 KB of local memory (LSTM and GRU 64, Elman 128),
    // persistent with the Elman W slice in registers (250), above 256 hidden units.
    let batch = 4;
    for hidden in [32, 64, 128, 250, 272] {
        recurrent(ops, &z, batch, hidden)?;
    }

    // Optimizers.
    let state = z(crate::ops::OPTIMIZER_STATE_LEN)?;
    let sgd = SgdStep {
        momentum: 0.9,
        weight_decay: 0.0,
        nesterov: false,
    };
    ops.sgd_step(
        OptimBuffers::new(a.view(), b.view(), state.view()),
        c.view(),
        sgd,
    )?;
    let adam = AdamStep {
        beta1: 0.9,
        beta2: 0.999,
        eps: 1e-8,
        weight_decay: 0.0,
        decoupled: true,
    };
    ops.adam_step(
        OptimBuffers::new(a.view(), b.view(), state.view()),
        c.view(),
        d.view(),
        adam,
    )?;
    let (scaler, flag) = (crate::ops::scaler_state(ops, 65536.0)?, z(1)?);
    ops.unscale_and_check(b.view(), scaler.view(), flag.view())?;
    ops.update_scale(scaler.view(), flag.view(), ScaleUpdate::default())?;
    for dtype in [DType::Bf16, DType::F16] {
        let low = ops.alloc_as(dtype, n)?;
        let mp = MixedUpdate::new(low.view(), flag.view());
        let buffers = OptimBuffers::new(a.view(), b.view(), state.view());
        ops.sgd_step_mixed(buffers, c.view(), sgd, mp)?;
        ops.adam_step_mixed(buffers, c.view(), d.view(), adam, mp)?;
    }
    ops.synchronize()
}

/// The recurrent ops at one size.
fn recurrent(
    ops: &dyn Ops,
    z: &dyn Fn(usize) -> Result<Buffer>,
    batch: usize,
    hidden: usize,
) -> Result<()> {
    let steps = 3;
    let bh = batch * hidden;
    let act = Activation::Tanh;
    let (pre, h_prev, h, dh) = (z(bh)?, z(bh)?, z(bh)?, z(bh)?);
    let (w_hh, b_ih, b_hh) = (z(hidden * hidden)?, z(hidden)?, z(hidden)?);
    ops.rnn_step_forward(RnnStepForward::new(
        pre.view(),
        h_prev.view(),
        RecurrentWeights::new(w_hh.view(), b_ih.view(), b_hh.view()),
        h.view(),
        act,
        SeqShape::step(batch, hidden),
    ))?;
    for next in [None, Some(pre.view())] {
        ops.rnn_step_backward(RnnStepBackward::new(
            dh.view(),
            next,
            w_hh.view(),
            h.view(),
            h_prev.view(),
            act,
            SeqShape::step(batch, hidden),
        ))?;
    }
    let (seq, hs, dpre) = (z(steps * bh)?, z((steps + 1) * bh)?, z(steps * bh)?);
    // The sequences in f32 and with T products (the `_lo` cells on the GEMM path).
    let shapes = [None, Some(DType::Bf16), Some(DType::F16)]
        .map(|t| SeqShape::new(steps, batch, hidden).with_product_type(t));
    for shape in shapes {
        ops.rnn_sequence_forward(RnnSequenceForward::new(
            seq.view(),
            hs.view(),
            RecurrentWeights::new(w_hh.view(), b_ih.view(), b_hh.view()),
            act,
            shape,
        ))?;
        ops.rnn_sequence_backward(RnnSequenceBackward::new(
            seq.view(),
            hs.view(),
            w_hh.view(),
            dpre.view(),
            act,
            shape,
        ))?;
    }

    // LSTM (4 gates) and GRU (3 gates).
    let (gates, dgates, c_prev, c, dc) = (z(4 * bh)?, z(4 * bh)?, z(bh)?, z(bh)?, z(bh)?);
    ops.lstm_cell_forward(LstmCellForward::new(
        gates.view(),
        c_prev.view(),
        c.view(),
        h.view(),
        SeqShape::step(batch, hidden),
    ))?;
    ops.lstm_cell_backward(LstmCellBackward::new(
        gates.view(),
        c_prev.view(),
        c.view(),
        dh.view(),
        dc.view(),
        dgates.view(),
        SeqShape::step(batch, hidden),
    ))?;
    let (gx, gh, cache, dgx, dgh) = (z(3 * bh)?, z(3 * bh)?, z(4 * bh)?, z(3 * bh)?, z(3 * bh)?);
    ops.gru_cell_forward(GruCellForward::new(
        gx.view(),
        gh.view(),
        h_prev.view(),
        h.view(),
        cache.view(),
        SeqShape::step(batch, hidden),
    ))?;
    ops.gru_cell_backward(GruCellBackward::new(
        cache.view(),
        h_prev.view(),
        dh.view(),
        GruGateGrads::new(dgx.view(), dgh.view()),
        c.view(),
        SeqShape::step(batch, hidden),
    ))?;

    let w4 = z(4 * hidden * hidden)?;
    let (b4i, b4h) = (z(4 * hidden)?, z(4 * hidden)?);
    let (sg, cs, sdg) = (z(steps * 4 * bh)?, z((steps + 1) * bh)?, z(steps * 4 * bh)?);
    let w3 = z(3 * hidden * hidden)?;
    let (b3i, b3h) = (z(3 * hidden)?, z(3 * hidden)?);
    let (sgx, scache, sdgx, sdgh) = (
        z(steps * 3 * bh)?,
        z(steps * 4 * bh)?,
        z(steps * 3 * bh)?,
        z(steps * 3 * bh)?,
    );
    // The T copy of the outputs in each 16-bit type (`_low` entries where the route is the
    // persistent one).
    let lows = [
        ops.alloc_as(DType::Bf16, steps * bh)?,
        ops.alloc_as(DType::F16, steps * bh)?,
    ];
    for shape in shapes {
        let lstm_forward = LstmSequenceForward {
            gates: sg.view(),
            hs: hs.view(),
            cs: cs.view(),
            weights: RecurrentWeights::new(w4.view(), b4i.view(), b4h.view()),
            shape,
        };
        ops.lstm_sequence_forward(lstm_forward)?;
        for low in &lows {
            ops.lstm_sequence_forward_low(lstm_forward, low.view())?;
        }
        ops.lstm_sequence_backward(LstmSequenceBackward {
            dh: seq.view(),
            gates: sg.view(),
            cs: cs.view(),
            w_hh: w4.view(),
            dgates: sdg.view(),
            dc_state: None,
            shape,
        })?;
        let gru_forward = GruSequenceForward {
            gx: sgx.view(),
            hs: hs.view(),
            weights: RecurrentWeights::new(w3.view(), b3i.view(), b3h.view()),
            cache: scache.view(),
            shape,
        };
        ops.gru_sequence_forward(gru_forward)?;
        for low in &lows {
            ops.gru_sequence_forward_low(gru_forward, low.view())?;
        }
        ops.gru_sequence_backward(GruSequenceBackward {
            dh: seq.view(),
            hs: hs.view(),
            cache: scache.view(),
            w_hh: w3.view(),
            grads: GruGateGrads::new(sdgx.view(), sdgh.view()),
            dh_state: None,
            shape,
        })?;
    }
    pairs(ops, z, batch, hidden)
}

/// Every sequence op as a [`SeqCall`] pair of two independent sequences of one shape (the
/// paired block-local entries where the route is block-local).
fn pairs(
    ops: &dyn Ops,
    z: &dyn Fn(usize) -> Result<Buffer>,
    batch: usize,
    hidden: usize,
) -> Result<()> {
    let shape = SeqShape::new(3, batch, hidden);
    let (t, bh) = (shape.steps, batch * hidden);
    // One set of buffers per sequence: every op of both cells reads and writes only its own.
    struct Set {
        x: Buffer,
        hs: Buffer,
        cs: Buffer,
        w: Buffer,
        b: Buffer,
        out: Buffer,
        out2: Buffer,
        cache: Buffer,
        state: Buffer,
    }
    let set = || -> Result<Set> {
        Ok(Set {
            x: z(t * 4 * bh)?,
            hs: z((t + 1) * bh)?,
            cs: z((t + 1) * bh)?,
            w: z(4 * hidden * hidden)?,
            b: z(8 * hidden)?,
            out: z(t * 4 * bh)?,
            out2: z(t * 4 * bh)?,
            cache: z(t * 4 * bh)?,
            state: z(bh)?,
        })
    };
    let sets = [set()?, set()?];
    let act = Activation::Tanh;
    type MakeCall = for<'a> fn(&'a Set, SeqShape, Activation) -> Result<SeqCall<'a>>;
    let makers: [MakeCall; 8] = [
        |s, shape, act| {
            let (g, h) = (shape.hidden, shape.steps * shape.batch * shape.hidden);
            Ok(SeqCall::RnnForward(RnnSequenceForward::new(
                s.x.slice(0, h)?,
                s.hs.view(),
                RecurrentWeights::new(s.w.slice(0, g * g)?, s.b.slice(0, g)?, s.b.slice(g, g)?),
                act,
                shape,
            )))
        },
        |s, shape, act| {
            let (g, h) = (shape.hidden, shape.steps * shape.batch * shape.hidden);
            Ok(SeqCall::RnnBackward(RnnSequenceBackward::new(
                s.x.slice(0, h)?,
                s.hs.view(),
                s.w.slice(0, g * g)?,
                s.out.slice(0, h)?,
                act,
                shape,
            )))
        },
        |s, shape, _| {
            let g = shape.hidden;
            let b = |i: usize| s.b.slice(i * 4 * g, 4 * g);
            Ok(SeqCall::LstmForward(LstmSequenceForward {
                gates: s.x.view(),
                hs: s.hs.view(),
                cs: s.cs.view(),
                weights: RecurrentWeights::new(s.w.view(), b(0)?, b(1)?),
                shape,
            }))
        },
        |s, shape, _| lstm_backward(s.x.view(), s, shape, None),
        |s, shape, _| lstm_backward(s.x.view(), s, shape, Some(s.state.view())),
        |s, shape, _| {
            let (g, h) = (shape.hidden, shape.steps * shape.batch * shape.hidden);
            let b = |i: usize| s.b.slice(i * 3 * g, 3 * g);
            Ok(SeqCall::GruForward(GruSequenceForward {
                gx: s.x.slice(0, 3 * h)?,
                hs: s.hs.view(),
                weights: RecurrentWeights::new(s.w.slice(0, 3 * g * g)?, b(0)?, b(1)?),
                cache: s.cache.view(),
                shape,
            }))
        },
        |s, shape, _| gru_backward(s, shape, None),
        |s, shape, _| gru_backward(s, shape, Some(s.state.view())),
    ];
    fn lstm_backward<'a>(
        gates: View<'a>,
        s: &'a Set,
        shape: SeqShape,
        dc_state: Option<View<'a>>,
    ) -> Result<SeqCall<'a>> {
        let h = shape.steps * shape.batch * shape.hidden;
        Ok(SeqCall::LstmBackward(LstmSequenceBackward {
            dh: s.out2.slice(0, h)?,
            gates,
            cs: s.cs.view(),
            w_hh: s.w.view(),
            dgates: s.out.view(),
            dc_state,
            shape,
        }))
    }
    fn gru_backward<'a>(
        s: &'a Set,
        shape: SeqShape,
        dh_state: Option<View<'a>>,
    ) -> Result<SeqCall<'a>> {
        let (g, h) = (shape.hidden, shape.steps * shape.batch * shape.hidden);
        Ok(SeqCall::GruBackward(GruSequenceBackward {
            dh: s.x.slice(0, h)?,
            hs: s.hs.view(),
            cache: s.cache.view(),
            w_hh: s.w.slice(0, 3 * g * g)?,
            grads: GruGateGrads::new(s.out.slice(0, 3 * h)?, s.out2.slice(0, 3 * h)?),
            dh_state,
            shape,
        }))
    }
    for make in makers {
        let first = make(&sets[0], shape, act)?;
        let second = make(&sets[1], shape, act)?;
        ops.sequence_pair(first, second)?;
    }
    Ok(())
}
