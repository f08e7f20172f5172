"""Counts a GPU plan's products and attention launches, and how many of them
the plan marks "tf32" (f32 operands holding 16-bit values, so TF32 tensor cores
are exact for them), "half" (operands stored as 16-bit values) or, attention
only, "bf16" (f32 operands holding bf16 values, for bf16 tensor cores)."""

import collections
import json
import sys

plan = json.load(open(sys.argv[1]))
launches, marked, half, bf16 = (collections.Counter() for _ in range(4))
for entry in plan["entries"].values():
    for launch in entry:
        op = launch["op"]
        if op in ("kernel", "copy"):
            if "tf32" in launch or "half" in launch or "bf16" in launch:
                sys.exit(f"a {op} launch is marked tf32, half or bf16")
            continue
        launches[op] += 1
        if launch.get("tf32") is True:
            marked[op] += 1
        if "half" in launch:
            if "tf32" in launch or op not in ("matmul", "matmul_bias"):
                sys.exit(f"a {op} launch is marked half and more")
            half[op, launch["half"]] += 1
        if "bf16" in launch:
            if launch["bf16"] is not True or "tf32" in launch or "half" in launch:
                sys.exit(f"a {op} launch is marked bf16 and more")
            if op not in ("attention", "attention_grad"):
                sys.exit(f"a {op} launch is marked bf16")
            bf16[op] += 1
for op in sorted(launches):
    kinds = "".join(f", {n} {t}" for (o, t), n in sorted(half.items()) if o == op)
    if bf16[op]:
        kinds += f", {bf16[op]} bf16"
    print(f"{op}: {launches[op]} launches, {marked[op]} tf32{kinds}")
