//! Writes checkpoints of sequence models for `scripts/torch_compare.py`, which loads them into
//! `torch.nn` modules with `strict=True` and compares forward outputs:
//!
//! ```text
//! cargo run --release --example torch_export -- --device cuda:0 --out /tmp/torch-cmp/cuda
//! python3 scripts/torch_compare.py /tmp/torch-cmp/cuda
//! ```
//!
//! For every model it writes `<name>.safetensors` (the checkpoint, PyTorch names),
//! `<name>.io.safetensors` (`input`: the features as the network takes them, `output`: this
//! device's forward output) and one `manifest.json` describing every model layer by layer.
//! Each model is first trained for one short epoch on the chosen device (so dropout ran in
//! training and the weights are no longer the seeded initial values), then run in evaluation.
//! It also writes the checkpoint in bf16 and f16 (`<name>.bf16.safetensors`,
//! `<name>.f16.safetensors`, `Network::save_as`) for `scripts/torch_half.py`, which loads them
//! into half-precision torch models and writes PyTorch's own half checkpoints and outputs; then
//!
//! ```text
//! cargo run --release --example torch_export -- --device cuda:0 --out DIR --check-half
//! ```
//!
//! loads PyTorch's bf16 and f16 checkpoints, predicts, and compares with PyTorch's forward in
//! that precision (within 1e-2 relative), one `PASS`/`FAIL` line each.
//!
//! The `state_*` models (torch_export/state.rs) start their recurrent layers from a given
//! `h_0`/`c_0` and carry everything `torch_compare.py` needs to check the outputs, `h_n`/`c_n`,
//! the loss and every gradient, the initial state's included.

mod common;
#[path = "torch_export/state.rs"]
mod state;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use rnn::nn::{
    Dataset, LayerDesc, Loss, Network, RecurrentCell, RecurrentOptions, Rng, RnnOutput, Targets,
    TrainingConfig,
};
use rnn::{Activation, Context, DType, DeviceId};
use serde_json::{Value, json};

const USAGE: &str = "usage: torch_export [--device ID] --out DIR [--check-half]
  --device ID    run on this device (cuda:0, opencl:0:1, hip:0, cpu); default: the CPU backend
  --out DIR      where the checkpoints, inputs/outputs and manifest.json go (created)
  --check-half   instead: load PyTorch's half checkpoints that scripts/torch_half.py wrote in DIR
                 and compare predictions with PyTorch's half-precision outputs";

/// Relative error allowed between our prediction from PyTorch's half checkpoint and PyTorch's
/// forward in that precision (ours computes in f32 from the same half weights).
const HALF_TOLERANCE: f64 = 1e-2;

struct Args {
    device: DeviceId,
    out: PathBuf,
    check_half: bool,
}

fn parse_args() -> Result<Option<Args>, String> {
    let (mut device, mut out, mut check_half) = (DeviceId::Cpu, None, false);
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--help" | "-h" => return Ok(None),
            "--device" => device = common::device(&mut it, "--device")?,
            "--out" => out = Some(PathBuf::from(common::value(&mut it, "--out")?)),
            "--check-half" => check_half = true,
            other => return Err(format!("unknown argument {other}")),
        }
    }
    let out = out.ok_or("--out DIR is required")?;
    Ok(Some(Args {
        device,
        out,
        check_half,
    }))
}

/// One model to export: how to build it, and what it reads.
struct Model {
    name: &'static str,
    steps: usize,
    /// Features per step.
    inputs: usize,
    /// Classes of the head.
    classes: usize,
    /// Token ids in `0..vocab` instead of features (`inputs` is then 1).
    vocab: Option<usize>,
    build: fn(&Context, usize) -> rnn::Result<Network>,
}

fn gru_stack(ctx: &Context, steps: usize) -> rnn::Result<Network> {
    Network::builder(ctx)
        .seed(21)
        .sequence_length(steps)
        .recurrent(
            RecurrentCell::Gru,
            6,
            16,
            RnnOutput::Sequence,
            RecurrentOptions::new().layers(3).dropout(0.2),
        )
        .dense(16, 5, Activation::Identity)
        .build(Loss::SoftmaxCrossEntropy)
}

fn gru_bi_last(ctx: &Context, steps: usize) -> rnn::Result<Network> {
    Network::builder(ctx)
        .seed(22)
        .sequence_length(steps)
        .recurrent(
            RecurrentCell::Gru,
            6,
            12,
            RnnOutput::Last,
            RecurrentOptions::new().layers(2).bidirectional(true),
        )
        .dense(24, 5, Activation::Identity)
        .build(Loss::SoftmaxCrossEntropy)
}

fn rnn_stack(ctx: &Context, steps: usize) -> rnn::Result<Network> {
    Network::builder(ctx)
        .seed(23)
        .sequence_length(steps)
        .recurrent(
            RecurrentCell::Rnn(Activation::Tanh),
            6,
            16,
            RnnOutput::Sequence,
            RecurrentOptions::new()
                .layers(3)
                .bidirectional(true)
                .dropout(0.1),
        )
        .dense(32, 5, Activation::Identity)
        .build(Loss::SoftmaxCrossEntropy)
}

fn rnn_relu_last(ctx: &Context, steps: usize) -> rnn::Result<Network> {
    Network::builder(ctx)
        .seed(24)
        .sequence_length(steps)
        .recurrent(
            RecurrentCell::Rnn(Activation::Relu),
            6,
            10,
            RnnOutput::Last,
            RecurrentOptions::new().layers(2),
        )
        .dense(10, 5, Activation::Identity)
        .build(Loss::SoftmaxCrossEntropy)
}

fn lstm_bi(ctx: &Context, steps: usize) -> rnn::Result<Network> {
    Network::builder(ctx)
        .seed(25)
        .sequence_length(steps)
        .recurrent(
            RecurrentCell::Lstm,
            6,
            16,
            RnnOutput::Last,
            RecurrentOptions::new()
                .layers(2)
                .bidirectional(true)
                .dropout(0.25),
        )
        .dense(32, 5, Activation::Identity)
        .build(Loss::SoftmaxCrossEntropy)
}

/// (a) embedding, 2-layer bidirectional LSTM (inter-layer dropout), dropout, LayerNorm,
/// dense head from `h_n` (both directions).
fn embed_bilstm(ctx: &Context, steps: usize) -> rnn::Result<Network> {
    Network::builder(ctx)
        .seed(27)
        .sequence_length(steps)
        .embedding(VOCAB, 10)
        .recurrent(
            RecurrentCell::Lstm,
            10,
            16,
            RnnOutput::Last,
            RecurrentOptions::new()
                .layers(2)
                .bidirectional(true)
                .dropout(0.3),
        )
        .dropout(0.5)
        .layer_norm(32)
        .dense(32, 5, Activation::Identity)
        .build(Loss::SoftmaxCrossEntropy)
}

/// (a) at every step: the same stack handing on every step's `[forward | reverse]` output.
fn embed_bilstm_tagger(ctx: &Context, steps: usize) -> rnn::Result<Network> {
    Network::builder(ctx)
        .seed(28)
        .sequence_length(steps)
        .embedding(VOCAB, 10)
        .recurrent(
            RecurrentCell::Lstm,
            10,
            16,
            RnnOutput::Sequence,
            RecurrentOptions::new()
                .layers(2)
                .bidirectional(true)
                .dropout(0.3),
        )
        .dropout(0.5)
        .layer_norm(32)
        .dense(32, 5, Activation::Identity)
        .build(Loss::SoftmaxCrossEntropy)
}

const VOCAB: usize = 40;

/// 2-layer bidirectional LSTM (inter-layer dropout), dropout, LayerNorm, dense head at every
/// step, over features.
fn bilstm_norm(ctx: &Context, steps: usize) -> rnn::Result<Network> {
    Network::builder(ctx)
        .seed(26)
        .sequence_length(steps)
        .recurrent(
            RecurrentCell::Lstm,
            6,
            16,
            RnnOutput::Sequence,
            RecurrentOptions::new()
                .layers(2)
                .bidirectional(true)
                .dropout(0.3),
        )
        .dropout(0.5)
        .layer_norm(32)
        .dense(32, 5, Activation::Identity)
        .build(Loss::SoftmaxCrossEntropy)
}

const MODELS: [Model; 8] = [
    Model {
        name: "embed_bilstm",
        steps: 9,
        inputs: 1,
        classes: 5,
        vocab: Some(VOCAB),
        build: embed_bilstm,
    },
    Model {
        name: "embed_bilstm_tagger",
        steps: 9,
        inputs: 1,
        classes: 5,
        vocab: Some(VOCAB),
        build: embed_bilstm_tagger,
    },
    Model {
        name: "bilstm_norm",
        steps: 9,
        inputs: 6,
        classes: 5,
        vocab: None,
        build: bilstm_norm,
    },
    Model {
        name: "gru_stack",
        steps: 9,
        inputs: 6,
        classes: 5,
        vocab: None,
        build: gru_stack,
    },
    Model {
        name: "gru_bi_last",
        steps: 9,
        inputs: 6,
        classes: 5,
        vocab: None,
        build: gru_bi_last,
    },
    Model {
        name: "rnn_stack",
        steps: 9,
        inputs: 6,
        classes: 5,
        vocab: None,
        build: rnn_stack,
    },
    Model {
        name: "rnn_relu_last",
        steps: 9,
        inputs: 6,
        classes: 5,
        vocab: None,
        build: rnn_relu_last,
    },
    Model {
        name: "lstm_bi",
        steps: 9,
        inputs: 6,
        classes: 5,
        vocab: None,
        build: lstm_bi,
    },
];

fn activation(a: Activation) -> Value {
    match a {
        Activation::Identity => json!("identity"),
        Activation::Relu => json!("relu"),
        Activation::Sigmoid => json!("sigmoid"),
        Activation::Tanh => json!("tanh"),
        Activation::Gelu => json!("gelu"),
        Activation::LeakyRelu { slope } => json!({"leaky_relu": slope}),
        other => unreachable!("the models here use no {other:?}"),
    }
}

fn output(o: RnnOutput) -> &'static str {
    match o {
        RnnOutput::Sequence => "sequence",
        RnnOutput::Last => "last",
    }
}

/// One layer as `scripts/torch_compare.py` rebuilds it.
fn describe(d: &LayerDesc) -> rnn::Result<Value> {
    let recurrent = |cell: &str, nonlinearity, inputs, hidden, o, layers, bi, p| {
        json!({"type": "recurrent", "cell": cell, "nonlinearity": nonlinearity,
               "inputs": inputs, "hidden": hidden, "output": output(o),
               "num_layers": layers, "bidirectional": bi, "dropout": p})
    };
    Ok(match *d {
        LayerDesc::Dense {
            inputs,
            outputs,
            activation: a,
        } => json!({"type": "dense", "inputs": inputs, "outputs": outputs,
                    "activation": activation(a)}),
        LayerDesc::Rnn {
            inputs,
            hidden,
            activation: a,
            output: o,
            ..
        } => recurrent("rnn", activation(a), inputs, hidden, o, 1, false, 0.0),
        LayerDesc::Lstm {
            inputs,
            hidden,
            output: o,
            ..
        } => recurrent("lstm", Value::Null, inputs, hidden, o, 1, false, 0.0),
        LayerDesc::Gru {
            inputs,
            hidden,
            output: o,
            ..
        } => recurrent("gru", Value::Null, inputs, hidden, o, 1, false, 0.0),
        LayerDesc::Embedding {
            num_embeddings,
            dim,
        } => json!({"type": "embedding", "num_embeddings": num_embeddings, "dim": dim}),
        LayerDesc::Dropout { p, .. } => json!({"type": "dropout", "p": p}),
        LayerDesc::LayerNorm { features, eps } => {
            json!({"type": "layer_norm", "features": features, "eps": eps})
        }
        LayerDesc::Recurrent {
            cell,
            inputs,
            hidden,
            output: o,
            num_layers,
            bidirectional,
            dropout,
            ..
        } => {
            let (c, nl) = match cell {
                RecurrentCell::Rnn(a) => ("rnn", activation(a)),
                RecurrentCell::Lstm => ("lstm", Value::Null),
                RecurrentCell::Gru => ("gru", Value::Null),
                other => unreachable!("the models here use no {other:?}"),
            };
            recurrent(c, nl, inputs, hidden, o, num_layers, bidirectional, dropout)
        }
        ref other => {
            return Err(rnn::Error::InvalidArgument(format!(
                "torch_export has no PyTorch layer for {other:?}"
            )));
        }
    })
}

fn save_io(path: &Path, input: (&[f32], Vec<usize>), output: (&[f32], Vec<usize>)) {
    use safetensors::{Dtype, tensor::TensorView};
    let bytes = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let (ib, ob) = (bytes(input.0), bytes(output.0));
    let views = vec![
        ("input", TensorView::new(Dtype::F32, input.1, &ib).unwrap()),
        (
            "output",
            TensorView::new(Dtype::F32, output.1, &ob).unwrap(),
        ),
    ];
    let data = safetensors::serialize(views, None).expect("serialize inputs/outputs");
    std::fs::write(path, data).expect("write inputs/outputs");
}

fn export(ctx: &Context, m: &Model, dir: &Path) -> rnn::Result<Value> {
    let mut net = (m.build)(ctx, m.steps)?;
    let mut rng = Rng::new(7);
    let n = 64;
    let x: Vec<f32> = (0..n * m.steps * m.inputs)
        .map(|_| match m.vocab {
            Some(v) => rng.below(v) as f32,
            None => rng.uniform_range(-1.5, 1.5),
        })
        .collect();
    let per_sample = net.output_steps();
    let labels = (0..n * per_sample)
        .map(|_| rng.below(m.classes) as u32)
        .collect();
    let targets = Targets::Classes {
        labels,
        classes: m.classes,
        per_sample,
    };
    let data = Dataset::new(x.clone(), m.steps * m.inputs, targets)?;
    let config = TrainingConfig {
        use_gpu: ctx.id() != DeviceId::Cpu,
        device: Some(ctx.id()),
        epochs: 1,
        batch_size: 16,
        learning_rate: 1e-2,
        seed: 3,
        ..Default::default()
    };
    net.train(&data, &config)?;
    let ckpt = format!("{}.safetensors", m.name);
    net.save(dir.join(&ckpt))?;
    for (dtype, key) in [(DType::Bf16, "bf16"), (DType::F16, "f16")] {
        net.save_as(dir.join(format!("{}.{key}.safetensors", m.name)), dtype)?;
    }
    let y = net.predict(&x)?;
    let out_shape = if per_sample > 1 {
        vec![n, per_sample, net.output_features()]
    } else {
        vec![n, net.output_features()]
    };
    let io = format!("{}.io.safetensors", m.name);
    let in_shape = match m.vocab {
        Some(_) => vec![n, m.steps],
        None => vec![n, m.steps, m.inputs],
    };
    save_io(&dir.join(&io), (&x, in_shape), (&y, out_shape));
    let layers = net
        .layers()
        .iter()
        .map(describe)
        .collect::<rnn::Result<Vec<_>>>()?;
    Ok(
        json!({"name": m.name, "checkpoint": ckpt, "io": io, "steps": m.steps,
              "input": if m.vocab.is_some() { "ids" } else { "features" },
              "layers": layers}),
    )
}

fn main() -> ExitCode {
    // Warnings (a training step that could not be recorded as a graph, say) are shown.
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    common::main(USAGE, parse_args, run)
}

/// One f32 tensor of a safetensors file.
fn read_tensor(path: &Path, name: &str) -> rnn::Result<Vec<f32>> {
    let bytes = std::fs::read(path).map_err(|e| rnn::Error::io(path, e))?;
    let fail = |reason: String| rnn::Error::Format {
        path: path.display().to_string(),
        reason,
    };
    let st = safetensors::SafeTensors::deserialize(&bytes).map_err(|e| fail(e.to_string()))?;
    let t = st.tensor(name).map_err(|e| fail(format!("{name}: {e}")))?;
    if t.dtype() != safetensors::Dtype::F32 {
        return Err(fail(format!("{name} is {:?}, expected F32", t.dtype())));
    }
    Ok(t.data()
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

/// Loads PyTorch's bf16 and f16 checkpoints of `m` (scripts/torch_half.py) and compares our
/// prediction with PyTorch's output in that precision; a line each. Whether all passed.
fn check_half(ctx: &Context, m: &Model, dir: &Path) -> rnn::Result<bool> {
    let input = read_tensor(&dir.join(format!("{}.io.safetensors", m.name)), "input")?;
    let mut all = true;
    for key in ["bf16", "f16"] {
        let mut net = (m.build)(ctx, m.steps)?;
        net.load(dir.join(format!("{}.torch-{key}.safetensors", m.name)))?;
        let want = read_tensor(
            &dir.join(format!("{}.torch-{key}.out.safetensors", m.name)),
            "output",
        )?;
        let got = net.predict(&input)?;
        let (diff, norm) = got
            .iter()
            .zip(&want)
            .fold((0.0f64, 0.0f64), |(d, n), (&g, &w)| {
                (d + (g as f64 - w as f64).powi(2), n + (w as f64).powi(2))
            });
        let err = (diff / norm.max(1e-60)).sqrt();
        let ok = got.len() == want.len() && err <= HALF_TOLERANCE;
        all &= ok;
        println!(
            "{} {} {key} torch-checkpoint device={} rel_err={err:.3e} tol={HALF_TOLERANCE:e}",
            if ok { "PASS" } else { "FAIL" },
            m.name,
            ctx.id()
        );
    }
    Ok(all)
}

/// Exports every model of [`MODELS`] and the manifest (or, with `--check-half`, checks
/// PyTorch's half checkpoints of them).
fn run(args: &Args) -> rnn::Result<()> {
    let ctx = if args.device == DeviceId::Cpu {
        Context::cpu()
    } else {
        TrainingConfig {
            use_gpu: true,
            device: Some(args.device),
            ..Default::default()
        }
        .context()?
    };
    if args.check_half {
        let mut failed = 0;
        for m in &MODELS {
            failed += usize::from(!check_half(&ctx, m, &args.out)?);
        }
        println!(
            "torch_export check-half models={} failed={failed}",
            MODELS.len()
        );
        if failed > 0 {
            return Err(rnn::Error::InvalidArgument(format!(
                "{failed} model(s) differ from PyTorch in half precision"
            )));
        }
        return Ok(());
    }
    std::fs::create_dir_all(&args.out).map_err(|e| rnn::Error::io(&args.out, e))?;
    let mut models = Vec::new();
    for m in &MODELS {
        models.push(export(&ctx, m, &args.out)?);
        println!("exported {} on {}", m.name, ctx.id());
    }
    models.extend(state::export_all(&ctx, &args.out)?);
    let manifest = json!({"device": ctx.id().to_string(), "device_name": ctx.info().name,
                          "models": models});
    let path = args.out.join("manifest.json");
    std::fs::write(&path, serde_json::to_string_pretty(&manifest).unwrap())
        .map_err(|e| rnn::Error::io(&path, e))?;
    println!(
        "torch_export models={} device={} out={}",
        models.len(),
        ctx.id(),
        args.out.display()
    );
    Ok(())
}
