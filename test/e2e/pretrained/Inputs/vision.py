#!/usr/bin/env python3
"""PyTorch's side of the batch-norm and ResNet tests: the same models written
with torch.nn.functional (and torchvision's ResNet), trained from dt's exported
weights, compared with dt's run output and its exports."""

import argparse
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_gpt2 import compare_losses, read_dir, read_tokens, train_steps  # noqa: E402


def close(name, got, want, tol=1e-4):
    import numpy as np
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    err = np.max(np.abs(got - want) / np.maximum(1.0, np.abs(want))) if want.size else 0
    print(f"{name}: largest relative difference {err:.2e}")
    if not err <= tol:
        raise SystemExit(f"{name}: dt and PyTorch differ by more than {tol}")


M64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15


def mix64(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def epoch_order(seed, epoch, n):
    """The order dt's runtime visits epoch `epoch` of n samples in, as
    runtime/include/dtrt/data/order.h specifies it: statistics taken per
    data-parallel rank depend on which samples share a rank."""
    h = 0xCBF29CE484222325
    for c in b"data-order":
        h = ((h ^ c) * 0x100000001B3) & M64
    key = mix64(mix64(seed) ^ h)
    state = mix64((key + (epoch + 1) * GOLDEN) & M64)
    perm = list(range(n))

    def below(bound):
        nonlocal state
        limit = (1 << 64) % bound
        while True:
            state = (state + GOLDEN) & M64
            x = mix64(state)
            if x >= limit:
                return x % bound
    for i in range(n - 1, 0, -1):
        j = below(i + 1)
        perm[i], perm[j] = perm[j], perm[i]
    return perm


def eval_loss(run_output):
    with open(run_output) as f:
        found = re.findall(r"eval at step \d+: loss ([0-9.]+)", f.read())
    if not found:
        raise SystemExit(f"{run_output}: no eval loss")
    return float(found[-1])


def bn_train(a):
    """bn_tiny.dt: tokens as a 16 x 16 image, convolutions and batch norms in
    train mode. The batch's statistics are taken over `groups` equal parts of
    it (one per data-parallel rank, as DDP's BatchNorm; 1 as SyncBatchNorm),
    and part 0's (rank 0's) move the running statistics. Then the losses of
    10 AdamW steps, the final running statistics, num_batches_tracked and the
    eval-mode loss are compared with dt's."""
    import torch
    import torch.nn.functional as F
    torch.set_num_threads(1)
    init = read_dir(a.dir)
    stats = {k: torch.from_numpy(v).double() for k, v in init.items()
             if k.endswith(("running_mean", "running_var"))}
    t = {k: torch.from_numpy(v).double().requires_grad_()
         for k, v in init.items() if k not in stats and "num_batches" not in k}
    opt = torch.optim.AdamW(
        [{"params": [v for v in t.values() if v.dim() >= 2], "weight_decay": 0.1},
         {"params": [v for v in t.values() if v.dim() < 2], "weight_decay": 0.0}],
        lr=1e-2, betas=(0.9, 0.95), eps=1e-8)
    windows = read_tokens(a.tokens, a.seq)
    b, n = windows.shape[0], a.seq
    momentum = {"bn1": 0.1, "bn2": 0.3}
    step = 0
    x, y = windows[:, :-1], windows[:, 1:]

    def bn(h, name, training):
        w, bias = t[name + ".weight"], t[name + ".bias"]
        rm, rv = stats[name + ".running_mean"], stats[name + ".running_var"]
        if not training:
            return F.batch_norm(h, rm, rv, w, bias, False, 0.0, 1e-5)
        parts = []
        for g, part in enumerate(h.chunk(a.groups)):
            # Part 0 updates the running statistics; the others are
            # normalised by their own and update copies thrown away.
            prm, prv = (rm, rv) if g == 0 else (rm.clone(), rv.clone())
            parts.append(F.batch_norm(part, prm, prv, w, bias, True, momentum[name], 1e-5))
        return torch.cat(parts)

    def forward(training):
        h = t["wte.weight"][x].reshape(b, 1, n, -1)
        h = bn(F.conv2d(h, t["c1.weight"], padding=1), "bn1", training).relu()
        h = bn(F.conv2d(h, t["c2.weight"], stride=2, padding=1), "bn2", training)
        logits = h.reshape(b, n, -1) @ t["head.weight"].T
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))

    def train_forward():
        # Each step is an epoch of the b windows, in dt's order: the first
        # b / groups go to data rank 0, and so on.
        nonlocal step, x, y
        batch = windows[epoch_order(a.seed, step, b)]
        x, y = batch[:, :-1], batch[:, 1:]
        step += 1
        return forward(True)

    compare_losses(a.run_output, train_steps(opt, a.steps, train_forward))
    x, y = windows[:, :-1], windows[:, 1:]
    final = read_dir(a.final)
    for k, v in stats.items():
        close(k, final[k], v.numpy())
    for layer in momentum:
        counted = int(final[layer + ".num_batches_tracked"])
        if counted != a.steps:
            raise SystemExit(f"{layer}.num_batches_tracked is {counted}, not {a.steps}")
    with torch.no_grad():
        close("eval loss", eval_loss(a.run_output), forward(False).item())


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("bn-train")
    for arg in ("dir", "tokens", "run_output", "final"):
        p.add_argument(arg)
    p.add_argument("--seq", type=int, required=True)
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--groups", type=int, default=1)
    p.add_argument("--seed", type=int, default=3)
    a = ap.parse_args()
    {"bn-train": bn_train}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
