//! Checkpoints round-trip through safetensors with PyTorch names; mismatches are errors.

use rnn::nn::{Loss, Network, RnnOutput};
use rnn::{Activation, Context, Error};

fn model(ctx: &Context, seed: u64, hidden: usize) -> Network {
    Network::builder(ctx)
        .seed(seed)
        .sequence_length(3)
        .rnn(4, hidden, Activation::Tanh, RnnOutput::Last)
        .dense(hidden, 2, Activation::Identity)
        .build(Loss::SoftmaxCrossEntropy)
        .unwrap()
}

fn temp_dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("rnn-nn-test-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn cpu_checkpoint_round_trip() {
    let ctx = Context::cpu();
    let dir = temp_dir("ckpt");
    let path = dir.join("model.safetensors");
    let mut a = model(&ctx, 1, 5);
    a.save(&path).unwrap();
    let names: Vec<&str> = a.param_info().iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "0.weight_ih_l0",
            "0.weight_hh_l0",
            "0.bias_ih_l0",
            "0.bias_hh_l0",
            "1.weight",
            "1.bias"
        ]
    );
    let mut b = model(&ctx, 2, 5);
    assert_ne!(a.parameters().unwrap(), b.parameters().unwrap());
    b.load(&path).unwrap();
    assert_eq!(a.parameters().unwrap(), b.parameters().unwrap());
    let x: Vec<f32> = (0..12).map(|i| (i as f32 * 0.37).sin()).collect();
    assert_eq!(a.predict(&x).unwrap(), b.predict(&x).unwrap());
    // No temp file is left behind.
    let left: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
    assert_eq!(left.len(), 1);

    // Shape mismatch and missing file are errors.
    let mut c = model(&ctx, 1, 6);
    let err = c.load(&path).unwrap_err();
    assert!(matches!(err, Error::Shape { .. }), "{err}");
    assert!(err.to_string().contains("0.weight_ih_l0"), "{err}");
    let err = c.load(dir.join("absent.safetensors")).unwrap_err();
    assert!(matches!(err, Error::Io { .. }), "{err}");
    std::fs::write(dir.join("junk.safetensors"), b"not a checkpoint").unwrap();
    let err = c.load(dir.join("junk.safetensors")).unwrap_err();
    assert!(matches!(err, Error::Format { .. }), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}
