//! Data sets and networks that several of these tests train.

use rnn::nn::{Dataset, Loss, Network, Optimizer, Rng, TrainingConfig};
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

/// Adam training on `ctx`'s device alone (no GPU preference, no replicas): `epochs` of batches
/// of `batch` at learning rate `lr`, seed 1.
pub fn config_for(ctx: &Context, epochs: usize, batch: usize, lr: f32) -> TrainingConfig {
    TrainingConfig {
        use_gpu: ctx.id() != rnn::DeviceId::Cpu,
        prefer_gpu: false,
        device: Some(ctx.id()),
        epochs,
        batch_size: batch,
        learning_rate: lr,
        optimizer: Optimizer::adam(),
        seed: 1,
        ..Default::default()
    }
}
