//! Shape descriptors: the integers that travel with an op's views, named and kept together.

/// The shape of a recurrent op: `steps` time steps, each a `batch x hidden` block (one row per
/// sequence of the batch, one column per hidden unit). The one-step ops (the Elman step, the
/// LSTM and GRU cells) read only `batch` and `hidden`: make theirs with [`SeqShape::step`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SeqShape {
    /// Time steps.
    pub steps: usize,
    /// Sequences processed together (rows of every block).
    pub batch: usize,
    /// Hidden units (columns of a state block).
    pub hidden: usize,
}

impl SeqShape {
    /// `steps` time steps of `batch x hidden`.
    pub const fn new(steps: usize, batch: usize, hidden: usize) -> Self {
        SeqShape {
            steps,
            batch,
            hidden,
        }
    }

    /// One time step of `batch x hidden`.
    pub const fn step(batch: usize, hidden: usize) -> Self {
        SeqShape::new(1, batch, hidden)
    }
}
