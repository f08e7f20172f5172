#!/usr/bin/env python3
"""The PyTorch peer of dt's GPU benchmark: GPT-2 124M (examples/gpt2_124m.dt's model:
vocabulary 50257, 1024 positions, 12 pre-LN blocks of width 768 with 12 heads, GELU
(tanh) MLP of 4x the width, tied output embedding) trained on one GPU the way a
PyTorch user makes it fast: bf16 autocast, torch.compile, scaled_dot_product_attention
(flash attention, causal), fused AdamW (betas (0.9, 0.95), weight decay 0.1 on
matrices), global-norm clipping at 1.0, sequences of 1024 tokens, one micro-batch per
step. Prints one JSON line: tokens/s over the measured steps, MFU in llm.c's and
PaLM's conventions (bench/../shared notes gpu-figures.md), peak memory, losses.

    gpt2_torch_gpu.py [--batch B ...] [--steps S] [--warmup W] [--no-compile]
                      [--profile-steps P]

With several --batch values it keeps the first that fits in memory (give them
largest first: "the largest micro-batch that fits"). Tokens are random: the
throughput does not depend on them. With --profile-steps, that many more steps
run under torch.profiler after the measured ones, and stderr gets their GPU
time a step by kind (attention, products, Triton's generated kernels, the rest)
and the longest kernels: what dt's DTRT_CUDA_PROFILE gives for its side.
"""
import argparse
import json
import math
import sys
import time

import torch
import torch.nn.functional as F

VOCAB, CTX, WIDTH, DEPTH, HEADS = 50257, 1024, 768, 12, 12
# Dense bf16 peaks (TFLOP/s) by device name, from ../shared/notes/gpu-figures.md.
PEAKS = {"H100 80GB HBM3": 989.0, "H100 PCIe": 756.0, "H100 NVL": 835.0, "H200": 989.0}


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1 = torch.nn.LayerNorm(WIDTH)
        self.qkv = torch.nn.Linear(WIDTH, 3 * WIDTH)
        self.proj = torch.nn.Linear(WIDTH, WIDTH)
        self.ln2 = torch.nn.LayerNorm(WIDTH)
        self.up = torch.nn.Linear(WIDTH, 4 * WIDTH)
        self.down = torch.nn.Linear(4 * WIDTH, WIDTH)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=-1)
        q, k, v = (z.view(b, t, HEADS, c // HEADS).transpose(1, 2) for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        h = x + self.proj(a.transpose(1, 2).reshape(b, t, c))
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

    def forward(self, tokens, targets):
        h = self.wte(tokens) + self.wpe(torch.arange(tokens.shape[1], device=tokens.device))
        for block in self.blocks:
            h = block(h)
        logits = self.ln_f(h) @ self.wte.weight.t()
        return F.cross_entropy(logits.float().view(-1, VOCAB), targets.reshape(-1))


def peak_tflops(name):
    for key, peak in PEAKS.items():
        if key in name:
            return peak
    return None


def kind(name):
    """A kernel's kind, by the names PyTorch's libraries give theirs."""
    n = name.lower()
    if any(k in n for k in ("flash", "fmha", "attention", "sdpa", "cudnn")):
        return "attention"
    if any(k in n for k in ("gemm", "cutlass", "xmma", "nvjet", "cublas")):
        return "products"
    if n.startswith("triton"):
        return "triton"
    return "other"


def profile(step, steps):
    """GPU time a step by kernel kind, and the longest kernels, to stderr."""
    from torch.profiler import ProfilerActivity
    with torch.profiler.profile(activities=[ProfilerActivity.CUDA]) as prof:
        for s in range(steps):
            step(s)
        torch.cuda.synchronize()

    def device_us(e):
        for attr in ("self_device_time_total", "self_cuda_time_total"):
            if hasattr(e, attr):
                return getattr(e, attr)
        return 0.0

    rows = [(device_us(e) / steps / 1e3, e.count // steps, e.key)
            for e in prof.key_averages() if device_us(e) > 0]
    rows.sort(reverse=True)
    kinds = {}
    for ms, count, name in rows:
        k = kinds.setdefault(kind(name), [0.0, 0])
        k[0] += ms
        k[1] += count
    total = sum(ms for ms, _, _ in rows)
    print(f"PyTorch profile: {total:.2f} ms of GPU time a step over {steps} steps",
          file=sys.stderr)
    for k, (ms, count) in sorted(kinds.items(), key=lambda kv: -kv[1][0]):
        print(f"  {k:10s} {ms:8.2f} ms in {count} launches", file=sys.stderr)
    for ms, count, name in rows[:30]:
        print(f"  {ms:8.3f} ms {count:4d}x {kind(name):9s} {name[:110]}",
              file=sys.stderr)


def run(batch, args):
    torch.manual_seed(0)
    model = GPT().cuda()
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=6e-4, betas=(0.9, 0.95), eps=1e-8, fused=True)
    step_fn = model
    if args.compile:
        step_fn = torch.compile(model)
    gen = torch.Generator(device="cuda").manual_seed(1)
    tokens = torch.randint(0, VOCAB, (args.warmup + args.steps, batch, CTX + 1),
                           device="cuda", generator=gen)
    losses = []
    times = []

    def step(s):
        x, y = tokens[s % len(tokens), :, :-1], tokens[s % len(tokens), :, 1:]
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = step_fn(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.item()  # synchronises

    for s in range(args.warmup + args.steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        losses.append(step(s))
        times.append(time.perf_counter() - t0)
    if args.profile_steps > 0:
        profile(step, args.profile_steps)
    n = sum(p.numel() for p in model.parameters())
    measured = sum(times[args.warmup:])
    tokens_per_s = batch * CTX * args.steps / measured
    llmc = 6 * n + 6 * DEPTH * WIDTH * CTX
    palm = 6 * n + 12 * DEPTH * WIDTH * CTX
    name = torch.cuda.get_device_name()
    peak = peak_tflops(name)
    out = {
        "peer": "pytorch", "torch": torch.__version__, "device": name,
        "compile": args.compile, "batch": batch, "seq": CTX, "params": n,
        "steps": args.steps, "warmup": args.warmup,
        "step_ms": 1e3 * measured / args.steps, "tokens_per_s": tokens_per_s,
        "peak_tflops": peak,
        "mfu_llmc": tokens_per_s * llmc / (peak * 1e12) if peak else None,
        "mfu_palm": tokens_per_s * palm / (peak * 1e12) if peak else None,
        "peak_mem_gib": torch.cuda.max_memory_allocated() / 2**30,
        "first_loss": losses[0], "last_loss": losses[-1],
    }
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, nargs="+", default=[64, 32, 16])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--no-compile", dest="compile", action="store_false")
    ap.add_argument("--profile-steps", type=int, default=0)
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = True
    for batch in args.batch:
        try:
            print(json.dumps(run(batch, args)), flush=True)
            return
        except torch.OutOfMemoryError:
            torch.cuda.empty_cache()
            print(json.dumps({"batch": batch, "error": "out of memory"}), flush=True)
    raise SystemExit("no batch fits")


if __name__ == "__main__":
    main()
