//! Writes padded-sequence cases for `scripts/torch_compare_varlen.py`, which runs the same
//! models in PyTorch through `pack_padded_sequence` and `CrossEntropyLoss(ignore_index=-100)`
//! (or `MSELoss` on `h_n`) and compares the loss and every parameter gradient:
//!
//! ```text
//! cargo run --release --example torch_export_varlen -- --device cuda:0 --out /tmp/varlen/cuda
//! python3 scripts/torch_compare_varlen.py /tmp/varlen/cuda
//! ```
//!
//! Each case is a 2-layer Elman (tanh), LSTM or GRU, one or two directions, with a linear head
//! at every step (cross-entropy, labels ignored past each length and at a few valid steps) or
//! on the last state (MSE). It writes `<name>.safetensors` (the checkpoint, PyTorch names),
//! `<name>.io.safetensors` (`input [n, steps, features]`, `lengths [n]`, `labels [n, steps]`
//! with -100 for ignored, or `targets [n, outputs]`, `loss [1]`, and `grad.<param>` for every
//! parameter) and `manifest.json`.

mod common;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use rnn::nn::{
    Dataset, Loss, Network, RecurrentCell, RecurrentOptions, Rng, RnnOutput, Targets,
    TrainingConfig,
};
use rnn::{Activation, Context, DeviceId};
use serde_json::{Value, json};

const USAGE: &str = "usage: torch_export_varlen [--device ID] --out DIR
  --device ID    run on this device (cuda:0, opencl:0:1, hip:0, cpu); default: the CPU backend
  --out DIR      where the checkpoints, inputs and gradients and manifest.json go (created)";

/// The ignored label on our side; the files hold PyTorch's default, -100.
const IGNORE: u32 = u32::MAX;
const STEPS: usize = 7;
const FEATURES: usize = 3;
const HIDDEN: usize = 6;
const OUTPUTS: usize = 4;
const LENGTHS: [usize; 5] = [7, 3, 5, 1, 6];

fn parse_args() -> Result<Option<(DeviceId, PathBuf)>, String> {
    let (mut device, mut out) = (DeviceId::Cpu, None);
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--help" | "-h" => return Ok(None),
            "--device" => device = common::device(&mut it, "--device")?,
            "--out" => out = Some(PathBuf::from(common::value(&mut it, "--out")?)),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    let out = out.ok_or("--out DIR is required")?;
    Ok(Some((device, out)))
}

fn cell_name(cell: RecurrentCell) -> &'static str {
    match cell {
        RecurrentCell::Lstm => "lstm",
        RecurrentCell::Gru => "gru",
        _ => "rnn_tanh",
    }
}

fn save_tensors(path: &Path, tensors: &[(String, Vec<usize>, Vec<f32>)]) {
    use safetensors::{Dtype, tensor::TensorView};
    let bytes: Vec<Vec<u8>> = tensors
        .iter()
        .map(|(_, _, v)| v.iter().flat_map(|x| x.to_le_bytes()).collect())
        .collect();
    let views: Vec<(String, TensorView<'_>)> = tensors
        .iter()
        .zip(&bytes)
        .map(|((name, shape, _), b)| {
            let view = TensorView::new(Dtype::F32, shape.clone(), b).expect("tensor view");
            (name.clone(), view)
        })
        .collect();
    let data = safetensors::serialize(views, None).expect("serialize");
    std::fs::write(path, data).expect("write tensors");
}

/// One case: builds it, computes the padded batch's loss and gradients, writes its files.
fn export(
    ctx: &Context,
    (cell, bidirectional, output): (RecurrentCell, bool, RnnOutput),
    dir: &Path,
    rng: &mut Rng,
) -> rnn::Result<Value> {
    let dirs = if bidirectional { 2 } else { 1 };
    let seq = output == RnnOutput::Sequence;
    let name = format!(
        "{}_{}_{}",
        cell_name(cell),
        if bidirectional { "bi" } else { "uni" },
        if seq { "seq_xent" } else { "last_mse" }
    );
    let opts = RecurrentOptions::new()
        .layers(2)
        .bidirectional(bidirectional);
    let mut net = Network::builder(ctx)
        .seed(rng.below(1 << 30) as u64)
        .sequence_length(STEPS)
        .recurrent(cell, FEATURES, HIDDEN, output, opts)
        .dense(HIDDEN * dirs, OUTPUTS, Activation::Identity)
        .build(if seq {
            Loss::SoftmaxCrossEntropy
        } else {
            Loss::Mse
        })?;
    let n = LENGTHS.len();
    let x: Vec<f32> = (0..n * STEPS * FEATURES)
        .map(|_| rng.uniform_range(-1.0, 1.0))
        .collect();
    let mut io = vec![
        ("input".to_string(), vec![n, STEPS, FEATURES], x.clone()),
        (
            "lengths".to_string(),
            vec![n],
            LENGTHS.iter().map(|&l| l as f32).collect(),
        ),
    ];
    let data = if seq {
        let labels: Vec<u32> = (0..n * STEPS)
            .map(|r| {
                let padded = r % STEPS >= LENGTHS[r / STEPS];
                if padded || rng.below(6) == 0 {
                    IGNORE
                } else {
                    rng.below(OUTPUTS) as u32
                }
            })
            .collect();
        let torch_labels = labels
            .iter()
            .map(|&l| if l == IGNORE { -100.0 } else { l as f32 })
            .collect();
        io.push(("labels".to_string(), vec![n, STEPS], torch_labels));
        let targets = Targets::Classes {
            labels,
            classes: OUTPUTS,
            per_sample: STEPS,
        };
        Dataset::new_ignoring(x, STEPS * FEATURES, targets, IGNORE)?
    } else {
        let y: Vec<f32> = (0..n * OUTPUTS)
            .map(|_| rng.uniform_range(-1.0, 1.0))
            .collect();
        io.push(("targets".to_string(), vec![n, OUTPUTS], y.clone()));
        Dataset::regression(x, STEPS * FEATURES, y, OUTPUTS)?
    };
    let data = data.with_lengths(&LENGTHS)?;
    let loss = net.compute_gradients(&data)?;
    let grads = net.gradients()?;
    io.push(("loss".to_string(), vec![1], vec![loss]));
    for p in net.param_info() {
        let len: usize = p.shape.iter().product();
        let g = grads[p.offset..p.offset + len].to_vec();
        io.push((format!("grad.{}", p.name), p.shape.clone(), g));
    }
    net.save(dir.join(format!("{name}.safetensors")))?;
    save_tensors(&dir.join(format!("{name}.io.safetensors")), &io);
    Ok(json!({
        "name": name,
        "cell": cell_name(cell),
        "bidirectional": bidirectional,
        "num_layers": 2,
        "input_size": FEATURES,
        "hidden_size": HIDDEN,
        "outputs": OUTPUTS,
        "head": if seq { "sequence_cross_entropy" } else { "last_mse" },
        "device": net.context().id().to_string(),
    }))
}

fn run((device, out): &(DeviceId, PathBuf)) -> rnn::Result<()> {
    let ctx = if *device == DeviceId::Cpu {
        Context::cpu()
    } else {
        TrainingConfig {
            use_gpu: true,
            device: Some(*device),
            ..Default::default()
        }
        .context()?
    };
    std::fs::create_dir_all(out).map_err(|e| rnn::Error::io(out, e))?;
    let mut rng = Rng::new(29);
    let mut models = Vec::new();
    for cell in [
        RecurrentCell::Rnn(Activation::Tanh),
        RecurrentCell::Lstm,
        RecurrentCell::Gru,
    ] {
        for bidirectional in [false, true] {
            for output in [RnnOutput::Sequence, RnnOutput::Last] {
                models.push(export(&ctx, (cell, bidirectional, output), out, &mut rng)?);
            }
        }
    }
    let manifest = serde_json::to_string_pretty(&json!({ "models": models }))
        .map_err(|e| rnn::Error::InvalidArgument(e.to_string()))?;
    let path = out.join("manifest.json");
    std::fs::write(&path, manifest).map_err(|e| rnn::Error::io(&path, e))?;
    println!(
        "wrote {} padded-sequence cases to {}",
        models.len(),
        out.display()
    );
    Ok(())
}

fn main() -> ExitCode {
    common::main(USAGE, parse_args, run)
}
