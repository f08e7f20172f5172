"""Counts a GPU plan's products and attention launches, and how many of them
the plan marks "tf32" (16-bit inputs, so tensor cores may take them)."""

import collections
import json
import sys

plan = json.load(open(sys.argv[1]))
launches, marked = collections.Counter(), collections.Counter()
for entry in plan["entries"].values():
    for launch in entry:
        op = launch["op"]
        if op in ("kernel", "copy"):
            if "tf32" in launch:
                sys.exit(f"a {op} launch is marked tf32")
            continue
        launches[op] += 1
        if launch.get("tf32") is True:
            marked[op] += 1
for op in sorted(launches):
    print(f"{op}: {launches[op]} launches, {marked[op]} tf32")
