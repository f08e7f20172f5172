#!/usr/bin/env python3
"""gpu_plan_traffic.py PROGRAM.dt [--entry grad_step] [--top N]

What a program's GPU plan asks of the device, without a GPU: dtc's launch list
for one entry point (`--emit=gpu-plan`) joined with the manifest's cost model
(`--emit=manifest`: each span's bytes and FLOPs). Prints the launches by kind,
the bytes the generated kernels move by what they fuse, and the heaviest of
them. These are the cost model's bytes (the CPU program's reads and writes of
each op), not a measurement: a zero copy that the plan takes removes a whole
launch, but a 16-bit read that replaces an f32 one still counts 4 bytes. The
measured times come from DTRT_CUDA_PROFILE=1 on a GPU (docs/operations.md)."""
import argparse
import collections
import json
import os
import subprocess
import tempfile


def dtc_json(program, emit):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, emit + ".json")
        subprocess.run(["dtc", program, "--gpu=on", "--emit=" + emit, "-o", out],
                       check=True)
        with open(out) as f:
            return json.load(f)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("program")
    parser.add_argument("--entry", default="grad_step")
    parser.add_argument("--top", type=int, default=10)
    args = parser.parse_args()

    plan = dtc_json(args.program, "gpu-plan")
    if "unsupported" in plan:
        raise SystemExit(f"no GPU plan: {plan['unsupported']}")
    spans = {s["id"]: s for s in dtc_json(args.program, "manifest")["spans"]}
    launches = plan["entries"][args.entry]

    def cost(t):
        # A launch of several small kernels at once costs what they all do.
        return sum(spans.get(s, {}).get("bytes", 0)
                   for s in t.get("spans", [t.get("span")]))

    merged = [t for t in launches if "kernels" in t]
    print(f"{args.entry}: {len(launches)} launches, "
          f"arena {plan['arena_bytes'] / 2**30:.2f} GiB; {len(merged)} of them "
          f"run {sum(len(t['kernels']) for t in merged)} small kernels at once")
    kinds = collections.Counter(t["op"] for t in launches)
    for kind, n in kinds.most_common():
        gb = sum(cost(t) for t in launches if t["op"] == kind) / 1e9
        print(f"  {kind:24s} {n:5d}  {gb:8.2f} GB")

    kernels = [t for t in launches if t["op"] == "kernel"]
    print(f"generated kernels by what they fuse "
          f"({sum(cost(t) for t in kernels) / 1e9:.2f} GB in all):")
    fused = collections.defaultdict(lambda: [0, 0])
    for t in kernels:
        for span in t.get("spans", [t.get("span")]):
            what = spans.get(span, {})
            fused[what.get("op", "?")][0] += 1
            fused[what.get("op", "?")][1] += what.get("bytes", 0)
    for what, (n, b) in sorted(fused.items(), key=lambda kv: -kv[1][1])[:args.top]:
        print(f"  {what:44s} {n:5d}  {b / 1e9:8.2f} GB")
    print(f"the {args.top} heaviest generated kernels (n: elements, or vector groups):")
    for t in sorted(kernels, key=cost, reverse=True)[:args.top]:
        s = spans.get(t.get("span"), {})
        print(f"  {t['name']:20s} n {t['n']:>11d}  {cost(t) / 1e6:8.1f} MB  "
              f"{s.get('op', '?')} {s.get('layer', '')}")


if __name__ == "__main__":
    main()
