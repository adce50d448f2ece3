#!/usr/bin/env python3
"""Runs the padded-sequence cases `examples/torch_export_varlen.rs` wrote through PyTorch and
compares the loss and every parameter gradient with the ones our device computed.

    python3 scripts/torch_compare_varlen.py DIR [DIR ...] [--dtype float64|float32] [--tol 1e-4]

Each case is `nn.RNN`/`nn.LSTM`/`nn.GRU` (num_layers=2, batch_first, one or two directions)
loaded with strict=True from <model>.safetensors, fed through
`pack_padded_sequence(lengths, enforce_sorted=False)`, and then either
- a linear head at every step of `pad_packed_sequence(total_length=steps)` (zeros past each
  length) with `CrossEntropyLoss(ignore_index=-100)` over every (sample, step), or
- a linear head on h_n of the top layer (`h_n[-1]`, or `cat(h_n[-2], h_n[-1])` for two
  directions: with packing, the forward state at each sample's last valid step and the reverse
  state after its pass) with `MSELoss`.
The reference runs on the CPU in float64 by default. One line per case:
    PASS|FAIL <dir> <model> device=<id> loss_rel=<e> grad_rel=<e> worst=<param>
then `torch_compare_varlen models=<n> failed=<k>`; exit status 1 when any case failed.
"""
import argparse
import json
import os
import sys

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

# The safetensors reader of the sibling script (this directory is on sys.path when run).
from torch_compare import read_safetensors


CELLS = {"rnn_tanh": nn.RNN, "lstm": nn.LSTM, "gru": nn.GRU}


class Padded(nn.Module):
    """Our layer indices as module names: `0` the recurrent layer, `1` the head."""

    def __init__(self, spec):
        super().__init__()
        dirs = 2 if spec["bidirectional"] else 1
        rnn = CELLS[spec["cell"]](
            spec["input_size"],
            spec["hidden_size"],
            num_layers=spec["num_layers"],
            bidirectional=spec["bidirectional"],
            batch_first=True,
        )
        self.add_module("0", rnn)
        self.add_module("1", nn.Linear(spec["hidden_size"] * dirs, spec["outputs"]))
        self.sequence = spec["head"] == "sequence_cross_entropy"
        self.dirs = dirs

    def forward(self, x, lengths):
        rnn, head = getattr(self, "0"), getattr(self, "1")
        packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        out, state = rnn(packed)
        if self.sequence:
            out, _ = pad_packed_sequence(out, batch_first=True, total_length=x.shape[1])
            return head(out)
        h_n = state[0] if isinstance(state, tuple) else state
        last = torch.cat([h_n[-2], h_n[-1]], dim=1) if self.dirs == 2 else h_n[-1]
        return head(last)


def rel(a, b):
    return (torch.linalg.vector_norm(a - b) / torch.linalg.vector_norm(b).clamp_min(1e-30)).item()


def compare(d, spec, dtype, tol):
    name = spec["name"]
    model = Padded(spec).to(dtype)
    state = {k: v.to(dtype) for k, v in read_safetensors(os.path.join(d, name + ".safetensors")).items()}
    model.load_state_dict(state, strict=True)
    io = read_safetensors(os.path.join(d, name + ".io.safetensors"))
    x = io["input"].to(dtype)
    lengths = io["lengths"].to(torch.int64)
    y = model(x, lengths)
    if model.sequence:
        labels = io["labels"].to(torch.int64)
        loss = nn.CrossEntropyLoss(ignore_index=-100)(y.reshape(-1, y.shape[-1]), labels.reshape(-1))
    else:
        loss = nn.MSELoss()(y, io["targets"].to(dtype))
    loss.backward()
    ours_loss = io["loss"].to(dtype)[0]
    loss_rel = abs(ours_loss.item() - loss.item()) / max(abs(loss.item()), 1e-30)
    worst, grad_rel = "-", 0.0
    for pname, p in model.named_parameters():
        e = rel(io["grad." + pname].to(dtype), p.grad)
        if e > grad_rel:
            worst, grad_rel = pname, e
    ok = loss_rel <= tol and grad_rel <= tol
    print(
        f"{'PASS' if ok else 'FAIL'} {d} {name} device={spec['device']} "
        f"loss_rel={loss_rel:.2e} grad_rel={grad_rel:.2e} worst={worst}"
    )
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("--dtype", default="float64", choices=["float64", "float32"])
    ap.add_argument("--tol", type=float, default=1e-4)
    a = ap.parse_args()
    dtype = getattr(torch, a.dtype)
    torch.backends.cudnn.enabled = False
    n = failed = 0
    for d in a.dirs:
        with open(os.path.join(d, "manifest.json")) as f:
            manifest = json.load(f)
        for spec in manifest["models"]:
            n += 1
            failed += 0 if compare(d, spec, dtype, a.tol) else 1
    print(f"torch_compare_varlen models={n} failed={failed}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
