#!/usr/bin/env python3
"""mfu.test's check: each training record's mfu times the printed peak times the
step's time (batch / samples_per_s) is the MLP's FLOPs per step counted by hand."""
import json
import re
import sys

out, metrics = sys.argv[1], sys.argv[2]
peak = float(re.search(r"peak: ([0-9.]+) GFLOP/s", open(out).read()).group(1)) * 1e9
batch = 128
products = 2 * batch * (784 * 256 + 256 * 10)
params = 784 * 256 + 256 + 256 * 10 + 10
hand = 3 * products - 2 * batch * 784 * 256 + 15 * params
records = [json.loads(l) for l in open(metrics) if '"mfu"' in l]
for r in records:
    flops = r["mfu"] * peak * batch / r["samples_per_s"]
    if abs(flops / hand - 1) > 0.02:
        sys.exit(f"FAIL: step {r['step']}: {flops:.4g} FLOPs a step, by hand {hand:.4g}")
print(f"{len(records)} records: mfu x peak x step time = the hand count within 2 %")
