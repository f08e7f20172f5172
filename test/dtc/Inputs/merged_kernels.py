#!/usr/bin/env python3
"""merged_kernels.py MERGED.json ALONE.json PTX: a GPU plan whose independent
small generated kernels share launches (dtc's default) against the same
program's plan with every kernel launched alone (--gpu-merge=false). Per entry
point: the launches other than generated kernels are the same and in the same
order, every kernel runs exactly once in either (a merged launch's "kernels"
are its members), each merged launch has a kernel of its name in the PTX and
as many blocks as its "n" asks. Prints a line per entry point."""
import collections
import json
import re
import sys

merged = json.load(open(sys.argv[1]))["entries"]
alone = json.load(open(sys.argv[2]))["entries"]
entries = set(re.findall(r"^\.visible \.entry (\w+)\(", open(sys.argv[3]).read(), re.M))

for name in sorted(merged):
    m, a = merged[name], alone[name]
    others = lambda plan: [json.dumps(t, sort_keys=True) for t in plan if t["op"] != "kernel"]
    assert others(m) == others(a), f"{name}: the other launches changed"
    ran = collections.Counter()
    groups = [t for t in m if "kernels" in t]
    for t in m:
        if t["op"] == "kernel":
            ran.update(t.get("kernels", [t["name"]]))
    assert ran == collections.Counter(t["name"] for t in a if t["op"] == "kernel"), name
    for t in groups:
        assert t["name"] in entries, f"{t['name']} is not in the PTX"
        assert t["n"] == t["grid"] * 256 and t["members"] == len(t["kernels"]) >= 2, t
    print(f"{name}: {len(a)} launches alone, {len(m)} merged: "
          f"{len(groups)} launches run {sum(t['members'] for t in groups)} kernels")
