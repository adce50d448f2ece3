//! ONNX export: every layer kind and the three example models are exported, and
//! `scripts/onnx_check.py` checks each file with `onnx.checker` and runs it in ONNX Runtime,
//! which must reproduce this network's outputs within 1e-5 relative at more than one batch
//! size. Without python3, onnx or onnxruntime the check is a SKIP, unless
//! `RNN_REQUIRE_BACKENDS` names `onnxruntime`.

use std::path::{Path, PathBuf};
use std::process::Command;

use rnn::nn::{
    Loss, Network, NetworkBuilder, OnnxOptions, RecurrentCell, RecurrentOptions, Rng, RnnOutput,
};
use rnn::{Activation, Context, Error};

use crate::onnx_case::{self, write_case};
use crate::support::{self, Target};

/// Samples per case (the script also runs half of them and one).
const N: usize = 6;

fn case_dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rnn-onnx-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// Random parameters everywhere (layer norm starts at 1 and 0, which would hide a swapped
/// scale and bias).
fn randomize(net: &mut Network, seed: u64) {
    let mut rng = Rng::new(seed);
    let v: Vec<f32> = (0..net.num_parameters())
        .map(|_| rng.uniform_range(-0.6, 0.6))
        .collect();
    net.set_parameters(&v).unwrap();
}

/// Builds, randomizes and exports one case.
fn case(dir: &Path, name: &str, b: NetworkBuilder, opts: &OnnxOptions) {
    let mut net = b.build(Loss::Mse).unwrap_or_else(|e| panic!("{name}: {e}"));
    randomize(&mut net, name.len() as u64);
    let x = onnx_case::features(&net, N, 7);
    write_case(dir, name, &mut net, &x, opts).unwrap_or_else(|e| panic!("{name}: {e}"));
}

/// Runs `scripts/onnx_check.py` over `dir`: a mismatch fails the test; missing python3,
/// onnx or onnxruntime is a SKIP unless required.
fn check(test: &str, dir: &Path) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/onnx_check.py");
    let skip = |reason: String| {
        if support::required().iter().any(|r| r == "onnxruntime") {
            panic!("{test}: required backend missing (RNN_REQUIRE_BACKENDS): {reason}");
        }
        println!("SKIP {test}: {reason}");
    };
    match Command::new("python3").arg(&script).arg(dir).output() {
        Err(e) => skip(format!("python3 cannot run: {e}")),
        Ok(o) if o.status.code() == Some(3) => {
            skip(String::from_utf8_lossy(&o.stderr).trim().to_string())
        }
        Ok(o) => {
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            );
            assert!(o.status.success(), "{test}: onnx_check.py failed:\n{text}");
            print!("{text}");
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

fn cpu() -> NetworkBuilder {
    Network::builder(&Context::cpu()).seed(3)
}

#[test]
fn cpu_onnx_dense_every_activation() {
    let dir = case_dir("dense");
    let acts = [
        ("identity", Activation::Identity),
        ("relu", Activation::Relu),
        ("sigmoid", Activation::Sigmoid),
        ("tanh", Activation::Tanh),
        ("gelu", Activation::Gelu),
        ("leaky_default", Activation::LeakyRelu { slope: 0.01 }),
        ("leaky_0_3", Activation::LeakyRelu { slope: 0.3 }),
    ];
    for (name, act) in acts {
        let b = cpu().dense(5, 7, act).dense(7, 3, act);
        case(&dir, &format!("dense_{name}"), b, &OnnxOptions::new());
    }
    // Dense layers applied per step of a sequence: a 3-D input and output.
    let b = cpu()
        .sequence_length(4)
        .dense(3, 6, Activation::Gelu)
        .dense(6, 2, Activation::Identity);
    case(&dir, "dense_per_step", b, &OnnxOptions::new());
    check("cpu_onnx_dense_every_activation", &dir);
}

#[test]
fn cpu_onnx_embedding() {
    let dir = case_dir("embedding");
    let b = cpu()
        .sequence_length(5)
        .embedding(11, 6)
        .dense(6, 4, Activation::Tanh);
    case(&dir, "embedding_sequence", b, &OnnxOptions::new());
    let b = cpu().embedding(9, 3).dense(3, 2, Activation::Identity);
    case(&dir, "embedding_one_id", b, &OnnxOptions::new());
    let b = cpu()
        .sequence_length(4)
        .embedding(7, 5)
        .gru(5, 4, RnnOutput::Last)
        .dense(4, 3, Activation::Identity);
    case(&dir, "embedding_gru", b, &OnnxOptions::new());
    check("cpu_onnx_embedding", &dir);
}

#[test]
fn cpu_onnx_recurrent_every_cell_depth_direction_and_output() {
    let dir = case_dir("recurrent");
    let cells = [
        ("rnn_tanh", RecurrentCell::Rnn(Activation::Tanh)),
        ("rnn_relu", RecurrentCell::Rnn(Activation::Relu)),
        ("lstm", RecurrentCell::Lstm),
        ("gru", RecurrentCell::Gru),
    ];
    for (cell_name, cell) in cells {
        for layers in [1, 2] {
            for bi in [false, true] {
                for (out_name, out) in [("seq", RnnOutput::Sequence), ("last", RnnOutput::Last)] {
                    let dirs = if bi { 2 } else { 1 };
                    let opts = RecurrentOptions::new().layers(layers).bidirectional(bi);
                    let b = cpu()
                        .sequence_length(5)
                        .recurrent(cell, 3, 4, out, opts)
                        .dense(4 * dirs, 2, Activation::Identity);
                    let dir_name = if bi { "bi" } else { "uni" };
                    let name = format!("{cell_name}_l{layers}_{dir_name}_{out_name}");
                    case(&dir, &name, b, &OnnxOptions::new());
                }
            }
        }
    }
    // The plain builder methods, a recurrent layer as the output (no head), two recurrent
    // layers in a row, and a one-step sequence (squeezed to `[batch, features]`).
    let b = cpu().sequence_length(6).lstm(2, 3, RnnOutput::Sequence);
    case(&dir, "lstm_plain_output", b, &OnnxOptions::new());
    let b = cpu()
        .sequence_length(4)
        .rnn(2, 3, Activation::Relu, RnnOutput::Sequence)
        .gru(3, 5, RnnOutput::Sequence)
        .recurrent(
            RecurrentCell::Lstm,
            5,
            2,
            RnnOutput::Last,
            RecurrentOptions::new().bidirectional(true),
        );
    case(&dir, "rnn_gru_bilstm_chain", b, &OnnxOptions::new());
    let b = cpu()
        .sequence_length(1)
        .gru(3, 4, RnnOutput::Sequence)
        .dense(4, 2, Activation::Identity);
    case(&dir, "gru_one_step", b, &OnnxOptions::new());
    check(
        "cpu_onnx_recurrent_every_cell_depth_direction_and_output",
        &dir,
    );
}

#[test]
fn cpu_onnx_layer_norm_and_dropout() {
    let dir = case_dir("norm");
    let b = cpu()
        .dense(4, 6, Activation::Tanh)
        .layer_norm(6)
        .dense(6, 2, Activation::Identity);
    case(&dir, "layer_norm_dense", b, &OnnxOptions::new());
    let b = cpu()
        .sequence_length(3)
        .layer_norm_eps(4, 1e-3)
        .gru(4, 5, RnnOutput::Sequence)
        .layer_norm(5)
        .dense(5, 3, Activation::Identity);
    case(&dir, "layer_norm_sequence", b, &OnnxOptions::new());
    // Dropout is the identity in evaluation, also between stacked layers.
    let b = cpu()
        .dense(4, 8, Activation::Relu)
        .dropout(0.5)
        .dense(8, 2, Activation::Identity);
    case(&dir, "dropout_dense", b, &OnnxOptions::new());
    let b = cpu()
        .sequence_length(4)
        .recurrent(
            RecurrentCell::Gru,
            3,
            4,
            RnnOutput::Sequence,
            RecurrentOptions::new().layers(2).dropout(0.4),
        )
        .dropout(0.3)
        .dense(4, 2, Activation::Identity);
    case(&dir, "dropout_stack", b, &OnnxOptions::new());
    check("cpu_onnx_layer_norm_and_dropout", &dir);
}

#[test]
fn cpu_onnx_softmax_head_and_opsets() {
    let dir = case_dir("softmax");
    let mlp = || {
        cpu()
            .dense(5, 8, Activation::Relu)
            .dense(8, 4, Activation::Identity)
    };
    case(&dir, "softmax_on", mlp(), &OnnxOptions::new().softmax(true));
    case(
        &dir,
        "softmax_off",
        mlp(),
        &OnnxOptions::new().softmax(false),
    );
    let seq = cpu()
        .sequence_length(4)
        .lstm(3, 5, RnnOutput::Sequence)
        .dense(5, 3, Activation::Identity);
    case(
        &dir,
        "softmax_per_step",
        seq,
        &OnnxOptions::new().softmax(true),
    );
    for opset in [18, 21, 23] {
        let b = cpu()
            .sequence_length(3)
            .gru(2, 3, RnnOutput::Last)
            .layer_norm(3)
            .dense(3, 2, Activation::Gelu);
        case(
            &dir,
            &format!("opset_{opset}"),
            b,
            &OnnxOptions::new().opset(opset),
        );
    }
    check("cpu_onnx_softmax_head_and_opsets", &dir);
}

#[test]
fn cpu_onnx_unsupported_opset_is_an_error() {
    let net = cpu()
        .dense(2, 2, Activation::Identity)
        .build(Loss::Mse)
        .unwrap();
    for opset in [16, 24] {
        let e = net
            .to_onnx_bytes(&OnnxOptions::new().opset(opset))
            .unwrap_err();
        assert!(
            matches!(&e, Error::InvalidArgument(m) if m.contains("opset")),
            "{e}"
        );
    }
    let e = net
        .export_onnx(Path::new("/nonexistent-dir/x/model.onnx"))
        .unwrap_err();
    assert!(matches!(e, Error::Io { .. }), "{e}");
}

/// The three example models trained one short epoch on `ctx`, then exported into `dir`.
fn example_models(ctx: &Context, dir: &Path) {
    for (name, b) in onnx_case::example_models(ctx) {
        let mut net = b.build(Loss::SoftmaxCrossEntropy).unwrap();
        onnx_case::train_briefly(&mut net, 1).unwrap_or_else(|e| panic!("{name}: {e}"));
        let x = onnx_case::features(&net, N, 11);
        let name = format!("{name}_{}", ctx.id().to_string().replace(':', "_"));
        write_case(dir, &name, &mut net, &x, &OnnxOptions::new())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

#[test]
fn cpu_onnx_example_models() {
    let dir = case_dir("examples-cpu");
    example_models(&Context::cpu(), &dir);
    check("cpu_onnx_example_models", &dir);
}

/// The same export from a model trained on CUDA: its parameters are read back from the
/// device, and ONNX Runtime on the CPU reproduces the GPU's outputs.
#[test]
fn cuda_onnx_example_models() {
    let test = "cuda_onnx_example_models";
    for ctx in support::contexts(Target::Cuda, test) {
        let dir = case_dir(&format!(
            "examples-{}",
            ctx.id().to_string().replace(':', "_")
        ));
        example_models(&ctx, &dir);
        check(test, &dir);
    }
}
