//! A small builder over the generated messages: nodes with unique value names, initializers
//! and attributes, so the per-layer code reads as a list of ONNX ops.

use super::proto::{
    AttributeProto, NodeProto, TensorProto, TensorShapeProto, TypeProto, ValueInfoProto,
    attribute_proto::AttributeType, tensor_proto::DataType, tensor_shape_proto::Dimension,
    tensor_shape_proto::dimension::Value as DimValue, type_proto,
};

/// One ONNX attribute value.
pub(crate) enum Attr {
    Int(i64),
    Float(f32),
    Ints(Vec<i64>),
    Str(&'static str),
    Strs(Vec<&'static str>),
}

/// A dimension of a graph input or output: fixed, or named (dynamic).
pub(crate) enum Dim {
    Fixed(usize),
    Named(&'static str),
}

/// The nodes and initializers of a graph under construction.
#[derive(Default)]
pub(crate) struct Graph {
    pub nodes: Vec<NodeProto>,
    pub initializers: Vec<TensorProto>,
    /// Counter for unique value and node names.
    next: usize,
}

impl Graph {
    /// A fresh value name, `{stem}:{n}` (unique within the graph).
    fn fresh(&mut self, stem: &str) -> String {
        self.next += 1;
        format!("{stem}:{}", self.next)
    }

    /// Adds `op_type(inputs) -> outputs` and returns the output names; `stem` names the node
    /// and its outputs after the layer it belongs to. An empty input name is an omitted
    /// optional input; `outputs` lists which of the op's outputs are used (false: omitted).
    pub fn node_multi(
        &mut self,
        stem: &str,
        op_type: &str,
        inputs: &[&str],
        outputs: &[bool],
        attrs: Vec<(&'static str, Attr)>,
    ) -> Vec<String> {
        let name = self.fresh(&format!("{stem}/{op_type}"));
        let out: Vec<String> = outputs
            .iter()
            .enumerate()
            .map(|(i, &used)| {
                if used {
                    format!("{name}:out{i}")
                } else {
                    String::new()
                }
            })
            .collect();
        self.nodes.push(NodeProto {
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: out.clone(),
            name: Some(name),
            op_type: Some(op_type.to_string()),
            attribute: attrs.into_iter().map(|(n, a)| attribute(n, a)).collect(),
            ..Default::default()
        });
        out
    }

    /// [`Graph::node_multi`] for an op with one output.
    pub fn node(
        &mut self,
        stem: &str,
        op_type: &str,
        inputs: &[&str],
        attrs: Vec<(&'static str, Attr)>,
    ) -> String {
        self.node_multi(stem, op_type, inputs, &[true], attrs)
            .swap_remove(0)
    }

    /// Names `x` as the graph output `name` (an Identity node, so the output is always a
    /// node's own output, whatever the last layer was).
    pub fn output(&mut self, stem: &str, x: &str, name: &str) {
        let node = self.fresh(&format!("{stem}/Identity"));
        self.nodes.push(NodeProto {
            input: vec![x.to_string()],
            output: vec![name.to_string()],
            name: Some(node),
            op_type: Some("Identity".to_string()),
            ..Default::default()
        });
    }

    /// Adds a float initializer of shape `dims` (row-major `values`) and returns its name.
    pub fn floats(&mut self, name: &str, dims: &[usize], values: &[f32]) -> String {
        debug_assert_eq!(dims.iter().product::<usize>(), values.len());
        let raw: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.initializers.push(TensorProto {
            dims: dims.iter().map(|&d| d as i64).collect(),
            data_type: Some(DataType::Float as i32),
            name: Some(name.to_string()),
            raw_data: Some(raw),
            ..Default::default()
        });
        name.to_string()
    }

    /// Adds a 1-D int64 initializer (shapes and axes of Reshape, Squeeze) and returns its name.
    pub fn int64s(&mut self, stem: &str, values: &[i64]) -> String {
        let name = self.fresh(&format!("{stem}/const"));
        self.initializers.push(TensorProto {
            dims: vec![values.len() as i64],
            data_type: Some(DataType::Int64 as i32),
            name: Some(name.clone()),
            int64_data: values.to_vec(),
            ..Default::default()
        });
        name
    }

    /// Adds a float scalar initializer (0-d) and returns its name.
    pub fn scalar(&mut self, stem: &str, value: f32) -> String {
        let name = self.fresh(&format!("{stem}/const"));
        self.floats(&name, &[], &[value])
    }
}

fn attribute(name: &str, a: Attr) -> AttributeProto {
    let mut p = AttributeProto {
        name: Some(name.to_string()),
        ..Default::default()
    };
    let ty = match a {
        Attr::Int(i) => {
            p.i = Some(i);
            AttributeType::Int
        }
        Attr::Float(f) => {
            p.f = Some(f);
            AttributeType::Float
        }
        Attr::Ints(v) => {
            p.ints = v;
            AttributeType::Ints
        }
        Attr::Str(s) => {
            p.s = Some(s.as_bytes().to_vec());
            AttributeType::String
        }
        Attr::Strs(v) => {
            p.strings = v.iter().map(|s| s.as_bytes().to_vec()).collect();
            AttributeType::Strings
        }
    };
    p.r#type = Some(ty as i32);
    p
}

/// A graph input or output: a tensor of `elem` with these dimensions.
pub(crate) fn value_info(name: &str, elem: DataType, dims: &[Dim]) -> ValueInfoProto {
    let dim = dims
        .iter()
        .map(|d| Dimension {
            value: Some(match d {
                Dim::Fixed(n) => DimValue::DimValue(*n as i64),
                Dim::Named(s) => DimValue::DimParam(s.to_string()),
            }),
            ..Default::default()
        })
        .collect();
    ValueInfoProto {
        name: Some(name.to_string()),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: Some(elem as i32),
                shape: Some(TensorShapeProto { dim }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}
