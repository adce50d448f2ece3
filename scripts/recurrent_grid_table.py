"""Joins the recurrent shape grid's outputs into one markdown table per figure (train, infer).

    python3 recurrent_grid_table.py --torch TORCH.log --cuda RNN_CUDA.log [--opencl RNN_OPENCL.log]

TORCH.log is the output of scripts/recurrent_grid.py (NAME_train, NAME_train_graph, NAME_infer,
NAME_infer_graph), RNN_*.log the output of benches/recurrent_grid.rs on cuda:0 and on NVIDIA's
OpenCL (NAME_train and NAME_infer with alg=...). Points come in the order of the CUDA log. Each
table: ours, PyTorch eager and `_graph`, ours / `_graph` (lower is better), the algorithm ours
chose, ours on OpenCL and OpenCL / CUDA; then the summary the issue's done-when criteria read:
median ratio, worst point, points over 0.8 of `_graph`, points slower than eager, OpenCL points
over 1.5x CUDA.
"""
import argparse
import statistics
import sys

FIGURES = ("train", "infer")


def read_log(path):
    """{figure name: (microseconds or None, {key: value}, failure text or None)}, in order."""
    out = {}
    with open(path) as f:
        for line in f:
            words = line.split()
            if len(words) < 2 or words[0].startswith("#"):
                continue
            name = words[0]
            if words[1] == "failed":
                out[name] = (None, {}, " ".join(words[2:]))
                continue
            try:
                value = float(words[1])
            except ValueError:
                continue
            extra = dict(w.split("=", 1) for w in words[3:] if "=" in w)
            out[name] = (value, extra, None)
    return out


def points_of(log):
    """The point names of a log of ours, in order."""
    names = []
    for name in log:
        for fig in FIGURES:
            suffix = "_" + fig
            if name.endswith(suffix) and name[: -len(suffix)] not in names:
                names.append(name[: -len(suffix)])
    return names


def us(log, name):
    entry = log.get(name) if log else None
    return entry[0] if entry else None


def fmt(x, digits=1):
    return "-" if x is None else f"{x:.{digits}f}"


def table(fig, points, torch, cuda, opencl):
    """The markdown lines of one figure's table and summary."""
    lines = [f"### {fig}", "",
             "| point | ours us | torch eager us | torch graph us | ours/graph | algorithm "
             "| OpenCL us | OpenCL/CUDA | OpenCL algorithm |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    ratios, slower_than_eager, opencl_slow, failed = [], [], [], []
    for p in points:
        key = f"{p}_{fig}"
        ours = us(cuda, key)
        eager, graph = us(torch, key), us(torch, key + "_graph")
        ocl = us(opencl, key)
        alg = cuda.get(key, (None, {}, None))[1].get("alg", "-")
        ocl_alg = opencl.get(key, (None, {}, None))[1].get("alg", "-") if opencl else "-"
        ratio = ours / graph if ours and graph else None
        ocl_ratio = ocl / ours if ocl and ours else None
        for log, who in ((cuda, "ours"), (torch, "torch"), (torch, "torch graph"), (opencl, "OpenCL")):
            k = key + ("_graph" if who == "torch graph" else "")
            if log and log.get(k, (0, {}, None))[2]:
                failed.append(f"{p} ({who}: {log[k][2][:80]})")
        if ratio is not None:
            ratios.append((ratio, p))
        if ours is not None and eager is not None and ours > eager:
            slower_than_eager.append(f"{p} ({ours / eager:.2f}x eager)")
        if ocl_ratio is not None and ocl_ratio > 1.5:
            opencl_slow.append(f"{p} ({ocl_ratio:.2f})")
        lines.append(f"| {p} | {fmt(ours)} | {fmt(eager)} | {fmt(graph)} | {fmt(ratio, 2)} | {alg} "
                     f"| {fmt(ocl)} | {fmt(ocl_ratio, 2)} | {ocl_alg} |")
    lines.append("")
    over = [f"{p} ({r:.2f})" for r, p in ratios if r > 0.8]
    if ratios:
        worst = max(ratios)
        lines.append(f"- median ours/graph: {statistics.median(r for r, _ in ratios):.2f} "
                     f"over {len(ratios)} points")
        lines.append(f"- worst point: {worst[1]} ({worst[0]:.2f})")
    else:
        lines.append("- no point has both ours and torch `_graph`")
    lines.append(f"- points over 0.8 of `_graph`: {len(over)}" + (": " + ", ".join(over) if over else ""))
    lines.append(f"- points slower than eager: {len(slower_than_eager)}"
                 + (": " + ", ".join(slower_than_eager) if slower_than_eager else ""))
    if opencl:
        lines.append(f"- OpenCL points over 1.5x CUDA: {len(opencl_slow)}"
                     + (": " + ", ".join(opencl_slow) if opencl_slow else ""))
    if failed:
        lines.append(f"- failed: {len(failed)}: " + "; ".join(failed))
    lines.append("")
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--torch", required=True, help="scripts/recurrent_grid.py's output")
    ap.add_argument("--cuda", required=True, help="benches/recurrent_grid.rs's output on cuda:0")
    ap.add_argument("--opencl", help="benches/recurrent_grid.rs's output on NVIDIA OpenCL")
    args = ap.parse_args()
    try:
        torch, cuda = read_log(args.torch), read_log(args.cuda)
        opencl = read_log(args.opencl) if args.opencl else {}
    except OSError as e:
        sys.exit(f"recurrent_grid_table.py: {e}")
    points = points_of(cuda)
    if not points:
        sys.exit(f"recurrent_grid_table.py: no point in {args.cuda}")
    header = [line.strip()[2:] for path in (args.torch, args.cuda, args.opencl) if path
              for line in open(path) if line.startswith("# recurrent_grid")]
    out = ["## Recurrent shape grid", ""] + [f"- {h}" for h in header] + [""]
    for fig in FIGURES:
        out += table(fig, points, torch, cuda, opencl)
    print("\n".join(out))


if __name__ == "__main__":
    main()
