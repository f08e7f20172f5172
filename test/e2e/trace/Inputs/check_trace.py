#!/usr/bin/env python3
"""Checks the per-rank traces of `--trace DIR` against each other and against the
program's manifest (`dtc --emit=manifest`), and prints what it found for FileCheck.

    check_trace.py DIR MANIFEST.json STEPS   (STEPS: "A:B", the traced steps)

Each rank_<r>.pt.trace.json must be valid JSON in the layout Kineto writes
(schemaVersion, distributedInfo with the rank and world size, baseTimeNanoseconds,
metadata naming the process and threads, complete events in microseconds); its
spans must nest strictly per thread; every op span must be the manifest's op of
that id; every collective must appear on every rank with the same op_id and bytes,
step by step; and the clock offsets must be recorded.
"""

import collections
import json
import os
import sys


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def check_nesting(rank, events):
    """Spans on one thread either nest or follow each other, never overlap."""
    by_thread = collections.defaultdict(list)
    for e in events:
        by_thread[e["tid"]].append(e)
    for tid, spans in by_thread.items():
        spans.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack = []
        for e in spans:
            begin, end = e["ts"], e["ts"] + e["dur"]
            while stack and stack[-1][1] <= begin + 1e-6:
                stack.pop()
            if stack and end > stack[-1][1] + 1e-6:
                fail(f"rank {rank} thread {tid}: '{e['name']}' at {begin} overlaps "
                     f"'{stack[-1][2]}' ending at {stack[-1][1]}")
            stack.append((begin, end, e["name"]))


def main():
    trace_dir, manifest_path, steps = sys.argv[1], sys.argv[2], sys.argv[3]
    first, last = (int(s) for s in steps.split(":"))
    manifest = json.load(open(manifest_path))
    spans = manifest["spans"]
    collectives = manifest.get("collectives", [])
    files = sorted(f for f in os.listdir(trace_dir) if f.endswith(".pt.trace.json"))
    if not files:
        fail(f"no traces in {trace_dir}")
    world = None
    per_rank_collectives = {}
    per_rank_exec = {}
    for name in files:
        trace = json.load(open(os.path.join(trace_dir, name)))
        info = trace["distributedInfo"]
        rank = info["rank"]
        if name != f"rank_{rank}.pt.trace.json":
            fail(f"{name} holds rank {rank}")
        world = info["world_size"]
        for key in ("schemaVersion", "baseTimeNanoseconds", "traceEvents",
                    "displayTimeUnit"):
            if key not in trace:
                fail(f"{name} has no {key}")
        dt = trace["dt"]
        if dt["spans_dropped"] != 0:
            fail(f"{name} dropped {dt['spans_dropped']} spans")
        if "clock_offset_us" not in dt or "clock_offset_error_us" not in dt:
            fail(f"{name} has no clock offset")
        # One host: the ranks share a clock, so the handshake's estimate of
        # the offset must be small (a barrier's release skew).
        if abs(dt["clock_offset_us"]) > 5000:
            fail(f"{name}: clock offset {dt['clock_offset_us']} us on one host")
        meta = {(e["name"], e["tid"]) for e in trace["traceEvents"] if e["ph"] == "M"}
        for m in (("process_name", 0), ("thread_name", 1), ("thread_name", 2)):
            if m not in meta:
                fail(f"{name} lacks the {m[0]} metadata of thread {m[1]}")
        events = [e for e in trace["traceEvents"] if e["ph"] == "X"]
        for e in events:
            if e["pid"] != rank or e["dur"] < 0:
                fail(f"{name}: bad event {e}")
        check_nesting(rank, events)

        steps_seen = sorted(e["args"]["step"] for e in events
                            if e["name"].startswith("ProfilerStep#"))
        if steps_seen != list(range(first, last + 1)):
            fail(f"{name}: steps {steps_seen}, expected {first}..{last}")

        ops = [e for e in events if e["cat"] == "cpu_op"]
        seen = collections.Counter()
        for e in ops:
            span = spans[e["args"]["op_id"]]
            expected = span["op"] + (" " + span["layer"] if "layer" in span else "")
            if e["name"] != expected or e["args"]["bytes"] != span["bytes"] \
                    or e["args"]["entry"] != span["entry"]:
                fail(f"{name}: event {e} is not span {span}")
            seen[span["entry"]] += 1
        per_rank_collectives[rank] = sorted(
            (e["args"]["step"], e["args"]["op_id"], e["args"]["bytes"])
            for e in ops if "collective" in e["args"])
        execs = [e for e in events if e["cat"] == "collective"]
        for e in execs:
            c = collectives[e["args"]["collective_id"]]
            if e["args"]["bytes"] != c["bytes"] or e["args"]["Collective name"] != c["kind"]:
                fail(f"{name}: collective event {e} is not {c}")
            if rank not in e["args"]["Process Group Ranks"]:
                fail(f"{name}: rank {rank} is not in the group of {e}")
        per_rank_exec[rank] = sorted(
            (e["args"]["step"], e["args"]["collective_id"], e["args"]["bytes"])
            for e in execs)
        entries = " ".join(f"{k}={v}" for k, v in sorted(seen.items()))
        print(f"rank {rank}: steps {first}..{last}, {len(ops)} op spans ({entries}), "
              f"{len(execs)} collectives, nested")

    if len(files) != world:
        fail(f"{len(files)} traces for a world of {world}")
    ranks = sorted(per_rank_collectives)
    for r in ranks[1:]:
        if per_rank_collectives[r] != per_rank_collectives[ranks[0]]:
            fail(f"rank {r}'s collective spans differ from rank {ranks[0]}'s")
        if per_rank_exec[r] != per_rank_exec[ranks[0]]:
            fail(f"rank {r}'s collectives differ from rank {ranks[0]}'s")
    print(f"every rank: the same {len(per_rank_collectives[ranks[0]])} collective "
          f"spans and {len(per_rank_exec[ranks[0]])} collectives, by op_id and bytes")


if __name__ == "__main__":
    main()
