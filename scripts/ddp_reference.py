"""PyTorch DistributedDataParallel reference for rnn's data-parallel throughput
(examples/data_parallel.rs --bench). Launch with torchrun, one process per GPU:

    torchrun --standalone --nproc_per_node N scripts/ddp_reference.py mlp4096 16384
    torchrun --standalone --nproc_per_node N scripts/ddp_reference.py w2 4096

Workloads (same as rnn's): mlp4096 = MLP 784-4096-4096-10, ReLU, softmax cross-entropy; w2 = Elman
RNN (tanh) vocab 96 one-hot, hidden 256, seq 64, linear head + cross-entropy at every step. Adam
(lr 1e-3) in both. The second argument is the GLOBAL batch, divided evenly among the processes.

Settings, the fastest reasonable ones at fp32 without changing the arithmetic: TF32 OFF for
matmuls and cuDNN (rnn does not use TF32 unless ContextOptions::allow_tf32 is set), fused Adam,
DDP with gradient_as_bucket_view=True and static_graph=True (default 25 MiB buckets, so the
all-reduce overlaps the backward pass), cudnn.benchmark on. No CUDA graphs. Batches are gathered
on the GPU from a device-resident data set through a shuffled index, as rnn does.

Prints (rank 0): ddp=<model> gpus=<N> batch=<global> samples_per_sec=<x>
"""
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP


class CharRnn(nn.Module):
    def __init__(self, v=96, h=256):
        super().__init__()
        self.rnn = nn.RNN(v, h, nonlinearity="tanh", batch_first=True)
        self.head = nn.Linear(h, v)

    def forward(self, x):
        self.rnn.flatten_parameters()  # cuDNN wants one weight block; DDP's broadcast may split it
        out, _ = self.rnn(x)
        return self.head(out)


def main():
    model_name = sys.argv[1] if len(sys.argv) > 1 else "mlp4096"
    global_batch = int(sys.argv[2]) if len(sys.argv) > 2 else (16384 if model_name == "mlp4096" else 4096)
    steps = int(os.environ.get("DDP_STEPS", "30"))
    warm = int(os.environ.get("DDP_WARMUP", "5"))

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True

    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    torch.cuda.set_device(local_rank)
    dev = torch.device("cuda", local_rank)
    if global_batch % world:
        raise SystemExit(f"global batch {global_batch} does not divide by {world} processes")
    local = global_batch // world
    torch.manual_seed(0)

    g = torch.Generator(device=dev).manual_seed(1)
    n = global_batch * 8
    if model_name == "mlp4096":
        model = nn.Sequential(nn.Linear(784, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(),
                              nn.Linear(4096, 10)).to(dev)
        x_all = torch.rand(n, 784, device=dev, generator=g)
        y_all = torch.randint(0, 10, (n,), device=dev, generator=g)
        loss_of = lambda out, y: F.cross_entropy(out, y)
    elif model_name == "w2":
        v, t = 96, 64
        model = CharRnn(v).to(dev)
        x_all = F.one_hot(torch.randint(0, v, (n, t), device=dev, generator=g), v).float()
        y_all = torch.randint(0, v, (n, t), device=dev, generator=g)
        loss_of = lambda out, y: F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
    else:
        raise SystemExit(f"unknown model {model_name} (mlp4096 or w2)")

    ddp = DDP(model, device_ids=[local_rank], gradient_as_bucket_view=True, static_graph=True)
    opt = torch.optim.Adam(ddp.parameters(), lr=1e-3, fused=True)
    perm = torch.randperm(n, device=dev, generator=g)  # same on every rank (same seed)

    def step(i):
        start = (i % 8) * global_batch + rank * local
        idx = perm[start:start + local]
        x, y = x_all[idx], y_all[idx]
        opt.zero_grad(set_to_none=True)
        loss = loss_of(ddp(x), y)
        loss.backward()
        opt.step()

    for i in range(warm):
        step(i)
    torch.cuda.synchronize()
    dist.barrier()
    t0 = time.perf_counter()
    for i in range(steps):
        step(i)
    torch.cuda.synchronize()
    dist.barrier()
    secs = time.perf_counter() - t0
    if rank == 0:
        print(f"ddp={model_name} gpus={world} batch={global_batch} "
              f"samples_per_sec={steps * global_batch / secs:.0f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
