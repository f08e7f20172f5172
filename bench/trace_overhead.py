#!/usr/bin/env python3
"""What tracing costs: each program built twice, with its ops' spans compiled in (the
default) and out (`dtc --no-spans`), and run three ways, interleaved:

  off      spans compiled out, no --trace      (the floor)
  idle     spans compiled in, no --trace       ("off costs nothing measurable")
  traced   spans compiled in, --trace of every step  (target: <= 3 % slower)

Throughput is the program's own (the `done:` line: training time only). Prints a
Markdown table; --out FILE also writes it with the machine.

    bench/trace_overhead.py [--repeats N] [--out FILE]
"""
import argparse
import os
import re
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import ROOT, cpu_name, run  # noqa: E402

BIN = os.path.join(os.environ.get("BUILD", os.path.join(ROOT, "build")), "bin")
SPEC = os.path.join(ROOT, "..", "shared", "spec", "programs")

# (name, program, steps): the MLP has the smallest ops, so the most spans per
# second of work; the GPT is a transformer's mix.
PROGRAMS = [
    ("mlp_fashion", os.path.join(SPEC, "mlp_fashion.dt"), 800),
    ("gpt_tiny", os.path.join(SPEC, "gpt_tiny.dt"), 80),
]


def throughput(out):
    m = re.search(r"^done: .*\(([0-9.]+)(k?) (tokens|samples)/s\)", out, re.M)
    if not m:
        sys.exit("no throughput in:\n" + out)
    return float(m.group(1)) * (1000 if m.group(2) else 1), m.group(3)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="dt-trace-bench-")
    rows = []
    for name, program, steps in PROGRAMS:
        spans = os.path.join(work, name)
        bare = os.path.join(work, name + "-nospans")
        run([os.path.join(BIN, "dtc"), program, "-o", spans])
        run([os.path.join(BIN, "dtc"), "--no-spans", program, "-o", bare])
        runs = {"off": [], "idle": [], "traced": []}
        unit = ""
        for r in range(args.repeats):
            variants = [
                ("off", bare, []),
                ("idle", spans, []),
                ("traced", spans, ["--trace", os.path.join(work, f"t-{name}-{r}"),
                                   "--trace-steps", f"1:{steps}"])]
            # Each repeat starts with another variant, so that the order the
            # machine sees them in (caches, clocks) favours none.
            for how, exe, extra in variants[r % 3:] + variants[:r % 3]:
                out = run([exe, "--threads", "1", "--steps", str(steps), "--eval-every", "0",
                           "--log-every", str(steps),
                           "--checkpoint-dir", os.path.join(work, f"ck-{name}-{how}-{r}")]
                          + extra)
                value, unit = throughput(out)
                runs[how].append(value)
        med = {k: statistics.median(v) for k, v in runs.items()}
        trace_file = os.path.join(work, f"t-{name}-0", "rank_0.pt.trace.json")
        rows.append((name, steps, unit, med, os.path.getsize(trace_file) / steps))

    lines = [
        "| program | steps | off (no spans) | idle (spans, no --trace) | traced (every step) "
        "| idle vs off | traced vs idle | trace per step |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, steps, unit, med, per_step in rows:
        lines.append(
            f"| {name} | {steps} | {med['off']:.0f} {unit}/s | {med['idle']:.0f} | "
            f"{med['traced']:.0f} | {100 * (med['idle'] / med['off'] - 1):+.1f} % | "
            f"{100 * (med['traced'] / med['idle'] - 1):+.1f} % | {per_step / 1024:.0f} KiB |")
    table = "\n".join(lines)
    print(table)
    if args.out:
        with open(args.out, "w") as f:
            f.write("# What tracing costs\n\n")
            f.write(f"Machine: {cpu_name()}, {os.cpu_count()} cores; one rank, --threads 1. "
                    f"Median of {args.repeats} interleaved runs of each (each repeat starts with another variant); throughput as the "
                    "program reports it (training time only).\n\n")
            f.write(table + "\n\nReproduce: `bench/trace_overhead.py --repeats "
                    f"{args.repeats}`\n")


if __name__ == "__main__":
    main()
