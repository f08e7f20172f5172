#!/usr/bin/env python3
"""Checks the last verdict line of a run's output: its parts add up to 100 % of the
step (within rounding), and its step time is the run's measured step time: the
ranks' mean step over the same steps (timing.jsonl, beside METRICS) within 5 %, and
metrics.jsonl's step_time_s within 15 % (that one is each step's slowest rank, which
jitter inflates when ranks oversubscribe the cores: 11 % on 2 cores while another
test ran).

    check_verdict.py OUTPUT METRICS.jsonl
"""
import os
import json
import re
import sys

out, metrics = sys.argv[1], sys.argv[2]
lines = [l for l in open(out) if l.startswith("verdict (")]
if not lines:
    sys.exit("FAIL: no verdict in " + out)
line = lines[-1]
step = float(re.search(r"'s ([0-9.e+]+) ms step", line).group(1))
parts = [float(p) for p in re.findall(
    r"(?:compute|communication|straggler wait|input|pipeline bubble) ([0-9]+) %",
    line.split("; predicted")[0])]
if abs(sum(parts) - 100) > len(parts):  # each part is rounded to 1 %
    sys.exit(f"FAIL: parts {parts} add up to {sum(parts)} %")
records = [json.loads(l) for l in open(metrics)]
times = [r["step_time_s"] * 1e3 for r in records if "step_time_s" in r]
measured = sum(times) / len(times)
if abs(step / measured - 1) > 0.15:
    sys.exit(f"FAIL: the verdict's step {step} ms vs measured {measured} ms")
timing = [json.loads(l) for l in open(os.path.join(os.path.dirname(metrics), "timing.jsonl"))]
last = [r["rank_step_s"] for r in timing if "rank_step_s" in r][-1]
ranks = 1e3 * sum(last) / len(last)
if abs(step / ranks - 1) > 0.05:
    sys.exit(f"FAIL: the verdict's step {step} ms vs the ranks' mean {ranks} ms")
print("parts add up to 100 % of the step; the step is the ranks' mean step within 5 %")
