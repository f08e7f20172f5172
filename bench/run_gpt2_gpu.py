#!/usr/bin/env python3
"""GPT-2 124M on one GPU, dt against PyTorch, side by side in one run on the same GPU.

    run_gpt2_gpu.py PROGRAM [--steps S] [--batch B] [--profile-steps P]

PROGRAM is bench/gpt2_124m_gpu.dt compiled by dtc (with its GPU code); run where
gpt2_torch_gpu.py and the program's token shard are. dt trains S steps with
--backend cuda; tokens/s is the median over the steps after the first five (the
first loads the kernels). The peer runs the same model and batch (bf16 autocast,
torch.compile, flash attention, fused AdamW). Prints one JSON line per side and
the ratio; MFU in llm.c's convention (6N + 6LCT FLOPs per token) for both.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
N, LAYERS, WIDTH, CTX = 124439808, 12, 768, 1024
FLOPS_PER_TOKEN = 6 * N + 6 * LAYERS * WIDTH * CTX


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("program")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--profile-steps", type=int, default=3,
                    help="steps of the peer to profile after its measured ones")
    args = ap.parse_args()
    log = os.path.abspath("runs/gpt2_124m_gpu")
    subprocess.run([args.program, "--backend", "cuda", "--steps", str(args.steps),
                    "--log-every", "1", "--log-dir", log, "--checkpoint-every", "0",
                    "--checkpoint-dir", "ckpt/gpt2_124m_gpu"], check=True)
    records = [json.loads(l) for l in open(os.path.join(log, "metrics.jsonl")) if l.strip()]
    steps = [r for r in records if "loss" in r]
    rate = statistics.median(r["tokens_per_s"] for r in steps[5:])
    # The peer's profile (--profile-steps: after its measured steps) goes to
    # stderr, beside dt's.
    peer = subprocess.run([sys.executable, os.path.join(HERE, "gpt2_torch_gpu.py"),
                           "--batch", str(args.batch), "--profile-steps",
                           str(args.profile_steps)], check=True,
                          stdout=subprocess.PIPE, text=True).stdout.strip().splitlines()[-1]
    torch = json.loads(peer)
    peak = torch["peak_tflops"]  # the device's dense bf16 peak, from its name
    dt = {"side": "dt", "batch": args.batch, "tokens_per_s": rate,
          "mfu_llmc": rate * FLOPS_PER_TOKEN / (peak * 1e12) if peak else None,
          "first_loss": steps[0]["loss"], "last_loss": steps[-1]["loss"]}
    print(json.dumps(dt), flush=True)
    print(json.dumps(torch), flush=True)
    print(json.dumps({"ratio_dt_over_pytorch": rate / torch["tokens_per_s"]}))


main()
