//! The exported model decoded again, without ONNX Runtime: the dynamic batch dimension, the
//! opset, and the places where PyTorch's conventions and ONNX's differ (LSTM and GRU gate
//! orders, GRU's `linear_before_reset`, the bias layout). tests/nn/onnx.rs runs the files.

use prost::Message;

use super::OnnxOptions;
use super::proto::{
    ModelProto, NodeProto, tensor_shape_proto::dimension::Value as DimValue, type_proto,
};
use crate::nn::{Loss, Network, RecurrentCell, RecurrentOptions, RnnOutput};
use crate::{Activation, Context};

fn export(cell: RecurrentCell, bi: bool) -> (Network, ModelProto) {
    let mut net = Network::builder(&Context::cpu())
        .sequence_length(3)
        .recurrent(
            cell,
            2,
            3,
            RnnOutput::Last,
            RecurrentOptions::new().bidirectional(bi),
        )
        .dense(3 * if bi { 2 } else { 1 }, 2, Activation::Identity)
        .build(Loss::Mse)
        .unwrap();
    // Every parameter its own index, so blocks can be traced.
    let values: Vec<f32> = (0..net.num_parameters()).map(|i| i as f32).collect();
    net.set_parameters(&values).unwrap();
    let bytes = net.to_onnx_bytes(&OnnxOptions::new()).unwrap();
    (net, ModelProto::decode(bytes.as_slice()).unwrap())
}

fn node<'a>(m: &'a ModelProto, op: &str) -> &'a NodeProto {
    let g = m.graph.as_ref().unwrap();
    g.node
        .iter()
        .find(|n| n.op_type.as_deref() == Some(op))
        .unwrap_or_else(|| panic!("no {op} node"))
}

fn initializer(m: &ModelProto, name: &str) -> (Vec<i64>, Vec<f32>) {
    let g = m.graph.as_ref().unwrap();
    let t = g
        .initializer
        .iter()
        .find(|t| t.name.as_deref() == Some(name))
        .unwrap_or_else(|| panic!("no initializer {name}"));
    let raw = t.raw_data.as_ref().unwrap();
    let v = raw
        .chunks(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    (t.dims.clone(), v)
}

/// Where the parameter tensor `name` starts in the flat parameters.
fn offset_of(net: &Network, name: &str) -> usize {
    net.param_info()
        .iter()
        .find(|p| p.name == name)
        .unwrap_or_else(|| panic!("no parameter {name}"))
        .offset
}

/// The first value of each `block`-sized gate block of `values`.
fn block_starts(values: &[f32], block: usize) -> Vec<f32> {
    values.chunks(block).map(|c| c[0]).collect()
}

#[test]
fn batch_is_dynamic_and_opset_declared() {
    let (_, m) = export(RecurrentCell::Lstm, false);
    assert_eq!(m.opset_import[0].version, Some(17));
    assert_eq!(m.ir_version, Some(8));
    let input = &m.graph.as_ref().unwrap().input[0];
    let Some(type_proto::Value::TensorType(t)) = &input.r#type.as_ref().unwrap().value else {
        panic!("input is not a tensor");
    };
    let dims = &t.shape.as_ref().unwrap().dim;
    assert_eq!(dims[0].value, Some(DimValue::DimParam("batch".into())));
    assert_eq!(dims[1].value, Some(DimValue::DimValue(3)));
}

#[test]
fn lstm_gates_reordered_to_iofc() {
    let (net, m) = export(RecurrentCell::Lstm, true);
    let block = 3 * 2; // H x I
    let o = offset_of(&net, "0.weight_ih_l0") as f32;
    let (dims, w) = initializer(&m, "0.W_l0");
    assert_eq!(dims, [2, 12, 2]);
    // PyTorch i, f, g, o -> ONNX i, o, f, c (blocks 0, 3, 1, 2), forward direction first.
    let starts = block_starts(&w[..4 * block], block);
    let want: Vec<f32> = [0, 3, 1, 2]
        .iter()
        .map(|&b| o + (b * block) as f32)
        .collect();
    assert_eq!(starts, want);
    let (dims, _) = initializer(&m, "0.B_l0");
    assert_eq!(dims, [2, 24]);
    assert_eq!(
        node(&m, "LSTM")
            .attribute
            .iter()
            .find(|a| a.name.as_deref() == Some("direction"))
            .and_then(|a| a.s.clone()),
        Some(b"bidirectional".to_vec())
    );
}

#[test]
fn gru_gates_reordered_to_zrh_with_linear_before_reset() {
    let (net, m) = export(RecurrentCell::Gru, false);
    let b_hh = offset_of(&net, "0.bias_hh_l0");
    let b_ih = offset_of(&net, "0.bias_ih_l0");
    let (_, b) = initializer(&m, "0.B_l0");
    // [Wb (z, r, h) | Rb (z, r, h)], each block H = 3 wide; PyTorch order r, z, n.
    let starts = block_starts(&b, 3);
    let want: Vec<f32> = [
        (b_ih, 1),
        (b_ih, 0),
        (b_ih, 2),
        (b_hh, 1),
        (b_hh, 0),
        (b_hh, 2),
    ]
    .iter()
    .map(|(start, k)| (start + k * 3) as f32)
    .collect();
    assert_eq!(starts, want);
    let lbr = node(&m, "GRU")
        .attribute
        .iter()
        .find(|a| a.name.as_deref() == Some("linear_before_reset"))
        .and_then(|a| a.i);
    assert_eq!(lbr, Some(1));
}
