#!/usr/bin/python3
"""The PyTorch DDP peer of examples/mlp_fashion.dt on a data-parallel mesh: the same model,
data, global batch, optimizer, schedule and epochs, on N processes over gloo, written as
a PyTorch user would (DistributedDataParallel, torch.optim.AdamW, LambdaLR). Rank 0 prints
one JSON line with samples/s, the final test accuracy and its peak RSS.

    ddp_torch.py --ranks N [--threads T] [--data DIR] [--epochs E]

Each optimizer step takes a global batch of 128 rows from one seeded permutation per epoch
(the last partial batch dropped); rank r trains on rows [r*128/N, (r+1)*128/N) of it, as a
DistributedSampler-style split does and as dt's ranks do. DDP averages the gradients with
one bucketed all-reduce, overlapped with backward.
"""
import argparse
import json
import os
import resource
import socket
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from common import cosine_lr_factor
from mlp_fashion_torch import read_idx


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def train(rank, args, port):
    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}",
                            rank=rank, world_size=args.ranks)
    torch.manual_seed(args.seed)  # the same initial model on every rank (DDP also broadcasts it)
    load = lambda name: read_idx(os.path.join(args.data, name))
    x_train = torch.from_numpy(load("train-images-idx3-ubyte.gz").reshape(-1, 784).astype(np.float32) / 255.0)
    y_train = torch.from_numpy(load("train-labels-idx1-ubyte.gz").astype(np.int64))

    model = torch.nn.parallel.DistributedDataParallel(
        torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10)))
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01},
                             {"params": no_decay, "weight_decay": 0.0}], lr=1e-3)
    batch, warmup = 128, 100
    local = batch // args.ranks
    steps_per_epoch = len(x_train) // batch
    total = steps_per_epoch * args.epochs
    sched = torch.optim.lr_scheduler.LambdaLR(opt, cosine_lr_factor(warmup, total))
    loss_fn = torch.nn.CrossEntropyLoss()
    gen = torch.Generator().manual_seed(args.seed)

    dist.barrier()
    start = time.perf_counter()
    for epoch in range(args.epochs):
        order = torch.randperm(len(x_train), generator=gen)
        for i in range(steps_per_epoch):
            idx = order[i * batch + rank * local:i * batch + (rank + 1) * local]
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(x_train[idx]), y_train[idx])
            loss.backward()
            opt.step()
            sched.step()
    dist.barrier()
    elapsed = time.perf_counter() - start

    if rank == 0:
        x_test = torch.from_numpy(load("t10k-images-idx3-ubyte.gz").reshape(-1, 784).astype(np.float32) / 255.0)
        y_test = torch.from_numpy(load("t10k-labels-idx1-ubyte.gz").astype(np.int64))
        with torch.no_grad():
            correct = (model.module(x_test).argmax(dim=1) == y_test).sum().item()
        rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
        print(json.dumps({"peer": "pytorch-ddp", "torch": torch.__version__, "ranks": args.ranks,
                          "threads": args.threads, "steps": total,
                          "samples_per_s": total * batch / elapsed, "final_loss": loss.item(),
                          "eval_accuracy": correct / len(x_test), "peak_rss_mib": rss_mib}),
              flush=True)
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1, help="torch threads per rank")
    ap.add_argument("--data", default=os.path.join(os.path.dirname(__file__), "..", "data", "fashion"))
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--seed", type=int, default=42)
    args = ap.parse_args()
    mp.spawn(train, args=(args, free_port()), nprocs=args.ranks, join=True)


if __name__ == "__main__":
    sys.exit(main())
