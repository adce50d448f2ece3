//! The recurrent-state models of `torch_export`: recurrent layers started from a given
//! `h_0`/`c_0` (1 and 2 layers, one and two directions, RNN, LSTM and GRU) under a dense head
//! with cross-entropy at every step. For each it writes the checkpoint and
//! `<name>.state.safetensors` with the inputs (`input`, `labels`, `h0`, `c0`, and `r_h`, `r_c`:
//! the weights of an extra loss term `sum(r_h h_n) + sum(r_c c_n)`) and what this device
//! computed: `output`, `h_n`, `c_n` (`Network::forward_with_state`), `loss` (the mean
//! cross-entropy), `grad.<parameter>` and `dh0`, `dc0` (the gradients of the whole loss,
//! `Network::compute_gradients_with_state`). `scripts/torch_compare.py` recomputes all of it
//! with `torch.nn` in float64.

use std::path::Path;

use rnn::nn::{
    Dataset, LayerState, Loss, Network, RecurrentCell, RecurrentOptions, RecurrentState, Rng,
    RnnOutput, Targets,
};
use rnn::{Activation, Context};
use serde_json::{Value, json};

const SAMPLES: usize = 8;
const STEPS: usize = 7;
const INPUTS: usize = 5;
const HIDDEN: usize = 12;
const CLASSES: usize = 4;

/// One state model: its name, cell, layers and directions.
struct StateModel {
    name: &'static str,
    cell: RecurrentCell,
    layers: usize,
    bidirectional: bool,
}

const MODELS: [StateModel; 8] = [
    StateModel {
        name: "state_lstm",
        cell: RecurrentCell::Lstm,
        layers: 1,
        bidirectional: false,
    },
    StateModel {
        name: "state_lstm_2_bi",
        cell: RecurrentCell::Lstm,
        layers: 2,
        bidirectional: true,
    },
    StateModel {
        name: "state_lstm_2",
        cell: RecurrentCell::Lstm,
        layers: 2,
        bidirectional: false,
    },
    StateModel {
        name: "state_gru_bi",
        cell: RecurrentCell::Gru,
        layers: 1,
        bidirectional: true,
    },
    StateModel {
        name: "state_gru_2_bi",
        cell: RecurrentCell::Gru,
        layers: 2,
        bidirectional: true,
    },
    StateModel {
        name: "state_rnn",
        cell: RecurrentCell::Rnn(Activation::Tanh),
        layers: 1,
        bidirectional: false,
    },
    StateModel {
        name: "state_rnn_2_bi",
        cell: RecurrentCell::Rnn(Activation::Tanh),
        layers: 2,
        bidirectional: true,
    },
    StateModel {
        name: "state_gru_2",
        cell: RecurrentCell::Gru,
        layers: 2,
        bidirectional: false,
    },
];

fn build(ctx: &Context, m: &StateModel) -> rnn::Result<Network> {
    let opts = RecurrentOptions::new()
        .layers(m.layers)
        .bidirectional(m.bidirectional);
    Network::builder(ctx)
        .seed(41)
        .sequence_length(STEPS)
        .recurrent(m.cell, INPUTS, HIDDEN, RnnOutput::Sequence, opts)
        .dense(HIDDEN * opts.directions(), CLASSES, Activation::Identity)
        .build(Loss::SoftmaxCrossEntropy)
}

fn values(rng: &mut Rng, n: usize) -> Vec<f32> {
    (0..n).map(|_| rng.uniform_range(-1.0, 1.0)).collect()
}

/// A random state shaped as the network's only recurrent layer's.
fn random_state(rng: &mut Rng, net: &Network) -> RecurrentState {
    let mut s = net.zero_state(SAMPLES);
    for l in &mut s.layers {
        l.h = values(rng, l.h.len());
        l.c = l.c.as_ref().map(|c| values(rng, c.len()));
    }
    s
}

/// `name -> (values, shape)` written as one safetensors file of f32 tensors.
fn save(path: &Path, tensors: Vec<(String, Vec<f32>, Vec<usize>)>) -> rnn::Result<()> {
    use safetensors::{Dtype, tensor::TensorView};
    let bytes: Vec<Vec<u8>> = tensors
        .iter()
        .map(|(_, v, _)| v.iter().flat_map(|x| x.to_le_bytes()).collect())
        .collect();
    let views = tensors
        .iter()
        .zip(&bytes)
        .map(|((name, _, shape), b)| {
            let view = TensorView::new(Dtype::F32, shape.clone(), b).expect("shape matches data");
            (name.clone(), view)
        })
        .collect::<Vec<_>>();
    let data = safetensors::serialize(views, None).expect("serialize the state tensors");
    std::fs::write(path, data).map_err(|e| rnn::Error::io(path, e))
}

fn layer(s: &RecurrentState) -> &LayerState {
    &s.layers[0]
}

fn export(ctx: &Context, m: &StateModel, dir: &Path) -> rnn::Result<Value> {
    let mut net = build(ctx, m)?;
    let mut rng = Rng::new(17);
    let x = values(&mut rng, SAMPLES * STEPS * INPUTS);
    let labels: Vec<u32> = (0..SAMPLES * STEPS)
        .map(|_| rng.below(CLASSES) as u32)
        .collect();
    let targets = Targets::Classes {
        labels: labels.clone(),
        classes: CLASSES,
        per_sample: STEPS,
    };
    let data = Dataset::new(x.clone(), STEPS * INPUTS, targets)?;
    let (h0, r) = (random_state(&mut rng, &net), random_state(&mut rng, &net));
    let input = ctx.tensor(&[SAMPLES, STEPS * INPUTS], &x)?;
    let (y, end) = net.forward_with_state(&input, &h0)?;
    let (loss, d0) = net.compute_gradients_with_state(&data, &h0, Some(&r))?;
    let grads = net.gradients()?;
    let (l0, l_end, lr, ld) = (layer(&h0), layer(&end), layer(&r), layer(&d0));
    let state_shape = vec![l0.cells, SAMPLES, HIDDEN];
    let mut tensors = vec![
        ("input".into(), x, vec![SAMPLES, STEPS, INPUTS]),
        (
            "labels".into(),
            labels.iter().map(|&l| l as f32).collect(),
            vec![SAMPLES, STEPS],
        ),
        ("output".into(), y.to_vec()?, vec![SAMPLES, STEPS, CLASSES]),
        ("loss".into(), vec![loss], vec![1]),
    ];
    let mut pair = |name: &str, s: &LayerState| {
        tensors.push((format!("{name}h"), s.h.clone(), state_shape.clone()));
        if let Some(c) = &s.c {
            tensors.push((format!("{name}c"), c.clone(), state_shape.clone()));
        }
    };
    pair("state0.", l0);
    pair("state_n.", l_end);
    pair("r.", lr);
    pair("d0.", ld);
    for t in net.param_info() {
        let g = grads[t.offset..t.offset + t.len()].to_vec();
        tensors.push((format!("grad.{}", t.name), g, t.shape.clone()));
    }
    let io = format!("{}.state.safetensors", m.name);
    save(&dir.join(&io), tensors)?;
    let ckpt = format!("{}.safetensors", m.name);
    net.save(dir.join(&ckpt))?;
    let layers = net
        .layers()
        .iter()
        .map(crate::describe)
        .collect::<rnn::Result<Vec<_>>>()?;
    Ok(
        json!({"name": m.name, "kind": "state", "checkpoint": ckpt, "io": io,
              "steps": STEPS, "input": "features", "layers": layers}),
    )
}

/// Exports every state model into `dir`; their manifest entries.
pub fn export_all(ctx: &Context, dir: &Path) -> rnn::Result<Vec<Value>> {
    let mut out = Vec::new();
    for m in &MODELS {
        out.push(export(ctx, m, dir)?);
        println!("exported {} on {}", m.name, ctx.id());
    }
    Ok(out)
}
