//! The character-model data of the recurrent benches (`workloads`' W2/W5/W6 and
//! `recurrent_grid`'s points), shared as a file: each bench is a crate of its own.

use rnn::nn::{Rng, Targets};

/// `batch` sequences of `steps` random one-hot characters of a `vocab`-letter alphabet, flat
/// (`batch * steps * vocab`), and a random class per step for a head at every step.
pub fn one_hot_sequences(
    rng: &mut Rng,
    batch: usize,
    steps: usize,
    vocab: usize,
) -> (Vec<f32>, Targets) {
    let mut x = vec![0.0f32; batch * steps * vocab];
    for row in x.chunks_mut(vocab) {
        row[rng.below(vocab)] = 1.0;
    }
    let labels = (0..batch * steps)
        .map(|_| rng.below(vocab) as u32)
        .collect();
    let targets = Targets::Classes {
        labels,
        classes: vocab,
        per_sample: steps,
    };
    (x, targets)
}
