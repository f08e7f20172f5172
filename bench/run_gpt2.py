#!/usr/bin/python3
"""Benchmark: a GPT example (examples/gpt2_124m.dt, or examples/gpt_tiny.dt with
--model gpt_tiny) compiled by dt against PyTorch, side by side, on one rank.

    bench/run_gpt2.py [--model M] [--steps S] [--warmup W] [--threads T]
                      [--repeats R] [--env KEY=VALUE ...] [--out FILE]

Both train the same model (f32) on the same token shards with the same batch
(gpt2_124m: 8 sequences of 1024 tokens in micro-batches of 4; gpt_tiny: 32 of 128),
optimizer (AdamW, weight decay on matrices), clipping and schedule, at T threads
(default: the machine's cores); W
steps are run first and not timed, then S are. PyTorch runs in both of its thread
configurations (torch T threads, or torch 1 thread over T OpenBLAS threads) and the
faster is compared. With --repeats R every peer runs R times, interleaved (dt, then each
PyTorch configuration, R rounds), and each one's best run is compared: on a shared VM
whose speed drifts, the best of a few runs is the steadiest estimate. Reported: tokens/s of each, the ratio, each one's fraction of the
machine's sgemm roof (a 2048^3 product through the same OpenBLAS, same threads) counting
6 N + 12 L d T FLOPs per token (N parameters, L layers, width d, context T; the
convention of llm.c and PaLM's MFU), and peak RSS against dt's planned arena.

dt's program chooses OpenBLAS's kernels itself when OpenBLAS under-detects the CPU
(dtrt/blas.h); the PyTorch peer is given the same kernels through OPENBLAS_CORETYPE,
so both multiply with the same code. The dt program is the example without its eval
source and checkpoints, so that both runs time training steps only.

Needs `scripts/setup.sh --bench` (python3-torch) and a built dtc. gpt2_124m takes about
15 minutes on 2 cores, gpt_tiny (--steps 30 --warmup 5) about 2. Writes a Markdown
report to bench/results/ (or --out).
"""
import argparse
import datetime
import json
import math
import os
import platform
import re
import tempfile

from common import ROOT, build_sgemm_roof, cpu_name, parse_size, run, sgemm_roof, torch_config

# Per model: parameters, layers, width, context, sequences per step, vocabulary.
MODELS = {"gpt2_124m": (124439808, 12, 768, 1024, 8, 50257),
          "gpt_tiny": (842496, 4, 128, 128, 32, 256)}
PARAMS, LAYERS, WIDTH, CTX, BATCH, VOCAB = MODELS["gpt2_124m"]
FLOP_PER_TOKEN = 0
MODEL = "gpt2_124m"


def choose(model):
    global PARAMS, LAYERS, WIDTH, CTX, BATCH, VOCAB, FLOP_PER_TOKEN, MODEL
    PARAMS, LAYERS, WIDTH, CTX, BATCH, VOCAB = MODELS[model]
    FLOP_PER_TOKEN = 6 * PARAMS + 12 * LAYERS * WIDTH * CTX
    MODEL = model


def bench_program(work):
    """The example without eval and checkpoints, compiled."""
    src = open(os.path.join(ROOT, "examples", MODEL + ".dt")).read()
    src = "\n".join(l for l in src.splitlines()
                    if not re.match(r"\s*(eval|eval_every|checkpoint)\s*=", l))
    path = os.path.join(work, MODEL + "_bench.dt")
    with open(path, "w") as f:
        f.write(src + "\n")
    program = os.path.join(work, "gpt2")
    run([os.path.join(ROOT, "build", "bin", "dtc"), path, "-o", program])
    return program


def run_dt(program, threads, steps, warmup, work, env):
    log = os.path.join(work, "dt-log")
    out = run([program, "--threads", str(threads), "--steps", str(warmup + steps),
               "--log-every", "1", "--log-dir", log], env)
    records = [json.loads(l) for l in open(os.path.join(log, "metrics.jsonl"))]
    timed = [r for r in records if "loss" in r and r["step"] > warmup]
    seconds = sum(BATCH * CTX / r["tokens_per_s"] for r in timed)
    arena = parse_size(re.search(r", arena ([0-9.]+ [KMG]?i?B);", out).group(1))
    rss = parse_size(re.search(r"peak RSS ([0-9.]+ [KMG]?i?B)", out).group(1))
    blas = re.search(r"blas: (.*)", out).group(1)
    return {"tokens_per_s": len(timed) * BATCH * CTX / seconds,
            "seconds_per_step": seconds / len(timed), "losses": [r["loss"] for r in timed],
            "peak_rss_mib": rss, "arena_mib": arena, "blas": blas}


def run_torch(threads, blas_threads, steps, warmup, env):
    e = dict(env)
    e["OPENBLAS_NUM_THREADS"] = str(blas_threads)
    out = run(["/usr/bin/python3", os.path.join(ROOT, "bench", "gpt2_torch.py"),
               "--model", MODEL, "--threads", str(threads), "--steps", str(steps), "--warmup", str(warmup)], e)
    return json.loads(out.splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", choices=sorted(MODELS), default="gpt2_124m")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--env", action="append", default=[], help="KEY=VALUE for both peers")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    env = dict(kv.split("=", 1) for kv in args.env)
    choose(args.model)

    work = tempfile.mkdtemp(prefix="dt-bench-gpt2-")
    program = bench_program(work)
    roof_tool = build_sgemm_roof(work)

    fastest = lambda runs: max(runs, key=lambda r: r["tokens_per_s"])
    dt_runs = [run_dt(program, args.threads, args.steps, args.warmup, work, env)]
    # The kernels dt's program multiplies with, for the roof and for PyTorch.
    core = re.match(r"OpenBLAS [0-9.]+, (\S+) kernels", dt_runs[0]["blas"]).group(1)
    peer_env = dict(env)
    peer_env.setdefault("OPENBLAS_CORETYPE", core)
    roof = sgemm_roof(roof_tool, args.threads, peer_env)
    configs = [(args.threads, 1)] + ([(1, args.threads)] if args.threads > 1 else [])
    all_torch = {c: [] for c in configs}
    for round_ in range(args.repeats):
        if round_ > 0:
            dt_runs.append(run_dt(program, args.threads, args.steps, args.warmup, work, env))
        for c in configs:
            all_torch[c].append(run_torch(c[0], c[1], args.steps, args.warmup, peer_env))
    dt = fastest(dt_runs)
    torch_runs = {c: fastest(runs) for c, runs in all_torch.items()}
    best = max(configs, key=lambda c: torch_runs[c]["tokens_per_s"])
    t = torch_runs[best]
    ratio = dt["tokens_per_s"] / t["tokens_per_s"]
    roof_frac = lambda rate: rate * FLOP_PER_TOKEN / (roof * 1e9)

    cpu = cpu_name()
    stamp = datetime.datetime.now().strftime("%Y-%m-%d")
    out = args.out or os.path.join(ROOT, "bench", "results",
                                   f"{MODEL}-{stamp}-{platform.node() or 'host'}.md")
    lines = [
        f"# {MODEL}: dt against PyTorch ({stamp})", "",
        f"Machine: {cpu}, {os.cpu_count()} cores; {args.threads} threads. dt: {dt['blas']};",
        f"PyTorch given OPENBLAS_CORETYPE={peer_env['OPENBLAS_CORETYPE']}. "
        f"{args.steps} timed optimizer steps after {args.warmup} untimed; "
        + ("one run each;" if args.repeats == 1 else
           f"best of {args.repeats} interleaved runs each;"),
        f"{BATCH} sequences of {CTX} tokens per step, f32, AdamW, clipping.",
        f"FLOPs per token: 6 N + 12 L d T = {FLOP_PER_TOKEN / 1e9:.3f} GFLOP; roof: OpenBLAS sgemm "
        f"2048^3 at {args.threads} threads = {roof:.1f} GFLOP/s.", "",
        "| | tokens/s | s/step | % of sgemm roof | peak RSS |",
        "|---|---|---|---|---|",
        f"| dt | {dt['tokens_per_s']:.0f} | {dt['seconds_per_step']:.1f} | "
        f"{100 * roof_frac(dt['tokens_per_s']):.0f}% | {dt['peak_rss_mib']:.0f} MiB "
        f"(arena {dt['arena_mib']:.0f} MiB) |",
        f"| PyTorch (torch {best[0]} threads, OpenBLAS {best[1]}) | {t['tokens_per_s']:.0f} | "
        f"{t['seconds_per_step']:.1f} | {100 * roof_frac(t['tokens_per_s']):.0f}% | "
        f"{t['peak_rss_mib']:.0f} MiB |", "",
        f"**dt / PyTorch: {ratio:.2f}x** tokens/s.", "",
        "Losses of the timed steps (different random initialisations and batches; both start "
        f"near ln {VOCAB} = {math.log(VOCAB):.2f}): dt {[round(x, 4) for x in dt['losses']]}, PyTorch "
        f"{[round(x, 4) for x in t['losses']]}.", "",
        f"Reproduce: `scripts/setup.sh --bench && bench/run_gpt2.py --model {MODEL}"
        f" --threads {args.threads} --steps {args.steps} --warmup {args.warmup}" +
        (f" --repeats {args.repeats}" if args.repeats > 1 else "") +
        "".join(f" --env {k}={v}" for k, v in env.items()) + "`", "",
        "<details><summary>All runs and torch.__config__.show()</summary>", "", "```json",
        json.dumps({"dt": dt, "torch": {f"torch {c[0]}, openblas {c[1]}": r
                                        for c, r in torch_runs.items()},
                    "tokens_per_s_of_every_run": {
                        "dt": [round(r["tokens_per_s"]) for r in dt_runs],
                        **{f"torch {c[0]}, openblas {c[1]}":
                           [round(r["tokens_per_s"]) for r in runs]
                           for c, runs in all_torch.items()}},
                    "sgemm_roof_gflops": roof}, indent=2),
        "```", "", "```", torch_config().strip(), "```", "</details>", ""]
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines[:16]))
    print(f"\nwritten to {out}")


if __name__ == "__main__":
    main()
