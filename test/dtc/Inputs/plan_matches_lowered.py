#!/usr/bin/env python3
"""plan_matches_lowered.py LOWERED.mlir PLAN.json: the GPU plan's kernel launches carry
the CPU kernel calls' arguments. `dtc --emit=lowered` calls kernels/cpu as
dtk_<op>_f32(pointers..., integers..., floats...) and the runtime's collectives as
dtrt_<collective>(pointers..., integers...); the plan (dtc --emit=gpu-plan)
must hold, per entry point and in the same order, one launch per such call whose
p + i + f are the same values (pointers as arena offsets). compiler/lib/Target/
CudaPlan.cpp and compiler/lib/Conversion/DTToKernels/DTToKernels.cpp each make those
lists; this is where they are held to each other. Prints a line per entry point."""
import json
import re
import sys

CALL = re.compile(r"call @(?:dtk_(\w+?)_f32|dtrt_(\w+?))\(([^)]*)\)")
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
        if not m:
            continue
        # The runtime's collectives (an asynchronous one's start is the same
        # launch on the GPU, which runs collectives in order); a block's
        # first row, which the CPU loads from the arena, is any value.
        name = m.group(1) or m.group(2).removesuffix("_start")
        if name in ("parallel_for", "mesh_coord", "span_begin", "span_end"):
            continue
        args = [values.get(a.strip()) for a in m.group(3).split(",")]
        entries[current].append((name, args))
    return entries


# Vocabulary-parallel kernels take their block's first row as a pointer (the
# last) on the GPU and as a value among the integers on the CPU: the plan's
# arguments in the CPU's order.
FIRST_LAST = {
    "embedding_shard": lambda p, i: p[:3] + i[:1] + [p[3]] + i[1:],
    "embedding_grad_shard": lambda p, i: p[:3] + i[:1] + [p[3]] + i[1:],
    "class_stats": lambda p, i: p[:3] + i[:2] + [p[3]] + i[2:],
    "cross_entropy_grad_shard": lambda p, i: p[:5] + i[:3] + [p[5]] + i[3:],
}


def expanded(t):
    """A launch as the CPU calls it: the loss with its gradient
    (cross_entropy_with_grad) is the CPU's two calls, the loss's first."""
    if t["op"] != "cross_entropy_with_grad":
        return [(t["op"], plan_args(t))]
    grad = t.get("cpu_p", t["p"])[:4] + t["i"]
    return [("cross_entropy", t["cpu_loss"] + t["i"]), ("cross_entropy_grad", grad)]


def plan_args(t):
    if t["op"] in FIRST_LAST:
        return FIRST_LAST[t["op"]](t["p"], t["i"])
    # Rotary embeddings: the CPU takes the direction (i[3]) after the floats.
    if t["op"] == "rope":
        return t["p"] + t["i"][:3] + t["f"] + t["i"][3:]
    # A product that reads or writes elsewhere on the GPU (conversions left
    # out, compiler/lib/Target/CudaZeroCopy.h) keeps the CPU's pointers too.
    return t.get("cpu_p", t.get("p", [])) + t["i"] + t.get("f", [])


def main():
    lowered = calls_by_entry(sys.argv[1])
    plan = json.load(open(sys.argv[2]))["entries"]
    ok = True
    for entry, thunks in sorted(plan.items()):
        launches = [launch for t in thunks
                    if t["op"] not in ("kernel", "copy", "shard_start")
                    for launch in expanded(t)]
        calls = lowered.get(entry, [])
        same = len(launches) == len(calls)
        for (op, args), (name, cpu) in zip(launches, calls):
            if op != name or len(args) != len(cpu) or any(
                    b is not None and abs(a - b) > 1e-6 * max(1.0, abs(b))
                    for a, b in zip(args, cpu)):
                print(f"{entry}: plan {op} {args} against CPU {name} {cpu}")
                same = False
                break
        print(f"{entry}: {len(launches)} launches, {len(calls)} CPU kernel calls, "
              f"{'the same' if same else 'DIFFERENT'}")
        ok &= same
    sys.exit(0 if ok else 1)


main()
