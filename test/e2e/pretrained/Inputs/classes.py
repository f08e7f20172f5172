#!/usr/bin/env python3
"""PyTorch's side of token-classes.test: reads dt-tokenize's classification
file itself (pads and truncates to seq as dtrt/data/token_classes.h says) and
trains bag_classes.dt's model from dt's exported initial weights; dt's logged
losses must agree within 1e-4.

usage: classes.py train INITIAL_DIR FILE RUN_OUTPUT --seq T --steps N
"""
import argparse
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "tokenize", "Inputs"))
import check  # noqa: E402  (the tokenize tests' reader of the file)
import hf_gpt2  # noqa: E402


def fields(path, seq):
    """ids, types, mask [N, seq] and labels [N], as the runtime reads them."""
    c = check.read_classes(path)
    ids, types, mask = [], [], []
    for tokens, segs in c["examples"]:
        if len(tokens) > seq:
            keep = seq - c["trailing"]
            tokens = tokens[:keep] + tokens[len(tokens) - c["trailing"]:]
            segs = segs[:keep] + segs[len(segs) - c["trailing"]:]
        pad = seq - len(tokens)
        ids.append(tokens + [c["pad"]] * pad)
        types.append(segs + [0] * pad)
        mask.append([1.0] * len(segs) + [0.0] * pad)
    return (np.array(ids), np.array(types), np.array(mask, np.float64),
            np.array(c["labels"]))


def train(a):
    import torch
    import torch.nn.functional as F
    torch.set_num_threads(1)
    t = {k: torch.from_numpy(v).double().requires_grad_()
         for k, v in hf_gpt2.read_dir(a.dir).items()}
    ids, types, mask, labels = (torch.from_numpy(v) for v in fields(a.file, a.seq))
    truncated = sum(len(e[0]) > a.seq for e in check.read_classes(a.file)["examples"])
    print(f"{len(labels)} examples, {truncated} truncated to {a.seq}")

    def loss():
        h = (t["tokens.weight"][ids] + t["segments.weight"][types]) * mask[..., None]
        pooled = h.sum(1) / mask.sum(1, keepdim=True)
        logits = pooled @ t["head.weight"].T + t["head.bias"]
        return F.cross_entropy(logits, labels)

    opt = torch.optim.AdamW(
        [{"params": [v for v in t.values() if v.dim() >= 2], "weight_decay": 0.1},
         {"params": [v for v in t.values() if v.dim() < 2], "weight_decay": 0.0}],
        lr=1e-2, betas=(0.9, 0.95), eps=1e-8)
    hf_gpt2.compare_losses(a.run_output, hf_gpt2.train_steps(opt, a.steps, loss))


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("train")
    for arg in ("dir", "file", "run_output"):
        p.add_argument(arg)
    p.add_argument("--seq", type=int, required=True)
    p.add_argument("--steps", type=int, required=True)
    a = ap.parse_args()
    train(a)


if __name__ == "__main__":
    main()
