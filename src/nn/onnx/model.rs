//! The network as one ONNX graph: its input and output, the walk over its layers, the model
//! around the graph, and the atomic write.

use std::path::Path;

use prost::Message;

use crate::error::{Error, Result};

use super::super::layer::Layer;
use super::super::network::Network;
use super::super::stack::RecurrentCell;
use super::OnnxOptions;
use super::graph::{Attr, Dim, Graph, value_info};
use super::layers::{Emit, Layout, Params, RecurrentSpec};
use super::proto::{GraphProto, ModelProto, OperatorSetIdProto, tensor_proto::DataType};

/// Marker in the names of temp files an export is written through.
const TEMP_MARKER: &str = ".onnx-tmp-";

/// The graph input's and output's names.
pub(crate) const INPUT: &str = "input";
pub(crate) const OUTPUT: &str = "output";

/// The name of the dynamic batch dimension.
const BATCH: &str = "batch";

/// Opsets the exporter writes: 17 brings LayerNormalization; every op it uses is unchanged in
/// meaning up to 23 (the newest ONNX Runtime 1.23 runs).
pub(crate) const OPSETS: std::ops::RangeInclusive<i64> = 17..=23;

/// The IR version that goes with an opset (ONNX's versioning table).
fn ir_version(opset: i64) -> i64 {
    match opset {
        ..=18 => 8,
        19 | 20 => 9,
        21 | 22 => 10,
        _ => 11,
    }
}

/// Encodes `net` as an ONNX model.
pub(crate) fn to_bytes(net: &Network, opts: &OnnxOptions) -> Result<Vec<u8>> {
    if !OPSETS.contains(&opts.opset) {
        return Err(Error::InvalidArgument(format!(
            "ONNX export: opset {} is not supported (the exporter writes opsets {} to {}; \
             LayerNormalization needs 17)",
            opts.opset,
            OPSETS.start(),
            OPSETS.end()
        )));
    }
    let values = net.parameters()?;
    let mut e = Emit {
        g: Graph::default(),
        p: Params {
            info: net.param_info(),
            values: &values,
        },
    };
    let steps = net.in_steps;
    let ids = matches!(net.layers[0], Layer::Embedding(_));
    let seq = steps > 1 || net.layers.iter().any(|l| recurrent_spec(l).is_some());
    let (input, mut layout) = if ids {
        let dims = [Dim::Named(BATCH), Dim::Fixed(steps)];
        (
            value_info(INPUT, DataType::Int64, &dims),
            Layout::BatchMajor,
        )
    } else if seq {
        let f = net.layers[0].inputs();
        let dims = [Dim::Named(BATCH), Dim::Fixed(steps), Dim::Fixed(f)];
        (
            value_info(INPUT, DataType::Float, &dims),
            Layout::BatchMajor,
        )
    } else {
        let dims = [Dim::Named(BATCH), Dim::Fixed(net.input_width())];
        (value_info(INPUT, DataType::Float, &dims), Layout::Rows)
    };
    let mut x = INPUT.to_string();
    for (i, layer) in net.layers.iter().enumerate() {
        x = match layer {
            Layer::Dense(d) => e.dense(i, d.inputs, d.outputs, d.act, &x)?,
            Layer::Dropout(_) => x,
            Layer::LayerNorm(n) => e.layer_norm(i, n.features, n.eps, &x)?,
            Layer::Embedding(m) => e.embedding(i, m.num, m.dim, &x)?,
            Layer::Rnn(_) | Layer::Lstm(_) | Layer::Gru(_) | Layer::Stack(_) => {
                if layout == Layout::BatchMajor {
                    x = transpose_steps(&mut e.g, i, &x);
                }
                let spec = recurrent_spec(layer).ok_or_else(|| {
                    Error::InvalidArgument(format!("ONNX export: layer {i} is not recurrent"))
                })?;
                let (y, l) = e.recurrent(i, &spec, &x)?;
                layout = l;
                y
            }
        };
    }
    let stem = "output";
    if layout == Layout::TimeMajor {
        x = transpose_steps(&mut e.g, stem, &x);
        layout = Layout::BatchMajor;
    }
    let out_steps = net.output_steps();
    if layout == Layout::BatchMajor && out_steps == 1 {
        // One step (a one-step sequence, or ids of a non-sequence embedding model): the
        // network outputs `[n, features]`, as `Network::forward` does.
        let axes = e.g.int64s(stem, &[1]);
        x = e.g.node(stem, "Squeeze", &[&x, &axes], vec![]);
    }
    if opts.softmax {
        x =
            e.g.node(stem, "Softmax", &[&x], vec![("axis", Attr::Int(-1))]);
    }
    e.g.output(stem, &x, OUTPUT);
    let o = net.output_features();
    let out_dims: Vec<Dim> = if out_steps > 1 {
        vec![Dim::Named(BATCH), Dim::Fixed(out_steps), Dim::Fixed(o)]
    } else {
        vec![Dim::Named(BATCH), Dim::Fixed(o)]
    };
    let graph = GraphProto {
        node: e.g.nodes,
        name: Some("rnn".into()),
        initializer: e.g.initializers,
        input: vec![input],
        output: vec![value_info(OUTPUT, DataType::Float, &out_dims)],
        ..Default::default()
    };
    let model = ModelProto {
        ir_version: Some(ir_version(opts.opset)),
        opset_import: vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(opts.opset),
        }],
        producer_name: Some("rnn".into()),
        producer_version: Some(env!("CARGO_PKG_VERSION").into()),
        graph: Some(graph),
        ..Default::default()
    };
    Ok(model.encode_to_vec())
}

/// What the exporter needs of a recurrent layer; `None` for the other kinds.
fn recurrent_spec(l: &Layer) -> Option<RecurrentSpec> {
    let plain = |cell, inputs, hidden, output| RecurrentSpec {
        cell,
        inputs,
        hidden,
        output,
        num_layers: 1,
        bidirectional: false,
    };
    Some(match l {
        Layer::Rnn(r) => plain(RecurrentCell::Rnn(r.act), r.inputs, r.hidden, r.output),
        Layer::Lstm(l) => plain(RecurrentCell::Lstm, l.inputs, l.hidden, l.output),
        Layer::Gru(g) => plain(RecurrentCell::Gru, g.inputs, g.hidden, g.output),
        Layer::Stack(s) => RecurrentSpec {
            cell: s.cell,
            inputs: s.inputs,
            hidden: s.hidden,
            output: s.output,
            num_layers: s.opts.num_layers,
            bidirectional: s.opts.bidirectional,
        },
        Layer::Dense(_) | Layer::Dropout(_) | Layer::LayerNorm(_) | Layer::Embedding(_) => {
            return None;
        }
    })
}

/// `[a, b, f] -> [b, a, f]`: between batch-major and time-major.
fn transpose_steps(g: &mut Graph, stem: impl ToString, x: &str) -> String {
    let perm = vec![("perm", Attr::Ints(vec![1, 0, 2]))];
    g.node(&stem.to_string(), "Transpose", &[x], perm)
}

/// Writes the encoded model to `path` atomically (a temp file in the same directory, synced,
/// then renamed), as checkpoints are written.
pub(crate) fn write(path: &Path, bytes: &[u8]) -> Result<()> {
    crate::fsutil::write_atomic(path, bytes, TEMP_MARKER, crate::fsutil::FileMode::Default)
        .map_err(|e| Error::io(path, e))
}
