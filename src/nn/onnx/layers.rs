//! The ONNX ops of each layer kind. Values flow as `[batch, features]` (`Rows`), or with a
//! time axis, batch-major `[batch, steps, features]` or time-major `[steps, batch, features]`
//! (what ONNX's recurrent ops read and write); per-row layers (dense, layer norm) work on
//! the last axis of any of them.

use crate::error::{Error, Result};
use crate::ops::Activation;

use super::super::params::ParamInfo;
use super::super::recurrent::RnnOutput;
use super::super::stack::RecurrentCell;
use super::graph::{Attr, Graph};

/// How the value between two layers is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Layout {
    /// `[batch, features]`.
    Rows,
    /// `[batch, steps, features]`.
    BatchMajor,
    /// `[steps, batch, features]`.
    TimeMajor,
}

/// The network's parameters, read back from its device, looked up by their PyTorch names.
pub(crate) struct Params<'a> {
    pub info: &'a [ParamInfo],
    pub values: &'a [f32],
}

impl Params<'_> {
    fn get(&self, name: &str) -> Result<&[f32]> {
        let t = self.info.iter().find(|t| t.name == name).ok_or_else(|| {
            Error::InvalidArgument(format!("ONNX export: the network has no parameter {name}"))
        })?;
        Ok(&self.values[t.offset..t.offset + t.len()])
    }
}

/// A recurrent layer as the exporter sees it: a plain RNN, LSTM or GRU layer is one level,
/// one direction.
pub(crate) struct RecurrentSpec {
    pub cell: RecurrentCell,
    pub inputs: usize,
    pub hidden: usize,
    pub output: RnnOutput,
    pub num_layers: usize,
    pub bidirectional: bool,
}

/// Emits the layers' ops into one graph.
pub(crate) struct Emit<'a> {
    pub g: Graph,
    pub p: Params<'a>,
}

impl Emit<'_> {
    /// `act(x W^T + b)`: MatMul with the transposed weight (so it also applies per step of a
    /// 3-D value), Add, then the activation.
    pub fn dense(
        &mut self,
        i: usize,
        inputs: usize,
        outputs: usize,
        act: Activation,
        x: &str,
    ) -> Result<String> {
        let stem = i.to_string();
        let w = self.p.get(&format!("{i}.weight"))?;
        let mut wt = vec![0.0f32; w.len()];
        for o in 0..outputs {
            for k in 0..inputs {
                wt[k * outputs + o] = w[o * inputs + k];
            }
        }
        let wt = self
            .g
            .floats(&format!("{i}.weight_t"), &[inputs, outputs], &wt);
        let b = self.p.get(&format!("{i}.bias"))?.to_vec();
        let b = self.g.floats(&format!("{i}.bias"), &[outputs], &b);
        let z = self.g.node(&stem, "MatMul", &[x, &wt], vec![]);
        let z = self.g.node(&stem, "Add", &[&z, &b], vec![]);
        Ok(self.activation(&stem, act, &z))
    }

    fn activation(&mut self, stem: &str, act: Activation, z: &str) -> String {
        let g = &mut self.g;
        match act {
            Activation::Identity => z.to_string(),
            Activation::Relu => g.node(stem, "Relu", &[z], vec![]),
            Activation::Sigmoid => g.node(stem, "Sigmoid", &[z], vec![]),
            Activation::Tanh => g.node(stem, "Tanh", &[z], vec![]),
            Activation::LeakyRelu { slope } => {
                g.node(stem, "LeakyRelu", &[z], vec![("alpha", Attr::Float(slope))])
            }
            Activation::Gelu => {
                // Exact GELU from Erf (opset 13), so every supported opset runs it the same
                // way: 0.5 z (1 + erf(z / sqrt 2)).
                let inv_sqrt2 = g.scalar(stem, std::f32::consts::FRAC_1_SQRT_2);
                let one = g.scalar(stem, 1.0);
                let half = g.scalar(stem, 0.5);
                let s = g.node(stem, "Mul", &[z, &inv_sqrt2], vec![]);
                let e = g.node(stem, "Erf", &[&s], vec![]);
                let e = g.node(stem, "Add", &[&e, &one], vec![]);
                let y = g.node(stem, "Mul", &[z, &e], vec![]);
                g.node(stem, "Mul", &[&y, &half], vec![])
            }
        }
    }

    /// `LayerNormalization` over the last axis (opset 17).
    pub fn layer_norm(&mut self, i: usize, features: usize, eps: f32, x: &str) -> Result<String> {
        let w = self.p.get(&format!("{i}.weight"))?.to_vec();
        let b = self.p.get(&format!("{i}.bias"))?.to_vec();
        let w = self.g.floats(&format!("{i}.weight"), &[features], &w);
        let b = self.g.floats(&format!("{i}.bias"), &[features], &b);
        let attrs = vec![("axis", Attr::Int(-1)), ("epsilon", Attr::Float(eps))];
        Ok(self
            .g
            .node(&i.to_string(), "LayerNormalization", &[x, &w, &b], attrs))
    }

    /// `Gather` of int64 ids `[batch, steps]` from the table: `[batch, steps, dim]`.
    pub fn embedding(&mut self, i: usize, num: usize, dim: usize, ids: &str) -> Result<String> {
        let w = self.p.get(&format!("{i}.weight"))?.to_vec();
        let w = self.g.floats(&format!("{i}.weight"), &[num, dim], &w);
        Ok(self.g.node(
            &i.to_string(),
            "Gather",
            &[&w, ids],
            vec![("axis", Attr::Int(0))],
        ))
    }

    /// A stacked and/or bidirectional RNN, LSTM or GRU on a time-major `x`: one ONNX
    /// recurrent op per level. Returns the output and its layout: time-major
    /// `[steps, batch, dirs * hidden]` for `Sequence`, `[batch, dirs * hidden]` for `Last`.
    pub fn recurrent(
        &mut self,
        i: usize,
        spec: &RecurrentSpec,
        x: &str,
    ) -> Result<(String, Layout)> {
        let RecurrentSpec {
            cell,
            inputs,
            hidden,
            output,
            num_layers,
            bidirectional,
        } = *spec;
        let stem = i.to_string();
        let dirs = if bidirectional { 2 } else { 1 };
        // ONNX's gate order as blocks of PyTorch's: LSTM i,o,f,c from i,f,g,o; GRU z,r,h
        // from r,z,n.
        let (op, order): (&str, &[usize]) = match cell {
            RecurrentCell::Rnn(_) => ("RNN", &[0]),
            RecurrentCell::Lstm => ("LSTM", &[0, 3, 1, 2]),
            RecurrentCell::Gru => ("GRU", &[1, 0, 2]),
        };
        let gh = order.len() * hidden;
        let mut x = x.to_string();
        for k in 0..num_layers {
            let level_in = if k == 0 { inputs } else { dirs * hidden };
            let (mut w, mut r, mut b) = (Vec::new(), Vec::new(), Vec::new());
            for d in 0..dirs {
                let sfx = format!("_l{k}{}", if d == 1 { "_reverse" } else { "" });
                let get = |t: &str| self.p.get(&format!("{i}.{t}{sfx}"));
                w.extend(gate_blocks(get("weight_ih")?, order, hidden * level_in));
                r.extend(gate_blocks(get("weight_hh")?, order, hidden * hidden));
                b.extend(gate_blocks(get("bias_ih")?, order, hidden));
                b.extend(gate_blocks(get("bias_hh")?, order, hidden));
            }
            let w = self
                .g
                .floats(&format!("{i}.W_l{k}"), &[dirs, gh, level_in], &w);
            let r = self
                .g
                .floats(&format!("{i}.R_l{k}"), &[dirs, gh, hidden], &r);
            let b = self.g.floats(&format!("{i}.B_l{k}"), &[dirs, 2 * gh], &b);
            let mut attrs = vec![
                ("hidden_size", Attr::Int(hidden as i64)),
                (
                    "direction",
                    Attr::Str(if bidirectional {
                        "bidirectional"
                    } else {
                        "forward"
                    }),
                ),
            ];
            match cell {
                RecurrentCell::Rnn(act) => {
                    let name = if act == Activation::Relu {
                        "Relu"
                    } else {
                        "Tanh"
                    };
                    attrs.push(("activations", Attr::Strs(vec![name; dirs])));
                }
                // PyTorch applies the reset gate after the recurrent product (`r * (W_hn h +
                // b_hn)`), which is ONNX's linear_before_reset = 1.
                RecurrentCell::Gru => attrs.push(("linear_before_reset", Attr::Int(1))),
                RecurrentCell::Lstm => {}
            }
            let last = k + 1 == num_layers && output == RnnOutput::Last;
            let outs = self
                .g
                .node_multi(&stem, op, &[&x, &w, &r, &b], &[!last, last], attrs);
            x = if last {
                // Y_h [dirs, batch, H] -> [batch, dirs * H]: PyTorch's cat(h_n[-2], h_n[-1]).
                self.merge_dirs(&stem, &outs[1], dirs, &[1, 0, 2], &[0, -1])
            } else {
                // Y [steps, dirs, batch, H] -> [steps, batch, dirs * H]: [forward | reverse].
                self.merge_dirs(&stem, &outs[0], dirs, &[0, 2, 1, 3], &[0, 0, -1])
            };
        }
        let layout = if output == RnnOutput::Last {
            Layout::Rows
        } else {
            Layout::TimeMajor
        };
        Ok((x, layout))
    }

    /// Folds the direction axis of a recurrent op's output into the features: a Squeeze for
    /// one direction, else a Transpose that brings it next to the features and a Reshape.
    fn merge_dirs(
        &mut self,
        stem: &str,
        y: &str,
        dirs: usize,
        perm: &[i64],
        shape: &[i64],
    ) -> String {
        let g = &mut self.g;
        if dirs == 1 {
            let dir_axis = perm[perm.len() - 2];
            let axes = g.int64s(stem, &[dir_axis]);
            return g.node(stem, "Squeeze", &[y, &axes], vec![]);
        }
        let t = g.node(
            stem,
            "Transpose",
            &[y],
            vec![("perm", Attr::Ints(perm.to_vec()))],
        );
        let shape = g.int64s(stem, shape);
        g.node(stem, "Reshape", &[&t, &shape], vec![])
    }
}

/// `values` as blocks of `block` elements, taken in `order`.
fn gate_blocks<'a>(
    values: &'a [f32],
    order: &'a [usize],
    block: usize,
) -> impl Iterator<Item = &'a f32> {
    order
        .iter()
        .flat_map(move |&g| &values[g * block..(g + 1) * block])
}
