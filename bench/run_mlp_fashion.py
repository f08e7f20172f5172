#!/usr/bin/python3
"""Benchmark: the compiled examples/mlp_fashion.dt against PyTorch, side by side.

    bench/run_mlp_fashion.py [--repeats R] [--env KEY=VALUE ...] [--out FILE]

Both train the same model (784-256-10, ReLU) on Fashion-MNIST for 3 epochs with the same
batch (128), optimizer (AdamW, lr 1e-3, wd 0.01 on matrices), schedule (cosine, 100
warm-up steps) and seed, at one and at two threads, interleaved, R times each; the
median of each is reported with the ratio dt / PyTorch. At two threads PyTorch is run in
its two possible configurations (torch threads 2, or torch 1 with OpenBLAS on 2) and the
faster one is compared. Also reported: each side's test accuracy and peak RSS, and the
fraction of the machine's sgemm roof (a large square product through the same OpenBLAS,
at the same thread count) that each reaches, counting the model's matrix-product FLOPs.

Needs the set-up of `scripts/setup.sh --bench` (python3-torch) and a built dtc.
Writes a Markdown report to bench/results/ (or --out).
"""
import argparse
import datetime
import json
import os
import platform
import re
import statistics
import subprocess
import tempfile

from common import ROOT, build_sgemm_roof, cpu_name, parse_size, run, sgemm_roof, torch_config
# What the race runs: the example, its PyTorch peer, the FLOPs counted per sample and the
# product shape whose sgemm rate is reported beside the roof.
MLP = {
    "name": "mlp_fashion",
    "torch": "mlp_fashion_torch.py",
    # Matrix-product FLOPs per training sample of 784-256-10: forward 2(784*256 +
    # 256*10); backward dW1 2*784*256, dW2 and dH 2*256*10 each (no gradient of the
    # input pixels).
    "flop_per_sample": 2 * (784 * 256 + 256 * 10) + 2 * 784 * 256 + 2 * 2 * 256 * 10,
    "flops_counted": "the model's matrix products only",
    "model_shape": (128, 256, 784),
    "model_shape_text": "128x784 @ 784x256",
}


def parse_rate(text):
    """'12.3k' -> 12300.0"""
    m = re.match(r"([0-9.]+)([kM]?)", text)
    return float(m.group(1)) * {"": 1, "k": 1e3, "M": 1e6}[m.group(2)]


def run_dt(program, threads, env):
    out = run([program, "--threads", str(threads)], env)
    done = [l for l in out.splitlines() if l.startswith("done:")][-1]
    rate = re.search(r"\(([0-9.]+[kM]?) samples/s\)", done).group(1)
    acc = re.search(r"eval accuracy ([0-9.]+)%", done).group(1)
    rss = re.search(r"peak RSS ([0-9.]+ [KMG]?i?B)", done).group(1)
    return {"samples_per_s": parse_rate(rate), "eval_accuracy": float(acc) / 100,
            "peak_rss_mib": parse_size(rss)}


def run_torch(script, threads, blas_threads, env):
    e = dict(env)
    e["OPENBLAS_NUM_THREADS"] = str(blas_threads)
    out = run(["/usr/bin/python3", os.path.join(ROOT, "bench", script),
               "--threads", str(threads)], e)
    return json.loads(out.splitlines()[-1])


def machine_info(env):
    info = {"cpu": cpu_name(), "cores": os.cpu_count()}
    e = dict(os.environ, OPENBLAS_VERBOSE="2", **env)
    p = subprocess.run(["/usr/bin/python3", "-c", "import ctypes; ctypes.CDLL('libopenblas.so.0')"],
                       env=e, capture_output=True, text=True)
    core = re.search(r"Core: (\S+)", p.stdout + p.stderr)
    info["openblas_core"] = core.group(1) if core else "unknown"
    info["torch_config"] = torch_config()
    return info


def race(spec, doc):
    """Runs spec's example and its PyTorch peer side by side and writes the report."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--env", action="append", default=[], help="KEY=VALUE for both peers")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    env = dict(kv.split("=", 1) for kv in args.env)
    name, flop_per_sample = spec["name"], spec["flop_per_sample"]

    work = tempfile.mkdtemp(prefix="dt-bench-")
    program = os.path.join(work, name)
    run([os.path.join(ROOT, "build", "bin", "dtc"), f"examples/{name}.dt", "-o", program])
    roof_tool = build_sgemm_roof(work)

    results = {}
    for threads in (1, 2):
        dt_runs, torch_runs = [], {}
        configs = [(1, 1)] if threads == 1 else [(2, 1), (1, 2)]  # (torch threads, BLAS threads)
        # The roof is measured in every repeat and the best kept: on a shared machine a
        # single measurement can land in a slow moment and flatter both peers.
        roof = model_roof = 0.0
        for _ in range(args.repeats):
            roof = max(roof, sgemm_roof(roof_tool, threads, env, (2048, 2048, 2048)))
            model_roof = max(model_roof, sgemm_roof(roof_tool, threads, env, spec["model_shape"]))
            dt_runs.append(run_dt(program, threads, env))
            for cfg in configs:
                torch_runs.setdefault(cfg, []).append(run_torch(spec["torch"], cfg[0], cfg[1], env))
        med = lambda rs, k: statistics.median(r[k] for r in rs)
        torch_best = max(configs, key=lambda c: med(torch_runs[c], "samples_per_s"))
        dt_rate = med(dt_runs, "samples_per_s")
        t_rate = med(torch_runs[torch_best], "samples_per_s")
        results[threads] = {
            "dt": {"samples_per_s": dt_rate, "runs": [r["samples_per_s"] for r in dt_runs],
                   "eval_accuracy": dt_runs[-1]["eval_accuracy"],
                   "peak_rss_mib": dt_runs[-1]["peak_rss_mib"],
                   "roof_fraction": dt_rate * flop_per_sample / (roof * 1e9)},
            "torch": {"samples_per_s": t_rate, "config": {"torch_threads": torch_best[0],
                                                          "openblas_threads": torch_best[1]},
                      "runs": {f"torch {c[0]}, openblas {c[1]}": [r["samples_per_s"] for r in rs]
                               for c, rs in torch_runs.items()},
                      "eval_accuracy": torch_runs[torch_best][-1]["eval_accuracy"],
                      "peak_rss_mib": torch_runs[torch_best][-1]["peak_rss_mib"],
                      "roof_fraction": t_rate * flop_per_sample / (roof * 1e9)},
            "ratio": dt_rate / t_rate,
            "sgemm_roof_gflops": roof, "sgemm_model_shape_gflops": model_roof,
        }

    info = machine_info(env)
    stamp = datetime.datetime.now().strftime("%Y-%m-%d")
    out = args.out or os.path.join(ROOT, "bench", "results",
                                   f"{name}-{stamp}-{platform.node() or 'host'}.md")
    lines = [f"# {name}: dt against PyTorch ({stamp})", "",
             f"Machine: {info['cpu']}, {info['cores']} cores; OpenBLAS kernels: {info['openblas_core']}.",
             f"Environment for both peers: {env or 'default'}. Median of {args.repeats} interleaved runs;",
             "samples/s over the whole 3-epoch run (1404 steps of 128), as each program reports it.",
             "Roof: OpenBLAS sgemm on 2048^3 at the same thread count (best of the repeats); FLOPs counted are",
             f"{spec['flops_counted']} ({flop_per_sample} per sample).", "",
             "| threads | dt samples/s | PyTorch samples/s | ratio | dt % of roof | PyTorch % of roof | dt acc | PyTorch acc | dt peak RSS | PyTorch peak RSS |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for t, r in results.items():
        lines.append(f"| {t} | {r['dt']['samples_per_s']:.0f} | {r['torch']['samples_per_s']:.0f} "
                     f"| **{r['ratio']:.2f}x** | {100 * r['dt']['roof_fraction']:.0f}% "
                     f"| {100 * r['torch']['roof_fraction']:.0f}% | {100 * r['dt']['eval_accuracy']:.2f}% "
                     f"| {100 * r['torch']['eval_accuracy']:.2f}% | {r['dt']['peak_rss_mib']:.0f} MiB "
                     f"| {r['torch']['peak_rss_mib']:.0f} MiB |")
    lines += ["", "sgemm roof (GFLOP/s): " + ", ".join(
        f"{t} thread(s): {r['sgemm_roof_gflops']:.1f} (2048^3), {r['sgemm_model_shape_gflops']:.1f} ({spec['model_shape_text']})"
        for t, r in results.items()), "",
        "At two threads PyTorch ran as torch.set_num_threads(2) and as torch 1 thread with OpenBLAS",
        "on 2 threads; the faster is compared: " +
        json.dumps(results[2]["torch"]["config"]) + ".", "",
        f"Reproduce: `scripts/setup.sh --bench && bench/run_{name}.py" +
        "".join(f" --env {k}={v}" for k, v in env.items()) + "`", "",
        "<details><summary>All runs and torch.__config__.show()</summary>", "", "```json",
        json.dumps(results, indent=2), "```", "", "```", info["torch_config"].strip(), "```", "</details>", ""]
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines[:14 + len(results)]))
    print(f"\nwritten to {out}")


def main():
    race(MLP, __doc__)


if __name__ == "__main__":
    main()
