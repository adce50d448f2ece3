#!/usr/bin/env python3
"""Half-precision checkpoints between rnn and PyTorch, over the models `examples/torch_export.rs`
wrote (manifest.json, <model>.safetensors, <model>.io.safetensors and our
<model>.bf16.safetensors / <model>.f16.safetensors from `Network::save_as`).

    python3 scripts/torch_half.py DIR [--torch-device cuda|cpu]

For each model and each of bfloat16 and float16:
  ours-loads   our half checkpoint loads into the torch.nn model of that dtype with
               strict=True, and holds exactly our f32 weights rounded to that dtype by torch
               (round to nearest even, as `save_as` rounds);
  torch-writes PyTorch's own half checkpoint (the f32 model cast to the dtype, its state_dict)
               is written as <model>.torch-<dtype>.safetensors, with the model's forward output
               in that dtype as <model>.torch-<dtype>.out.safetensors, for
               `torch_export --check-half DIR` to load, predict and compare (within 1e-2).
One line per check, `PASS|FAIL <dir> <model> <dtype> <check> ...`, then a summary; exit 1 on any
failure. Needs torch only (safetensors are read and written here directly).
"""
import argparse
import json
import os
import struct
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_compare import Model, read_safetensors  # noqa: E402

DTYPES = {"bf16": (torch.bfloat16, "BF16"), "f16": (torch.float16, "F16")}


def write_safetensors(path, tensors, st_dtype):
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        blob = t.detach().contiguous().cpu().view(torch.uint8).numpy().tobytes() if t.numel() else b""
        header[name] = {"dtype": st_dtype, "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    header["__metadata__"] = {"format": "pt"}
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * ((8 - len(raw) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw + b"".join(blobs))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("dir")
    p.add_argument("--torch-device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = p.parse_args()
    dev = torch.device(args.torch_device)
    with open(os.path.join(args.dir, "manifest.json")) as f:
        manifest = json.load(f)
    total = failed = 0

    def report(ok, model, dtype, check, detail):
        nonlocal total, failed
        total += 1
        failed += not ok
        print(f"{'PASS' if ok else 'FAIL'} {args.dir} {model} {dtype} {check} {detail}", flush=True)

    for model in manifest["models"]:
        name = model["name"]
        f32_state = read_safetensors(os.path.join(args.dir, model["checkpoint"]))
        io = read_safetensors(os.path.join(args.dir, model["io"]))
        for key, (dtype, st_dtype) in DTYPES.items():
            try:
                ours = read_safetensors(os.path.join(args.dir, f"{name}.{key}.safetensors"),
                                        allowed=("F32", "BF16", "F16"))
                net = Model(model["layers"]).to(dtype)
                net.load_state_dict(ours, strict=True)
                wrong_kind = [k for k, v in ours.items() if v.dtype != dtype]
                mismatched = [k for k, v in net.state_dict().items()
                              if not torch.equal(v, f32_state[k].to(dtype))]
                ok = not wrong_kind and not mismatched
                report(ok, name, key, "ours-loads",
                       f"tensors={len(ours)} not_{st_dtype}={wrong_kind} differ={mismatched}")
            except Exception as e:  # a strict-load failure is a result, not a crash
                report(False, name, key, "ours-loads", f"{type(e).__name__}: {e}".replace("\n", " "))
            try:
                net = Model(model["layers"])
                net.load_state_dict(f32_state, strict=True)
                net = net.to(dev, dtype).eval()
                write_safetensors(os.path.join(args.dir, f"{name}.torch-{key}.safetensors"),
                                  net.state_dict(), st_dtype)
                x = io["input"]
                x = x.to(torch.long) if model["input"] == "ids" else x.to(dtype)
                with torch.no_grad():
                    y = net(x.to(dev)).to("cpu", torch.float32)
                write_safetensors(os.path.join(args.dir, f"{name}.torch-{key}.out.safetensors"),
                                  {"output": y}, "F32")
                report(True, name, key, "torch-writes", f"output={tuple(y.shape)} on {dev}")
            except Exception as e:
                report(False, name, key, "torch-writes", f"{type(e).__name__}: {e}".replace("\n", " "))
    print(f"torch_half checks={total} failed={failed} torch={torch.__version__} device={dev}")
    sys.exit(1 if failed or total == 0 else 0)


if __name__ == "__main__":
    main()
