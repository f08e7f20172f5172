#!/usr/bin/env python3
"""plan_matches_lowered.py LOWERED.mlir PLAN.json: the GPU plan's kernel launches carry
the CPU kernel calls' arguments. `dtc --emit=lowered` calls kernels/cpu as
dtk_<op>_f32(pointers..., integers..., floats...); the plan (dtc --emit=gpu-plan)
must hold, per entry point and in the same order, one launch per such call whose
p + i + f are the same values (pointers as arena offsets). compiler/lib/Target/
CudaPlan.cpp and compiler/lib/Conversion/DTToKernels/DTToKernels.cpp each make those
lists; this is where they are held to each other. Prints a line per entry point."""
import json
import re
import sys

CALL = re.compile(r"call @dtk_(\w+?)_f32\(([^)]*)\)")
GEP = re.compile(r"(%[\w.]+) = llvm\.getelementptr %[\w.]+\[(%[\w.]+)\]")
CONST = re.compile(r"(%[\w.]+) = arith\.constant ([-+0-9.eE]+|true|false) : (i\d+|f\d+)")
FUNC = re.compile(r"func\.func @dt_(\w+)\(")


def calls_by_entry(path):
    entries, current, values = {}, None, {}
    for line in open(path):
        m = FUNC.search(line)
        if m:
            current = m.group(1)
            values = {}
            entries.setdefault(current, [])
            continue
        if current is None:
            continue
        m = CONST.search(line)
        if m:
            v = m.group(2)
            values[m.group(1)] = float(v) if m.group(3).startswith("f") else int(v == "true" if v in ("true", "false") else int(v))
        m = GEP.search(line)
        if m:
            values[m.group(1)] = values[m.group(2)]
        m = CALL.search(line)
        if m and m.group(1) != "parallel_for":
            args = [values[a.strip()] for a in m.group(2).split(",")]
            entries[current].append((m.group(1), args))
    return entries


def main():
    lowered = calls_by_entry(sys.argv[1])
    plan = json.load(open(sys.argv[2]))["entries"]
    ok = True
    for entry, thunks in sorted(plan.items()):
        launches = [(t["op"], t["p"] + t["i"] + t.get("f", [])) for t in thunks
                    if t["op"] not in ("kernel", "copy")]
        calls = lowered.get(entry, [])
        same = len(launches) == len(calls)
        for (op, args), (name, cpu) in zip(launches, calls):
            if op != name or len(args) != len(cpu) or any(
                    abs(a - b) > 1e-6 * max(1.0, abs(b)) for a, b in zip(args, cpu)):
                print(f"{entry}: plan {op} {args} against CPU {name} {cpu}")
                same = False
                break
        print(f"{entry}: {len(launches)} launches, {len(calls)} CPU kernel calls, "
              f"{'the same' if same else 'DIFFERENT'}")
        ok &= same
    sys.exit(0 if ok else 1)


main()
