//! Trains the example models briefly on a device, exports them as ONNX, and writes each
//! model's input and device output next to it for `scripts/onnx_check.py`, which checks every
//! file with `onnx.checker` and runs it in ONNX Runtime against those outputs:
//!
//! ```text
//! cargo run --release --example onnx_export -- --device cuda:0 --out /tmp/onnx-cmp/cuda
//! python3 scripts/onnx_check.py /tmp/onnx-cmp/cuda
//! ```
//!
//! The models are those of `real_gpu_neural_network` (the MNIST MLP, the Elman character
//! model) and `char_lstm` (embedding, 2-layer LSTM with dropout, head), plus a bidirectional
//! 2-layer GRU with layer norm classifying from `h_n`, on random data.

mod common;

#[path = "../tests/support/onnx_case.rs"]
mod onnx_case;

use std::path::PathBuf;
use std::process::ExitCode;

use rnn::nn::{Loss, Network, OnnxOptions, RecurrentCell, RecurrentOptions, RnnOutput};
use rnn::{Activation, Context, DeviceId, GpuManager};

const USAGE: &str = "usage: onnx_export [--device ID] [--epochs N] [--softmax] --out DIR
  --device ID   train and run on this device (cuda:0, opencl:0:1, hip:0, cpu); default: cpu
  --epochs N    training epochs before the export (default 1)
  --softmax     export with a softmax head (the reference gets the softmax too)
  --out DIR     where <model>.onnx, .json, .input.bin and .output.bin go (created)";

struct Args {
    device: DeviceId,
    epochs: usize,
    softmax: bool,
    out: PathBuf,
}

fn parse_args() -> Result<Option<Args>, String> {
    let (mut device, mut epochs, mut softmax, mut out) = (DeviceId::Cpu, 1, false, None);
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--help" | "-h" => return Ok(None),
            "--device" => device = common::device(&mut it, "--device")?,
            "--epochs" => {
                epochs = common::value(&mut it, "--epochs")?
                    .parse()
                    .map_err(|e| format!("--epochs: {e}"))?
            }
            "--softmax" => softmax = true,
            "--out" => out = Some(PathBuf::from(common::value(&mut it, "--out")?)),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    let out = out.ok_or("--out DIR is required")?;
    Ok(Some(Args {
        device,
        epochs,
        softmax,
        out,
    }))
}

fn run(args: &Args) -> rnn::Result<()> {
    let ctx = match args.device {
        DeviceId::Cpu => Context::cpu(),
        id => GpuManager::new()?.create_context(id)?,
    };
    let mut models = onnx_case::example_models(&ctx);
    models.push((
        "bigru_layer_norm",
        Network::builder(&ctx)
            .seed(4)
            .sequence_length(20)
            .recurrent(
                RecurrentCell::Gru,
                12,
                64,
                RnnOutput::Last,
                RecurrentOptions::new().layers(2).bidirectional(true),
            )
            .layer_norm(128)
            .dense(128, 5, Activation::Gelu),
    ));
    let opts = OnnxOptions::new().softmax(args.softmax);
    for (name, builder) in models {
        let mut net = builder.build(Loss::SoftmaxCrossEntropy)?;
        onnx_case::train_briefly(&mut net, args.epochs)?;
        let x = onnx_case::features(&net, 8, 11);
        let model = onnx_case::write_case(&args.out, name, &mut net, &x, &opts)?;
        println!(
            "{} ({} parameters, trained on {})",
            model.display(),
            net.num_parameters(),
            ctx.id()
        );
    }
    println!(
        "check with: python3 scripts/onnx_check.py {}",
        args.out.display()
    );
    Ok(())
}

fn main() -> ExitCode {
    common::main(USAGE, parse_args, run)
}
