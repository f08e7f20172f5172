#!/usr/bin/python3
"""read_tfevents.py check TBDIR METRICS.jsonl: reads the TensorBoard event files dt
wrote, independently of dt: TFRecord framing with both masked CRC-32Cs (checked
with the crc32c module), the Event and Summary protos decoded by hand, the first
event's file_version. Then holds the job's scalars (TBDIR) to metrics.jsonl's values
(as float32), the verdicts' parts (verdict/*) to timing.jsonl's beside it, and says
what the per-rank directories (TBDIR/rank_<r>/) hold."""
import glob
import json
import os
import struct
import sys

import crc32c


def masked(data):
    c = crc32c.crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def varint(b, i):
    v = shift = 0
    while True:
        x = b[i]
        i += 1
        v |= (x & 0x7F) << shift
        shift += 7
        if x < 0x80:
            return v, i


def fields(b):
    """(field, wire type, value) of one message."""
    i = 0
    while i < len(b):
        k, i = varint(b, i)
        f, w = k >> 3, k & 7
        if w == 0:
            v, i = varint(b, i)
        elif w == 1:
            v = b[i:i + 8]
            i += 8
        elif w == 5:
            v = b[i:i + 4]
            i += 4
        elif w == 2:
            n, i = varint(b, i)
            v = b[i:i + n]
            i += n
        else:
            sys.exit(f"unexpected wire type {w}")
        yield f, w, v


def events(path):
    data = open(path, "rb").read()
    i = 0
    out = []
    while i < len(data):
        header = data[i:i + 8]
        (n,) = struct.unpack("<Q", header)
        (crc,) = struct.unpack("<I", data[i + 8:i + 12])
        if crc != masked(header):
            sys.exit(f"{path}: bad length CRC at byte {i}")
        body = data[i + 12:i + 12 + n]
        (crc,) = struct.unpack("<I", data[i + 12 + n:i + 16 + n])
        if crc != masked(body):
            sys.exit(f"{path}: bad data CRC at byte {i}")
        i += 16 + n
        e = {"step": 0, "values": {}}
        for f, w, v in fields(body):
            if f == 1:
                e["wall_time"] = struct.unpack("<d", v)[0]
            elif f == 2:
                e["step"] = v
            elif f == 3:
                e["file_version"] = v.decode()
            elif f == 5:
                for vf, _, value in fields(v):
                    if vf != 1:
                        continue
                    tag = None
                    for tf, _, tv in fields(value):
                        if tf == 1:
                            tag = tv.decode()
                        elif tf == 2:
                            e["values"][tag] = struct.unpack("<f", tv)[0]
        out.append(e)
    return out


def one_file(d):
    files = glob.glob(os.path.join(d, "events.out.tfevents.*"))
    if len(files) != 1:
        sys.exit(f"{d}: {len(files)} event files, expected one writer")
    evs = events(files[0])
    if evs[0].get("file_version") != "brain.Event:2":
        sys.exit(f"{files[0]}: the first event is not brain.Event:2")
    return evs[1:]


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def main():
    tb, metrics = sys.argv[2], sys.argv[3]
    job = one_file(tb)
    scalars = {}
    for e in job:
        for tag, v in e["values"].items():
            if (e["step"], tag) in scalars:
                sys.exit(f"two values of {tag} at step {e['step']}")
            scalars[(e["step"], tag)] = v
    compared = 0
    for line in open(metrics):
        r = json.loads(line)
        for tag, v in r.items():
            if tag in ("step", "epoch", "elapsed_s", "step_time_s", "slowest_rank",
                       "step_time_spread_s", "comm_time_s") or v is None:
                continue
            got = scalars.get((r["step"], tag))
            if got is None or abs(got - f32(v)) > 1e-6 * max(1.0, abs(v)):
                sys.exit(f"step {r['step']} {tag}: TensorBoard {got}, metrics {v}")
            compared += 1
    # The verdicts' parts, against timing.jsonl beside metrics.jsonl.
    timing = os.path.join(os.path.dirname(metrics), "timing.jsonl")
    verdicts = 0
    for line in open(timing) if os.path.exists(timing) else []:
        r = json.loads(line)
        if "verdict" not in r:
            continue
        v = dict(r["verdict"])
        if "predicted_compute_s" in v:
            v["predicted_step_s"] = v["predicted_compute_s"] + v["predicted_comm_s"]
        for part in ("compute_s", "comm_s", "straggler_wait_s", "input_s", "bubble_s",
                     "predicted_step_s"):
            got = scalars.get((r["step"], "verdict/" + part))
            if part in v and (got is None or abs(got - f32(v[part])) > 1e-6 * max(1.0, abs(v[part]))):
                sys.exit(f"step {r['step']} verdict/{part}: TensorBoard {got}, timing {v.get(part)}")
        verdicts += 1
    tags = sorted({t for _, t in scalars})
    print(f"job: {len(job)} events, {compared} scalars equal to metrics.jsonl, "
          f"{verdicts} verdicts to timing.jsonl; tags {' '.join(tags)}")
    for d in sorted(glob.glob(os.path.join(tb, "rank_*"))):
        evs = one_file(d)
        tags = sorted({t for e in evs for t in e["values"]})
        print(f"{os.path.basename(d)}: {len(evs)} events at steps "
              f"{' '.join(str(e['step']) for e in evs)}; tags {' '.join(tags)}")


main()
