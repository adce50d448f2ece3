//! The argument structs of the row-wise ops (layer normalization, the fused losses, the row
//! gathers, the dense layer and the bias + activation backward passes), one
//! per op as cuDNN has its descriptors: the views and sizes of a call, named, with the op's
//! name, its views in the kernels' order and its checks (context and type, lengths, overlaps),
//! which every backend runs before touching memory.

use super::check;
use super::views::{op_args, view_group};
use super::{Activated, Activation, BiasActGrads, DenseParams, DenseShape, Gemm};
#[cfg(doc)]
use super::{ActivationOps, DenseOps, IndexOps, LossOps, NormOps};
use super::{LayerNormGrads, LayerNormParams, LossOutputs, MatShape};
use crate::buffer::View;
use crate::dtype::DType;
use crate::error::{Error, Result};

op_args! {
    /// The arguments of [`NormOps::layer_norm_forward`].
    LayerNormForward for "layer_norm_forward" {
        /// The input, `rows x cols`.
        x: View<'a>,
        /// `weight` and `bias`, `cols` elements each.
        params: LayerNormParams<'a>,
        /// Written: the output, `rows x cols`.
        y: View<'a>,
        /// Written: each row's mean and rstd, `2 * rows` elements.
        stats: View<'a>,
        /// Rows and columns.
        shape: MatShape,
        /// Added to the variance.
        eps: f32,
    }
    views [x, params.weight, params.bias, y, stats]
}

op_args! {
    /// The arguments of [`NormOps::layer_norm_backward`].
    LayerNormBackward for "layer_norm_backward" {
        /// The gradient w.r.t. the output, `rows x cols`.
        dy: View<'a>,
        /// The forward's input, `rows x cols`.
        x: View<'a>,
        /// The scale, `cols`.
        weight: View<'a>,
        /// The forward's `stats`, `2 * rows`.
        stats: View<'a>,
        /// Written: `dx` (`rows x cols`), `dweight` and `dbias` (`cols` each).
        grads: LayerNormGrads<'a>,
        /// Rows and columns.
        shape: MatShape,
    }
    views [dy, x, weight, stats, grads.dx, grads.dweight, grads.dbias]
}

impl LayerNormForward<'_> {
    /// Checks the arguments against the context `ctx`; returns `rows * cols`, which fits the
    /// 32-bit kernel dimensions.
    pub(crate) fn check(&self, ctx: u64) -> Result<u32> {
        check::same_context(Self::OP, ctx, &self.views().each_ref())?;
        let MatShape { rows, cols } = self.shape;
        let n = rows.saturating_mul(cols);
        let ins = [
            ("x", &self.x, n),
            ("weight", &self.params.weight, cols),
            ("bias", &self.params.bias, cols),
        ];
        let outs = [("y", &self.y, n), ("stats", &self.stats, 2 * rows)];
        check::layer_norm(Self::OP, rows, cols, &ins, &outs)
    }
}

impl LayerNormBackward<'_> {
    /// Checks the arguments against the context `ctx`; returns `rows * cols`, which fits the
    /// 32-bit kernel dimensions.
    pub(crate) fn check(&self, ctx: u64) -> Result<u32> {
        check::same_context(Self::OP, ctx, &self.views().each_ref())?;
        let MatShape { rows, cols } = self.shape;
        let n = rows.saturating_mul(cols);
        let ins = [
            ("dy", &self.dy, n),
            ("x", &self.x, n),
            ("weight", &self.weight, cols),
            ("stats", &self.stats, 2 * rows),
        ];
        let outs = [
            ("dx", &self.grads.dx, n),
            ("dweight", &self.grads.dweight, cols),
            ("dbias", &self.grads.dbias, cols),
        ];
        check::layer_norm(Self::OP, rows, cols, &ins, &outs)
    }
}

op_args! {
    /// The arguments of [`LossOps::softmax_cross_entropy`].
    SoftmaxCrossEntropy for "softmax_cross_entropy" {
        /// The logits, `rows x cols`.
        logits: View<'a>,
        /// u32 class labels, `rows`: `labels[r]` is the class index of row `r`.
        labels: View<'a>,
        /// Written: `dlogits`, the row losses and, if given, the totals to add to.
        out: LossOutputs<'a>,
        /// Written: 1 where the row's arg-max is its label, else 0; `rows`.
        row_correct: View<'a>,
        /// Rows and classes.
        shape: MatShape,
        /// Scale of the gradient (`1 / rows` for a mean loss).
        grad_scale: f32,
    }
}

op_args! {
    /// The arguments of [`LossOps::mse`].
    Mse for "mse" {
        /// The predictions, `rows x cols`.
        pred: View<'a>,
        /// The targets, `rows x cols`.
        target: View<'a>,
        /// Written: `dpred`, the row losses and, if given, the totals to add to.
        out: LossOutputs<'a>,
        /// Rows and columns.
        shape: MatShape,
        /// Scale of the gradient (`1 / rows` for a mean loss).
        grad_scale: f32,
    }
}

/// The checks of a fused loss with the inputs `ins` (`(name, view, type, elements)`) and the
/// outputs `outs` (f32, `(name, view, elements)`) besides its `totals` (at least `totals_len`
/// elements): contexts and types, lengths, and no output overlapping another view.
fn loss_views(
    op: &str,
    ctx: u64,
    ins: &[(&str, &View<'_>, DType, usize)],
    outs: &[check::Arg<'_, '_>],
    totals: (Option<&View<'_>>, usize),
) -> Result<()> {
    let f32_outs = outs.iter().map(|(name, v, _)| (*name, *v, DType::F32));
    let typed: Vec<_> = ins
        .iter()
        .map(|(name, v, t, _)| (*name, *v, *t))
        .chain(f32_outs)
        .collect();
    check::typed(op, ctx, &typed)?;
    let ins: Vec<_> = ins.iter().map(|(name, v, _, n)| (*name, *v, *n)).collect();
    let all: Vec<&View<'_>> = ins.iter().chain(outs).map(|(_, v, _)| *v).collect();
    if let Some(t) = totals.0 {
        check::typed(op, ctx, &[("totals", t, DType::F32)])?;
    }
    check::totals(op, totals.0, totals.1, &all)?;
    for (name, v, n) in ins.iter().chain(outs) {
        check::len(op, name, v, *n)?;
    }
    check::disjoint_outputs(op, &ins, outs)
}

impl SoftmaxCrossEntropy<'_> {
    /// Checks the arguments against the context `ctx`; returns `rows * cols`.
    pub(crate) fn check(&self, ctx: u64) -> Result<usize> {
        let MatShape { rows, cols } = self.shape;
        let n = check::area(Self::OP, rows, cols)?;
        let ins = [
            ("logits", &self.logits, DType::F32, n),
            ("labels", &self.labels, DType::U32, rows),
        ];
        let outs = [
            ("dlogits", &self.out.grad, n),
            ("row_loss", &self.out.row_loss, rows),
            ("row_correct", &self.row_correct, rows),
        ];
        loss_views(Self::OP, ctx, &ins, &outs, (self.out.totals.as_ref(), 2))?;
        Ok(n)
    }
}

impl Mse<'_> {
    /// Checks the arguments against the context `ctx`; returns `rows * cols`.
    pub(crate) fn check(&self, ctx: u64) -> Result<usize> {
        let MatShape { rows, cols } = self.shape;
        let n = check::area(Self::OP, rows, cols)?;
        let ins = [
            ("pred", &self.pred, DType::F32, n),
            ("target", &self.target, DType::F32, n),
        ];
        let outs = [
            ("dpred", &self.out.grad, n),
            ("row_loss", &self.out.row_loss, rows),
        ];
        loss_views(Self::OP, ctx, &ins, &outs, (self.out.totals.as_ref(), 1))?;
        Ok(n)
    }
}

view_group! {
    /// The arguments of [`IndexOps::gather_rows`] and [`IndexOps::scatter_add_rows`]: rows of
    /// `cols` elements moved by index.
    IndexedRows {
        /// The rows read: a gather picks `src[indices[i]]`, a scatter adds its row `i`.
        src: View<'a>,
        /// The u32 row indices.
        indices: View<'a>,
        /// The rows written: a gather's row `i`, or the rows a scatter adds to.
        dst: View<'a>,
        /// Elements of a row.
        cols: usize,
    }
    /// The arguments in declaration order.
}

impl IndexedRows<'_> {
    /// Checks a gather against the context `ctx`: `indices` u32, `src` f32 or u32 and `dst` of
    /// the same type, `dst` of `indices.len() x cols` overlapping neither input, and `src` whole
    /// rows. Returns the rows' type and the elements written (0: nothing to do).
    pub(crate) fn check_gather(&self, ctx: u64) -> Result<(DType, usize)> {
        let op = "gather_rows";
        let rows = if self.src.dtype() == DType::U32 {
            DType::U32
        } else {
            DType::F32
        };
        let views = [
            ("src", &self.src, rows),
            ("indices", &self.indices, DType::U32),
        ];
        check::typed(op, ctx, &views)?;
        check::typed(op, ctx, &[("dst", &self.dst, rows)])?;
        let n = check::area(op, self.indices.len(), self.cols)?;
        check::len(op, "dst", &self.dst, n)?;
        check::no_overlap(op, &self.dst, &self.src, false)?;
        check::no_overlap(op, &self.dst, &self.indices, false)?;
        if n != 0 && self.src.len() % self.cols != 0 {
            return Err(Error::shape(
                op,
                format!(
                    "src of {} elements is not rows of {}",
                    self.src.len(),
                    self.cols
                ),
            ));
        }
        Ok((rows, n))
    }

    /// Checks a scatter-add against the context `ctx`: `src` (f32) is `indices.len() x cols`,
    /// `dst` (f32) whole rows of `cols` overlapping neither input, and both within 32 bits.
    /// Returns the rows of `dst`.
    pub(crate) fn check_scatter(&self, ctx: u64) -> Result<usize> {
        let op = "scatter_add_rows";
        let (src, indices, dst, cols) = (&self.src, &self.indices, &self.dst, self.cols);
        let views = [
            ("src", src, DType::F32),
            ("indices", indices, DType::U32),
            ("dst", dst, DType::F32),
        ];
        check::typed(op, ctx, &views)?;
        check::len(op, "src", src, check::area(op, indices.len(), cols)?)?;
        if cols == 0 || dst.len() % cols != 0 {
            return Err(Error::shape(
                op,
                format!("dst of {} elements is not rows of {cols}", dst.len()),
            ));
        }
        check::no_overlap(op, dst, src, false)?;
        check::no_overlap(op, dst, indices, false)?;
        check::fits_u32(op, src.len())?;
        check::fits_u32(op, dst.len())?;
        Ok(dst.len() / cols)
    }
}

view_group! {
    /// The arguments of [`DenseOps::dense_forward`].
    DenseForward {
        /// The input, `rows x inputs`.
        x: View<'a>,
        /// The weight (`outputs x inputs`, PyTorch's layout) and the bias (`outputs`).
        params: DenseParams<'a>,
        /// Written: the pre-activation `x W^T + bias`, `rows x outputs`.
        z: View<'a>,
        /// Written: `act(z)`; may be the same view as `z`.
        y: View<'a>,
        /// The activation.
        act: Activation,
        /// Rows, inputs and outputs.
        shape: DenseShape,
    }
    /// The arguments in declaration order.
}

view_group! {
    /// The arguments of [`DenseOps::dense_param_grads`].
    DenseParamGrads {
        /// The gradient of the layer's pre-activation, `rows x outputs`.
        dz: View<'a>,
        /// The layer's input, `rows x inputs`.
        x: View<'a>,
        /// Written (overwritten): the weight gradient `dw` and the bias gradient `dbias`.
        grads: DenseParams<'a>,
        /// Rows, inputs and outputs.
        shape: DenseShape,
    }
    /// The arguments in declaration order.
}

view_group! {
    /// The arguments of [`ActivationOps::bias_act_backward`].
    BiasActBackward {
        /// The gradient w.r.t. the output, `rows x cols`.
        dy: View<'a>,
        /// The forward pass: `z`, `y` and the activation.
        f: Activated<'a>,
        /// Written: `dz` (`rows x cols`; may be the same view as `dy`) and `dbias` (`cols`).
        grads: BiasActGrads<'a>,
        /// Rows and columns of the pre-activation.
        shape: MatShape,
    }
    /// The arguments in declaration order.
}

op_args! {
    /// The arguments of [`ActivationOps::bias_act_backward_product`].
    BiasActBackwardProduct for "bias_act_backward_product" {
        /// The next layer's pre-activation gradient, `rows x k`.
        g: View<'a>,
        /// The next layer's weight, `k x cols`.
        w: View<'a>,
        /// The forward pass: `z`, `y` and the activation.
        f: Activated<'a>,
        /// Written: `dz` (`rows x cols`) and `dbias` (`cols`).
        grads: BiasActGrads<'a>,
        /// Rows and columns of the pre-activation.
        shape: MatShape,
        /// The inner dimension of the product `g w`.
        k: usize,
    }
}

impl BiasActBackwardProduct<'_> {
    /// The product `dy = g w` (`rows x cols`).
    pub(crate) fn product_gemm(&self) -> Gemm {
        Gemm::new(self.shape.rows, self.shape.cols, self.k)
    }

    /// Checks the views (their types as [`BiasActBackwardProduct::float_type`] says, all of
    /// `g`'s context): their lengths, and no overlap of an output with anything it is read
    /// with, `dz` being written before `g`, `w`, `y` and (where the derivative reads it) `z`
    /// are read. Returns the areas of `dz`, `g` and `w`.
    pub(crate) fn check(&self) -> Result<[usize; 3]> {
        let op = Self::OP;
        let Activated { z, y, act } = &self.f;
        let BiasActGrads { dz, dbias } = &self.grads;
        let (g, w) = (&self.g, &self.w);
        let MatShape { rows, cols } = self.shape;
        self.float_type(g.buffer().context_id())?;
        let n = check::area(op, rows, cols)?;
        let (g_len, w_len) = (
            check::area(op, rows, self.k)?,
            check::area(op, self.k, cols)?,
        );
        check::len(op, "g", g, g_len)?;
        check::len(op, "w", w, w_len)?;
        for (name, v) in [("z", z), ("y", y), ("dz", dz)] {
            check::len(op, name, v, n)?;
        }
        check::len(op, "dbias", dbias, cols)?;
        for v in [g, w, y] {
            check::no_overlap(op, dz, v, false)?;
        }
        if !act.derivative_from_output() {
            check::no_overlap(op, dz, z, false)?;
        }
        for v in [g, w, z, y, dz] {
            check::no_overlap(op, dbias, v, false)?;
        }
        Ok([n, g_len, w_len])
    }
}
