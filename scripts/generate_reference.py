"""PyTorch's side of benches/generate.rs: tokens per second of examples/char_lstm's model
(nn.Embedding(V, 32), a 2-layer nn.LSTM, nn.Linear(H, V), V the characters of the play) drawing
one token per step from a carried (h, c), as a user of PyTorch writes generation.

    python3 generate_reference.py [cuda|cpu] [--hidden 128,512] [--batch 1,32] [--seconds S]
    python3 generate_reference.py table RNN_LOG TORCH_LOG      the figures side by side (markdown)

Every figure warms the state up on a 16-token prompt, then draws tokens one step a call: the
ids go to the device, the step runs, the logits come back to the host, and the next ids are
their arg-max there, exactly as the Rust bench does (batch sequences side by side). Two figures
per (hidden, batch), fp32 with TF32 off:
  generate_h{H}_b{B}_torch         eager, under torch.no_grad()
  generate_h{H}_b{B}_torch_graph   the step (embedding, LSTM, head, and the copy of the new
                                   (h, c) over the old) captured once in a CUDA graph and
                                   replayed; CUDA only
Each figure is wall-clock tokens per second over as many calls as fill --seconds (default 2)
after 3 warm-up calls. Prints one line per figure: `name value tokens/s`, or `name failed ERROR`.
"""
import os
import re
import sys
import time

EMBED = 32
PROMPT = 16
WARM_UP = 3


def vocab_size():
    """The distinct characters of the play, as CharCorpus counts them."""
    here = os.path.dirname(os.path.abspath(__file__))
    for path in (os.path.join(here, "..", "examples", "data", "asyoulik.txt"),
                 os.path.join(here, "asyoulik.txt")):
        if os.path.exists(path):
            with open(path, encoding="utf-8", newline="") as f:
                return len(set(f.read()))
    sys.exit("generate_reference.py: examples/data/asyoulik.txt not found")


def time_figures(dev, hiddens, batches, seconds):
    import torch
    import torch.nn as nn

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)
    cuda = dev == "cuda"
    vocab = vocab_size()

    class CharModel(nn.Module):
        def __init__(self, hidden):
            super().__init__()
            self.emb = nn.Embedding(vocab, EMBED)
            self.lstm = nn.LSTM(EMBED, hidden, num_layers=2, batch_first=True)
            self.head = nn.Linear(hidden, vocab)

        def forward(self, ids, h, c):
            out, (h, c) = self.lstm(self.emb(ids), (h, c))
            return self.head(out[:, -1]), h, c

    def rate(batch, step):
        """Tokens per second of `step()`, which draws one token of every sequence."""
        for _ in range(WARM_UP):
            step()
        start, calls = time.perf_counter(), 0
        while calls < 10 or time.perf_counter() - start < seconds:
            step()
            calls += 1
        return calls * batch / (time.perf_counter() - start)

    def eager(model, batch, hidden):
        h = torch.zeros(2, batch, hidden, device=dev)
        c = torch.zeros_like(h)
        prompt = torch.randint(0, vocab, (batch, PROMPT))
        with torch.no_grad():
            logits, h, c = model(prompt.to(dev), h, c)
        state = {"tokens": logits.cpu().argmax(1, keepdim=True), "h": h, "c": c}

        def step():
            with torch.no_grad():
                logits, state["h"], state["c"] = model(state["tokens"].to(dev), state["h"],
                                                       state["c"])
            state["tokens"] = logits.cpu().argmax(1, keepdim=True)

        return step

    def graphed(model, batch, hidden):
        h = torch.zeros(2, batch, hidden, device=dev)
        c = torch.zeros_like(h)
        prompt = torch.randint(0, vocab, (batch, PROMPT))
        ids = torch.zeros(batch, 1, dtype=torch.long, device=dev)
        with torch.no_grad():
            logits, h1, c1 = model(prompt.to(dev), h, c)
            h.copy_(h1)
            c.copy_(c1)
        tokens = logits.cpu().argmax(1, keepdim=True)

        def body():
            logits, h1, c1 = model(ids, h, c)
            h.copy_(h1)
            c.copy_(c1)
            return logits

        # Warmed on a side stream, then captured: the graph reads `ids`, `h`, `c` and writes
        # `h`, `c` and `out` in place; the saved state is put back after the warm-up.
        saved = (h.clone(), c.clone())
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side), torch.no_grad():
            for _ in range(3):
                body()
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g), torch.no_grad():
            out = body()
        h.copy_(saved[0])
        c.copy_(saved[1])
        state = {"tokens": tokens}

        def step():
            ids.copy_(state["tokens"])
            g.replay()
            state["tokens"] = out.cpu().argmax(1, keepdim=True)

        return step

    def emit(name, batch, make):
        try:
            print(f"{name} {rate(batch, make()):.1f} tokens/s", flush=True)
        except Exception as e:  # out of memory, a refused capture: reported, not fatal
            print(f"{name} failed {type(e).__name__}: {str(e)[:160]}".replace("\n", " "), flush=True)
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.empty_cache()

    where = torch.cuda.get_device_name() if cuda else "cpu"
    print(f"# generate_reference torch={torch.__version__} device={where} vocab={vocab}",
          flush=True)
    for hidden in hiddens:
        model = CharModel(hidden).to(dev).eval()
        for batch in batches:
            name = f"generate_h{hidden}_b{batch}"
            emit(name + "_torch", batch, lambda: eager(model, batch, hidden))
            if cuda:
                emit(name + "_torch_graph", batch, lambda: graphed(model, batch, hidden))


def table(rnn_log, torch_log):
    """The figures of both logs by (hidden, batch), with ours over PyTorch's."""
    figures = {}
    for path in (rnn_log, torch_log):
        with open(path) as f:
            for line in f:
                m = re.match(r"generate_h(\d+)_b(\d+)_(\w+) ([0-9.]+) tokens/s", line)
                if m:
                    figures.setdefault((int(m[1]), int(m[2])), {})[m[3]] = float(m[4])
    cols = ("stepper", "window", "torch", "torch_graph")
    print("| hidden | batch | " + " | ".join(f"{c} tokens/s" for c in cols)
          + " | stepper / torch | stepper / torch_graph |")
    print("|---" * (len(cols) + 4) + "|")
    for (hidden, batch), f in sorted(figures.items()):
        cells = [f"{f[c]:.0f}" if c in f else "-" for c in cols]
        ratios = [f"{f['stepper'] / f[c]:.2f}" if "stepper" in f and f.get(c) else "-"
                  for c in ("torch", "torch_graph")]
        print(f"| {hidden} | {batch} | " + " | ".join(cells + ratios) + " |")


def counts(value, flag):
    try:
        out = [int(v) for v in value.split(",")]
    except ValueError:
        out = []
    if not out or min(out) <= 0:
        sys.exit(f"generate_reference.py: {flag} takes positive counts, got '{value}'")
    return out


def main(argv):
    usage = ("usage: generate_reference.py [cuda|cpu] [--hidden H,H] [--batch B,B] [--seconds S]"
             " | table RNN_LOG TORCH_LOG")
    if argv and argv[0] == "table":
        if len(argv) != 3:
            sys.exit(usage)
        table(argv[1], argv[2])
        return
    dev, hiddens, batches, seconds = "cuda", [128, 512], [1, 32], 2.0
    rest = list(argv)
    if rest and rest[0] in ("cuda", "cpu"):
        dev = rest.pop(0)
    while rest:
        flag = rest.pop(0)
        if flag in ("--hidden", "--batch", "--seconds") and rest:
            value = rest.pop(0)
            if flag == "--hidden":
                hiddens = counts(value, flag)
            elif flag == "--batch":
                batches = counts(value, flag)
            else:
                try:
                    seconds = float(value)
                except ValueError:
                    seconds = 0.0
                if not seconds > 0.0:
                    sys.exit(f"generate_reference.py: --seconds takes a number > 0, got '{value}'")
        else:
            sys.exit(f"generate_reference.py: unknown argument '{flag}'\n{usage}")
    time_figures(dev, hiddens, batches, seconds)


if __name__ == "__main__":
    main(sys.argv[1:])
