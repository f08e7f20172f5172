#!/usr/bin/python3
"""Helpers for the runtime's end-to-end lit tests (test/e2e/runtime).

    dtrt_test.py make-idx DIR [--train N] [--eval N] [--raw]
        8x8 IDX image/label files (4 learnable classes), gzip unless --raw:
        DIR/{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]
    dtrt_test.py make-tokens DIR
        llm.c token shards of a small repetitive text:
        DIR/train_00.bin, DIR/train_01.bin, DIR/val.bin
    dtrt_test.py compare-metrics A B
        the two metrics.jsonl files hold the same records (step, loss, lr,
        grad_norm, eval_loss, ...: every field but timings), exactly
    dtrt_test.py compare-losses A B [FROM [TO]]
        the training losses (and evaluations) of two runs of one job agree
        within 1e-5 relative over the first 10 common steps (from FROM, to
        TO), 1e-4 after: the same job on another layout
    dtrt_test.py close-losses A B TOL
        the training losses of two runs agree within TOL relative at every
        common step: the same job in another precision
    dtrt_test.py signal-rank RANK SIGNAL STEP -- CMD...
        runs an MPI job and, once it has printed a progress line for a step
        >= STEP, sends SIGNAL to the process of rank RANK only
    dtrt_test.py min-accuracy FILE X
        the last eval record of FILE has eval_accuracy >= X
    dtrt_test.py loss-drops FILE RATIO
        the last training loss in FILE is below RATIO times the first
    dtrt_test.py expect-exit CODE -- CMD...
        runs CMD (output passed through); succeeds iff it exits with CODE
        (KILL/TERM/INT: killed by that signal)
    dtrt_test.py signal-after STEP SIGNAL -- CMD...
        runs CMD, sends SIGNAL once it has printed a progress line for a step
        >= STEP, and exits with CMD's exit status
    dtrt_test.py check-checkpoint DIR
        DIR is a complete checkpoint: manifest.json parses, tensors.bin (or,
        sharded, every piece in its shard file) has the recorded size and
        every CRC32 matches
    dtrt_test.py rss-near-arena OUT LOW HIGH
        the program output OUT reports a peak RSS within [LOW, HIGH] times
        its arena
    dtrt_test.py flip-byte FILE OFFSET
        inverts one byte of FILE
    dtrt_test.py edit-json FILE PATH VALUE
        sets a value in a JSON file (PATH: dot-separated keys and indices)
"""
import gzip
import json
import os
import re
import signal
import struct
import subprocess
import sys
import time
import zlib

TIMING = {"samples_per_s", "tokens_per_s", "elapsed_s", "step_time_s",
          "step_time_spread_s", "slowest_rank", "comm_time_s", "mfu", "hfu"}


def make_idx(args):
    out, n_train, n_eval, raw = args[0], 512, 100, "--raw" in args
    if "--train" in args:
        n_train = int(args[args.index("--train") + 1])
    if "--eval" in args:
        n_eval = int(args[args.index("--eval") + 1])
    os.makedirs(out, exist_ok=True)
    state = [12345]

    def rand():  # a tiny LCG: reproducible without numpy
        state[0] = (state[0] * 1103515245 + 12345) % (1 << 31)
        return state[0] / (1 << 31)

    def write(name, payload):
        path = os.path.join(out, name + ("" if raw else ".gz"))
        opener = open if raw else gzip.open
        with opener(path, "wb") as f:
            f.write(payload)

    for prefix, n in (("train", n_train), ("t10k", n_eval)):
        labels = bytes(i % 4 for i in range(n))
        images = bytearray()
        for c in labels:
            # Class c lights up quadrant c; noise everywhere.
            for r in range(8):
                for col in range(8):
                    q = (r >= 4) * 2 + (col >= 4)
                    v = (150 if q == c else 40) + int(rand() * 100)
                    images.append(min(v, 255))
        write(f"{prefix}-images-idx3-ubyte", struct.pack(">IIII", 0x803, n, 8, 8) + images)
        write(f"{prefix}-labels-idx1-ubyte", struct.pack(">II", 0x801, n) + labels)


def write_shard(path, tokens):
    header = [20240520, 1, len(tokens)] + [0] * 253
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", *header))
        f.write(struct.pack("<%dH" % len(tokens), *tokens))


def make_tokens(args):
    out = args[0]
    os.makedirs(out, exist_ok=True)
    text = ("the quick brown fox jumps over the lazy dog. " * 60).encode()
    half = len(text) // 2
    write_shard(os.path.join(out, "train_00.bin"), list(text[:half]))
    write_shard(os.path.join(out, "train_01.bin"), list(text[half:]))
    write_shard(os.path.join(out, "val.bin"), list(text[:700]))


def records(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def compare_metrics(args):
    a, b = records(args[0]), records(args[1])
    strip = lambda rs: [{k: v for k, v in r.items() if k not in TIMING} for r in rs]
    sa, sb = strip(a), strip(b)
    if not sa:
        sys.exit(f"{args[0]} holds no records")
    for rs, path in ((a, args[0]), (b, args[1])):
        train = [r["step"] for r in rs if "loss" in r]
        if train != sorted(set(train)):
            sys.exit(f"{path}: training records are not one increasing run: {train}")
    if sa != sb:
        for i, (x, y) in enumerate(zip(sa, sb)):
            if x != y:
                sys.exit(f"record {i} differs:\n  {x}\n  {y}")
        sys.exit(f"{len(sa)} records against {len(sb)}")
    print(f"{len(sa)} records identical")


def compare_losses(args):
    """compare-losses A B [FROM [TO]]: the training losses and evaluations of two
    runs of one job on different layouts agree: within 1e-5 relative over the first
    10 steps (from step FROM, default the first; to step TO, default the last),
    within 1e-4 after."""
    first = int(args[2]) if len(args) > 2 else None
    last = int(args[3]) if len(args) > 3 else None
    runs = []
    for path in args[:2]:
        rs = records(path)
        train = {r["step"]: r["loss"] for r in rs if "loss" in r}
        evals = {r["step"]: r for r in rs if "eval_loss" in r}
        runs.append((train, evals))
    (ta, ea), (tb, eb) = runs
    steps = sorted(set(ta) & set(tb))
    if first is not None:
        steps = [s for s in steps if s >= first]
    if last is not None:
        steps = [s for s in steps if s <= last]
    if not steps:
        sys.exit("the runs have no training step in common")
    start = steps[0]
    worst = 0.0
    for s in steps:
        rel = abs(ta[s] - tb[s]) / max(abs(ta[s]), 1e-12)
        bound = 1e-5 if s < start + 10 else 1e-4
        worst = max(worst, rel)
        if rel > bound:
            sys.exit(f"step {s}: loss {ta[s]} against {tb[s]} ({rel:.2e} relative, over {bound})")
    for s in sorted(set(ea) & set(eb)):
        for key in ("eval_loss", "eval_accuracy"):
            if key in ea[s] and abs(ea[s][key] - eb[s][key]) > 1e-4 * max(abs(ea[s][key]), 1e-12):
                sys.exit(f"step {s}: {key} {ea[s][key]} against {eb[s][key]}")
    print(f"{len(steps)} steps from {start} agree (worst {worst:.2e} relative)")


def close_losses(args):
    tol = float(args[2])
    ta, tb = ({r["step"]: r["loss"] for r in records(p) if "loss" in r} for p in args[:2])
    steps = sorted(set(ta) & set(tb))
    if not steps:
        sys.exit("the runs have no training step in common")
    worst = max(abs(ta[s] - tb[s]) / max(abs(ta[s]), 1e-12) for s in steps)
    for s in steps:
        if abs(ta[s] - tb[s]) > tol * max(abs(ta[s]), 1e-12):
            sys.exit(f"step {s}: loss {ta[s]} against {tb[s]} (over {tol} relative)")
    print(f"{len(steps)} steps agree within {tol} (worst {worst:.2e} relative)")


def rank_pid(root, rank):
    """The pid of the process below `root` that MPI started as `rank` (the program,
    not a shell around it)."""
    children = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(d))
            except (OSError, IndexError, ValueError):
                pass
    todo, found = [root], []
    while todo:
        pid = todo.pop()
        for c in children.get(pid, []):
            todo.append(c)
            try:
                with open(f"/proc/{c}/environ", "rb") as f:
                    env = f.read().split(b"\0")
                with open(f"/proc/{c}/comm") as f:
                    comm = f.read().strip()
            except OSError:
                continue
            if f"OMPI_COMM_WORLD_RANK={rank}".encode() in env and comm not in ("sh", "bash"):
                found.append(c)
    return found[0] if found else None


def signal_rank(args):
    """signal-rank RANK SIG STEP -- CMD: runs an MPI job and, once its progress shows
    STEP, sends SIG to rank RANK's process only. Exits with the job's status; prints
    how long the job took after the signal."""
    rank, sig, step = int(args[0]), getattr(signal, "SIG" + args[1]), int(args[2])
    cmd = args[args.index("--") + 1:]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    sent_at = None
    for line in p.stdout:
        sys.stdout.write(line)
        m = re.match(r"step\s+(\d+)/", line)
        if m and int(m.group(1)) >= step and sent_at is None:
            pid = rank_pid(p.pid, rank)
            if pid is None:
                sys.exit(f"no process of rank {rank} below {p.pid}")
            os.kill(pid, sig)
            sent_at = time.monotonic()
    p.wait()
    sys.stdout.flush()
    if sent_at is None:
        sys.exit("the job ended before the signal was sent")
    print(f"the job ended {time.monotonic() - sent_at:.1f} s after the signal", file=sys.stderr)
    sys.exit(p.returncode if p.returncode >= 0 else 128 - p.returncode)


def min_accuracy(args):
    evals = [r for r in records(args[0]) if "eval_accuracy" in r]
    if not evals:
        sys.exit("no eval record")
    acc = evals[-1]["eval_accuracy"]
    if acc < float(args[1]):
        sys.exit(f"eval accuracy {acc} < {args[1]}")
    print(f"eval accuracy {acc}")


def loss_drops(args):
    losses = [r["loss"] for r in records(args[0]) if "loss" in r]
    if len(losses) < 2:
        sys.exit("fewer than two training records")
    if not losses[-1] < float(args[1]) * losses[0]:
        sys.exit(f"loss went from {losses[0]} to {losses[-1]}, not below {args[1]} times the first")
    print(f"loss {losses[0]} -> {losses[-1]}")


def status_of(returncode):
    return {-9: "KILL", -15: "TERM", -2: "INT"}.get(returncode, str(returncode))


def expect_exit(args):
    code, cmd = args[0], args[args.index("--") + 1:]
    p = subprocess.run(cmd)
    if status_of(p.returncode) != code:
        sys.exit(f"expected exit {code}, got {status_of(p.returncode)}")


def signal_after(args):
    step, sig, cmd = int(args[0]), getattr(signal, "SIG" + args[1]), args[args.index("--") + 1:]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    sent = False
    for line in p.stdout:
        sys.stdout.write(line)
        m = re.match(r"step\s+(\d+)/", line)
        if m and int(m.group(1)) >= step and not sent:
            p.send_signal(sig)
            sent = True
    p.wait()
    sys.stdout.flush()
    if not sent:
        sys.exit("the program ended before the signal was sent")
    sys.exit(p.returncode if p.returncode >= 0 else 128 - p.returncode)


def check_checkpoint(args):
    d = args[0]
    with open(os.path.join(d, "manifest.json")) as f:
        m = json.load(f)
    if m["version"] == 2:
        # Sharded: every piece of every tensor in its shard file, CRC intact, and
        # the pieces of a tensor cover its elements (padding included) once.
        pieces = 0
        for t in m["tensors"]:
            for p in t["pieces"]:
                with open(os.path.join(d, p["file"]), "rb") as f:
                    f.seek(p["offset"])
                    chunk = f.read(p["bytes"])
                if len(chunk) != p["bytes"] or zlib.crc32(chunk) != p["crc32"]:
                    sys.exit(f"tensor {t['name']}: piece of rank {p['rank']} damaged")
                pieces += 1
        ranks = 1
        for a in m["mesh"]["axes"]:
            ranks *= a["size"]
        print(f"checkpoint at step {m['step']} of {m['program']}: {len(m['tensors'])} tensors "
              f"in {pieces} pieces from {ranks} ranks, CRCs match")
        return
    with open(os.path.join(d, "tensors.bin"), "rb") as f:
        data = f.read()
    if len(data) != m["tensors_bytes"]:
        sys.exit(f"tensors.bin holds {len(data)} bytes, manifest says {m['tensors_bytes']}")
    for t in m["tensors"]:
        chunk = data[t["offset"]:t["offset"] + t["bytes"]]
        if zlib.crc32(chunk) != t["crc32"]:
            sys.exit(f"tensor {t['name']}: CRC mismatch")
    print(f"checkpoint at step {m['step']} of {m['program']}: {len(m['tensors'])} tensors, CRCs match")


def size_in_mib(text):
    """'5.7 GiB' -> 5836.8"""
    m = re.match(r"([0-9.]+) (B|KiB|MiB|GiB|TiB)", text)
    return float(m.group(1)) * {"B": 2**-20, "KiB": 2**-10, "MiB": 1, "GiB": 2**10, "TiB": 2**20}[m.group(2)]


def rss_near_arena(args):
    """The program's peak RSS (its `done:` line) lies within [LOW, HIGH] times its
    planned arena (its first line): the plan is what the run really uses."""
    text = open(args[0]).read()
    arena = size_in_mib(re.search(r", arena ([0-9.]+ [KMGT]?i?B);", text).group(1))
    rss = size_in_mib(re.search(r"peak RSS ([0-9.]+ [KMGT]?i?B)", text).group(1))
    low, high = float(args[1]), float(args[2])
    ratio = rss / arena
    if not low <= ratio <= high:
        sys.exit(f"peak RSS {rss:.0f} MiB is {ratio:.2f} times the arena of {arena:.0f} MiB, "
                 f"outside [{low}, {high}]")
    print(f"peak RSS {rss:.0f} MiB = {ratio:.2f} x the arena of {arena:.0f} MiB")


def flip_byte(args):
    path, offset = args[0], int(args[1])
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ 0xFF]))


def edit_json(args):
    path, keys, value = args[0], args[1].split("."), json.loads(args[2])
    with open(path) as f:
        doc = json.load(f)
    node = doc
    for k in keys[:-1]:
        node = node[int(k)] if isinstance(node, list) else node[k]
    last = keys[-1]
    node[int(last) if isinstance(node, list) else last] = value
    with open(path, "w") as f:
        json.dump(doc, f)


COMMANDS = {
    "make-idx": make_idx,
    "make-tokens": make_tokens,
    "compare-metrics": compare_metrics,
    "compare-losses": compare_losses,
    "close-losses": close_losses,
    "signal-rank": signal_rank,
    "min-accuracy": min_accuracy,
    "loss-drops": loss_drops,
    "expect-exit": expect_exit,
    "signal-after": signal_after,
    "check-checkpoint": check_checkpoint,
    "rss-near-arena": rss_near_arena,
    "flip-byte": flip_byte,
    "edit-json": edit_json,
}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS:
        sys.exit(__doc__)
    COMMANDS[sys.argv[1]](sys.argv[2:])
