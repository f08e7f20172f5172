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


def read_idx(path):
    """An IDX file (gzip or raw) as a numpy array."""
    import gzip
    import numpy as np
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    ndims = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndims)]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * ndims).reshape(dims)


def random_idx(a):
    """An IDX image file of random bytes and its labels: no constant
    background, so no ReLU sits on an exact tie that f32 and f64 break
    differently (a blank Fashion-MNIST border makes such ties)."""
    import numpy as np
    rng = np.random.default_rng(a.seed)
    images = rng.integers(0, 256, (a.count, a.rows, a.cols), dtype=np.uint8)
    labels = rng.integers(0, 10, a.count, dtype=np.uint8)
    for path, array in ((a.images, images), (a.labels, labels)):
        header = bytes([0, 0, 8, array.ndim]) + b"".join(
            d.to_bytes(4, "big") for d in array.shape)
        with open(path, "wb") as f:
            f.write(header + array.tobytes())


def torchvision_resnet(depth, classes, channels):
    import torch
    import torchvision
    net = getattr(torchvision.models, f"resnet{depth}")(num_classes=classes)
    if channels != 3:
        net.conv1 = torch.nn.Conv2d(channels, 64, kernel_size=7, stride=2, padding=3,
                                    bias=False)
    return net


def load_strict(net, directory):
    """dt's export into the torchvision model: strict, so every name, shape
    and buffer (num_batches_tracked included) must be torchvision's."""
    import torch
    state = {k: torch.from_numpy(v) for k, v in read_dir(directory).items()}
    net.load_state_dict(state, strict=True)
    return state


def resnet_train(a):
    """nn.ResNet against torchvision's resnet{18,34,50} on one-channel IDX
    images: dt's initial export loads strictly; the losses of the
    steps dt ran (train mode, SGD with momentum and no decay on 1-D tensors,
    dt's data order) agree; and each tensor's change over them (weights and
    running statistics, from dt's final export) is PyTorch's."""
    import numpy as np
    import torch
    import torch.nn.functional as F
    torch.set_num_threads(2)
    # In f32, as dt computes: a ResNet on small batches amplifies rounding
    # (batch-norm statistics of few values, max-pool windows whose two
    # largest values differ by less than an f32 rounding), so PyTorch's own
    # f32 and f64 runs part by 1e-4 within a few steps.
    dtype = torch.float64 if a.f64 else torch.float32
    net = torchvision_resnet(a.depth, 10, 1).to(dtype)
    load_strict(net, a.dir)
    images = read_idx(a.images)
    labels = read_idx(a.labels).astype(np.int64)
    decay = [p for p in net.parameters() if p.dim() >= 2]
    plain = [p for p in net.parameters() if p.dim() < 2]
    opt = torch.optim.SGD([{"params": decay, "weight_decay": a.wd},
                           {"params": plain, "weight_decay": 0.0}],
                          lr=a.lr, momentum=a.momentum)
    per_epoch = len(images) // a.batch
    step = 0

    def loss():
        nonlocal step
        epoch, at = divmod(step, per_epoch)
        rows = epoch_order(a.seed, epoch, len(images))[at * a.batch:(at + 1) * a.batch]
        step += 1
        x = torch.from_numpy(images[rows].astype(np.float64) * a.scale)[:, None].to(dtype)
        y = torch.from_numpy(labels[rows])
        return F.cross_entropy(net(x), y)

    net.train()
    before = {k: v.detach().double().clone() for k, v in net.state_dict().items()}
    compare_losses(a.run_output, train_steps(opt, a.steps, loss))
    if a.losses_only:
        return
    final = read_dir(a.final)
    want = net.state_dict()
    worst = 0.0
    for k, v in want.items():
        got = final[k]
        if k.endswith("num_batches_tracked"):
            if int(got) != int(v):
                raise SystemExit(f"{k}: dt {int(got)}, PyTorch {int(v)}")
            continue
        # Each tensor's change over the run, dt's against PyTorch's, relative
        # to PyTorch's: after one step, the gradient (and the running
        # statistics' update) to f32 rounding.
        start = before[k].numpy()
        moved = v.double().numpy() - start
        err = float(np.linalg.norm((got - start) - moved) / max(np.linalg.norm(moved), 1e-30))
        worst = max(worst, err)
        if not err <= a.tolerance:
            raise SystemExit(f"{k}: dt's change differs from PyTorch's by {err:.2e} of it")
    print(f"{len(want)} tensors after {a.steps} steps: their changes agree within {worst:.2e}")
    if a.eval:
        # The round trip: dt's final export in torchvision's model, in eval
        # mode (the running statistics), on the eval images dt evaluated.
        check = torchvision_resnet(a.depth, 10, 1).double()
        load_strict(check, a.final)
        check.eval()
        x = torch.from_numpy(images.astype(np.float64) * a.scale)[:, None]
        with torch.no_grad():
            want_eval = F.cross_entropy(check(x), torch.from_numpy(labels)).item()
        close("eval loss of the export in torchvision", eval_loss(a.run_output),
              want_eval, 1e-5)


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
    p = sub.add_parser("resnet-train")
    for arg in ("dir", "run_output", "final"):
        p.add_argument(arg)
    for arg in ("--images", "--labels"):
        p.add_argument(arg, required=True)
    p.add_argument("--depth", type=int, required=True)
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--batch", type=int, required=True)
    p.add_argument("--lr", type=float, required=True)
    p.add_argument("--wd", type=float, required=True)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--scale", type=float, default=1 / 255)
    p.add_argument("--seed", type=int, default=3)
    p.add_argument("--f64", action="store_true")
    p.add_argument("--tolerance", type=float, default=1e-3)
    p.add_argument("--losses-only", action="store_true",
                   help="compare the losses, not each tensor's change")
    p.add_argument("--eval", action="store_true",
                   help="dt evaluated the train images at the end: check its "
                        "eval loss with the export in torchvision")
    p = sub.add_parser("random-idx")
    p.add_argument("images")
    p.add_argument("labels")
    p.add_argument("--count", type=int, required=True)
    p.add_argument("--rows", type=int, default=28)
    p.add_argument("--cols", type=int, default=28)
    p.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    {"bn-train": bn_train, "resnet-train": resnet_train, "random-idx": random_idx}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
