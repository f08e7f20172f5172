#!/usr/bin/env python3
"""compare-losses.py A.jsonl B.jsonl TOLERANCE: the training losses of two runs'
metrics.jsonl, step by step; fails when any step's losses differ by more than
TOLERANCE relative, or the runs have different steps."""
import json
import sys


def losses(path):
    with open(path) as f:
        records = [json.loads(line) for line in f if line.strip()]
    return {r["step"]: r["loss"] for r in records if "loss" in r}


def main():
    a, b, tolerance = losses(sys.argv[1]), losses(sys.argv[2]), float(sys.argv[3])
    if sorted(a) != sorted(b) or not a:
        sys.exit(f"the runs logged different steps: {sorted(a)[:5]}... against {sorted(b)[:5]}...")
    worst = max(abs(a[s] - b[s]) / abs(b[s]) for s in a)
    for s in sorted(a)[:3] + sorted(a)[-3:]:
        print(f"step {s}: {a[s]:.6f} against {b[s]:.6f}")
    print(f"{len(a)} steps, largest relative difference {worst:.2e} (tolerance {tolerance:g})")
    sys.exit(0 if worst <= tolerance else 1)


main()
