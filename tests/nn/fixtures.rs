//! Data sets and networks that several of these tests train.

use rnn::nn::{Dataset, Loss, Network, Rng, TrainingHistory};
use rnn::{Activation, Context};

/// Three Gaussian blobs in 8 dimensions.
pub fn blobs(n: usize, seed: u64) -> Dataset {
    let mut rng = Rng::new(seed);
    let mut x = Vec::with_capacity(n * 8);
    let mut y = Vec::with_capacity(n);
    for i in 0..n {
        let c = (i % 3) as u32;
        for j in 0..8 {
            let centre = if j % 3 == c as usize { 1.5 } else { -0.5 };
            x.push(centre + rng.normal());
        }
        y.push(c);
    }
    Dataset::classification(x, 8, y, 3).unwrap()
}

/// A classifier with one hidden dense layer: `inputs` features, `hidden` units with `act`,
/// `classes` logits (softmax cross-entropy), initialized from `seed`.
pub fn classifier(
    ctx: &Context,
    seed: u64,
    [inputs, hidden, classes]: [usize; 3],
    act: Activation,
) -> Network {
    Network::builder(ctx)
        .seed(seed)
        .dense(inputs, hidden, act)
        .dense(hidden, classes, Activation::Identity)
        .build(Loss::SoftmaxCrossEntropy)
        .unwrap()
}

/// Asserts that two runs' histories are the same bit for bit: losses, validation losses,
/// learning rates and the best epoch.
pub fn assert_same_bits(a: &TrainingHistory, b: &TrainingHistory, what: &str) {
    assert_eq!(a.epochs.len(), b.epochs.len(), "{what}");
    for (x, y) in a.epochs.iter().zip(&b.epochs) {
        assert_eq!(x.epoch, y.epoch, "{what}");
        assert_eq!(
            x.loss.to_bits(),
            y.loss.to_bits(),
            "{what}: epoch {}",
            x.epoch
        );
        assert_eq!(
            x.val_loss.map(f32::to_bits),
            y.val_loss.map(f32::to_bits),
            "{what}: epoch {}",
            x.epoch
        );
        assert_eq!(
            x.learning_rate.to_bits(),
            y.learning_rate.to_bits(),
            "{what}"
        );
    }
    assert_eq!(a.best_epoch, b.best_epoch, "{what}");
}
