#!/usr/bin/env python3
"""Reads the files dt-tokenize writes and compares them with reference ids.

  check.py shards REF.json SEPARATOR SHARD...
      The shards' tokens (uint16 or uint32, by magic) must be, document by
      document, SEPARATOR (an id, or "none") followed by the reference ids.
  check.py classes REF.json LABELS.json FILE
      dt's classification file must hold the reference examples' ids and
      type ids, and the labels.
  check.py dump FILE
      Prints a shard's or a classification file's header and first ids.
"""
import json
import struct
import sys

TOKENS16, TOKENS32, CLASSES = 20240520, 20240801, 20261126


def read_shard(path):
    with open(path, "rb") as f:
        data = f.read()
    header = struct.unpack_from("<256i", data)
    magic, version, count, masked = header[:4]
    if magic == TOKENS16:
        assert version == 1, version
        width, fmt = 2, "H"
    elif magic == TOKENS32:
        assert version == 7, version
        width, fmt = 4, "I"
    else:
        sys.exit(f"{path}: magic {magic} is not a token shard's")
    tokens = list(struct.unpack_from(f"<{count}{fmt}", data, 1024))
    end = 1024 + width * count
    mask = list(data[end:end + count]) if masked else None
    if len(data) != end + (count if masked else 0):
        sys.exit(f"{path}: {len(data)} bytes, the header promises "
                 f"{end + (count if masked else 0)}")
    return tokens, mask


def read_classes(path):
    with open(path, "rb") as f:
        data = f.read()
    h = struct.unpack_from("<256i", data)
    magic, version, n, width, pad, trailing, classes = h[:7]
    assert magic == CLASSES and version == 1, (magic, version)
    at = 1024
    offsets = struct.unpack_from(f"<{n + 1}q", data, at)
    at += 8 * (n + 1)
    labels = struct.unpack_from(f"<{n}i", data, at)
    at += 4 * n
    total = offsets[-1]
    ids = struct.unpack_from(f"<{total}{'H' if width == 2 else 'I'}", data, at)
    at += width * total
    types = data[at:at + total]
    assert len(data) == at + total, (len(data), at + total)
    examples = [(list(ids[offsets[i]:offsets[i + 1]]),
                 list(types[offsets[i]:offsets[i + 1]])) for i in range(n)]
    return {"pad": pad, "trailing": trailing, "classes": classes,
            "labels": list(labels), "examples": examples}


def first_difference(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def shards(ref_path, separator, paths):
    ref = json.load(open(ref_path))
    expected = []
    for ids in ref:
        if separator != "none":
            expected.append(int(separator))
        expected.extend(ids)
    got = []
    for p in paths:
        got.extend(read_shard(p)[0])
    if got != expected:
        i = first_difference(got, expected)
        sys.exit(f"ids differ at {i} of {len(expected)} (dt-tokenize has "
                 f"{len(got)}): dt {got[max(0, i - 3):i + 8]} reference "
                 f"{expected[max(0, i - 3):i + 8]}")
    print(f"shards match: {len(got)} ids in {len(ref)} documents")


def classes(ref_path, labels_path, path):
    ref = json.load(open(ref_path))
    labels = json.load(open(labels_path))
    got = read_classes(path)
    for i, (r, (ids, types)) in enumerate(zip(ref, got["examples"])):
        if ids != r["ids"] or types != r["type_ids"]:
            sys.exit(f"example {i}: dt {ids} {types} reference {r['ids']} "
                     f"{r['type_ids']}")
    if len(ref) != len(got["examples"]) or got["labels"] != labels:
        sys.exit(f"{len(got['examples'])} examples with labels "
                 f"{got['labels']}; reference {len(ref)} with {labels}")
    print(f"examples match: {len(ref)}, pad {got['pad']}, trailing "
          f"{got['trailing']}, classes {got['classes']}")


def dump(path):
    with open(path, "rb") as f:
        magic = struct.unpack("<i", f.read(4))[0]
    if magic == CLASSES:
        c = read_classes(path)
        print(f"classes: {len(c['examples'])} examples, pad {c['pad']}, "
              f"trailing {c['trailing']}, classes {c['classes']}")
        for (ids, types), label in zip(c["examples"], c["labels"]):
            print(f"label {label} ids {ids} types {types}")
        return
    tokens, mask = read_shard(path)
    print(f"shard: {len(tokens)} tokens, magic {magic}, "
          f"{'masked' if mask is not None else 'no mask'}")
    print("ids", tokens[:64])
    if mask is not None:
        print("mask", mask[:64])


def main():
    cmd = sys.argv[1]
    if cmd == "shards":
        shards(sys.argv[2], sys.argv[3], sys.argv[4:])
    elif cmd == "classes":
        classes(sys.argv[2], sys.argv[3], sys.argv[4])
    elif cmd == "dump":
        dump(sys.argv[2])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
