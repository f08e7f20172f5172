#!/usr/bin/env python3
"""Checks a log directory's timing.jsonl against its metrics.jsonl: one run record
with the program and the mesh; a per-rank record beside every training record, with
one time per rank, each rank's step within 5 % of... nothing invented: the slowest
rank's mean step is metrics' step_time_s within 5 %; a verdict that names the
expected straggler; a memory record with one figure per rank.

    check_timing.py LOGDIR RANKS STRAGGLER
"""
import json
import os
import sys

logdir, ranks, straggler = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])


def records(name):
    with open(os.path.join(logdir, name)) as f:
        return [json.loads(line) for line in f]


metrics, timing = records("metrics.jsonl"), records("timing.jsonl")
runs = [r["run"] for r in timing if "run" in r]
if len(runs) != 1:
    sys.exit(f"FAIL: {len(runs)} run records")
run = runs[0]
if run["ranks"] != ranks or run["program"] != "zero3_synthetic":
    sys.exit(f"FAIL: run record {run}")
train = {r["step"]: r for r in metrics if "loss" in r}
per_rank = {r["step"]: r for r in timing if "rank_step_s" in r}
if sorted(train) != sorted(per_rank):
    sys.exit(f"FAIL: per-rank records at {sorted(per_rank)}, training at {sorted(train)}")
for step, r in per_rank.items():
    for key in ("rank_step_s", "rank_comm_s", "rank_input_s", "rank_bubble_s"):
        if len(r[key]) != ranks:
            sys.exit(f"FAIL: step {step}: {key} has {len(r[key])} ranks")
    slowest = max(r["rank_step_s"])
    if abs(slowest / train[step]["step_time_s"] - 1) > 0.05:
        sys.exit(f"FAIL: step {step}: slowest rank {slowest} s, "
                 f"metrics' step_time_s {train[step]['step_time_s']} s")
verdicts = [r["verdict"] for r in timing if "verdict" in r]
final = max(verdicts, key=lambda v: v["steps"])
if final.get("straggler") != straggler:
    sys.exit(f"FAIL: the verdict names {final.get('straggler')}: {final['text']}")
parts = sum(final[k] for k in ("compute_s", "comm_s", "straggler_wait_s", "input_s",
                               "bubble_s"))
if abs(parts / final["step_s"] - 1) > 0.01:
    sys.exit(f"FAIL: the verdict's parts add up to {parts} s of {final['step_s']} s")
memory = [r["memory"] for r in timing if "memory" in r]
if len(memory) != 1 or len(memory[0]["peak_rss_bytes"]) != ranks or \
        memory[0]["planned_bytes"] != run["arena_bytes"]:
    sys.exit(f"FAIL: memory records {memory}")
print(f"timing.jsonl: {len(per_rank)} per-rank records of {ranks} ranks, "
      f"{len(verdicts)} verdicts naming rank {straggler}, memory of every rank")
