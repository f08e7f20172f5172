#!/usr/bin/env python3
"""mfu.test's check: each training record's mfu times the printed peak times the
step's time (the step's samples over samples_per_s, or its tokens over tokens_per_s:
the rate mfu comes from) is the model's FLOPs per step counted by hand.

    check_mfu.py OUT METRICS [mlp | gpt_tiny]

mlp: mlp_fashion's products forward and backward (less the first layer's input
gradient, never computed) and AdamW's ~15 FLOPs a parameter, at batch 128.
gpt_tiny: llm.c's 6N + 6LCT FLOPs a token, at 32 x 128 tokens a step."""
import json
import re
import sys

out, metrics = sys.argv[1], sys.argv[2]
model = sys.argv[3] if len(sys.argv) > 3 else "mlp"
peak = float(re.search(r"peak: ([0-9.]+) GFLOP/s", open(out).read()).group(1)) * 1e9
if model == "mlp":
    batch = 128
    products = 2 * batch * (784 * 256 + 256 * 10)
    params = 784 * 256 + 256 + 256 * 10 + 10
    hand = 3 * products - 2 * batch * 784 * 256 + 15 * params
    step_time = lambda r: batch / r["samples_per_s"]
else:
    n, layers, width, seq = 842496, 4, 128, 128
    hand = (6 * n + 6 * layers * width * seq) * 32 * seq
    step_time = lambda r: 32 * seq / r["tokens_per_s"]
records = [json.loads(l) for l in open(metrics) if '"mfu"' in l]
if not records:
    sys.exit("FAIL: no training record carries mfu")
for r in records:
    flops = r["mfu"] * peak * step_time(r)
    if abs(flops / hand - 1) > 0.02:
        sys.exit(f"FAIL: step {r['step']}: {flops:.4g} FLOPs a step, by hand {hand:.4g}")
print(f"{len(records)} records: mfu x peak x step time = the hand count within 2 %")
