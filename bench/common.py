"""What the benchmarks share: running commands, the sgemm roof, the machine's
description, and dt's cosine schedule for the PyTorch peers."""
import math
import os
import re
import subprocess
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def run(cmd, env=None, cwd=ROOT):
    """Runs cmd with env added to the environment; exits with its output on failure."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    p = subprocess.run(cmd, cwd=cwd, env=full_env, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    return p.stdout


def parse_size(text):
    """'5.7 GiB' -> MiB"""
    m = re.match(r"([0-9.]+) (B|KiB|MiB|GiB)", text)
    return float(m.group(1)) * {"B": 1 / 2**20, "KiB": 1 / 1024, "MiB": 1, "GiB": 1024}[m.group(2)]


def build_sgemm_roof(work):
    """Compiles sgemm_roof.c into work/ against the system OpenBLAS."""
    tool = os.path.join(work, "sgemm_roof")
    run(["cc", "-O2", "-o", tool, os.path.join(ROOT, "bench", "sgemm_roof.c"),
         "-I/usr/include/x86_64-linux-gnu/openblas-pthread", "-lopenblas"])
    return tool


def sgemm_roof(tool, threads, env, shape=(2048, 2048, 2048)):
    """GFLOP/s of an M x N x K sgemm at `threads` OpenBLAS threads."""
    e = dict(env)
    e["OPENBLAS_NUM_THREADS"] = str(threads)
    return float(run([tool] + [str(s) for s in shape], e).strip())


def cpu_name():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown"


def torch_config():
    return subprocess.run(
        ["/usr/bin/python3", "-c", "import torch; print(torch.__version__); "
         "print(torch.__config__.show())"], capture_output=True, text=True).stdout


def cosine_lr_factor(warmup, total, min_factor=0.0):
    """dt's cosine schedule as a LambdaLR factor of the 0-based step: lr * t / warmup
    for the 1-based step t <= warmup, then a half cosine down to min_factor (the
    schedule's `min` over the optimizer's lr)."""
    def factor(step):
        t = step + 1
        if t <= warmup:
            return t / warmup
        progress = min(1.0, (t - 1 - warmup) / max(1, total - warmup))
        return min_factor + (1 - min_factor) * 0.5 * (1 + math.cos(math.pi * progress))
    return factor
