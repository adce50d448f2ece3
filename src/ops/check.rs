//! Argument checks shared by every `Ops` implementation, so each backend rejects bad shapes with
//! the same clear errors before touching memory.

use crate::buffer::View;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::ops::RecurrentWeights;
use crate::ops::SeqShape;
use crate::ops::{Activation, Gemm};

/// Every view must belong to the context `ctx` and hold f32: the boundary check every op makes
/// with all its views, so that no op (a new one included) lets another element type reach a
/// kernel. The ops with u32 index views call [`typed`] instead; the type-independent ops
/// (`copy`, the byte transfers) [`context_only`].
pub(crate) fn same_context(op: &str, ctx: u64, views: &[&View<'_>]) -> Result<()> {
    for (i, v) in views.iter().enumerate() {
        view(op, ctx, i, v)?;
    }
    Ok(())
}

/// [`same_context`] for one view, the `index`-th (from 0) of the op's views.
pub(crate) fn view(op: &str, ctx: u64, index: usize, v: &View<'_>) -> Result<()> {
    context_only(op, ctx, &[v])?;
    // Every op checks every view on every call: the argument's name is formed only on error.
    if v.dtype() != DType::F32 {
        return dtype(op, &format!("view {index}"), v, DType::F32);
    }
    Ok(())
}

/// Every view belongs to the context `ctx` and holds its element type: `(name, view, type)`
/// each, for the ops whose views are not all f32 (the index and label arguments are u32).
pub(crate) fn typed(op: &str, ctx: u64, views: &[(&str, &View<'_>, DType)]) -> Result<()> {
    for (name, v, expected) in views {
        context_only(op, ctx, &[v])?;
        dtype(op, name, v, *expected)?;
    }
    Ok(())
}

/// The float type "T" of an op whose views are typed per argument (docs/architecture.md, "Typed
/// storage"): every view of `t` holds one float type (f32, bf16 or f16), the first one's; every
/// view of `fixed` holds its own type (`(name, view, type)`: f32 statistics, u32 indices); all
/// belong to the context `ctx`. Returns T (f32 when `t` is empty). A mismatch is
/// [`Error::DTypeMismatch`] naming `op` and the argument, before any work.
pub(crate) fn float_t(
    op: &str,
    ctx: u64,
    t: &[(&str, &View<'_>)],
    fixed: &[(&str, &View<'_>, DType)],
) -> Result<DType> {
    let ty = match t.first() {
        Some((_, v)) if v.dtype().is_float() => v.dtype(),
        _ => DType::F32,
    };
    for (name, v) in t {
        context_only(op, ctx, &[v])?;
        dtype(op, name, v, ty)?;
    }
    typed(op, ctx, fixed)?;
    Ok(ty)
}

/// The arguments of [`crate::ops::ElementwiseOps::cast`]: float types on both sides (each its
/// own), of the context `ctx`, equal lengths, no overlap. Returns the element count, which fits
/// 32 bits.
pub(crate) fn cast(ctx: u64, src: &View<'_>, dst: &View<'_>) -> Result<u32> {
    let op = "cast";
    float_t(op, ctx, &[("src", src)], &[])?;
    float_t(op, ctx, &[("dst", dst)], &[])?;
    len(op, "dst", dst, src.len())?;
    no_overlap(op, dst, src, false)?;
    fits_u32(op, src.len())
}

/// The view holds elements of `expected`, else [`Error::DTypeMismatch`] naming `op` and `arg`.
pub(crate) fn dtype(op: &str, arg: &str, v: &View<'_>, expected: DType) -> Result<()> {
    if v.dtype() != expected {
        return Err(Error::DTypeMismatch {
            op: op.into(),
            arg: arg.into(),
            expected,
            found: v.dtype(),
        });
    }
    Ok(())
}

/// Every named view holds f32: for ops made of several others (whose own checks come one op at
/// a time) and ops with a first step of their own, so that nothing is written before a view of
/// another type is rejected.
pub(crate) fn all_f32(op: &str, views: &[(&str, &View<'_>)]) -> Result<()> {
    for (name, v) in views {
        dtype(op, name, v, DType::F32)?;
    }
    Ok(())
}

/// Every view must belong to the context `ctx`; their element types are not checked (for the
/// type-independent ops only).
pub(crate) fn context_only(op: &str, ctx: u64, views: &[&View<'_>]) -> Result<()> {
    for v in views {
        if v.buffer().context_id() != ctx {
            return Err(Error::ForeignBuffer(format!(
                "{op}: buffer of context {} used with context {ctx}",
                v.buffer().context_id()
            )));
        }
    }
    Ok(())
}

/// The arguments of a byte transfer: `dst`/`src` of this context (any type), and `bytes` host
/// bytes for its `len * dtype.size()`. Returns the view's size in bytes.
pub(crate) fn transfer(op: &str, ctx: u64, v: &View<'_>, bytes: usize) -> Result<usize> {
    context_only(op, ctx, &[v])?;
    let want = v.len().checked_mul(v.dtype().size()).ok_or_else(|| {
        Error::shape(
            op,
            format!("{} elements overflow the address space", v.len()),
        )
    })?;
    if bytes != want {
        return Err(Error::shape(
            op,
            format!(
                "{bytes} host bytes for a view of {} {} ({want} bytes)",
                v.len(),
                v.dtype()
            ),
        ));
    }
    Ok(want)
}

/// `view.len() == expected`.
pub(crate) fn len(op: &str, name: &str, view: &View<'_>, expected: usize) -> Result<()> {
    if view.len() != expected {
        return Err(Error::shape(
            op,
            format!("{name} has {} elements, expected {expected}", view.len()),
        ));
    }
    Ok(())
}

/// `rows * cols` without overflow.
pub(crate) fn area(op: &str, rows: usize, cols: usize) -> Result<usize> {
    rows.checked_mul(cols)
        .ok_or_else(|| Error::shape(op, format!("{rows} x {cols} overflows")))
}

/// An output may not overlap an input unless it is exactly the same view (in place) and the op
/// allows that.
pub(crate) fn no_overlap(
    op: &str,
    out: &View<'_>,
    input: &View<'_>,
    in_place_ok: bool,
) -> Result<()> {
    if out.overlaps(input) && !(in_place_ok && out.same_as(input)) {
        return Err(Error::InvalidArgument(format!(
            "{op}: output {out:?} overlaps input {input:?}"
        )));
    }
    Ok(())
}

/// A named view with the size a check reads: its elements, or (for the LSTM/GRU cells) its
/// width in `hidden` units per row.
pub(crate) type Arg<'a, 'b> = (&'a str, &'a View<'b>, usize);

/// No output of `outs` overlaps an input of `ins` or another output.
pub(crate) fn disjoint_outputs(op: &str, ins: &[Arg<'_, '_>], outs: &[Arg<'_, '_>]) -> Result<()> {
    for (i, (_, o, _)) in outs.iter().enumerate() {
        for (_, input, _) in ins {
            no_overlap(op, o, input, false)?;
        }
        for (_, other, _) in &outs[i + 1..] {
            no_overlap(op, o, other, false)?;
        }
    }
    Ok(())
}

/// Lengths of A, B and C for a GEMM, and that C overlaps neither input.
pub(crate) fn gemm(g: &Gemm, a: &View<'_>, b: &View<'_>, c: &View<'_>) -> Result<()> {
    len("gemm", "A", a, area("gemm", g.m, g.k)?)?;
    len("gemm", "B", b, area("gemm", g.k, g.n)?)?;
    len("gemm", "C", c, area("gemm", g.m, g.n)?)?;
    no_overlap("gemm", c, a, false)?;
    no_overlap("gemm", c, b, false)
}

/// Shared checks of the LSTM/GRU cell ops: every view of the context `ctx` and f32, lengths
/// (`batch x width*hidden` each), and no output overlapping an input or another output.
/// Returns `batch * hidden`.
pub(crate) fn cell(
    op: &str,
    ctx: u64,
    shape: SeqShape,
    inputs: &[Arg<'_, '_>],
    outputs: &[Arg<'_, '_>],
) -> Result<usize> {
    let all: Vec<&View<'_>> = inputs.iter().chain(outputs).map(|(_, v, _)| *v).collect();
    same_context(op, ctx, &all)?;
    let n = area(op, shape.batch, shape.hidden)?;
    for (name, v, width) in inputs.iter().chain(outputs) {
        len(op, name, v, area(op, n, *width)?)?;
    }
    disjoint_outputs(op, inputs, outputs)?;
    Ok(n)
}

/// Kernel dimensions are 32-bit on every GPU dialect.
pub(crate) fn fits_u32(op: &str, n: usize) -> Result<u32> {
    u32::try_from(n)
        .map_err(|_| Error::shape(op, format!("{n} elements exceed the 2^32 kernel limit")))
}

/// Arguments of the Elman ops, one step or a whole sequence: the activation is `Tanh` or
/// `Relu`, every view has its length, `out` overlaps no input, and one step's `batch * hidden`,
/// `hidden * hidden` and `steps` fit the 32-bit kernel dimensions (and `steps + 1` blocks the
/// address space). Returns `batch * hidden`.
pub(crate) fn elman(
    op: &str,
    act: Activation,
    shape: SeqShape,
    inputs: &[Arg<'_, '_>],
    out: Arg<'_, '_>,
) -> Result<usize> {
    let SeqShape {
        steps,
        batch,
        hidden,
        ..
    } = shape;
    product_type(op, shape)?;
    if !matches!(act, Activation::Tanh | Activation::Relu) {
        return Err(Error::InvalidArgument(format!(
            "{op}: activation must be Tanh or Relu, got {act:?}"
        )));
    }
    let n = area(op, batch, hidden)?;
    fits_u32(op, n)?;
    fits_u32(op, area(op, hidden, hidden)?)?;
    fits_u32(op, steps)?;
    area(op, steps.saturating_add(1), n)?;
    len(op, out.0, out.1, out.2)?;
    for (name, v, expected) in inputs {
        len(op, name, v, *expected)?;
        no_overlap(op, out.1, v, false)?;
    }
    Ok(n)
}

/// A sequence's recurrent product type ([`SeqShape::product_type`]): none, bf16 or f16.
fn product_type(op: &str, shape: SeqShape) -> Result<()> {
    match shape.product_type {
        None | Some(DType::Bf16 | DType::F16) => Ok(()),
        Some(t) => Err(Error::InvalidArgument(format!(
            "{op}: recurrent products take bf16 or f16 operands, not {t}"
        ))),
    }
}

/// A `(name, view, blocks, width)` argument of a gated sequence op: `blocks` time blocks of
/// `batch x width*hidden` elements each.
pub(crate) type SeqArg<'a, 'b> = (&'a str, &'a View<'b>, usize, usize);

/// Shared checks of the LSTM/GRU sequence ops (`gates` gates): the lengths of the parameters
/// (`(name, view, elements)`) and of the sequence arguments, no output overlapping an input, a
/// parameter or another output, and one step's gate matrix (`batch x 4*hidden` at most: the
/// LSTM's gates, the GRU's cache), `W_hh` and `steps` within the 32-bit kernel dimensions.
/// Returns `batch * hidden`, or 0 where there are no steps.
pub(crate) fn gated_sequence(
    op: &str,
    gates: usize,
    shape: SeqShape,
    params: &[Arg<'_, '_>],
    inputs: &[SeqArg<'_, '_>],
    outputs: &[SeqArg<'_, '_>],
) -> Result<usize> {
    let SeqShape {
        steps,
        batch,
        hidden,
        ..
    } = shape;
    product_type(op, shape)?;
    let n = area(op, batch, hidden)?;
    fits_u32(op, area(op, n, 4)?)?;
    fits_u32(op, area(op, area(op, gates, hidden)?, hidden)?)?;
    fits_u32(op, steps)?;
    for (name, v, expected) in params {
        len(op, name, v, *expected)?;
    }
    for (name, v, blocks, width) in inputs.iter().chain(outputs) {
        len(op, name, v, area(op, area(op, *blocks, n)?, *width)?)?;
    }
    for (i, (_, o, _, _)) in outputs.iter().enumerate() {
        for (_, input, _, _) in inputs {
            no_overlap(op, o, input, false)?;
        }
        for (_, p, _) in params {
            no_overlap(op, o, p, false)?;
        }
        for (_, other, _, _) in &outputs[i + 1..] {
            no_overlap(op, o, other, false)?;
        }
    }
    Ok(if steps == 0 { 0 } else { n })
}

/// `W_hh` (`gates*hidden x hidden`) of a recurrent layer with `gates` gates (1 for Elman). The
/// product saturates: the checks reject shapes that overflow before comparing lengths.
pub(crate) fn recurrent_weight<'a, 'b>(
    gates: usize,
    hidden: usize,
    w_hh: &'a View<'b>,
) -> Arg<'a, 'b> {
    let g = gates.saturating_mul(hidden);
    ("w_hh", w_hh, g.saturating_mul(hidden))
}

/// `(W_hh, b_ih, b_hh)` of a recurrent layer with `gates` gates (1 for Elman). The products
/// saturate: the checks reject shapes that overflow before comparing lengths.
pub(crate) fn gate_params<'a, 'b>(
    gates: usize,
    hidden: usize,
    weights: &'a RecurrentWeights<'b>,
) -> [Arg<'a, 'b>; 3] {
    let g = gates.saturating_mul(hidden);
    [
        recurrent_weight(gates, hidden, &weights.w_hh),
        ("b_ih", &weights.b_ih, g),
        ("b_hh", &weights.b_hh, g),
    ]
}

/// The optional loss totals: at least `min_len` elements, overlapping none of `others`.
pub(crate) fn totals(
    op: &str,
    totals: Option<&View<'_>>,
    min_len: usize,
    others: &[&View<'_>],
) -> Result<()> {
    let Some(t) = totals else {
        return Ok(());
    };
    if t.len() < min_len {
        return Err(Error::shape(
            op,
            format!("totals has {} elements, needs {min_len}", t.len()),
        ));
    }
    for o in others {
        no_overlap(op, t, o, false)?;
    }
    Ok(())
}

/// The device-side optimizer state: [`crate::ops::OPTIMIZER_STATE_LEN`] elements overlapping
/// none of the other buffers.
fn optimizer_state(op: &str, state: &View<'_>, others: &[&View<'_>]) -> Result<()> {
    len(op, "state", state, crate::ops::OPTIMIZER_STATE_LEN)?;
    for o in others {
        no_overlap(op, state, o, false)?;
    }
    Ok(())
}

/// Lengths and overlaps of an SGD step; returns the parameter count (which fits 32 bits).
pub(crate) fn sgd_step(
    params: &View<'_>,
    grads: &View<'_>,
    velocity: &View<'_>,
    state: &View<'_>,
    s: &crate::ops::SgdStep,
) -> Result<u32> {
    let op = "sgd_step";
    let n = params.len();
    len(op, "grads", grads, n)?;
    no_overlap(op, params, grads, false)?;
    if s.momentum != 0.0 {
        len(op, "velocity", velocity, n)?;
        no_overlap(op, velocity, params, false)?;
        no_overlap(op, velocity, grads, false)?;
        optimizer_state(op, state, &[params, grads, velocity])?;
    } else {
        optimizer_state(op, state, &[params, grads])?;
    }
    fits_u32(op, n)
}

/// Lengths and overlaps of an Adam step; returns the parameter count (which fits 32 bits).
pub(crate) fn adam_step(
    params: &View<'_>,
    grads: &View<'_>,
    m: &View<'_>,
    v: &View<'_>,
    state: &View<'_>,
) -> Result<u32> {
    let op = "adam_step";
    let n = params.len();
    len(op, "grads", grads, n)?;
    len(op, "m", m, n)?;
    len(op, "v", v, n)?;
    let outs = [params, m, v];
    for (i, o) in outs.iter().enumerate() {
        no_overlap(op, o, grads, false)?;
        for other in &outs[i + 1..] {
            no_overlap(op, o, other, false)?;
        }
    }
    optimizer_state(op, state, &[params, grads, m, v])?;
    fits_u32(op, n)
}

/// Arguments of [`crate::ops::RandomOps::dropout`]: `y` as long as `x` (or exactly `x`), a whole
/// random state that no output overlaps, `p` in `0..=1`, an index range of 32 bits.
pub(crate) fn dropout(x: &View<'_>, y: &View<'_>, state: &View<'_>, p: f32) -> Result<u32> {
    let op = "dropout";
    len(op, "y", y, x.len())?;
    len(op, "state", state, crate::ops::RNG_STATE_LEN)?;
    no_overlap(op, y, x, true)?;
    no_overlap(op, y, state, false)?;
    if !(0.0..=1.0).contains(&p) {
        return Err(Error::InvalidArgument(format!(
            "{op}: drop probability {p} is not in 0..=1"
        )));
    }
    fits_u32(op, x.len())
}

/// [`crate::ops::RandomOps::rng_advance`]: a whole random state.
pub(crate) fn rng_state(op: &str, state: &View<'_>) -> Result<()> {
    len(op, "state", state, crate::ops::RNG_STATE_LEN)
}

/// Arguments of the layer-norm ops: every view's length, and no output overlapping another
/// view. `outs` and `ins` are `(name, view, elements)`. Returns `rows * cols`, which fits the
/// 32-bit kernel dimensions.
pub(crate) fn layer_norm(
    op: &str,
    rows: usize,
    cols: usize,
    ins: &[Arg<'_, '_>],
    outs: &[Arg<'_, '_>],
) -> Result<u32> {
    let n = area(op, rows, cols)?;
    for (name, v, want) in ins.iter().chain(outs) {
        len(op, name, v, *want)?;
    }
    disjoint_outputs(op, ins, outs)?;
    fits_u32(op, area(op, rows, 2)?)?;
    fits_u32(op, n)
}

/// Arguments of [`crate::ops::OptimOps::unscale_and_check`] and
/// [`crate::ops::OptimOps::update_scale`] (`grads` empty for the latter): f32 views of the
/// context `ctx`, a whole scaler state and a one-element flag, no output overlapping another
/// view. Returns the gradient count (which fits 32 bits).
pub(crate) fn loss_scale(
    op: &str,
    ctx: u64,
    grads: &View<'_>,
    scaler: &View<'_>,
    found_inf: &View<'_>,
) -> Result<u32> {
    let f = DType::F32;
    typed(
        op,
        ctx,
        &[
            ("grads", grads, f),
            ("scaler", scaler, f),
            ("found_inf", found_inf, f),
        ],
    )?;
    len(op, "scaler", scaler, crate::ops::SCALER_STATE_LEN)?;
    len(op, "found_inf", found_inf, 1)?;
    no_overlap(op, found_inf, scaler, false)?;
    no_overlap(op, found_inf, grads, false)?;
    no_overlap(op, scaler, grads, false)?;
    fits_u32(op, grads.len())
}

/// The mixed-precision part of an optimizer step, after the step's own checks: a low copy of
/// bf16 or f16 as long as the parameters and a one-element f32 flag, of the context `ctx`,
/// overlapping none of the step's `others` nor each other.
pub(crate) fn mixed_update(
    op: &str,
    ctx: u64,
    mp: &crate::ops::MixedUpdate<'_>,
    n: usize,
    others: &[&View<'_>],
) -> Result<()> {
    let t = float_t(
        op,
        ctx,
        &[("low", &mp.low)],
        &[("found_inf", &mp.found_inf, DType::F32)],
    )?;
    if t == DType::F32 {
        return dtype(op, "low", &mp.low, DType::Bf16);
    }
    len(op, "low", &mp.low, n)?;
    len(op, "found_inf", &mp.found_inf, 1)?;
    no_overlap(op, &mp.low, &mp.found_inf, false)?;
    for o in others {
        no_overlap(op, &mp.low, o, false)?;
        no_overlap(op, &mp.found_inf, o, false)?;
    }
    Ok(())
}

/// A [`crate::ops::ScaleUpdate`]: finite positive factors and an interval of at least 1.
pub(crate) fn scale_update(u: &crate::ops::ScaleUpdate) -> Result<()> {
    let factor = |f: f32| f.is_finite() && f > 0.0;
    if !factor(u.growth) || !factor(u.backoff) || u.interval == 0 {
        return Err(Error::InvalidArgument(format!(
            "update_scale: growth {} and backoff {} must be finite and positive, interval {} at \
             least 1",
            u.growth, u.backoff, u.interval
        )));
    }
    Ok(())
}

/// Checks the `low` output of `op` (`lstm_sequence_forward_low`, `gru_sequence_forward_low`, of
/// context `ctx`, whose other views are `views`): bf16 or f16, `steps * n` elements (`n` one
/// step's), apart from every other view; returns its type.
pub(crate) fn seq_low_outputs(
    op: &str,
    ctx: u64,
    (low, views): (&View<'_>, &[&View<'_>]),
    (n, steps): (usize, usize),
) -> Result<DType> {
    context_only(op, ctx, &[low])?;
    if !matches!(low.dtype(), DType::Bf16 | DType::F16) {
        return Err(Error::DTypeMismatch {
            op: op.into(),
            arg: "low".into(),
            expected: DType::Bf16,
            found: low.dtype(),
        });
    }
    len(op, "low", low, n.saturating_mul(steps))?;
    for v in views {
        no_overlap(op, low, v, false)?;
    }
    Ok(low.dtype())
}
