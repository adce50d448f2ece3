#!/usr/bin/env python3
"""Roofline table of one profiled training step, from `ncu --csv` output.

    ncu --profile-from-start off --clock-control none --csv --metrics <METRICS> \
        .gpu-bundle/bin/workloads --device cuda:0 --only <figure> --profile <STEPS> > step.csv
    python3 scripts/roofline.py step.csv STEPS [FILE STEPS ...]   (STEPS: a number, or auto)

METRICS (what this script reads):
    gpu__time_duration.sum, dram__bytes_read.sum, dram__bytes_write.sum,
    sm__sass_thread_inst_executed_op_ffma_pred_on.sum, ..._fadd_pred_on.sum, ..._fmul_pred_on.sum,
    gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed,
    sm__throughput.avg.pct_of_peak_sustained_elapsed

Per kernel name: launches per step, time per step and its share, DRAM bytes and FP32 FLOPs per
step, the achieved GB/s and GFLOP/s, and ncu's speed-of-light percentages (memory and SM
throughput against the device's peak). `bound` is the larger of the two: how close the kernel
runs to the ceiling of whatever limits it.
"""
import csv
import sys
from collections import defaultdict


def load(path):
    kernels = defaultdict(dict)  # id -> metric -> value
    names = {}
    with open(path, newline="") as f:
        lines = [l for l in f if l.startswith('"')]
    for row in csv.DictReader(lines):
        kid = row["ID"]
        names[kid] = row["Kernel Name"]
        v = row["Metric Value"].replace(",", "")
        try:
            val = float(v)
        except ValueError:
            continue
        unit = row.get("Metric Unit", "")
        # Times in microseconds, sizes in bytes; ncu's unit names vary between versions.
        scale = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3,
                 "ms": 1e3, "second": 1e6, "s": 1e6, "byte": 1.0, "Kbyte": 1e3, "KB": 1e3,
                 "Mbyte": 1e6, "MB": 1e6, "Gbyte": 1e9, "GB": 1e9}.get(unit, 1.0)
        kernels[kid][row["Metric Name"]] = val * scale
    return names, kernels


def short(name):
    name = name.split("(")[0]
    for prefix in ("void ", "cutlass::Kernel2<", "cutlass_80_simt_", "sm90_xmma_"):
        if name.startswith(prefix):
            name = name[len(prefix):]
    return name[:48]


def aggregate(path, steps):
    """Per short kernel name: launches `n`, `us`, DRAM `bytes`, FP32 `flop` (all summed over the
    profiled steps) and the time-weighted speed-of-light sums `mem_w`, `sm_w`; and the step
    count (resolved when `auto`)."""
    names, kernels = load(path)
    if steps == "auto":
        # A window of launches from a timed loop: count the steps by the optimizer's launches.
        steps = max(1, sum(1 for k in names.values() if "adam_step" in k or "sgd_step" in k))
    steps = int(steps)
    rows = defaultdict(lambda: defaultdict(float))
    for kid, m in kernels.items():
        r = rows[short(names[kid])]
        r["n"] += 1
        r["us"] += m.get("gpu__time_duration.sum", 0.0)
        r["bytes"] += m.get("dram__bytes_read.sum", 0.0) + m.get("dram__bytes_write.sum", 0.0)
        r["flop"] += (2 * m.get("sm__sass_thread_inst_executed_op_ffma_pred_on.sum", 0.0)
                      + m.get("sm__sass_thread_inst_executed_op_fadd_pred_on.sum", 0.0)
                      + m.get("sm__sass_thread_inst_executed_op_fmul_pred_on.sum", 0.0))
        t = m.get("gpu__time_duration.sum", 0.0)
        r["mem_w"] += t * m.get("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", 0.0)
        r["sm_w"] += t * m.get("sm__throughput.avg.pct_of_peak_sustained_elapsed", 0.0)
    return rows, steps


def table(path, steps):
    rows, steps = aggregate(path, steps)
    total = sum(r["us"] for r in rows.values()) / steps
    print(f"## {path}: {total:.1f} us of kernel time per step ({steps} step(s) profiled)")
    print("| kernel | launches/step | us/step | share | MB/step | GB/s | GFLOP/step | GFLOP/s | mem % | SM % | bound % |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, r in sorted(rows.items(), key=lambda kv: -kv[1]["us"]):
        us = r["us"] / steps
        mem = r["mem_w"] / r["us"] if r["us"] else 0.0
        sm = r["sm_w"] / r["us"] if r["us"] else 0.0
        gbs = r["bytes"] / (r["us"] * 1e-6) / 1e9 if r["us"] else 0.0
        gfs = r["flop"] / (r["us"] * 1e-6) / 1e9 if r["us"] else 0.0
        print(f"| {name} | {r['n'] / steps:.0f} | {us:.1f} | {100 * us / total:.0f}% | "
              f"{r['bytes'] / steps / 1e6:.2f} | {gbs:.0f} | {r['flop'] / steps / 1e9:.3f} | {gfs:.0f} | "
              f"{mem:.0f} | {sm:.0f} | {max(mem, sm):.0f} |")
    print()


if __name__ == "__main__":
    args = sys.argv[1:]
    if len(args) < 2 or len(args) % 2:
        sys.exit("usage: roofline.py FILE STEPS [FILE STEPS ...]")
    for i in range(0, len(args), 2):
        table(args[i], args[i + 1])
