#!/usr/bin/python3
"""Benchmark: data parallelism on 2 ranks, dt against PyTorch DDP, side by side; and the
gradient all-reduce of the dt program against a bare MPI_Allreduce of the same bytes.

    bench/run_ddp.py [--ranks N] [--repeats R] [--out FILE]

The job is examples/mlp_fashion.dt (784-256-10, AdamW, cosine schedule, 3 epochs of
Fashion-MNIST) with a global batch of 128 split over N data-parallel ranks of one thread
each (N = 2: one per core of the development machine):
  - dt: the example with `parallel { mesh = (dp = N)  data = dp  zero = Z }`, Z = 0
    (plain data parallelism, as DDP) and Z = 1, started with `dtrun -n N`; and Z = 0
    compiled with `--overlap`, whose last layer's gradients are summed on a
    communication thread while the first layer's are computed;
  - PyTorch: bench/ddp_torch.py, DistributedDataParallel over gloo, N processes.
For scale, both also run on one process with N threads. Runs are interleaved, R times
each, and medians reported; samples/s is each program's own figure over its training
steps (start-up and the final evaluation excluded).

The all-reduce: dtc's manifest lists the program's collectives; the gradients' bucket
is timed with `dt-bench-allreduce --bytes` (the communicator the program calls against
MPI_Allreduce, interleaved), beside what the running program reports it spent in
collectives per step.

Needs `scripts/setup.sh --bench` (python3-torch) and a build. Writes a Markdown report
to bench/results/ (or --out).
"""
import argparse
import datetime
import json
import math
import os
import platform
import re
import statistics
import tempfile

from common import ROOT, cpu_name, parse_size, run, torch_config

BIN = os.path.join(ROOT, "build", "bin")


def parse_rate(text):
    """'12.3k' -> 12300.0"""
    m = re.match(r"([0-9.]+)([kM]?)", text)
    return float(m.group(1)) * {"": 1, "k": 1e3, "M": 1e6}[m.group(2)]


def compile_dt(work, ranks, zero, flags=()):
    """examples/mlp_fashion.dt, on `ranks` data-parallel ranks under ZeRO `zero` (or
    as written, on one rank, when ranks is 1), compiled with dtc `flags`."""
    src = open(os.path.join(ROOT, "examples", "mlp_fashion.dt")).read()
    name = (f"dp{ranks}_zero{zero}" if ranks > 1 else "one") + "".join(
        f.replace("-", "_").replace("=", "_").replace(".", "_") for f in flags)
    if ranks > 1:
        src += f"\nparallel {{\n  mesh = (dp = {ranks})\n  data = dp\n  zero = {zero}\n}}\n"
    path = os.path.join(work, name + ".dt")
    with open(path, "w") as f:
        f.write(src)
    program = os.path.join(work, name)
    run([os.path.join(BIN, "dtc"), path, "-o", program, *flags])
    manifest = json.loads(run([os.path.join(BIN, "dtc"), path, "--emit=manifest", "-o", "-", *flags]))
    return program, manifest


def run_dt(program, ranks, threads):
    cmd = [program, "--threads", str(threads)]
    if ranks > 1:
        cmd = [os.path.join(BIN, "dtrun"), "-n", str(ranks)] + cmd
    out = run(cmd, {"OPENBLAS_NUM_THREADS": "1"})
    done = [l for l in out.splitlines() if l.startswith("done:")][-1]
    r = {"samples_per_s": parse_rate(re.search(r"\(([0-9.]+[kM]?) samples/s\)", done).group(1)),
         "eval_accuracy": float(re.search(r"eval accuracy ([0-9.]+)%", done).group(1)) / 100,
         "peak_rss_mib": parse_size(re.search(r"peak RSS ([0-9.]+ [KMG]?i?B)", done).group(1))}
    comm = re.search(r"collectives: ([0-9.e+-]+) ms of rank 0's ([0-9.e+-]+) ms step", out)
    if comm:
        r["comm_ms_per_step"] = float(comm.group(1))
        r["step_ms"] = float(comm.group(2))
    return r


def run_torch(ranks, threads):
    bench = os.path.join(ROOT, "bench")
    if ranks > 1:
        cmd = ["/usr/bin/python3", os.path.join(bench, "ddp_torch.py"), "--ranks", str(ranks),
               "--threads", str(threads)]
    else:
        cmd = ["/usr/bin/python3", os.path.join(bench, "mlp_fashion_torch.py"), "--threads",
               str(threads)]
    out = run(cmd, {"OPENBLAS_NUM_THREADS": "1"})
    return json.loads(out.splitlines()[-1])


def bench_allreduce(ranks, sizes):
    """{bytes: (MPI_Allreduce us, dt us, dt / MPI)} from dt-bench-allreduce --bytes."""
    out = run([os.path.join(BIN, "dtrun"), "-n", str(ranks), os.path.join(BIN, "dt-bench-allreduce"),
               "--bytes", ",".join(str(s) for s in sizes)])
    table = {}
    for m in re.finditer(r"^\| (\d+) \| ([0-9.]+) us \| ([0-9.]+) us \| ([0-9.]+) \|", out, re.M):
        table[int(m.group(1))] = (float(m.group(2)), float(m.group(3)), float(m.group(4)))
    return table


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    n = args.ranks

    work = tempfile.mkdtemp(prefix="dt-bench-ddp-")
    programs = {"dt, ZeRO-0": compile_dt(work, n, 0), "dt, ZeRO-1": compile_dt(work, n, 1),
                "dt, ZeRO-0, --overlap": compile_dt(work, n, 0, ("--overlap",))}
    one, _ = compile_dt(work, 1, 0)

    peers = {
        **{f"{name}, {n} ranks x 1 thread": (lambda p=p: run_dt(p, n, 1))
           for name, (p, _) in programs.items()},
        f"PyTorch DDP (gloo), {n} ranks x 1 thread": lambda: run_torch(n, 1),
        f"dt, 1 rank x {n} threads": lambda: run_dt(one, 1, n),
        f"PyTorch, 1 process x {n} threads": lambda: run_torch(1, n),
    }
    runs = {k: [] for k in peers}
    for _ in range(args.repeats):
        for k, f in peers.items():
            runs[k].append(f())
    med = lambda k, field: statistics.median(r[field] for r in runs[k] if field in r)
    ddp = f"PyTorch DDP (gloo), {n} ranks x 1 thread"

    # The ZeRO-0 program's collectives of a training step; its gradients travel in
    # those of more than a KiB (in backward with one micro-batch per step).
    manifest = programs["dt, ZeRO-0"][1]
    collectives = manifest["collectives"]
    per_step = [c for c in collectives if c["entry"] != "eval_step"]
    grads = [c for c in per_step if c["bytes"] > 1024]
    grad_buffers = sum(4 * math.prod(b["shape"]) for b in manifest["buffers"]
                       if b["role"] == "grad")
    table = bench_allreduce(n, sorted({c["bytes"] for c in per_step}))

    info = {"cpu": cpu_name(), "cores": os.cpu_count(), "torch_config": torch_config()}
    stamp = datetime.datetime.now().strftime("%Y-%m-%d")
    out = args.out or os.path.join(ROOT, "bench", "results", f"ddp-{stamp}-{platform.node() or 'host'}.md")
    lines = [f"# Data parallelism: dt against PyTorch DDP ({stamp})", "",
             f"Machine: {info['cpu']}, {info['cores']} cores. Job: examples/mlp_fashion.dt (784-256-10,",
             "AdamW, cosine schedule), 3 epochs of Fashion-MNIST, global batch 128 split over the ranks.",
             f"Median of {args.repeats} interleaved runs; samples/s over the training steps as each",
             "program reports it; OPENBLAS_NUM_THREADS=1 for both peers.", "",
             "| peer | samples/s | vs DDP | test accuracy | peak RSS (rank 0) |", "|---|---:|---:|---:|---:|"]
    for k in peers:
        rate = med(k, "samples_per_s")
        lines.append(f"| {k} | {rate:.0f} | **{rate / med(ddp, 'samples_per_s'):.2f}x** "
                     f"| {100 * runs[k][-1]['eval_accuracy']:.2f}% | {runs[k][-1]['peak_rss_mib']:.0f} MiB |")
    zero0 = f"dt, ZeRO-0, {n} ranks x 1 thread"
    lines += ["", "## The gradient all-reduce", "",
              f"The ZeRO-0 program's collectives per step ({len(per_step)}, from `dtc --emit=manifest`), each",
              "timed alone: the runtime's communicator as the program calls it against a bare",
              "MPI_Allreduce of the same bytes (`dt-bench-allreduce --bytes`, interleaved rounds):", "",
              "| collective | bytes | MPI_Allreduce | dt | dt / MPI |", "|---|---:|---:|---:|---:|"]
    for c in per_step:
        mpi, ours, ratio = table[c["bytes"]]
        lines.append(f"| {c['entry']}: {c['what']} | {c['bytes']} | {mpi:.1f} us | {ours:.1f} us "
                     f"| {ratio:.3f} |")
    bare = sum(table[c["bytes"]][0] for c in per_step)
    where = ", ".join(f"{c['entry']}: {c['what']}" for c in grads)
    lines += ["", f"Gradients: {grad_buffers} bytes, summed in {where}. Inside the training run, "
              f"rank 0 spent {1e3 * med(zero0, 'comm_ms_per_step'):.0f} us a step in collectives "
              f"(of a {1e3 * med(zero0, 'step_ms'):.0f} us step; waiting for the other rank included) "
              f"against {bare:.0f} us for the same calls alone on bare MPI.", "",
              "Reproduce: `scripts/setup.sh --bench && bench/run_ddp.py`", "",
              "<details><summary>All runs and torch.__config__.show()</summary>", "", "```json",
              json.dumps(runs, indent=2), "```", "", "```", info["torch_config"].strip(), "```",
              "</details>", ""]
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines[:lines.index("<details><summary>All runs and torch.__config__.show()</summary>")]))
    print(f"written to {out}")


if __name__ == "__main__":
    main()
