#!/usr/bin/env python3
"""zero_copies.py PLAN.json: what a mixed-precision GPU plan leaves out
(compiler/lib/Target/CudaZeroCopy.h). Prints, for grad_step, the products that
read their 16-bit operands (and bias) where they lie or write a 16-bit result, the loss
launches that read 16-bit logits or write a 16-bit gradient, how many
generated kernels still run over the logits, and how many attention, layer
norm and RMS norm launches read and write 16-bit data where the conversions
around them would have.
Row pitches ("ld": a product's A, B and C, 0 for packed; the loss's logits and
dlogits) and a padded product's extents follow a launch's types. Every rerouted launch keeps the CPU's pointers
in cpu_p, of the same length as p."""
import collections
import json
import sys

plan = json.load(open(sys.argv[1]))["entries"]["grad_step"]
products = [t for t in plan if t["op"] in ("matmul", "matmul_bias")]
for t in plan:
    if "cpu_p" in t:
        # A GELU epilogue's pre-activation is one pointer more on the GPU.
        extra = 1 if "epilogue" in t else 0
        assert len(t["cpu_p"]) + extra == len(t["p"]) and t["cpu_p"] != t["p"], t
print(f"products: {len(products)}, {sum('cpu_p' in t for t in products)} rerouted, "
      f"{sum(t.get('out') == 'bf16' for t in products)} writing bf16, "
      f"{sum(t.get('bias') == 'bf16' for t in products)} adding a bf16 bias, "
      f"{sum(t.get('epilogue') == 'gelu' for t in products)} GELU and "
      f"{sum(t.get('epilogue') == 'gelu_grad' for t in products)} its gradient "
      f"and {sum(t.get('epilogue') == 'bias_grad' for t in products)} a bias's "
      f"gradient in the epilogue")
def pitches(t):
    return f", rows {t['ld']} apart" if "ld" in t else ""
for t in plan:
    if t["op"] in ("cross_entropy", "cross_entropy_grad", "cross_entropy_with_grad"):
        print(f"{t['op']}: in {t.get('in', 'f32')}, out {t.get('out', 'f32')}"
              f"{pitches(t)}")
logits = [t for t in products if 50257 in t["i"][1:4]]
def padding(t):
    # A padded product (compiler/lib/Target/CudaPadding.h): the n and k it
    # runs with, and the bytes it zeroes first (rows x width).
    if "pad" not in t:
        return ""
    zeros = " + ".join(f"{z[2]} x {z[1]}" for z in t.get("zero", []))
    return f", padded to n {t['pad'][0]} k {t['pad'][1]}" + (
        f", zeroing {zeros} bytes" if zeros else "")
for t in logits:
    print(f"logits product {t['i'][1]} x {t['i'][2]} x {t['i'][3]}: "
          f"half {t.get('half')}, out {t.get('out', 'f32')}{pitches(t)}"
          f"{padding(t)}")
padded = [t for t in products if "pad" in t]
print(f"padded products: {len(padded)}, reading B from "
      f"{len(set(t['p'][1] for t in padded))} place(s)")
def kernels_over(size):
    # A kernel's n counts its elements, or its vector groups of 2 to 8.
    return sum(t['n'] * w == size for t in plan if t['op'] == 'kernel'
               for w in (1, 2, 4, 8))
if logits:
    size = logits[0]["i"][1] * logits[0]["i"][2]
    print(f"generated kernels over the logits ({size} elements): "
          f"{kernels_over(size)}")
    table = logits[0]["i"][2] * logits[0]["i"][3]
    print(f"generated kernels over the table ({table} elements): "
          f"{kernels_over(table)}")
for op in ("attention", "attention_grad"):
    launches = [t for t in plan if t["op"] == op]
    print(f"{op}: {len(launches)}, "
          f"{sum(t.get('in') == 'bf16' for t in launches)} reading bf16, "
          f"{sum(t.get('out') == 'bf16' for t in launches)} writing bf16")
    # Operands read or written with strides: a layout other than
    # [slices, t, d]'s [1, t * d, 0, d] (pointer 4, the log-sum-exp, is
    # [slices, t]: [1, t, 0, 1]).
    strided = set()
    for t in launches:
        _, steps, width, _ = t["i"]
        for k, layout in enumerate(t.get("layouts", [])):
            packed = [1, steps, 0, 1] if k == 4 else [1, steps * width, 0, width]
            if layout != packed:
                strided.add((k, tuple(layout)))
    for k, layout in sorted(strided):
        print(f"{op}: pointer {k} strided {list(layout)} in "
              f"{sum(t.get('layouts', [None] * 9)[k] == list(layout) for t in launches)}")
    # K and V in bytes from Q: a qkv split left out reads them a piece apart
    # in one buffer.
    apart = collections.Counter((t["p"][1] - t["p"][0], t["p"][2] - t["p"][0])
                                for t in launches if t.get("layouts"))
    for (k, v), n in sorted(apart.items()):
        if abs(k) < 1 << 16 and abs(v) < 1 << 16:
            print(f"{op}: K and V at Q + {k} and + {v} bytes in {n}")
for op, keys in (("layer_norm", ("in", "out")),
                 ("layer_norm_grad", ("in", "grad_in", "out")),
                 ("rms_norm", ("in", "out")),
                 ("rms_norm_grad", ("in", "grad_in", "out"))):
    launches = [t for t in plan if t["op"] == op]
    if launches:
        print(f"{op}: {len(launches)}, " + ", ".join(
            f"{sum(key in t for t in launches)} {key}" for key in keys))
print(f"generated kernels: {sum(t['op'] == 'kernel' for t in plan)}")
