#!/usr/bin/env python3
"""Loads the checkpoints `examples/torch_export.rs` wrote into torch.nn modules with
strict=True and compares their forward outputs with the ones our device computed.

    python3 scripts/torch_compare.py DIR [DIR ...] [--torch-device cpu|cuda] [--dtype float64|float32]
                                         [--tol 1e-4]

DIR holds manifest.json, <model>.safetensors and <model>.io.safetensors. Every model must
load with strict=True (every tensor name and shape as torch.nn names them, nothing missing,
nothing extra) and match within --tol relative error (||ours - torch|| / ||torch||).
The torch reference runs in float64 on the CPU by default (no TF32, no cuDNN), so the
difference measured is our device's error alone. One line per model:
    PASS|FAIL <dir> <model> device=<id> rel_err=<e> max_abs=<a>
then `torch_compare models=<n> failed=<k>`; the exit status is 1 when any model failed.

The `state_*` models (kind "state") start their recurrent layer from a given h0/c0: their
outputs, h_n/c_n, loss and the gradients of every parameter and of h0/c0 (for a loss that
also weighs h_n/c_n) must each match within --tol; rel_err is the worst of them.

The safetensors files are read here directly (an 8-byte header length, a JSON header, raw
little-endian data), so only torch is needed.
"""
import argparse
import json
import os
import struct
import sys

import torch
from torch import nn


SAFETENSORS_DTYPES = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16}


def read_safetensors(path, allowed=("F32",)):
    """The tensors of a safetensors file, each in its stored dtype, which must be in `allowed`."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    data = raw[8 + n :]
    out = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        if meta["dtype"] not in allowed:
            raise ValueError(f"{path}: {name} is {meta['dtype']}, expected one of {allowed}")
        a, b = meta["data_offsets"]
        t = torch.frombuffer(bytearray(data[a:b]), dtype=SAFETENSORS_DTYPES[meta["dtype"]])
        out[name] = t.reshape(meta["shape"]).clone()
    return out


def activation(spec):
    if spec == "identity":
        return nn.Identity()
    if spec == "relu":
        return nn.ReLU()
    if spec == "sigmoid":
        return nn.Sigmoid()
    if spec == "tanh":
        return nn.Tanh()
    if spec == "gelu":
        return nn.GELU()
    if isinstance(spec, dict) and "leaky_relu" in spec:
        return nn.LeakyReLU(spec["leaky_relu"])
    raise ValueError(f"unknown activation {spec!r}")


def recurrent(spec):
    kw = dict(
        input_size=spec["inputs"],
        hidden_size=spec["hidden"],
        num_layers=spec["num_layers"],
        bidirectional=spec["bidirectional"],
        dropout=spec["dropout"],
        batch_first=True,
    )
    cell = spec["cell"]
    if cell == "rnn":
        return nn.RNN(nonlinearity=spec["nonlinearity"], **kw)
    if cell == "lstm":
        return nn.LSTM(**kw)
    if cell == "gru":
        return nn.GRU(**kw)
    raise ValueError(f"unknown cell {cell}")


def build_layer(spec):
    """The torch.nn module of one layer, registered under the layer's index so that its
    state_dict names are exactly ours (`0.weight_ih_l1_reverse`, `1.weight`, ...)."""
    t = spec["type"]
    if t == "recurrent":
        return recurrent(spec)
    if t == "dense":
        return nn.Linear(spec["inputs"], spec["outputs"])
    if t == "embedding":
        return nn.Embedding(spec["num_embeddings"], spec["dim"])
    if t == "layer_norm":
        return nn.LayerNorm(spec["features"], eps=spec["eps"])
    if t == "dropout":
        return nn.Dropout(spec["p"])
    raise ValueError(f"unknown layer type {t}")


class Model(nn.Module):
    def __init__(self, layers):
        super().__init__()
        self.specs = layers
        # Activations have no parameters: kept outside the module tree so the state_dict
        # holds exactly the layers' tensors.
        self.acts = [activation(s["activation"]) if s["type"] == "dense" else None for s in layers]
        for i, spec in enumerate(layers):
            self.add_module(str(i), build_layer(spec))

    def forward(self, x):
        for i, spec in enumerate(self.specs):
            m = getattr(self, str(i))
            if spec["type"] == "recurrent":
                out, h_n = m(x)
                if spec["output"] == "last":
                    # h_n of the top layer: h_n[-1], or cat(h_n[-2], h_n[-1]) when
                    # bidirectional -- what our RnnOutput::Last promises.
                    if isinstance(h_n, tuple):  # LSTM: (h_n, c_n)
                        h_n = h_n[0]
                    dirs = 2 if spec["bidirectional"] else 1
                    out = torch.cat([h_n[j] for j in range(-dirs, 0)], dim=1)
                x = out
            elif spec["type"] == "dense":
                x = self.acts[i](m(x))
            else:
                x = m(x)
        return x


def compare(directory, model, args):
    layers = model["layers"]
    net = Model(layers)
    state = read_safetensors(os.path.join(directory, model["checkpoint"]))
    net.load_state_dict(state, strict=True)
    io = read_safetensors(os.path.join(directory, model["io"]))
    dtype = getattr(torch, args.dtype)
    dev = torch.device(args.torch_device)
    net = net.to(dev, dtype).eval()
    x = io["input"]
    if model["input"] == "ids":
        x = x.to(torch.long)
        assert torch.equal(io["input"], x.to(torch.float32)), "ids must be integers"
    else:
        x = x.to(dtype)
    with torch.no_grad():
        want = net(x.to(dev)).to("cpu", torch.float64)
    ours = io["output"].to(torch.float64)
    if tuple(want.shape) != tuple(ours.shape):
        return False, f"shape ours {tuple(ours.shape)} torch {tuple(want.shape)}", 0.0, 0.0
    err = ((ours - want).norm() / want.norm().clamp_min(1e-30)).item()
    max_abs = (ours - want).abs().max().item()
    return err <= args.tol, "", err, max_abs


def rel(ours, want):
    ours, want = ours.to(torch.float64), want.detach().to("cpu", torch.float64)
    if tuple(ours.shape) != tuple(want.shape):
        return float("inf")
    return ((ours - want).norm() / want.norm().clamp_min(1e-30)).item()


def compare_state(directory, model, args):
    """A `state_*` model: recurrent layer from h0 (and c0), dense head, cross-entropy at every
    step plus sum(r_h h_n) + sum(r_c c_n); outputs, h_n, c_n, the loss and the gradients of all
    parameters and of h0/c0 against ours. Returns (ok, why, worst rel_err, 0.0)."""
    layers = model["layers"]
    net = Model(layers)
    net.load_state_dict(read_safetensors(os.path.join(directory, model["checkpoint"])), strict=True)
    io = read_safetensors(os.path.join(directory, model["io"]))
    dtype = getattr(torch, args.dtype)
    dev = torch.device(args.torch_device)
    net = net.to(dev, dtype).train()  # no dropout in these models; train() for cuDNN's backward
    rnn_m, head = getattr(net, "0"), getattr(net, "1")
    t = lambda name: io[name].to(dev, dtype)
    lstm = "state0.c" in io
    h0 = t("state0.h").requires_grad_(True)
    c0 = t("state0.c").requires_grad_(True) if lstm else None
    out, hn = rnn_m(t("input"), (h0, c0) if lstm else h0)
    h_n, c_n = hn if lstm else (hn, None)
    logits = head(out)
    labels = io["labels"].to(dev, torch.long)
    loss = nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))
    total = loss + (h_n * t("r.h")).sum() + ((c_n * t("r.c")).sum() if lstm else 0.0)
    total.backward()
    checks = [
        ("output", io["output"], logits),
        ("h_n", io["state_n.h"], h_n),
        ("loss", io["loss"], loss.reshape(1)),
        ("dh0", io["d0.h"], h0.grad),
    ]
    if lstm:
        checks += [("c_n", io["state_n.c"], c_n), ("dc0", io["d0.c"], c0.grad)]
    params = dict(net.named_parameters())
    for name, ours in io.items():
        if name.startswith("grad."):
            checks.append((name, ours, params[name[len("grad."):]].grad))
    errs = [(rel(ours, want), what) for what, ours, want in checks]
    worst, what = max(errs)
    bad = [f"{w}={e:.2e}" for e, w in errs if not e <= args.tol]
    return not bad, " ".join(bad) or f"worst {what}", worst, 0.0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("dirs", nargs="+")
    p.add_argument("--torch-device", default="cpu")
    p.add_argument("--dtype", default="float64", choices=["float64", "float32"])
    p.add_argument("--tol", type=float, default=1e-4)
    args = p.parse_args()
    if args.torch_device.startswith("cuda"):
        # Plain IEEE f32 (or f64) on the GPU too: TF32 would be the larger error.
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    total = failed = 0
    for d in args.dirs:
        with open(os.path.join(d, "manifest.json")) as f:
            manifest = json.load(f)
        for model in manifest["models"]:
            total += 1
            try:
                check = compare_state if model.get("kind") == "state" else compare
                ok, why, err, max_abs = check(d, model, args)
            except Exception as e:  # a strict-load failure is a result, not a crash
                why = f"{type(e).__name__}: {e}".replace("\n", " ")
                ok, err, max_abs = False, float("nan"), float("nan")
            failed += not ok
            line = (
                f"{'PASS' if ok else 'FAIL'} {d} {model['name']} device={manifest['device']} "
                f"rel_err={err:.3e} max_abs={max_abs:.3e}"
            )
            print(line + (f" ({why})" if why else ""), flush=True)
    print(f"torch_compare models={total} failed={failed} torch={torch.__version__} "
          f"reference={args.torch_device}/{args.dtype} tol={args.tol}")
    sys.exit(1 if failed or total == 0 else 0)


if __name__ == "__main__":
    main()
