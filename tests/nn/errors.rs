//! Bad input gives a clear `Error`, never a panic.

use rnn::nn::{Dataset, Loss, Network, RnnOutput, Targets, TrainingConfig, parse_device_env};
use rnn::{Activation, BackendKind, Context, DeviceId, Error, GpuManager};

fn net(ctx: &Context) -> Network {
    Network::builder(ctx)
        .dense(4, 3, Activation::Relu)
        .dense(3, 2, Activation::Identity)
        .build(Loss::SoftmaxCrossEntropy)
        .unwrap()
}

fn cpu_config() -> TrainingConfig {
    TrainingConfig {
        use_gpu: false,
        epochs: 1,
        batch_size: 2,
        ..Default::default()
    }
}

fn data(width: usize, labels: Vec<u32>) -> Dataset {
    Dataset::classification(vec![0.5; width * labels.len()], width, labels, 2).unwrap()
}

#[test]
fn cpu_wrong_input_width() {
    let ctx = Context::cpu();
    let err = net(&ctx)
        .train(&data(5, vec![0, 1]), &cpu_config())
        .unwrap_err();
    assert!(matches!(err, Error::InvalidData(_)), "{err}");
    assert!(
        err.to_string().contains("5 values") && err.to_string().contains("takes 4"),
        "{err}"
    );
    let err = net(&ctx).predict(&[0.0; 5]).unwrap_err();
    assert!(matches!(err, Error::InvalidData(_)), "{err}");
}

#[test]
fn cpu_label_out_of_range_names_the_row() {
    let err = Dataset::classification(vec![0.0; 12], 4, vec![0, 1, 7], 2).unwrap_err();
    assert!(matches!(err, Error::InvalidData(_)), "{err}");
    assert!(
        err.to_string().contains("row 2") && err.to_string().contains("label 7"),
        "{err}"
    );
    // More classes in the data than the network outputs.
    let ctx = Context::cpu();
    let d = Dataset::classification(vec![0.0; 8], 4, vec![0, 2], 3).unwrap();
    assert!(matches!(net(&ctx).evaluate(&d), Err(Error::InvalidData(_))));
}

#[test]
fn cpu_empty_and_non_finite_data() {
    let err = Dataset::classification(vec![], 4, vec![], 2).unwrap_err();
    assert!(err.to_string().contains("empty"), "{err}");
    let mut x = vec![0.0; 12];
    x[9] = f32::NAN;
    let err = Dataset::classification(x, 4, vec![0, 1, 0], 2).unwrap_err();
    assert!(
        err.to_string().contains("row 2") && err.to_string().contains("NaN"),
        "{err}"
    );
    let err = Dataset::regression(vec![0.0; 4], 2, vec![1.0, f32::INFINITY], 1).unwrap_err();
    assert!(err.to_string().contains("row 1"), "{err}");
    let err = Dataset::classification(vec![0.0; 8], 4, vec![0], 2).unwrap_err();
    assert!(matches!(err, Error::InvalidData(_)), "{err}");
    let err = Dataset::from_mnist_csv(b"1,2,3\n").unwrap_err();
    assert!(err.to_string().contains("line 1"), "{err}");
}

#[test]
fn cpu_bad_training_config() {
    let ctx = Context::cpu();
    let d = data(4, vec![0, 1]);
    let cases: Vec<(TrainingConfig, &str)> = vec![
        (
            TrainingConfig {
                batch_size: 0,
                ..cpu_config()
            },
            "batch_size",
        ),
        (
            TrainingConfig {
                epochs: 0,
                ..cpu_config()
            },
            "epochs",
        ),
        (
            TrainingConfig {
                learning_rate: 0.0,
                ..cpu_config()
            },
            "learning_rate",
        ),
        (
            TrainingConfig {
                learning_rate: f32::NAN,
                ..cpu_config()
            },
            "learning_rate",
        ),
        (
            TrainingConfig {
                validation_split: 1.0,
                ..cpu_config()
            },
            "validation_split",
        ),
        (
            TrainingConfig {
                validation_split: -0.1,
                ..cpu_config()
            },
            "validation_split",
        ),
        (
            TrainingConfig {
                clip_grad_norm: Some(0.0),
                ..cpu_config()
            },
            "clip_grad_norm",
        ),
    ];
    for (config, word) in cases {
        let err = net(&ctx).train(&d, &config).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
        assert!(err.to_string().contains(word), "{err}");
    }
}

#[test]
fn cpu_bad_architecture() {
    let ctx = Context::cpu();
    let err = Network::builder(&ctx)
        .dense(4, 3, Activation::Relu)
        .dense(5, 2, Activation::Identity)
        .build(Loss::Mse)
        .unwrap_err();
    assert!(err.to_string().contains("layer 1 takes 5"), "{err}");
    let err = Network::builder(&ctx)
        .rnn(4, 3, Activation::Tanh, RnnOutput::Sequence)
        .build(Loss::Mse)
        .unwrap_err();
    assert!(err.to_string().contains("sequence_length"), "{err}");
    let err = Network::builder(&ctx)
        .sequence_length(3)
        .rnn(4, 3, Activation::Sigmoid, RnnOutput::Sequence)
        .build(Loss::Mse)
        .unwrap_err();
    assert!(err.to_string().contains("Tanh or Relu"), "{err}");
    assert!(Network::builder(&ctx).build(Loss::Mse).is_err());
    // Class labels given to an MSE model.
    let mut mse = Network::builder(&ctx)
        .dense(4, 1, Activation::Identity)
        .build(Loss::Mse)
        .unwrap();
    assert!(matches!(
        mse.evaluate(&data(4, vec![0, 1])),
        Err(Error::InvalidData(_))
    ));
    // Per-step labels given to a model with one output per sample.
    let t = Targets::Classes {
        labels: vec![0, 1, 0, 1],
        classes: 2,
        per_sample: 2,
    };
    let d = Dataset::new(vec![0.0; 8], 4, t).unwrap();
    assert!(matches!(net(&ctx).evaluate(&d), Err(Error::InvalidData(_))));
}

#[test]
fn cpu_unknown_rnn_device() {
    let err = parse_device_env("gpu7").unwrap_err();
    assert!(matches!(err, Error::InvalidEnv { .. }), "{err}");
    assert!(err.to_string().contains("RNN_DEVICE"), "{err}");
    assert_eq!(parse_device_env("cuda:1").unwrap(), DeviceId::Cuda(1));

    let manager = GpuManager::with_backends(&[BackendKind::Cpu]);
    let config = TrainingConfig::default();
    // A well-formed id for a device that does not exist lists the valid ids.
    let err = config.resolve_device(&manager, Some("cuda:3")).unwrap_err();
    assert!(matches!(err, Error::UnknownDevice { .. }), "{err}");
    assert!(err.to_string().contains("cpu"), "{err}");
    assert!(config.resolve_device(&manager, Some("nonsense")).is_err());
    // No GPU: prefer_gpu falls back to the CPU, prefer_gpu false is an error.
    assert_eq!(
        config.resolve_device(&manager, None).unwrap(),
        DeviceId::Cpu
    );
    let strict = TrainingConfig {
        prefer_gpu: false,
        ..Default::default()
    };
    let err = strict.resolve_device(&manager, None).unwrap_err();
    assert!(err.to_string().contains("no GPU"), "{err}");
    let off = TrainingConfig {
        use_gpu: false,
        ..Default::default()
    };
    assert_eq!(
        off.resolve_device(&manager, Some("cuda:3")).unwrap(),
        DeviceId::Cpu
    );
}
