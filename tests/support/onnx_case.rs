//! One ONNX check case as `scripts/onnx_check.py` reads it, shared by tests/nn/onnx.rs and
//! examples/onnx_export.rs: in DIR, `<name>.onnx` (the export), `<name>.json` (input dtype and
//! shapes, tolerance), `<name>.input.bin` and `<name>.output.bin` (little-endian f32: the
//! input as the network takes it, ids as exact floats, and this network's forward output).
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use rnn::nn::{
    Dataset, LayerDesc, Network, NetworkBuilder, OnnxOptions, Progress, RecurrentCell,
    RecurrentOptions, Rng, RnnOutput, Targets, TrainingConfig,
};
use rnn::{Activation, Context, DeviceId};

/// The ONNX graph input's shape for `n` samples: `[n, steps]` ids, `[n, steps, features]`,
/// or `[n, features]` (see `rnn::nn::Network::export_onnx`).
pub fn input_shape(net: &Network, n: usize) -> (Vec<usize>, &'static str) {
    let layers = net.layers();
    let w = net.input_width();
    let recurrent = layers.iter().any(|l| {
        matches!(
            l,
            LayerDesc::Rnn { .. }
                | LayerDesc::Lstm { .. }
                | LayerDesc::Gru { .. }
                | LayerDesc::Recurrent { .. }
        )
    });
    let first_in = match &layers[0] {
        LayerDesc::Embedding { .. } => return (vec![n, w], "int64"),
        LayerDesc::Dense { inputs, .. }
        | LayerDesc::Rnn { inputs, .. }
        | LayerDesc::Lstm { inputs, .. }
        | LayerDesc::Gru { inputs, .. }
        | LayerDesc::Recurrent { inputs, .. } => *inputs,
        LayerDesc::LayerNorm { features, .. } | LayerDesc::Dropout { features, .. } => *features,
        other => panic!("no ONNX input shape for {other:?}"),
    };
    let steps = w / first_in;
    if steps > 1 || recurrent {
        (vec![n, steps, first_in], "float32")
    } else {
        (vec![n, w], "float32")
    }
}

fn write_f32(path: &Path, values: &[f32]) {
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(path, bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

/// Softmax over each row of `width` values (the reference for the softmax head).
pub fn softmax_rows(values: &mut [f32], width: usize) {
    for row in values.chunks_mut(width) {
        let m = row.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
        let mut s = 0.0f64;
        for v in row.iter_mut() {
            *v = (*v - m).exp();
            s += *v as f64;
        }
        for v in row.iter_mut() {
            *v = (*v as f64 / s) as f32;
        }
    }
}

/// Exports `net` with `opts` into `dir` as case `name`, with `features` (`[n,
/// input_width]`) and the network's own prediction for them as the reference.
pub fn write_case(
    dir: &Path,
    name: &str,
    net: &mut Network,
    features: &[f32],
    opts: &OnnxOptions,
) -> rnn::Result<PathBuf> {
    std::fs::create_dir_all(dir).map_err(|e| rnn::Error::io(dir, e))?;
    let n = features.len() / net.input_width();
    let mut out = net.predict(features)?;
    if opts.softmax {
        softmax_rows(&mut out, net.output_features());
    }
    let model = dir.join(format!("{name}.onnx"));
    net.export_onnx_with(&model, opts)?;
    write_f32(&dir.join(format!("{name}.input.bin")), features);
    write_f32(&dir.join(format!("{name}.output.bin")), &out);
    let (in_shape, dtype) = input_shape(net, n);
    let out_shape = if net.output_steps() > 1 {
        vec![n, net.output_steps(), net.output_features()]
    } else {
        vec![n, net.output_features()]
    };
    let meta = serde_json::json!({
        "device": net.context().id().to_string(),
        "input_dtype": dtype,
        "input_shape": in_shape,
        "output_shape": out_shape,
        "softmax": opts.softmax,
        "opset": opts.opset,
    });
    let json = dir.join(format!("{name}.json"));
    std::fs::write(&json, meta.to_string()).map_err(|e| rnn::Error::io(&json, e))?;
    Ok(model)
}

/// `n` random samples for `net`: token ids for an embedding first, else values in [-1, 1].
pub fn features(net: &Network, n: usize, seed: u64) -> Vec<f32> {
    let mut rng = Rng::new(seed);
    let len = n * net.input_width();
    match net.layers()[0] {
        LayerDesc::Embedding { num_embeddings, .. } => {
            (0..len).map(|_| rng.below(num_embeddings) as f32).collect()
        }
        _ => (0..len).map(|_| rng.uniform_range(-1.0, 1.0)).collect(),
    }
}

/// The models of the examples (vocabulary 30 for the character models):
/// `real_gpu_neural_network`'s MNIST MLP and Elman character model, and `char_lstm`'s
/// embedding, 2-layer LSTM with dropout between and after, and linear head.
pub fn example_models(ctx: &Context) -> Vec<(&'static str, NetworkBuilder)> {
    let v = 30;
    vec![
        (
            "example_mlp",
            Network::builder(ctx)
                .seed(1)
                .dense(784, 256, Activation::Relu)
                .dense(256, 128, Activation::Relu)
                .dense(128, 10, Activation::Identity),
        ),
        (
            "example_elman",
            Network::builder(ctx)
                .seed(2)
                .sequence_length(32)
                .rnn(v, 128, Activation::Tanh, RnnOutput::Sequence)
                .dense(128, v, Activation::Identity),
        ),
        (
            "example_char_lstm",
            Network::builder(ctx)
                .seed(2)
                .sequence_length(48)
                .embedding(v, 32)
                .recurrent(
                    RecurrentCell::Lstm,
                    32,
                    128,
                    RnnOutput::Sequence,
                    RecurrentOptions::new().layers(2).dropout(0.2),
                )
                .dropout(0.2)
                .dense(128, v, Activation::Identity),
        ),
    ]
}

/// Trains `net` (a classifier) for `epochs` on 16 random samples on its own device, so the
/// exported weights are trained ones and dropout ran in training.
pub fn train_briefly(net: &mut Network, epochs: usize) -> rnn::Result<()> {
    let classes = net.output_features();
    let per_sample = net.output_steps();
    let n = 16;
    let x = features(net, n, 5);
    let mut rng = Rng::new(9);
    let labels = (0..n * per_sample)
        .map(|_| rng.below(classes) as u32)
        .collect();
    let targets = Targets::Classes {
        labels,
        classes,
        per_sample,
    };
    let data = Dataset::new(x, net.input_width(), targets)?;
    let id = net.context().id();
    let config = TrainingConfig {
        device: Some(id),
        use_gpu: id != DeviceId::Cpu,
        epochs,
        batch_size: 8,
        progress: Progress::Off,
        ..Default::default()
    };
    net.train(&data, &config)?;
    Ok(())
}
