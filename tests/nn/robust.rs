//! Robustness: workspace reuse across sizes, size limits, malformed files, concurrent saves,
//! and the thread-safety of the public types.

use rnn::nn::{CharCorpus, Dataset, Loss, Network, Rng, RnnOutput, Trainer, TrainingConfig};
use rnn::{Activation, Context, Error};

use crate::fixtures::classifier;

fn small_net(ctx: &Context) -> Network {
    classifier(ctx, 3, [3, 5, 2], Activation::Tanh)
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
    let mut copy = classifier(&ctx, 99, [3, 5, 2], Activation::Tanh);
    copy.load(&path).unwrap();
    assert_eq!(copy.parameters().unwrap(), net.parameters().unwrap());
    let left: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left.len(), 1, "temp files left behind: {left:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

fn idx(magic_rank: u8, dims: &[u32], payload: usize) -> Vec<u8> {
    let mut v = vec![0, 0, 8, magic_rank];
    for d in dims {
        v.extend_from_slice(&d.to_be_bytes());
    }
    v.extend(std::iter::repeat_n(0u8, payload));
    v
}

#[test]
fn malformed_idx_headers_are_format_errors() {
    let labels = idx(1, &[2], 2);
    let images = idx(3, &[2, 2, 2], 8);
    Dataset::from_mnist_idx(&images, &labels).unwrap();
    let cases: Vec<(&str, Vec<u8>, Vec<u8>)> = vec![
        // The product of the dimensions overflows 64 bits.
        ("huge dims", idx(3, &[u32::MAX; 3], 8), labels.clone()),
        (
            "huge but consistent",
            idx(3, &[u32::MAX, 2, 2], 8),
            labels.clone(),
        ),
        ("truncated payload", idx(3, &[2, 2, 2], 7), labels.clone()),
        ("truncated header", images[..9].to_vec(), labels.clone()),
        ("empty", vec![], labels.clone()),
        ("wrong rank", idx(2, &[2, 4], 8), labels.clone()),
        ("labels huge", images.clone(), idx(1, &[u32::MAX], 2)),
        ("labels truncated", images.clone(), labels[..6].to_vec()),
    ];
    for (what, i, l) in cases {
        match Dataset::from_mnist_idx(&i, &l) {
            Err(Error::Format { .. }) => {}
            other => panic!("{what}: expected a format error, got {other:?}"),
        }
    }
    // Zero images of an absurd size: the total is 0, the data set is empty.
    let err = Dataset::from_mnist_idx(&idx(3, &[0, u32::MAX, u32::MAX], 0), &idx(1, &[0], 0))
        .unwrap_err();
    assert!(matches!(err, Error::InvalidData(_)), "{err}");
    let dir = std::env::temp_dir().join(format!("rnn-robust-idx-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (ip, lp) = (dir.join("images.idx"), dir.join("labels.idx"));
    std::fs::write(&ip, idx(3, &[u32::MAX; 3], 8)).unwrap();
    std::fs::write(&lp, &labels).unwrap();
    let err = Dataset::load_mnist_idx(&ip, &lp).unwrap_err();
    assert!(matches!(err, Error::Format { .. }), "{err}");
    assert!(err.to_string().contains("images.idx"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn sample_index_of_no_logits_is_an_error() {
    let mut rng = Rng::new(1);
    let err = CharCorpus::sample_index(&[], 1.0, &mut rng).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    assert_eq!(CharCorpus::sample_index(&[5.0], 1.0, &mut rng).unwrap(), 0);
    let corpus = CharCorpus::new("abcabc").unwrap();
    assert!(corpus.sequences(usize::MAX, 1, 1).is_err());
}

#[test]
fn absurd_layer_sizes_are_errors_before_allocating() {
    let ctx = Context::cpu();
    let half = usize::MAX / 2 + 1;
    let builds = [
        (
            "dense weight",
            Network::builder(&ctx).dense(half, 2, Activation::Relu),
        ),
        (
            "dense total",
            Network::builder(&ctx)
                .dense(1 << 32, 1 << 31, Activation::Relu)
                .dense(1 << 31, 1 << 32, Activation::Relu)
                .dense(1 << 32, 1 << 31, Activation::Relu),
        ),
        (
            "rnn recurrent weight",
            Network::builder(&ctx).sequence_length(2).rnn(
                1,
                1 << 33,
                Activation::Tanh,
                RnnOutput::Last,
            ),
        ),
        (
            "lstm gates",
            Network::builder(&ctx)
                .sequence_length(2)
                .lstm(1, usize::MAX / 3, RnnOutput::Last),
        ),
        (
            "gru weight",
            Network::builder(&ctx)
                .sequence_length(2)
                .gru(1 << 31, 1 << 31, RnnOutput::Last),
        ),
        (
            "input width",
            Network::builder(&ctx).sequence_length(half).rnn(
                2,
                1,
                Activation::Tanh,
                RnnOutput::Last,
            ),
        ),
        (
            "sequence output width",
            Network::builder(&ctx)
                .sequence_length(1 << 40)
                .rnn(1, 1 << 12, Activation::Tanh, RnnOutput::Sequence)
                .dense(1 << 12, 1 << 30, Activation::Identity),
        ),
    ];
    for (what, b) in builds {
        match b.build(Loss::Mse) {
            Err(Error::InvalidArgument(m)) => assert!(m.contains("overflow"), "{what}: {m}"),
            other => panic!("{what}: expected InvalidArgument, got {other:?}"),
        }
    }
}

#[test]
fn rnn_device_values_map_to_one_error() {
    use rnn::nn::parse_device_env;
    use rnn::{BackendKind, GpuManager};
    let err = parse_device_env("   ").unwrap_err();
    assert!(matches!(err, Error::InvalidEnv { .. }), "{err}");
    let direct = parse_device_env("gpu7").unwrap_err();
    assert!(matches!(direct, Error::InvalidEnv { .. }), "{direct}");
    let manager = GpuManager::with_backends(&[BackendKind::Cpu]);
    let config = TrainingConfig::default();
    let via_config = config.resolve_device(&manager, Some("gpu7")).unwrap_err();
    assert_eq!(via_config.to_string(), direct.to_string());
    // Blank means unset for the variable itself.
    let fallback = config.resolve_device(&manager, Some(" ")).unwrap();
    assert_eq!(fallback, rnn::DeviceId::Cpu);
}
