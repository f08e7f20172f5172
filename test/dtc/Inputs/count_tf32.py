"""Counts a GPU plan's products and attention launches, and how many of them
the plan marks "tf32" (f32 operands holding 16-bit values, so TF32 tensor cores
are exact for them) or "half" (operands stored as 16-bit values)."""

import collections
import json
import sys

plan = json.load(open(sys.argv[1]))
launches, marked, half = (collections.Counter() for _ in range(3))
for entry in plan["entries"].values():
    for launch in entry:
        op = launch["op"]
        if op in ("kernel", "copy"):
            if "tf32" in launch or "half" in launch:
                sys.exit(f"a {op} launch is marked tf32 or half")
            continue
        launches[op] += 1
        if launch.get("tf32") is True:
            marked[op] += 1
        if "half" in launch:
            if "tf32" in launch or op not in ("matmul", "matmul_bias"):
                sys.exit(f"a {op} launch is marked half and more")
            half[op, launch["half"]] += 1
for op in sorted(launches):
    kinds = "".join(f", {n} {t}" for (o, t), n in sorted(half.items()) if o == op)
    print(f"{op}: {launches[op]} launches, {marked[op]} tf32{kinds}")
