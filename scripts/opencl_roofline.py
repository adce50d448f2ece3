#!/usr/bin/env python3
"""OpenCL roofline table: the OpenCL kernel times of one training step joined with the Nsight
Compute table of the same figure on CUDA (Nsight Compute cannot profile OpenCL kernels).

    RNN_PROFILE_KERNELS=1 workloads --device opencl:P:D --only <figure> --profile 2 > ocl.log
    python3 scripts/opencl_roofline.py ocl.log [--ncu-dir DIR] [--ncu-steps 2]
        [--device-name NAME | --peak-gbs GB/s --peak-gflops GFLOP/s]
    python3 scripts/opencl_roofline.py --self-test

`ocl.log` holds one or more `## OpenCL kernel times: FIGURE on ID (NAME), N step(s)` tables
(benches/workloads.rs `--profile` on an OpenCL device). For each figure, DIR/ncu-FIGURE.csv
(scripts/gpu-machine.sh `profile` writes $OUT/ncu-<figure>.csv; DIR defaults to the log's
directory) is read with roofline.py's parser, for that many profiled steps.

Per kernel name present in both: OpenCL and CUDA time per step, the DRAM bytes and FP32 FLOPs
ncu measured for the CUDA kernel (the same algorithm on the same shapes moves the same bytes and
does the same FLOPs), and the fraction of the device's bound each implementation reaches with
them: max(bytes/time / peak bandwidth, FLOPs/time / peak FP32 rate), the roofline bound for
the kernel's arithmetic intensity. The peaks are datasheet figures picked from the device name
in the OpenCL table (or --device-name, or given directly); ncu's own speed-of-light percentage
of the CUDA kernel is printed alongside as a check on them. Kernels only one side runs (OpenCL's
per-step kernels where CUDA runs one persistent kernel, OpenCL GEMMs where CUDA calls cuBLAS)
are listed with their time and "no CUDA counterpart" / "no OpenCL counterpart"; a last row
compares all GEMM kernels of each side as a group, with the FLOPs ncu counted for CUDA's.

DRAM bytes understate the traffic of a kernel whose data stays in L2 (50 MB on H100), so its
bandwidth fraction is a lower bound there.
"""
import argparse
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import roofline  # noqa: E402  (its ncu CSV parser and kernel-name shortening)

# Datasheet peaks: (name fragment, DRAM GB/s, FP32 GFLOP/s without tensor cores). First match
# wins, so the more specific fragments come first.
PEAKS = [
    ("H100 PCIe", 2000.0, 51200.0),
    ("H100 NVL", 3900.0, 60000.0),
    ("H100", 3350.0, 66900.0),  # SXM5, "NVIDIA H100 80GB HBM3"
    ("H200", 4800.0, 66900.0),
    ("A100", 2039.0, 19500.0),  # 80 GB SXM
]

HEADING = re.compile(r"^## OpenCL kernel times: (\S+) on (\S+) \((.*)\), (\d+) step")
ROW = re.compile(r"^\|\s*([^|]+?)\s*\|\s*([0-9.]+)\s*\|\s*([0-9.]+)\s*\|\s*([0-9.]+)%\s*\|\s*$")
TOTAL = re.compile(r"^kernel_time_per_step (\S+) ([0-9.]+) us; wall_per_step ([0-9.]+) us")


def load_opencl(path):
    """{figure: {"device", "name", "steps", "kernels": {entry: (launches/step, us/step)},
    "kernel_us", "wall_us"}} from a bench log (other lines are ignored)."""
    figures, current = {}, None
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            m = HEADING.match(line)
            if m:
                current = figures.setdefault(m.group(1), {
                    "device": m.group(2), "name": m.group(3), "steps": int(m.group(4)),
                    "kernels": {}, "kernel_us": None, "wall_us": None})
                continue
            m = TOTAL.match(line)
            if m and m.group(1) in figures:
                figures[m.group(1)]["kernel_us"] = float(m.group(2))
                figures[m.group(1)]["wall_us"] = float(m.group(3))
                current = None
                continue
            m = ROW.match(line)
            if m and current is not None:
                current["kernels"][m.group(1)] = (float(m.group(2)), float(m.group(3)))
    return figures


def key(name):
    """The name both sides share: ncu's short name without template arguments."""
    return roofline.short(name).split("<")[0].rstrip("> ")


def peaks_for(device_name):
    for fragment, gbs, gflops in PEAKS:
        if fragment.lower() in device_name.lower():
            return gbs, gflops, fragment
    return None


def fraction(bytes_, flop, us, peak_gbs, peak_gflops):
    """Percent of the roofline bound, the larger of the bandwidth and FP32-rate fractions, as
    table text ("n/a" without peaks)."""
    if peak_gbs is None or peak_gflops is None:
        return "n/a"
    if us <= 0:
        return "0%"
    s = us * 1e-6
    return f"{100.0 * max(bytes_ / s / (peak_gbs * 1e9), flop / s / (peak_gflops * 1e9)):.0f}%"


def join(figure, ocl, ncu_path, ncu_steps, peak_gbs, peak_gflops, out=sys.stdout):
    p = lambda *a: print(*a, file=out)  # noqa: E731
    total = sum(us for _, us in ocl["kernels"].values())
    p(f"## {figure}: OpenCL {ocl['device']} ({ocl['name']}) vs CUDA (ncu)")
    cuda = {}
    have_ncu = bool(ncu_path) and os.path.exists(ncu_path)
    if have_ncu:
        rows, steps = roofline.aggregate(ncu_path, ncu_steps)
        for name, r in rows.items():
            c = cuda.setdefault(key(name), {"n": 0.0, "us": 0.0, "bytes": 0.0, "flop": 0.0,
                                            "mem_w": 0.0, "sm_w": 0.0})
            for k in c:
                c[k] += r[k] / steps
        cuda_total = sum(c["us"] for c in cuda.values())
        p(f"OpenCL kernel time {total:.1f} us/step (wall {ocl['wall_us'] or 0:.1f} us/step, "
          f"timer on); CUDA kernel time {cuda_total:.1f} us/step ({ncu_path}, {steps} step(s)); "
          f"peaks {peak_gbs or 'unknown'} GB/s, {peak_gflops or 'unknown'} GFLOP/s")
    else:
        p(f"OpenCL kernel time {total:.1f} us/step (wall {ocl['wall_us'] or 0:.1f} us/step); "
          f"no ncu table ({ncu_path or 'none given'}): OpenCL times only")
    p("| kernel | OpenCL launches/step | OpenCL us/step | share | CUDA launches/step | "
      "CUDA us/step | OpenCL / CUDA | MB/step (ncu) | GFLOP/step (ncu) | OpenCL GB/s | "
      "OpenCL % of bound | CUDA % of bound | ncu bound % |")
    p("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    seen = set()
    for entry, (n, us) in sorted(ocl["kernels"].items(), key=lambda kv: -kv[1][1]):
        share = 100.0 * us / total if total else 0.0
        c = cuda.get(key(entry))
        if c is None:
            missing = "no CUDA counterpart" if have_ncu else "(no ncu table)"
            p(f"| {entry} | {n:g} | {us:.1f} | {share:.1f}% | {missing} | | | | | | | | |")
            continue
        seen.add(key(entry))
        ncu_bound = max(c["mem_w"], c["sm_w"]) / c["us"] if c["us"] else 0.0
        gbs = c["bytes"] / (us * 1e-6) / 1e9 if us else 0.0
        p(f"| {entry} | {n:g} | {us:.1f} | {share:.1f}% | {c['n']:g} | {c['us']:.1f} | "
          f"{us / c['us'] if c['us'] else float('inf'):.2f} | {c['bytes'] / 1e6:.2f} | "
          f"{c['flop'] / 1e9:.3f} | {gbs:.0f} | "
          f"{fraction(c['bytes'], c['flop'], us, peak_gbs, peak_gflops)} | "
          f"{fraction(c['bytes'], c['flop'], c['us'], peak_gbs, peak_gflops)} | "
          f"{ncu_bound:.0f}% |")
    for name, c in sorted(cuda.items(), key=lambda kv: -kv[1]["us"]):
        if name not in seen:
            ncu_bound = max(c["mem_w"], c["sm_w"]) / c["us"] if c["us"] else 0.0
            p(f"| {name} | no OpenCL counterpart | | | {c['n']:g} | {c['us']:.1f} | | "
              f"{c['bytes'] / 1e6:.2f} | {c['flop'] / 1e9:.3f} | | | "
              f"{fraction(c['bytes'], c['flop'], c['us'], peak_gbs, peak_gflops)} | "
              f"{ncu_bound:.0f}% |")
    # GEMMs by any kernel (OpenCL sgemm_split/sgemm_tile64_split and their sums vs cuBLAS or our CUDA GEMM kernels) do the
    # same FLOPs per step, so the totals compare even where the kernels do not pair up.
    is_gemm = lambda name: "gemm" in name.lower() or "splitk" in name.lower()  # noqa: E731
    ocl_gemm = sum(us for e, (_, us) in ocl["kernels"].items() if is_gemm(e))
    cuda_gemm = [c for name, c in cuda.items() if is_gemm(name)]
    if ocl_gemm and cuda_gemm:
        c = {k: sum(g[k] for g in cuda_gemm) for k in ("us", "bytes", "flop")}
        p(f"| all GEMM kernels | | {ocl_gemm:.1f} | {100.0 * ocl_gemm / total:.1f}% | | "
          f"{c['us']:.1f} | {ocl_gemm / c['us'] if c['us'] else float('inf'):.2f} | "
          f"{c['bytes'] / 1e6:.2f} | {c['flop'] / 1e9:.3f} | "
          f"{c['bytes'] / (ocl_gemm * 1e-6) / 1e9:.0f} | "
          f"{fraction(c['bytes'], c['flop'], ocl_gemm, peak_gbs, peak_gflops)} | "
          f"{fraction(c['bytes'], c['flop'], c['us'], peak_gbs, peak_gflops)} | |")
    p()


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("log", nargs="?", help="bench output with OpenCL kernel-time tables")
    ap.add_argument("--ncu-dir", help="where ncu-<figure>.csv lie (default: the log's directory)")
    ap.add_argument("--ncu-steps", default="2", help="steps each ncu CSV profiled (or auto)")
    ap.add_argument("--device-name", help="picks the peaks (default: the OpenCL device's name)")
    ap.add_argument("--peak-gbs", type=float, help="DRAM bandwidth bound, GB/s")
    ap.add_argument("--peak-gflops", type=float, help="FP32 rate bound, GFLOP/s")
    ap.add_argument("--self-test", action="store_true", help="run on synthetic tables and check")
    a = ap.parse_args(argv)
    if a.self_test:
        return self_test()
    if not a.log:
        ap.error("the bench log is required")
    figures = load_opencl(a.log)
    if not figures:
        sys.exit(f"{a.log}: no '## OpenCL kernel times:' table")
    ncu_dir = a.ncu_dir or os.path.dirname(os.path.abspath(a.log))
    for figure, ocl in figures.items():
        name = a.device_name or ocl["name"]
        found = peaks_for(name)
        gbs = a.peak_gbs or (found[0] if found else None)
        gflops = a.peak_gflops or (found[1] if found else None)
        if gbs is None or gflops is None:
            print(f"no datasheet peaks known for '{name}' (give --peak-gbs and --peak-gflops): "
                  "fractions of the bound are n/a", file=sys.stderr)
        join(figure, ocl, os.path.join(ncu_dir, f"ncu-{figure}.csv"), a.ncu_steps, gbs, gflops)
    return 0


def self_test():
    """A synthetic OpenCL table and ncu CSV (2 steps) of one figure: the joined numbers."""
    log = """device opencl:0:0 (NVIDIA H100 80GB HBM3), GEMM: vendor BLAS where present
## OpenCL kernel times: w1_mlp_b256_step on opencl:0:0 (NVIDIA H100 80GB HBM3), 2 step(s)
| kernel | launches/step | us/step | share |
| --- | --- | --- | --- |
| sgemm | 8 | 60.0 | 60.0% |
| sum_rows | 3 | 30.0 | 30.0% |
| copy | 2 | 10.0 | 10.0% |
kernel_time_per_step w1_mlp_b256_step 100.0 us; wall_per_step 150.0 us (the timer's events included)
"""
    header = '"ID","Kernel Name","Metric Name","Metric Unit","Metric Value"\n'
    rows = []
    kid = 0
    # Per step: sum_rows 3 launches of 4 us, 1 MB read + 0.2 MB written each; a cuBLAS GEMM.
    for _ in range(2):
        for _ in range(3):
            for metric, unit, value in [
                ("gpu__time_duration.sum", "usecond", "4"),
                ("dram__bytes_read.sum", "Mbyte", "1"),
                ("dram__bytes_write.sum", "Kbyte", "200"),
                ("sm__sass_thread_inst_executed_op_fadd_pred_on.sum", "inst", "1,000"),
                ("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", "%", "10"),
                ("sm__throughput.avg.pct_of_peak_sustained_elapsed", "%", "5"),
            ]:
                rows.append(f'"{kid}","sum_rows(const float *, float *, unsigned int)",'
                            f'"{metric}","{unit}","{value}"\n')
            kid += 1
        for metric, unit, value in [("gpu__time_duration.sum", "nsecond", "20000"),
                                    ("sm__sass_thread_inst_executed_op_ffma_pred_on.sum", "inst",
                                     "500000000")]:
            rows.append(f'"{kid}","sm90_xmma_gemm_f32f32_tn(params)","{metric}","{unit}",'
                        f'"{value}"\n')
        kid += 1
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "ocl.log")
        with open(path, "w") as f:
            f.write(log)
        with open(os.path.join(d, "ncu-w1_mlp_b256_step.csv"), "w") as f:
            f.write("==PROF== Connected to process\n" + header + "".join(rows))
        figures = load_opencl(path)
        assert list(figures) == ["w1_mlp_b256_step"], figures
        ocl = figures["w1_mlp_b256_step"]
        assert ocl["kernels"] == {"sgemm": (8.0, 60.0), "sum_rows": (3.0, 30.0),
                                  "copy": (2.0, 10.0)}, ocl
        assert (ocl["steps"], ocl["kernel_us"], ocl["wall_us"]) == (2, 100.0, 150.0), ocl
        gbs, gflops, _ = peaks_for(ocl["name"])
        assert (gbs, gflops) == (3350.0, 66900.0)
        import io
        buf = io.StringIO()
        join("w1_mlp_b256_step", ocl, os.path.join(d, "ncu-w1_mlp_b256_step.csv"), "2",
             gbs, gflops, out=buf)
        text = buf.getvalue()
        print(text)
        line = next(l for l in text.splitlines() if l.startswith("| sum_rows |"))
        cells = [c.strip() for c in line.strip("|").split("|")]
        # 3 launches x 1.2 MB per step = 3.6 MB in 30 us on OpenCL (120 GB/s, 3.6% of 3350)
        # and in 12 us on CUDA (300 GB/s, 9%); ncu's bound: max(10, 5) = 10%.
        assert cells[4:] == ["3", "12.0", "2.50", "3.60", "0.000", "120", "4%", "9%", "10%"], cells
        assert "| sgemm | 8 | 60.0 | 60.0% | no CUDA counterpart" in text, text
        assert "| copy | 2 | 10.0 | 10.0% | no CUDA counterpart" in text, text
        # 5e8 FFMA = 1 GFLOP per step in 20 us: 50 TFLOP/s, 75% of 66.9.
        gemm = next(l for l in text.splitlines() if l.startswith("| gemm_f32f32_tn |"))
        assert "no OpenCL counterpart" in gemm and "| 75% | 0% |" in gemm, gemm
        # The GEMMs as a group: OpenCL's 60 us for CUDA's 1 GFLOP is 16.7 TFLOP/s, 25%.
        group = next(l for l in text.splitlines() if l.startswith("| all GEMM kernels |"))
        cells = [c.strip() for c in group.strip("|").split("|")]
        assert cells[1:] == ["", "60.0", "60.0%", "", "20.0", "3.00", "0.00", "1.000", "0",
                             "25%", "75%", ""], cells
    print("self-test passed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
