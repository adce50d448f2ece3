//! Two independent whole-sequence recurrent ops in one call: the two directions of a
//! bidirectional layer, which a GPU backend may run in one launch.

use super::{ElmanOps, GatedSequenceOps};
use crate::buffer::View;
use crate::error::{Error, Result};
use crate::ops::{
    GruSequenceBackward, GruSequenceForward, LstmSequenceBackward, LstmSequenceForward,
    RnnSequenceBackward, RnnSequenceForward,
};

/// One whole-sequence recurrent op and its arguments, as [`SequencePairOps::sequence_pair`]
/// takes them.
#[derive(Clone, Copy)]
pub enum SeqCall<'a> {
    /// [`ElmanOps::rnn_sequence_forward`].
    RnnForward(RnnSequenceForward<'a>),
    /// [`ElmanOps::rnn_sequence_backward`].
    RnnBackward(RnnSequenceBackward<'a>),
    /// [`GatedSequenceOps::lstm_sequence_forward`].
    LstmForward(LstmSequenceForward<'a>),
    /// [`GatedSequenceOps::lstm_sequence_backward`].
    LstmBackward(LstmSequenceBackward<'a>),
    /// [`GatedSequenceOps::gru_sequence_forward`].
    GruForward(GruSequenceForward<'a>),
    /// [`GatedSequenceOps::gru_sequence_backward`].
    GruBackward(GruSequenceBackward<'a>),
}

impl<'a> SeqCall<'a> {
    /// Runs the op on `ops`.
    pub fn run(self, ops: &(impl ElmanOps + GatedSequenceOps + ?Sized)) -> Result<()> {
        match self {
            SeqCall::RnnForward(a) => ops.rnn_sequence_forward(a),
            SeqCall::RnnBackward(a) => ops.rnn_sequence_backward(a),
            SeqCall::LstmForward(a) => ops.lstm_sequence_forward(a),
            SeqCall::LstmBackward(a) => ops.lstm_sequence_backward(a),
            SeqCall::GruForward(a) => ops.gru_sequence_forward(a),
            SeqCall::GruBackward(a) => ops.gru_sequence_backward(a),
        }
    }

    /// The op's name, as its errors give it.
    pub(crate) fn op(&self) -> &'static str {
        match self {
            SeqCall::RnnForward(_) => RnnSequenceForward::OP,
            SeqCall::RnnBackward(_) => RnnSequenceBackward::OP,
            SeqCall::LstmForward(_) => LstmSequenceForward::OP,
            SeqCall::LstmBackward(_) => LstmSequenceBackward::OP,
            SeqCall::GruForward(_) => GruSequenceForward::OP,
            SeqCall::GruBackward(_) => GruSequenceBackward::OP,
        }
    }

    /// The views the op writes (`gates` of the LSTM forward is read and rewritten).
    fn outputs(&self) -> Vec<View<'a>> {
        match self {
            SeqCall::RnnForward(a) => vec![a.hs],
            SeqCall::RnnBackward(a) => vec![a.dpre],
            SeqCall::LstmForward(a) => vec![a.gates, a.hs, a.cs],
            SeqCall::LstmBackward(a) => a.dc_state.into_iter().chain([a.dgates]).collect(),
            SeqCall::GruForward(a) => vec![a.hs, a.cache],
            SeqCall::GruBackward(a) => {
                let grads = [a.grads.dgx, a.grads.dgh];
                a.dh_state.into_iter().chain(grads).collect()
            }
        }
    }

    /// Every view the op reads or writes.
    fn all_views(&self) -> Vec<View<'a>> {
        let mut out = match self {
            SeqCall::RnnForward(a) => a.views().to_vec(),
            SeqCall::RnnBackward(a) => a.views().to_vec(),
            SeqCall::LstmForward(a) => a.views().to_vec(),
            SeqCall::LstmBackward(a) => a.views().to_vec(),
            SeqCall::GruForward(a) => a.views().to_vec(),
            SeqCall::GruBackward(a) => a.views().to_vec(),
        };
        out.extend(self.outputs());
        out
    }
}

/// Checks that neither of `first` and `second` writes a view the other reads or writes, so
/// that running them in either order, or at once, gives the same result.
pub(crate) fn check_independent(first: &SeqCall<'_>, second: &SeqCall<'_>) -> Result<()> {
    for (a, b) in [(first, second), (second, first)] {
        for out in a.outputs() {
            for other in b.all_views() {
                if out.overlaps(&other) {
                    return Err(Error::InvalidArgument(format!(
                        "sequence_pair: an output of {} ({out:?}) overlaps a view of {} \
                         ({other:?}): the two ops must be independent",
                        a.op(),
                        b.op()
                    )));
                }
            }
        }
    }
    Ok(())
}

/// Two independent whole-sequence ops at once.
pub trait SequencePairOps: ElmanOps + GatedSequenceOps {
    /// Runs `first` and `second`, which must be independent: neither may write a view the
    /// other reads or writes ([`crate::Error::InvalidArgument`] otherwise, before any work).
    /// The result is that of running one after the other. The two directions of a
    /// bidirectional layer are such a pair: where both are the same op of the same shape and
    /// the GPU backend runs that shape block-local, it runs both in one launch, twice the
    /// blocks, so that at small batches the second direction does not wait for the first.
    /// Elsewhere (the default, the CPU backend, other routes) the two run one after the other.
    fn sequence_pair(&self, first: SeqCall<'_>, second: SeqCall<'_>) -> Result<()> {
        check_independent(&first, &second)?;
        first.run(self)?;
        second.run(self)
    }
}
