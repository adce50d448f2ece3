//! One ONNX check case as `scripts/onnx_check.py` reads it, shared by tests/nn/onnx.rs and
//! examples/onnx_export.rs: in DIR, `<name>.onnx` (the export), `<name>.json` (input dtype and
//! shapes, tolerance), `<name>.input.bin` and `<name>.output.bin` (little-endian f32: the
//! input as the network takes it, ids as exact floats, and this network's forward output).
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use rnn::nn::{LayerDesc, Network, OnnxOptions};

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
