#!/usr/bin/python3
"""The PyTorch peer of examples/mlp_fashion.dt: the same model, data, batch, optimizer,
schedule and epochs, written as a PyTorch user would (nn.Sequential, torch.optim.AdamW,
LambdaLR). Prints one JSON line with samples/s, the final test accuracy and peak RSS.

    mlp_fashion_torch.py --threads N [--data DIR] [--epochs E]

Matches dt's recipe exactly: kaiming-uniform-style default init of nn.Linear, AdamW
(lr 1e-3, betas (0.9, 0.999), eps 1e-8, weight decay 0.01 on weight matrices only),
cosine schedule with 100 warm-up steps (warm-up lr * t / warmup for the 1-based step t),
batch 128 with the last partial batch dropped, reshuffled every epoch.
"""
import argparse
import gzip
import json
import os
import resource
import struct
import sys
import time

import numpy as np
import torch

from common import cosine_lr_factor


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic, = struct.unpack(">I", data[:4])
    ndim = magic & 0xFF
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def train_and_report(model, args, lr):
    """Trains `model` on Fashion-MNIST as the dt examples do (AdamW with weight
    decay 0.01 on tensors of rank >= 2, cosine schedule with 100 warm-up steps,
    batch 128, last partial batch dropped, reshuffled every epoch) and prints
    one JSON line: samples/s, the final test accuracy and peak RSS."""
    load = lambda name: read_idx(os.path.join(args.data, name))
    x_train = torch.from_numpy(load("train-images-idx3-ubyte.gz").reshape(-1, 784).astype(np.float32) / 255.0)
    y_train = torch.from_numpy(load("train-labels-idx1-ubyte.gz").astype(np.int64))
    x_test = torch.from_numpy(load("t10k-images-idx3-ubyte.gz").reshape(-1, 784).astype(np.float32) / 255.0)
    y_test = torch.from_numpy(load("t10k-labels-idx1-ubyte.gz").astype(np.int64))

    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01},
                             {"params": no_decay, "weight_decay": 0.0}], lr=lr)
    batch, warmup = 128, 100
    steps_per_epoch = len(x_train) // batch
    total = steps_per_epoch * args.epochs

    sched = torch.optim.lr_scheduler.LambdaLR(opt, cosine_lr_factor(warmup, total))
    loss_fn = torch.nn.CrossEntropyLoss()
    gen = torch.Generator().manual_seed(args.seed)

    start = time.perf_counter()
    for epoch in range(args.epochs):
        order = torch.randperm(len(x_train), generator=gen)
        for i in range(steps_per_epoch):
            idx = order[i * batch:(i + 1) * batch]
            xb, yb = x_train[idx], y_train[idx]
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(xb), yb)
            loss.backward()
            opt.step()
            sched.step()
    elapsed = time.perf_counter() - start

    with torch.no_grad():
        correct = sum((model(x_test[i:i + 1000]).argmax(dim=1) == y_test[i:i + 1000]).sum().item()
                      for i in range(0, len(x_test), 1000))
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(json.dumps({"peer": "pytorch", "torch": torch.__version__, "threads": args.threads,
                      "steps": total, "samples_per_s": total * batch / elapsed,
                      "final_loss": loss.item(), "eval_accuracy": correct / len(x_test),
                      "peak_rss_mib": rss_mib}))


def arguments():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--data", default=os.path.join(os.path.dirname(__file__), "..", "data", "fashion"))
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--seed", type=int, default=42)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    return args


def main():
    args = arguments()
    model = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
    train_and_report(model, args, lr=1e-3)


if __name__ == "__main__":
    sys.exit(main())
