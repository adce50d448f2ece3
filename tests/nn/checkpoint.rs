//! Checkpoints round-trip through safetensors with PyTorch names; mismatches are errors.

use rnn::nn::{Loss, Network, RnnOutput};
use rnn::{Activation, Context, DType, Error};

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

/// `save_as` in bf16 and f16 writes half the bytes; loading converts back exactly, so the
/// loaded parameters are the originals rounded to that type (to nearest even, as PyTorch's
/// `.to(torch.bfloat16)` rounds).
#[test]
fn half_precision_checkpoints_round_trip_through_their_rounding() {
    let ctx = Context::cpu();
    let dir = temp_dir("ckpt-half");
    let a = model(&ctx, 1, 48);
    let p = a.parameters().unwrap();
    let f32_path = dir.join("f32.safetensors");
    a.save(&f32_path).unwrap();
    let f32_size = std::fs::metadata(&f32_path).unwrap().len();
    type Round = fn(f32) -> f32;
    let cases: [(DType, Round); 2] = [
        (DType::Bf16, |v| half::bf16::from_f32(v).to_f32()),
        (DType::F16, |v| half::f16::from_f32(v).to_f32()),
    ];
    for (dtype, round) in cases {
        let path = dir.join(format!("{dtype}.safetensors"));
        a.save_as(&path, dtype).unwrap();
        let size = std::fs::metadata(&path).unwrap().len();
        // Two bytes a value instead of four, plus the (equal-length) header.
        assert!(
            size < f32_size * 6 / 10,
            "{dtype}: {size} bytes vs {f32_size}"
        );
        let mut b = model(&ctx, 2, 48);
        b.load(&path).unwrap();
        let expected: Vec<f32> = p.iter().map(|&v| round(v)).collect();
        assert_eq!(b.parameters().unwrap(), expected, "{dtype}");
        assert_ne!(
            expected, p,
            "{dtype}: rounding changed nothing, the test proves nothing"
        );
    }
    // bf16 to f32 and back is exact: a bf16 checkpoint saved again as bf16 is the same bytes.
    let mut b = model(&ctx, 2, 48);
    b.load(dir.join("bf16.safetensors")).unwrap();
    b.save_as(dir.join("again.safetensors"), DType::Bf16)
        .unwrap();
    assert_eq!(
        std::fs::read(dir.join("bf16.safetensors")).unwrap(),
        std::fs::read(dir.join("again.safetensors")).unwrap()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// What a checkpoint cannot hold, or a file that holds the wrong kind of numbers, is a clear
/// error, and the network keeps its parameters.
#[test]
fn checkpoint_precision_errors_are_clear() {
    let ctx = Context::cpu();
    let dir = temp_dir("ckpt-precision");
    let mut a = model(&ctx, 1, 5);
    // An f16 file tops out at 65504.
    let mut p = a.parameters().unwrap();
    p[0] = 1.0e5;
    a.set_parameters(&p).unwrap();
    let err = a
        .save_as(dir.join("big.safetensors"), DType::F16)
        .unwrap_err();
    assert!(matches!(err, Error::Format { .. }), "{err}");
    assert!(err.to_string().contains("65504"), "{err}");
    assert!(!dir.join("big.safetensors").exists());
    a.save_as(dir.join("big.safetensors"), DType::Bf16).unwrap();
    let err = a
        .save_as(dir.join("u32.safetensors"), DType::U32)
        .unwrap_err();
    assert!(err.to_string().contains("u32"), "{err}");

    // A file of integer tensors with the right names and shapes.
    let tensors: Vec<(String, Vec<usize>, usize)> = a
        .param_info()
        .iter()
        .map(|t| (t.name.clone(), t.shape.clone(), t.shape.iter().product()))
        .collect();
    let bytes: Vec<Vec<u8>> = tensors.iter().map(|(_, _, n)| vec![0u8; n * 4]).collect();
    let views: Vec<(String, safetensors::tensor::TensorView<'_>)> = tensors
        .iter()
        .zip(&bytes)
        .map(|((name, shape, _), b)| {
            let view =
                safetensors::tensor::TensorView::new(safetensors::Dtype::I32, shape.clone(), b)
                    .unwrap();
            (name.clone(), view)
        })
        .collect();
    let path = dir.join("i32.safetensors");
    std::fs::write(&path, safetensors::serialize(views, None).unwrap()).unwrap();
    let before = a.parameters().unwrap();
    let err = a.load(&path).unwrap_err();
    assert!(matches!(err, Error::Format { .. }), "{err}");
    assert!(err.to_string().contains("I32"), "{err}");
    assert_eq!(
        a.parameters().unwrap(),
        before,
        "a failed load changed the parameters"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
