"""PyTorch's side of the recurrent shape grid (issue 27), in the style of pytorch_reference.py.

The grid is benches/recurrent_grid.points (one source of truth: benches/recurrent_grid.rs times
the same points); this script finds it next to itself (the GPU bundle) or in ../benches.

    python3 recurrent_grid.py points [--points FILE]          the grid as JSON (no torch needed)
    python3 recurrent_grid.py cuda [--points FILE] [--only A,B] [--autocast bf16|f16]
                                                              time every point

Every point: nn.RNN (tanh) / nn.LSTM / nn.GRU with num_layers and bidirectional, batch_first,
input 96 one-hot features a step, nn.Linear(hidden * directions, 96) at every step, softmax
cross-entropy, Adam (lr 1e-3); fp32 with TF32 off (cuBLAS and cuDNN). Four figures a point:
  NAME_train         one eager training step (zero grad, forward, loss, backward, Adam)
  NAME_train_graph   the whole step captured once in a CUDA graph (Adam capturable=True) and
                     replayed, as pytorch_reference.py does W5
  NAME_infer         one eager forward under torch.no_grad() (the logits of every step)
  NAME_infer_graph   that forward captured in a CUDA graph and replayed
Each figure is the median over 5 repetitions (CUDA events) after a warm-up, a repetition as many
back-to-back calls as fill about 10 ms. Prints one line per figure: `name value us`, or
`name failed ERROR` (a point that does not fit or a capture PyTorch refuses is not fatal).

With `--autocast bf16|f16` every forward (and the loss) runs under
`torch.autocast("cuda", dtype)`, as pytorch_reference.py's `_bf16` figures do: the names gain
`_bf16`/`_f16` after the point's (`NAME_bf16_train_graph`), as benches/recurrent_grid.rs
`--precision` prints them; f16 training scales the loss with a GradScaler.
"""
import json
import os
import sys

VOCAB = 96
CELLS = ("elman", "lstm", "gru")


def default_points():
    here = os.path.dirname(os.path.abspath(__file__))
    for path in (os.path.join(here, "recurrent_grid.points"),
                 os.path.join(here, "..", "benches", "recurrent_grid.points")):
        if os.path.exists(path):
            return path
    sys.exit("recurrent_grid.py: no recurrent_grid.points next to the script or in ../benches")


def parse_point(line, where):
    """`cell hidden batch steps layers uni|bi [quick]`, as benches/recurrent_grid.rs reads it."""
    words = line.split()
    if len(words) not in (6, 7) or words[0] not in CELLS or words[5] not in ("uni", "bi") \
            or (len(words) == 7 and words[6] != "quick"):
        raise ValueError(f"{where}: expected `cell hidden batch steps layers uni|bi [quick]`")
    try:
        hidden, batch, steps, layers = (int(w) for w in words[1:5])
    except ValueError:
        raise ValueError(f"{where}: hidden, batch, steps and layers must be integers") from None
    if min(hidden, batch, steps, layers) <= 0:
        raise ValueError(f"{where}: hidden, batch, steps and layers must be positive")
    p = dict(cell=words[0], hidden=hidden, batch=batch, steps=steps, layers=layers,
             bidirectional=words[5] == "bi", quick=len(words) == 7)
    p["name"] = "{cell}_h{hidden}_b{batch}_t{steps}_l{layers}_".format(**p) + words[5]
    return p


def read_points(path):
    points = []
    with open(path) as f:
        for i, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if line:
                points.append(parse_point(line, f"{path}:{i}"))
    return points


def time_points(points, autocast=None):
    import contextlib

    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)
    dev = "cuda"
    low = {"bf16": torch.bfloat16, "f16": torch.float16}.get(autocast)

    def cast_scope():
        return torch.autocast("cuda", dtype=low) if low else contextlib.nullcontext()

    class GridModel(nn.Module):
        def __init__(self, p):
            super().__init__()
            kw = dict(num_layers=p["layers"], bidirectional=p["bidirectional"], batch_first=True)
            if p["cell"] == "elman":
                self.rec = nn.RNN(VOCAB, p["hidden"], nonlinearity="tanh", **kw)
            else:
                self.rec = (nn.LSTM if p["cell"] == "lstm" else nn.GRU)(VOCAB, p["hidden"], **kw)
            dirs = 2 if p["bidirectional"] else 1
            self.head = nn.Linear(p["hidden"] * dirs, VOCAB)

        def forward(self, x):
            return self.head(self.rec(x)[0])

    def median_us(fn, warm=3, reps=5, rep_seconds=0.01, max_calls=200):
        for _ in range(warm):
            fn()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        s.record()
        fn()
        e.record()
        e.synchronize()
        one = max(s.elapsed_time(e) / 1e3, 1e-7)
        calls = min(max(int(-(-rep_seconds // one)), 1), max_calls)
        times = []
        for _ in range(reps):
            s.record()
            for _ in range(calls):
                fn()
            e.record()
            e.synchronize()
            times.append(s.elapsed_time(e) / calls * 1e3)
        return sorted(times)[len(times) // 2]

    def case(p):
        m = GridModel(p).to(dev)
        b, t = p["batch"], p["steps"]
        x = F.one_hot(torch.randint(0, VOCAB, (b, t), device=dev), VOCAB).float()
        y = torch.randint(0, VOCAB, (b, t), device=dev)
        return m, x, y

    def loss_fn(m, x, y):
        with cast_scope():
            return F.cross_entropy(m(x).reshape(-1, VOCAB), y.reshape(-1))

    def graphed(fn):
        """`fn` run three times on a side stream, then captured once in a CUDA graph: its replay."""
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                fn()
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            fn()
        return g.replay

    def train_step(p, graph):
        """pytorch_reference.py's train_step: eager, or the whole step in one CUDA graph."""
        model, x, y = case(p)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3, capturable=graph)
        scaler = torch.amp.GradScaler("cuda") if autocast == "f16" else None

        def step():
            opt.zero_grad(set_to_none=not graph)
            loss = loss_fn(model, x, y)
            if scaler:
                scaler.scale(loss).backward()
                scaler.step(opt)
                scaler.update()
            else:
                loss.backward()
                opt.step()

        return graphed(step) if graph else step

    def infer(p, graph):
        model, x, _ = case(p)
        model.eval()

        def forward():
            with torch.no_grad(), cast_scope():
                return model(x)

        return graphed(forward) if graph else forward

    def emit(name, make):
        try:
            print(f"{name} {median_us(make()):.1f} us", flush=True)
        except Exception as e:  # out of memory, a refused capture: reported, not fatal
            print(f"{name} failed {type(e).__name__}: {str(e)[:160]}".replace("\n", " "), flush=True)
        torch.cuda.synchronize()
        torch.cuda.empty_cache()

    print(f"# recurrent_grid torch={torch.__version__} device={torch.cuda.get_device_name()} "
          f"points={len(points)} autocast={autocast or 'off'}", flush=True)
    for p in points:
        n = p["name"] + (f"_{autocast}" if autocast else "")
        emit(n + "_train", lambda: train_step(p, graph=False))
        emit(n + "_train_graph", lambda: train_step(p, graph=True))
        emit(n + "_infer", lambda: infer(p, graph=False))
        emit(n + "_infer_graph", lambda: infer(p, graph=True))


def main(argv):
    usage = "usage: recurrent_grid.py points|cuda [--points FILE] [--only A,B] [--autocast bf16|f16]"
    if not argv or argv[0] not in ("points", "cuda"):
        sys.exit(usage)
    mode, path, only, autocast = argv[0], None, None, None
    rest = argv[1:]
    while rest:
        flag = rest.pop(0)
        if flag in ("--points", "--only", "--autocast") and rest:
            value = rest.pop(0)
            if flag == "--points":
                path = value
            elif flag == "--autocast":
                if value not in ("bf16", "f16"):
                    sys.exit(f"recurrent_grid.py: --autocast takes bf16 or f16, not '{value}'")
                autocast = value
            else:
                only = [s.strip() for s in value.split(",")]
        else:
            sys.exit(f"recurrent_grid.py: unknown argument '{flag}'\n{usage}")
    try:
        points = read_points(path or default_points())
    except (OSError, ValueError) as e:
        sys.exit(f"recurrent_grid.py: {e}")
    if only:
        points = [p for p in points if any(s in p["name"] for s in only)]
    if mode == "points":
        print(json.dumps(points, indent=1))
    else:
        time_points(points, autocast)


if __name__ == "__main__":
    main(sys.argv[1:])
