//! [`SequencePairOps`] on a GPU: two independent sequence ops of one kind and shape (the two
//! directions of a bidirectional layer) that the router sends block-local run as ONE launch of
//! the kernel's paired entry (`*_pair`, kernels-cu/small_seq.cu), the grid doubled along `y`.
//! Each block-local launch gives a sequence `ceil(batch / rows)` blocks; at small batches
//! that is a few SMs, and the stream is in order, so the second direction used to wait for
//! the first while most of the GPU idled. Every other pair (other routes, different shapes)
//! runs as two ops.

use super::GpuOps;
use super::launch::Args;
use super::seq_route::SeqRoute;
use crate::backend::Device;
use crate::buffer::View;
use crate::env_switch::Switch;
use crate::error::Result;
use crate::ops::SeqShape;
use crate::ops::prelude::*;
use crate::ops::{SeqCall, seq_pair};

/// `RNN_RECURRENT_PAIR`: off (`0`, `off`, `false`, `no`) runs the two ops of every pair one
/// after the other, for measuring the paired launch against them; on, unset or empty, pairs
/// run as the module docs say. Read once, when the context is created.
const ENV: Switch = Switch {
    name: "RNN_RECURRENT_PAIR",
    unset: true,
    empty: true,
    yes_no: true,
};

/// Whether this context pairs sequence ops ([`ENV`]).
pub(super) fn choice() -> Result<bool> {
    ENV.read_env()
}

/// What follows the dimensions in a block-local launch.
#[derive(Clone, Copy, PartialEq)]
enum Tail {
    Nothing,
    /// The Elman activation: its code and its parameter's bits.
    Activation(u32, u32),
    /// The LSTM backward's `carry_in`.
    CarryIn(u32),
}

impl Tail {
    fn append(self, args: Args) -> Args {
        match self {
            Tail::Nothing => args,
            Tail::Activation(code, param) => args.u32(code).f32(f32::from_bits(param)),
            Tail::CarryIn(on) => args.u32(on),
        }
    }
}

/// One op of a pair as a block-local launch takes it.
struct Part<'a> {
    /// The persistent kernel that names the op (`lstm_seq_backward`, ...).
    base: &'static str,
    gates: usize,
    shape: SeqShape,
    /// One step's state elements (0: nothing to compute).
    n: usize,
    /// The op's views in the kernel's order.
    bufs: Vec<View<'a>>,
    /// The gated backward ops' carry: the caller's state view, or `None` for scratch. `None`
    /// for the ops without one.
    carry: Option<Option<View<'a>>>,
    tail: Tail,
}

impl<D: Device> GpuOps<D> {
    /// `call` checked, as a [`Part`].
    fn part<'a>(&self, call: &SeqCall<'a>) -> Result<Part<'a>> {
        let ctx = self.context;
        let act = |a: crate::ops::Activation| Tail::Activation(a.code(), a.param().to_bits());
        Ok(match call {
            SeqCall::RnnForward(a) => Part {
                base: "rnn_seq_forward",
                gates: 1,
                shape: a.shape,
                n: a.check(ctx)?,
                bufs: a.views().to_vec(),
                carry: None,
                tail: act(a.act),
            },
            SeqCall::RnnBackward(a) => Part {
                base: "rnn_seq_backward",
                gates: 1,
                shape: a.shape,
                n: a.check(ctx)?,
                bufs: a.views().to_vec(),
                carry: None,
                tail: act(a.act),
            },
            SeqCall::LstmForward(a) => Part {
                base: "lstm_seq_forward",
                gates: 4,
                shape: a.shape,
                n: a.check(ctx)?,
                bufs: a.views().to_vec(),
                carry: None,
                tail: Tail::Nothing,
            },
            SeqCall::LstmBackward(a) => Part {
                base: "lstm_seq_backward",
                gates: 4,
                shape: a.shape,
                n: a.check(ctx)?,
                bufs: a.views().to_vec(),
                carry: Some(a.dc_state),
                tail: Tail::CarryIn(u32::from(a.dc_state.is_some())),
            },
            SeqCall::GruForward(a) => Part {
                base: "gru_seq_forward",
                gates: 3,
                shape: a.shape,
                n: a.check(ctx)?,
                bufs: a.views().to_vec(),
                carry: None,
                tail: Tail::Nothing,
            },
            SeqCall::GruBackward(a) => Part {
                base: "gru_seq_backward",
                gates: 3,
                shape: a.shape,
                n: a.check(ctx)?,
                bufs: a.views().to_vec(),
                carry: Some(a.dh_state),
                tail: Tail::Nothing,
            },
        })
    }

    /// Runs `first` and `second` as one paired block-local launch where both are the same op
    /// of the same shape and the router sends that block-local: true then; false, nothing
    /// run, otherwise.
    fn paired(&self, first: &SeqCall<'_>, second: &SeqCall<'_>) -> Result<bool> {
        let (a, b) = (self.part(first)?, self.part(second)?);
        if a.base != b.base || a.shape != b.shape || a.tail != b.tail || a.n == 0 {
            return Ok(false);
        }
        let forward = a.base.ends_with("_forward");
        let route = match a.gates {
            1 => self.elman_route(a.base, a.shape)?,
            g => self.gated_route(a.base, (g, forward), a.shape)?,
        };
        let SeqRoute::Local(plan) = route else {
            return Ok(false);
        };
        let Some(pair) = self.pair_plan(&plan, a.shape)? else {
            return Ok(false);
        };
        log::debug!(
            "{}: {} {}x{} runs two sequences in one launch ({})",
            self.info.id,
            a.base,
            a.shape.batch,
            a.shape.hidden,
            pair.kernel.entry
        );
        let n = a.n;
        let scratch_parts = [&a, &b]
            .iter()
            .filter(|p| matches!(p.carry, Some(None)))
            .count();
        let launch = |scratch: Option<View<'_>>| -> Result<()> {
            let mut next = 0;
            let va = with_carry(&a, scratch.as_ref(), &mut next)?;
            let vb = with_carry(&b, scratch.as_ref(), &mut next)?;
            let (ra, rb): (Vec<&View<'_>>, Vec<&View<'_>>) =
                (va.iter().collect(), vb.iter().collect());
            self.block_local_pair(&pair, (&ra, &rb), a.shape, |args| a.tail.append(args))
        };
        if scratch_parts == 0 {
            launch(None)?;
        } else {
            self.with_carry(scratch_parts * n, |scratch| launch(Some(scratch)))?;
        }
        Ok(true)
    }
}

impl<D: Device> SequencePairOps for GpuOps<D> {
    fn sequence_pair(&self, first: SeqCall<'_>, second: SeqCall<'_>) -> Result<()> {
        seq_pair::check_independent(&first, &second)?;
        if !(self.seq_pair && self.paired(&first, &second)?) {
            first.run(self)?;
            second.run(self)?;
        }
        Ok(())
    }
}

/// `p`'s buffers with its carry appended, if it has one: its state view, or the next `p.n`
/// elements of `scratch` from `*next` (which holds `p.n` for each part without a state view).
fn with_carry<'v>(
    p: &Part<'v>,
    scratch: Option<&View<'v>>,
    next: &mut usize,
) -> Result<Vec<View<'v>>> {
    let mut bufs = p.bufs.clone();
    match (p.carry, scratch) {
        (Some(Some(state)), _) => bufs.push(state),
        (Some(None), Some(s)) => {
            bufs.push(s.slice(*next, p.n)?);
            *next += p.n;
        }
        (Some(None), None) => {
            return Err(crate::Error::InvalidArgument(
                "sequence_pair: no carry scratch for a part without a state view".into(),
            ));
        }
        (None, _) => {}
    }
    Ok(bufs)
}
