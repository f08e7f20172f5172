#!/usr/bin/python3
"""The PyTorch peer of dt's GPT examples: the model as dt's nn.dt builds it, trained on
the same token shards with the same batch, micro-batch, optimizer, clipping and
schedule, written as a PyTorch user would. Prints one JSON line with tokens/s over the
measured steps, their losses and the peak RSS.

    gpt2_torch.py [--model gpt2_124m|gpt_tiny] --threads N [--steps S] [--warmup W]
                  [--data FILE]

The model: token and position embeddings (N(0, 0.02)), pre-LN blocks of causal
self-attention (one qkv projection) and a GELU (tanh) MLP of 4 x the width, a final
layer norm, logits through the tied token embedding. nn.Linear keeps PyTorch's default
initialisation, which is what dt's nn.Linear reproduces. AdamW (betas (0.9, 0.95), eps
1e-8, weight decay 0.1 on matrices only), global-norm clipping at 1.0, a cosine
schedule; the gradient averaged over micro-batches as dt averages it. The recipes
(MODELS) are examples/gpt2_124m.dt's (12 layers of width 768, 8 sequences of 1024
tokens per step in micro-batches of 4, lr 6e-4, 700 warm-up steps) and
examples/gpt_tiny.dt's (4 layers of width 128, vocabulary 256, 32 sequences of 128
tokens, lr 1e-3, 50 warm-up steps, minimum lr 1e-4).
"""
import argparse
import json
import math
import os
import resource
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

from common import cosine_lr_factor

MODELS = {
    "gpt2_124m": dict(vocab=50257, ctx=1024, width=768, depth=12, heads=12, batch=8,
                      micro=4, lr=6e-4, warmup=700, total=18865, min_lr=0.0),
    "gpt_tiny": dict(vocab=256, ctx=128, width=128, depth=4, heads=4, batch=32,
                     micro=32, lr=1e-3, warmup=50, total=600, min_lr=1e-4),
}
VOCAB, CTX, WIDTH, DEPTH, HEADS = 0, 0, 0, 0, 0  # set by main() from MODELS


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1 = torch.nn.LayerNorm(WIDTH)
        self.qkv = torch.nn.Linear(WIDTH, 3 * WIDTH)
        self.proj = torch.nn.Linear(WIDTH, WIDTH)
        self.ln2 = torch.nn.LayerNorm(WIDTH)
        self.up = torch.nn.Linear(WIDTH, 4 * WIDTH)
        self.down = torch.nn.Linear(4 * WIDTH, WIDTH)

    def attention(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=-1)
        shape = (b, t, HEADS, c // HEADS)
        q, k, v = (z.view(shape).transpose(1, 2) for z in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(c // HEADS)
        mask = torch.ones(t, t, dtype=torch.bool).triu(1)
        p = scores.masked_fill(mask, float("-inf")).softmax(dim=-1)
        return self.proj((p @ v).transpose(1, 2).reshape(b, t, c))

    def forward(self, x):
        h = x + self.attention(self.ln1(x))
        return h + self.down(F.gelu(self.up(self.ln2(h)), approximate="tanh"))


class GPT(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = torch.nn.Embedding(VOCAB, WIDTH)
        self.wpe = torch.nn.Embedding(CTX, WIDTH)
        torch.nn.init.normal_(self.wte.weight, std=0.02)
        torch.nn.init.normal_(self.wpe.weight, std=0.02)
        self.blocks = torch.nn.ModuleList(Block() for _ in range(DEPTH))
        self.ln_f = torch.nn.LayerNorm(WIDTH)

    def forward(self, tokens):
        t = tokens.shape[1]
        h = self.wte(tokens) + self.wpe(torch.arange(t))
        for block in self.blocks:
            h = block(h)
        return self.ln_f(h) @ self.wte.weight.t()


def shard(path):
    """An llm.c token shard: a 256-int header (magic, version, count), uint16 tokens."""
    header = np.fromfile(path, dtype=np.int32, count=256)
    return np.memmap(path, dtype=np.uint16, mode="r", offset=1024, shape=(int(header[2]),))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", choices=sorted(MODELS), default="gpt2_124m")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=3, help="measured optimizer steps")
    ap.add_argument("--warmup", type=int, default=1, help="steps run before measuring")
    ap.add_argument("--data", default=os.path.join(os.path.dirname(__file__), "..", "data",
                                                   "text", "train.bin"))
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    recipe = MODELS[args.model]
    global VOCAB, CTX, WIDTH, DEPTH, HEADS
    VOCAB, CTX, WIDTH, DEPTH, HEADS = (recipe[k] for k in
                                       ("vocab", "ctx", "width", "depth", "heads"))

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    tokens = shard(args.data)
    windows = (len(tokens) - 1) // CTX
    model = GPT()
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=recipe["lr"], betas=(0.9, 0.95), eps=1e-8)
    batch, micro, warmup, total = (recipe[k] for k in ("batch", "micro", "warmup", "total"))

    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, cosine_lr_factor(warmup, total, recipe["min_lr"] / recipe["lr"]))
    rng = np.random.default_rng(args.seed)
    losses, seconds = [], 0.0
    for step in range(args.warmup + args.steps):
        begin = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        step_loss = 0.0
        for _ in range(batch // micro):
            starts = rng.integers(0, windows, size=micro) * CTX
            chunk = np.stack([tokens[s:s + CTX + 1] for s in starts]).astype(np.int64)
            x, y = torch.from_numpy(chunk[:, :-1]), torch.from_numpy(chunk[:, 1:])
            logits = model(x)
            loss = F.cross_entropy(logits.view(-1, VOCAB), y.reshape(-1)) * (micro / batch)
            loss.backward()
            step_loss += loss.item()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        elapsed = time.perf_counter() - begin
        if step >= args.warmup:
            seconds += elapsed
            losses.append(step_loss)
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(json.dumps({"peer": "pytorch", "model": args.model, "torch": torch.__version__,
                      "threads": args.threads,
                      "steps": args.steps, "tokens_per_s": args.steps * batch * CTX / seconds,
                      "seconds_per_step": seconds / args.steps, "losses": losses,
                      "peak_rss_mib": rss_mib}))


if __name__ == "__main__":
    sys.exit(main())
