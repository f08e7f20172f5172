"""What offload = "optimizer" split, from a program's manifest; or whether two
runs' metrics hold the same losses, bit for bit.

  check_offload.py MANIFEST             prints the host's buffers, what the host
                                        copies down and up each step, and what
                                        the device clears itself
  check_offload.py same-losses A B      fails unless A's and B's metrics.jsonl
                                        hold the same steps with the same losses
"""
import json
import sys


def covered(buffer, ranges):
    return any(lo <= buffer["offset"] and buffer["offset"] + size(buffer) <= lo + n
               for lo, n in ranges)


def size(buffer):
    n = {"f32": 4, "i64": 8, "i32": 4, "bf16": 2, "f16": 2}[buffer["dtype"]]
    for d in buffer["shape"]:
        n *= d
    return max(n, 1)


def split(path):
    m = json.load(open(path))
    o = m["offload"]
    host = [b for b in m["buffers"] if b["offset"] < o["host_bytes"]]
    # Nothing of the device's part lies in the host's, nor the other way.
    for b in m["buffers"]:
        if b["offset"] < o["host_bytes"] < b["offset"] + size(b):
            sys.exit(f"{b['name']} straddles the split")
    moments = [b for b in host if b["role"] == "state" and "/" in b["name"]]
    scalars = [b for b in host if b not in moments]
    kinds = sorted({b["name"].split("/")[0] for b in moments})
    per = len(moments) // max(len(kinds), 1)
    print(f"host: {len(scalars)} scalars and the optimizer's {len(kinds)} x {per} moments")
    grads = [b for b in m["buffers"] if b["role"] == "grad"]
    params = [b for b in m["buffers"] if b["role"] == "param"]
    down = [b for b in m["buffers"] if covered(b, o["down"])]
    up = [b for b in m["buffers"] if covered(b, o["up"])]
    zero = [b for b in m["buffers"] if covered(b, o.get("zero", []))]
    if (any(b["role"] != "grad" for b in down + zero)
            or any(b["role"] != "param" for b in up)):
        sys.exit(f"down {[b['name'] for b in down]} / up {[b['name'] for b in up]}"
                 f" / zero {[b['name'] for b in zero]}")
    print(f"down: every gradient ({len(down)} of {len(grads)})" if len(down) == len(grads)
          else f"down: {len(down)} of {len(grads)} gradients")
    print(f"up: every parameter ({len(up)} of {len(params)})" if len(up) == len(params)
          else f"up: {len(up)} of {len(params)} parameters")
    print(f"cleared on the device: {len(zero)} of {len(grads)} gradients")


def losses(path):
    return [(r["step"], r.get("loss"), r.get("eval_loss"))
            for r in map(json.loads, open(path)) if "step" in r]


if sys.argv[1] == "same-losses":
    a, b = losses(sys.argv[2]), losses(sys.argv[3])
    if not a or a != b:
        sys.exit(f"the runs differ:\n{a}\n{b}")
    print(f"{len(a)} records, the same losses")
else:
    split(sys.argv[1])
