//! The bf16/f16 GEMM and dense-layer calls the kernel-contract test records (`calls.rs` runs
//! them): every `hgemm*` and `hcol_sum*` entry, portable (odd shapes and offsets) and, on the
//! devices that have them, tensor-core (aligned shapes, both tile sizes, k split and not).

use crate::buffer::Buffer;
use crate::dtype::DType;
use crate::error::Result;
use crate::ops::{
    Activated, Activation, BiasActBackwardProduct, BiasActGrads, DenseForward, DenseParamGrads,
    DenseParams, DenseShape, Gemm, MatShape, Ops,
};

/// Runs the bf16/f16 products and dense ops of `ops` in both types.
pub(super) fn exercise(ops: &dyn Ops) -> Result<()> {
    for t in [DType::Bf16, DType::F16] {
        let z = |dtype: DType, n: usize| -> Result<Buffer> {
            let b = ops.alloc_as(dtype, n)?;
            ops.upload_bytes(b.view(), &vec![0u8; n * dtype.size()])?;
            Ok(b)
        };
        // (m, n, k): tensor-core tiles of 128 and of 64 with k split, the portable kernel at
        // an odd k; each into f32 and into T.
        for (m, n, k) in [(2048, 2048, 256), (256, 256, 4096), (100, 70, 33)] {
            let (a, b) = (z(t, m * k)?, z(t, k * n)?);
            for out in [DType::F32, t] {
                let c = z(out, m * n)?;
                ops.gemm(Gemm::new(m, n, k).tb(), a.view(), b.view(), c.view())?;
            }
        }
        // A small layer (the fused kernels everywhere) and one whose products pass the size from
        // which a vendor library takes a product with an epilogue (the imitated H100's cuBLAS,
        // then `hgemm_epilogue_*`).
        for (rows, inputs, outputs, inner) in [(64, 40, 24, 32), (512, 128, 64, 128)] {
            let dense = DenseShape::new(rows, inputs, outputs);
            let (x, w, bias) = (
                z(t, rows * inputs)?,
                z(t, outputs * inputs)?,
                z(t, outputs)?,
            );
            let (zb, yb, dzb) = (
                z(t, rows * outputs)?,
                z(t, rows * outputs)?,
                z(t, rows * outputs)?,
            );
            let (dw, db) = (z(DType::F32, outputs * inputs)?, z(DType::F32, outputs)?);
            let act = Activation::Gelu;
            ops.dense_forward(DenseForward::new(
                x.view(),
                DenseParams::new(w.view(), bias.view()),
                zb.view(),
                yb.view(),
                act,
                dense,
            ))?;
            let grads = DenseParams::new(dw.view(), db.view());
            ops.dense_param_grads(DenseParamGrads::new(zb.view(), x.view(), grads, dense))?;
            let (g, wn) = (z(t, rows * inner)?, z(t, inner * outputs)?);
            ops.bias_act_backward_product(BiasActBackwardProduct::new(
                g.view(),
                wn.view(),
                Activated::new(zb.view(), yb.view(), act),
                BiasActGrads::new(dzb.view(), db.view()),
                MatShape::new(rows, outputs),
                inner,
            ))?;
        }
    }
    Ok(())
}
