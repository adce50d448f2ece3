//! Robustness: workspace reuse across sizes, size limits, malformed files, concurrent saves,
//! and the thread-safety of the public types.

use rnn::nn::{Dataset, Loss, Network, Trainer, TrainingConfig};
use rnn::{Activation, Context};

fn small_net(ctx: &Context) -> Network {
    Network::builder(ctx)
        .seed(3)
        .dense(3, 5, Activation::Tanh)
        .dense(5, 2, Activation::Identity)
        .build(Loss::SoftmaxCrossEntropy)
        .unwrap()
}

fn small_data(n: usize) -> Dataset {
    let features: Vec<f32> = (0..n * 3).map(|i| ((i * 7) % 11) as f32 / 11.0).collect();
    let labels: Vec<u32> = (0..n as u32).map(|i| i % 2).collect();
    Dataset::classification(features, 3, labels, 2).unwrap()
}

fn predict_rows(net: &mut Network, rows: usize) {
    let out = net.predict(&vec![0.25; rows * 3]).unwrap();
    assert_eq!(out.len(), rows * 2);
}

/// Many prediction sizes before and between training calls used to evict the workspaces a
/// running `train` or a live `Trainer` indexes, which panicked.
#[test]
fn cpu_workspaces_survive_many_sizes() {
    let ctx = Context::cpu();
    let data = small_data(23);
    let config = TrainingConfig {
        use_gpu: false,
        epochs: 3,
        batch_size: 4,
        validation_split: 0.3,
        log_every: 0,
        ..Default::default()
    };
    for before in 0..=9 {
        let mut net = small_net(&ctx);
        for rows in 0..before {
            predict_rows(&mut net, 5 + rows);
        }
        let history = net.train(&data, &config).unwrap();
        assert_eq!(history.epochs.len(), 3);
        assert!(history.epochs.iter().all(|e| e.val_loss.is_some()));
        let mut trainer: Trainer = net.trainer(&data, &config).unwrap();
        trainer.step(&mut net).unwrap();
        for rows in 0..9 {
            predict_rows(&mut net, 30 + rows);
            net.evaluate(&small_data(2 + rows)).unwrap();
        }
        trainer.step(&mut net).unwrap();
        assert!(trainer.take_mean_loss(&net).unwrap().is_finite());
    }
}

#[test]
fn public_types_are_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<rnn::Context>();
    check::<rnn::Tensor>();
    check::<rnn::Buffer>();
    check::<rnn::nn::Network>();
    check::<rnn::nn::Trainer>();
    check::<rnn::GpuManager>();
    check::<rnn::Kernel>();
    check::<rnn::cache::KernelCache>();
    check::<rnn::nn::Dataset>();
    check::<rnn::Error>();
}

/// Threads saving the same path used to share one temp file name (the process id only), so
/// one thread's rename found its temp file already renamed away.
#[test]
fn cpu_concurrent_saves_of_one_path_all_succeed() {
    let ctx = Context::cpu();
    let net = small_net(&ctx);
    let dir = std::env::temp_dir().join(format!("rnn-robust-save-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("model.safetensors");
    std::thread::scope(|s| {
        for _ in 0..6 {
            s.spawn(|| {
                for _ in 0..25 {
                    net.save(&path).unwrap();
                }
            });
        }
    });
    let mut copy = Network::builder(&ctx)
        .seed(99)
        .dense(3, 5, Activation::Tanh)
        .dense(5, 2, Activation::Identity)
        .build(Loss::SoftmaxCrossEntropy)
        .unwrap();
    copy.load(&path).unwrap();
    assert_eq!(copy.parameters().unwrap(), net.parameters().unwrap());
    let left: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left.len(), 1, "temp files left behind: {left:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}
