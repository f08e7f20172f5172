#!/usr/bin/python3
"""Checks of `dtc --report=json` and of what running ranks report.

    check_report.py ratio A B KIND N
        each rank of report B holds 1/N of the KIND bytes (params, grads,
        optimizer) a rank of report A holds (within 1 %: a scalar step counter
        is not sharded)
    check_report.py at-most A B KIND FRACTION
        each rank of report B holds at most FRACTION of the KIND bytes
        (activations, arena, ...) the same rank of report A holds
    check_report.py tensor-parallel REPORT N
        the weights of column and row layers (attn.qkv, attn.proj, mlp.up,
        mlp.down), the column layers' biases and the vocabulary-parallel
        embedding table (wte) are 1/N of the whole on each rank; other
        parameters whole
    check_report.py measured REPORT OUT TOLERANCE
        the arena each rank of the run whose output is OUT held ("memory: ...
        resident ...", one rank or several) is the report's arena within
        TOLERANCE
"""
import json
import re
import sys

UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}


def load(path):
    with open(path) as f:
        return json.load(f)


def ratio(a, b, kind, n):
    ra, rb = load(a)["ranks"], load(b)["ranks"]
    for x, y in zip(ra, rb):
        want = x[kind] / float(n)
        if abs(y[kind] - want) > 0.01 * want:
            sys.exit(f"rank {y['rank']}: {kind} {y[kind]} bytes, expected {want:.0f} (1/{n} of {x[kind]})")
    print(f"{kind}: {rb[0][kind]} bytes per rank against {ra[0][kind]}")


def at_most(a, b, kind, fraction):
    ra, rb = load(a)["ranks"], load(b)["ranks"]
    for x, y in zip(ra, rb):
        if y[kind] > fraction * x[kind]:
            sys.exit(f"rank {y['rank']}: {kind} {y[kind]} bytes, more than {fraction} of {x[kind]}")
    print(f"{kind}: {rb[0][kind]} bytes per rank against {ra[0][kind]}")


def tensor_parallel(report, n):
    # Column layers split weight and bias by their outputs, row layers the
    # weight by its inputs (their bias is added after the sum, whole); @vocab
    # the table's rows.
    layers = ("attn.qkv.weight", "attn.qkv.bias", "mlp.up.weight", "mlp.up.bias",
              "attn.proj.weight", "mlp.down.weight", "wte.weight")
    checked = 0
    for t in load(report)["tensors"]:
        if t["role"] != "param":
            continue
        split = any(t["name"].endswith(l) for l in layers)
        want = t["whole_bytes"] // n if split else t["whole_bytes"]
        if t["bytes"] != want:
            sys.exit(f"{t['name']} ({t['layout']}): {t['bytes']} bytes per rank, expected {want}")
        checked += split
    if not checked:
        sys.exit("no column or row layer in the report")
    print(f"{checked} column/row tensors at 1/{n} per rank")


def measured(report, out, tolerance):
    arena = load(report)["ranks"][0]["arena"]
    text = open(out).read()
    # "resident on ranks 0..3: A, B, ..." from several ranks, "; A resident"
    # from one.
    m = (re.search(r"resident on ranks [0-9.]+: (.*)", text)
         or re.search(r"planned; ([0-9.]+ \w+) resident", text))
    if not m:
        sys.exit("the run reported no resident arena")
    sizes = []
    for item in m.group(1).split(","):
        value, unit = item.split()
        sizes.append(float(value) * UNITS[unit])
    for r, s in enumerate(sizes):
        # The figures are printed to 2 or 3 significant digits.
        if abs(s - arena) > tolerance * arena:
            sys.exit(f"rank {r}: {s:.0f} bytes resident, the plan says {arena}")
    print(f"{len(sizes)} ranks hold their planned arena of {arena} bytes")


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "ratio":
        ratio(args[0], args[1], args[2], int(args[3]))
    elif cmd == "at-most":
        at_most(args[0], args[1], args[2], float(args[3]))
    elif cmd == "tensor-parallel":
        tensor_parallel(args[0], int(args[1]))
    elif cmd == "measured":
        measured(args[0], args[1], float(args[2]))
    else:
        sys.exit(__doc__)
