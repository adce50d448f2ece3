#!/usr/bin/env python3
"""Checks ONNX exports of rnn networks with onnx.checker and ONNX Runtime.

    python3 scripts/onnx_check.py [--tol 1e-5] DIR...

Every case in each DIR (written by tests/nn/onnx.rs or examples/onnx_export.rs) is
`<name>.onnx`, `<name>.json` (input dtype and shapes), `<name>.input.bin` and
`<name>.output.bin` (little-endian f32: the input, and the network's own forward output on
the device it ran on). For each case: `onnx.checker.check_model(full_check=True)`, the input's
batch dimension is symbolic, and ONNX Runtime (CPU) on the whole batch and on a smaller batch
reproduces the reference within `tol` relative (||out - ref|| / ||ref||). Prints one line per
case; exits 1 when any case fails, 2 on bad arguments or when no DIR holds a case, 3 when
onnx, onnxruntime or numpy is missing.
"""

import argparse
import json
import pathlib
import sys

try:
    import numpy as np
    import onnx
    import onnxruntime as ort
except ImportError as e:  # the Rust test turns this exit code into a SKIP
    print(f"missing module: {e.name} (pip install onnx onnxruntime)", file=sys.stderr)
    sys.exit(3)


def rel_err(out, ref):
    return float(np.linalg.norm((out - ref).ravel()) / max(np.linalg.norm(ref.ravel()), 1e-12))


def check_case(json_path, tol):
    stem = json_path.with_suffix("")
    meta = json.loads(json_path.read_text())
    model_path = stem.with_suffix(".onnx")
    model = onnx.load(str(model_path))
    onnx.checker.check_model(model, full_check=True)
    batch_dim = model.graph.input[0].type.tensor_type.shape.dim[0]
    if not batch_dim.dim_param:
        return f"input batch dimension is fixed ({batch_dim.dim_value}), not dynamic"

    x = np.fromfile(f"{stem}.input.bin", dtype="<f4").reshape(meta["input_shape"])
    x = x.astype(np.int64) if meta["input_dtype"] == "int64" else x
    ref = np.fromfile(f"{stem}.output.bin", dtype="<f4").reshape(meta["output_shape"])
    opts = ort.SessionOptions()
    # The graph as written, so the check is of the export, not of the optimizer's rewrites.
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(str(model_path), opts, providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    n = x.shape[0]
    worst = 0.0
    for b in sorted({n, max(1, n // 2), 1}, reverse=True):
        (out,) = sess.run(None, {name: x[:b]})
        if out.shape != ref[:b].shape:
            return f"batch {b}: output shape {out.shape}, expected {ref[:b].shape}"
        err = rel_err(out, ref[:b])
        worst = max(worst, err)
        if not err <= tol:
            return f"batch {b}: relative error {err:.3e} > {tol:g}"
    print(f"ok   {stem.name}: max relative error {worst:.2e} (device {meta.get('device', '?')})")
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tol", type=float, default=1e-5, help="relative tolerance (default 1e-5)")
    ap.add_argument("dirs", nargs="+", type=pathlib.Path)
    args = ap.parse_args()
    failed = 0
    cases = 0
    for d in args.dirs:
        for j in sorted(d.glob("*.json")):
            cases += 1
            try:
                why = check_case(j, args.tol)
            except Exception as e:  # a checker or runtime error is a failed case
                why = f"{type(e).__name__}: {e}"
            if why:
                failed += 1
                print(f"FAIL {j.with_suffix('').name}: {why}")
    if cases == 0:
        print("no cases found in " + ", ".join(map(str, args.dirs)), file=sys.stderr)
        sys.exit(2)
    print(f"{cases - failed} of {cases} cases passed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
