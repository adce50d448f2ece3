//! Element types at the op boundary, on every backend (the CPU one through
//! `cpu_reference`): typed buffers round-trip at odd offsets, `copy` moves any one type, and
//! every op rejects a view of another type than it takes (f32, u32 for index data) with
//! `Error::DTypeMismatch` before any work.

use half::{bf16, f16};
use rnn::ops::BiasActBackward;
use rnn::ops::BiasActBackwardProduct;
use rnn::ops::DenseForward;
use rnn::ops::DenseParamGrads;
use rnn::ops::IndexedRows;
use rnn::ops::LayerNormForward;
use rnn::ops::Mse;
use rnn::ops::RnnStepForward;
use rnn::ops::SoftmaxCrossEntropy;
use rnn::ops::prelude::*;
use rnn::ops::{
    Activated, BiasActGrads, DenseParams, DenseShape, DropoutMask, LayerNormParams, LossOutputs,
    MatShape, OptimBuffers, RNG_STATE_LEN, RecurrentWeights, SeqShape,
};
use rnn::{Activation, AdamStep, Buffer, DType, Element, Error, Gemm, SgdStep, View};

use super::contexts;
use crate::support::Target;

/// Uploads `vals` at offset 3 of a buffer of `T` (guards around it), downloads them back, and
/// checks the guards and a `copy` to odd offsets of a second buffer.
fn round_trip<T: Element + PartialEq + std::fmt::Debug>(ops: &dyn Ops, vals: &[T]) {
    let n = vals.len();
    let buf = ops.alloc_as(T::DTYPE, n + 8).unwrap();
    assert_eq!(buf.dtype(), T::DTYPE);
    assert_eq!(buf.len(), n + 8);
    ops.upload_as(buf.view(), &vec![T::default(); n + 8])
        .unwrap();
    let v = buf.slice(3, n).unwrap();
    assert_eq!(v.dtype(), T::DTYPE);
    ops.upload_as(v, vals).unwrap();
    let mut back = vec![T::default(); n];
    ops.download_as(v, &mut back).unwrap();
    assert_eq!(back, vals, "{}", T::DTYPE);
    let mut all = vec![T::default(); n + 8];
    ops.download_as(buf.view(), &mut all).unwrap();
    assert!(
        all[..3]
            .iter()
            .chain(&all[3 + n..])
            .all(|x| *x == T::default())
    );

    let other = ops.alloc_as(T::DTYPE, n + 6).unwrap();
    ops.upload_as(other.view(), &vec![T::default(); n + 6])
        .unwrap();
    ops.copy(v, other.slice(5, n).unwrap()).unwrap();
    // Within one buffer too (disjoint ranges).
    ops.copy(buf.slice(3, 1).unwrap(), buf.slice(n + 7, 1).unwrap())
        .unwrap();
    let mut got = vec![T::default(); n];
    ops.download_as(other.slice(5, n).unwrap(), &mut got)
        .unwrap();
    assert_eq!(got, vals, "copy of {}", T::DTYPE);
    let mut last = [T::default()];
    ops.download_as(buf.slice(n + 7, 1).unwrap(), &mut last)
        .unwrap();
    assert_eq!(last[0], vals[0]);

    // The typed transfers check the type, and f32 transfers reject other types.
    if T::DTYPE != DType::F32 {
        let e = ops.upload_as(v, &vec![0.5f32; n]).unwrap_err();
        assert!(matches!(e, Error::DTypeMismatch { .. }), "{e}");
        let e = ops.download(v, &mut vec![0.0; n]).unwrap_err();
        assert!(
            matches!(e, Error::DTypeMismatch { ref op, .. } if op == "download"),
            "{e}"
        );
        let f = ops.alloc(n).unwrap();
        let e = ops.copy(v, f.view()).unwrap_err();
        assert!(
            matches!(e, Error::DTypeMismatch { ref op, ref arg, expected, found: DType::F32 }
                if op == "copy" && arg == "dst" && expected == T::DTYPE),
            "{e}"
        );
    }
}

/// Typed buffers of every type round-trip through upload, download and copy at odd offsets.
pub fn typed_round_trips(t: Target) {
    for ctx in contexts(t, "typed_round_trips") {
        let ops = ctx.ops();
        // 2^24 + 1 and beyond: not exact in f32, exact in u32.
        let big: Vec<u32> = (0..37).map(|i| (1 << 24) + 1 + i * 977).collect();
        round_trip(ops, &big);
        round_trip(ops, &[i32::MIN, -7, 0, 5, i32::MAX]);
        round_trip(ops, &[0.5f32, -1.25, 3.0]);
        let halves: Vec<f32> = (0..33).map(|i| i as f32 * 0.25 - 3.0).collect();
        round_trip(
            ops,
            &halves
                .iter()
                .map(|&x| bf16::from_f32(x))
                .collect::<Vec<_>>(),
        );
        round_trip(
            ops,
            &halves.iter().map(|&x| f16::from_f32(x)).collect::<Vec<_>>(),
        );
        // A typed tensor.
        let ids = ctx
            .tensor_as(&[2, 2], &[1u32, 2, 3, (1 << 24) + 1])
            .unwrap();
        assert_eq!(ids.dtype(), DType::U32);
        assert_eq!(ids.to_vec_as::<u32>().unwrap(), [1, 2, 3, (1 << 24) + 1]);
        let e = ids.to_vec().unwrap_err();
        assert!(matches!(e, Error::DTypeMismatch { .. }), "{e}");
        assert_eq!(ctx.zeros(&[3]).unwrap().dtype(), DType::F32);
        // Byte transfers check the byte count.
        let b = ops.alloc_as(DType::Bf16, 4).unwrap();
        assert!(ops.upload_bytes(b.view(), &[0; 7]).is_err());
        ops.upload_bytes(b.view(), &[0; 8]).unwrap();
    }
}

/// Views for one case: disjoint f32 ranges and one u32 range, all of one context.
struct Pick<'a> {
    f32s: &'a Buffer,
    u32s: &'a Buffer,
    next: std::cell::Cell<usize>,
}

impl<'a> Pick<'a> {
    /// A fresh f32 view of `n` elements.
    fn f(&self, n: usize) -> View<'a> {
        let at = self.next.get();
        self.next.set(at + n + 1);
        self.f32s.slice(at, n).unwrap()
    }

    /// The u32 view of `n` elements (odd offset).
    fn bad(&self, n: usize) -> View<'a> {
        self.u32s.slice(1, n).unwrap()
    }

    /// A u32 view of `n` (at most 16) indices (zeros, valid), apart from [`Pick::bad`].
    fn u(&self, n: usize) -> View<'a> {
        self.u32s.slice(16, n).unwrap()
    }
}

type Case = (&'static str, fn(&dyn Ops, &Pick<'_>) -> rnn::Result<()>);

/// One u32 view among valid f32 ones, for ops of every family; shapes are `2 x 3`.
const CASES: &[Case] = &[
    ("fill", |o, p| o.fill(p.bad(6), 1.0)),
    ("upload", |o, p| o.upload(p.bad(6), &[0.0; 6])),
    ("download", |o, p| o.download(p.bad(6), &mut [0.0; 6])),
    ("scale", |o, p| o.scale(p.bad(6), 2.0)),
    ("axpy", |o, p| o.axpy(1.0, p.f(6), p.bad(6))),
    ("add", |o, p| o.add(p.f(6), p.bad(6), p.f(6))),
    ("mul", |o, p| o.mul(p.bad(6), p.f(6), p.f(6))),
    ("gemm", |o, p| {
        o.gemm(Gemm::new(2, 3, 3), p.bad(6), p.f(9), p.f(6))
    }),
    ("sum_rows", |o, p| {
        o.sum_rows(p.f(6), p.bad(3), MatShape::new(2, 3), 0.0)
    }),
    ("sum_cols", |o, p| {
        o.sum_cols(p.bad(6), p.f(2), MatShape::new(2, 3), 0.0)
    }),
    ("sum_all", |o, p| o.sum_all(p.f(6), p.bad(1), 0.0)),
    ("clip_grad_norm", |o, p| {
        o.clip_grad_norm(p.bad(6), 1.0, p.f(1))
    }),
    ("bias_act_forward", |o, p| {
        o.bias_act_forward(
            Activated::new(p.f(6), p.f(6), Activation::Relu),
            p.bad(3),
            MatShape::new(2, 3),
        )
    }),
    ("activation", |o, p| {
        o.activation(p.bad(6), p.f(6), Activation::Tanh)
    }),
    ("act_backward", |o, p| {
        o.act_backward(
            p.f(6),
            Activated::new(p.f(6), p.f(6), Activation::Tanh),
            p.bad(6),
        )
    }),
    ("softmax", |o, p| o.softmax(p.bad(6), p.f(6), 2, 3)),
    ("log_softmax", |o, p| o.log_softmax(p.f(6), p.bad(6), 2, 3)),
    ("softmax_cross_entropy", |o, p| {
        let out = LossOutputs::new(p.f(6), p.f(2), None);
        o.softmax_cross_entropy(SoftmaxCrossEntropy::new(
            p.bad(6),
            p.u(2),
            out,
            p.f(2),
            MatShape::new(2, 3),
            1.0,
        ))
    }),
    ("mse", |o, p| {
        let out = LossOutputs::new(p.f(6), p.f(2), None);
        o.mse(Mse::new(p.f(6), p.bad(6), out, MatShape::new(2, 3), 1.0))
    }),
    ("gather_rows", |o, p| {
        o.gather_rows(IndexedRows::new(p.f(6), p.u(2), p.bad(6), 3))
    }),
    ("scatter_add_rows", |o, p| {
        o.scatter_add_rows(IndexedRows::new(p.bad(6), p.u(2), p.f(6), 3))
    }),
    ("one_hot", |o, p| o.one_hot(p.u(2), p.bad(6), 3)),
    ("dropout", |o, p| {
        o.dropout(
            p.f(6),
            p.bad(6),
            DropoutMask::new(p.f(RNG_STATE_LEN), 0, 0.5),
        )
    }),
    ("rng_advance", |o, p| o.rng_advance(p.bad(RNG_STATE_LEN))),
    ("layer_norm_forward", |o, p| {
        let params = LayerNormParams::new(p.f(3), p.f(3));
        o.layer_norm_forward(LayerNormForward::new(
            p.bad(6),
            params,
            p.f(6),
            p.f(4),
            MatShape::new(2, 3),
            1e-5,
        ))
    }),
    ("sgd_step", |o, p| {
        let s = SgdStep {
            momentum: 0.9,
            weight_decay: 0.0,
            nesterov: false,
        };
        let state = p.f(rnn::ops::OPTIMIZER_STATE_LEN);
        o.sgd_step(OptimBuffers::new(p.f(6), p.bad(6), state), p.f(6), s)
    }),
    ("adam_step", |o, p| {
        let s = AdamStep {
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 0.0,
            decoupled: false,
        };
        let state = p.f(rnn::ops::OPTIMIZER_STATE_LEN);
        o.adam_step(
            OptimBuffers::new(p.f(6), p.f(6), state),
            p.f(6),
            p.bad(6),
            s,
        )
    }),
    ("dense_forward", |o, p| {
        let params = DenseParams::new(p.f(9), p.bad(3));
        let shape = DenseShape::new(2, 3, 3);
        o.dense_forward(DenseForward::new(
            p.f(6),
            params,
            p.f(6),
            p.f(6),
            Activation::Relu,
            shape,
        ))
    }),
    ("dense_param_grads", |o, p| {
        let grads = DenseParams::new(p.f(9), p.bad(3));
        o.dense_param_grads(DenseParamGrads::new(
            p.f(6),
            p.f(6),
            grads,
            DenseShape::new(2, 3, 3),
        ))
    }),
    ("bias_act_backward", |o, p| {
        let grads = BiasActGrads::new(p.f(6), p.bad(3));
        let shape = MatShape::new(2, 3);
        o.bias_act_backward(BiasActBackward::new(
            p.f(6),
            Activated::new(p.f(6), p.f(6), Activation::Tanh),
            grads,
            shape,
        ))
    }),
    ("bias_act_backward_product", |o, p| {
        let grads = BiasActGrads::new(p.f(6), p.bad(3));
        let act = Activation::Tanh;
        o.bias_act_backward_product(BiasActBackwardProduct::new(
            p.f(4),
            p.f(6),
            Activated::new(p.f(6), p.f(6), act),
            grads,
            MatShape::new(2, 3),
            2,
        ))
    }),
    ("rnn_step_forward", |o, p| {
        let w = RecurrentWeights::new(p.bad(9), p.f(3), p.f(3));
        let shape = SeqShape::new(1, 2, 3);
        o.rnn_step_forward(RnnStepForward::new(
            p.f(6),
            p.f(6),
            w,
            p.f(6),
            Activation::Tanh,
            shape,
        ))
    }),
];

/// An f32 view where an op takes u32 index data (labels, row indices); shapes are `2 x 3`.
const INDEX_CASES: &[Case] = &[
    ("softmax_cross_entropy", |o, p| {
        let out = LossOutputs::new(p.f(6), p.f(2), None);
        o.softmax_cross_entropy(SoftmaxCrossEntropy::new(
            p.f(6),
            p.f(2),
            out,
            p.f(2),
            MatShape::new(2, 3),
            1.0,
        ))
    }),
    ("gather_rows", |o, p| {
        o.gather_rows(IndexedRows::new(p.f(6), p.f(2), p.f(6), 3))
    }),
    ("scatter_add_rows", |o, p| {
        o.scatter_add_rows(IndexedRows::new(p.f(6), p.f(2), p.f(6), 3))
    }),
    ("one_hot", |o, p| o.one_hot(p.f(2), p.f(6), 3)),
];

/// Every case fails with `DTypeMismatch` naming its op and an argument (expecting f32 where
/// a u32 view was passed, u32 where an f32 view was passed as index data), and leaves the f32
/// views untouched (no kernel ran).
pub fn rejects_other_types(t: Target) {
    for ctx in contexts(t, "rejects_other_types") {
        let ops = ctx.ops();
        let f32s = ops.alloc(4096).unwrap();
        ops.fill(f32s.view(), 7.0).unwrap();
        let u32s = ops.alloc_as(DType::U32, 64).unwrap();
        ops.upload_as(u32s.view(), &[0u32; 64]).unwrap();
        let cases = CASES.iter().map(|c| (c, (DType::F32, DType::U32)));
        let index_cases = INDEX_CASES.iter().map(|c| (c, (DType::U32, DType::F32)));
        for ((name, case), want) in cases.chain(index_cases) {
            let pick = Pick {
                f32s: &f32s,
                u32s: &u32s,
                next: std::cell::Cell::new(0),
            };
            match case(ops, &pick) {
                Err(Error::DTypeMismatch {
                    op,
                    arg,
                    expected,
                    found,
                }) => {
                    assert_eq!(&op, name, "{t:?}");
                    assert!(!arg.is_empty(), "{name}");
                    assert_eq!((expected, found), want, "{name}");
                }
                other => panic!("{t:?} {name}: expected DTypeMismatch, got {other:?}"),
            }
            let mut all = vec![0.0; 4096];
            ops.download(f32s.view(), &mut all).unwrap();
            assert!(all.iter().all(|&x| x == 7.0), "{t:?} {name} wrote");
        }
        let mut ids = [1u32; 64];
        ops.download_as(u32s.view(), &mut ids).unwrap();
        assert_eq!(ids, [0; 64], "{t:?}: an op wrote the u32 view");
    }
}
