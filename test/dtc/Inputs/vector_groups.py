#!/usr/bin/env python3
"""vector_groups.py GROUPED.json SCALAR.json: how the generated kernels of a GPU
plan (dtc --emit=gpu-plan) take their elements, against the same program built
with dtc --gpu-unroll=1 (one element at a time). A kernel's `n` counts its
vector groups (dt/Conversion/GPUKernels.h, vectorWidth): the scalar plan's n
over the grouped one's is the group's width, 1, 2, 4 or 8. Prints, per entry
point, how many kernels take groups of each width."""
import json
import sys

grouped = json.load(open(sys.argv[1]))["entries"]
scalar = json.load(open(sys.argv[2]))["entries"]
for entry in sorted(grouped):
    g = {t["name"]: t["n"] for t in grouped[entry] if t["op"] == "kernel"}
    s = {t["name"]: t["n"] for t in scalar[entry] if t["op"] == "kernel"}
    assert g.keys() == s.keys(), entry
    widths = {}
    for name, n in g.items():
        width = s[name] // n
        assert s[name] == n * width and width in (1, 2, 4, 8), (name, n, s[name])
        widths[width] = widths.get(width, 0) + 1
    print(f"{entry}: " + ", ".join(f"{widths[w]} of width {w}"
                                   for w in sorted(widths)))
