#!/usr/bin/python3
"""Builds byte-level token shards in llm.c's .bin format from a folder of text files.

    make_text_shards.py SOURCE_DIR OUT_DIR

Every regular text file in SOURCE_DIR (Debian's fortunes: /usr/share/games/fortunes) is read
in name order and concatenated; each byte is one token (vocabulary 256). The first 95% of the
bytes become OUT_DIR/train.bin and the rest OUT_DIR/val.bin.

The format is llm.c's: a header of 256 little-endian int32 (magic 20240520, version 1, number
of tokens, zeros), then the tokens as little-endian uint16.
"""
import os
import struct
import sys

MAGIC, VERSION, HEADER_INTS = 20240520, 1, 256


def write_shard(path, data):
    header = [MAGIC, VERSION, len(data)] + [0] * (HEADER_INTS - 3)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<%di" % HEADER_INTS, *header))
        f.write(struct.pack("<%dH" % len(data), *data))
    os.replace(tmp, path)


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: make_text_shards.py SOURCE_DIR OUT_DIR")
    src, out = sys.argv[1], sys.argv[2]
    text = bytearray()
    for name in sorted(os.listdir(src)):
        path = os.path.join(src, name)
        # fortune's index files (.dat) are binary and .u8 are symlinks to the same text.
        if name.endswith((".dat", ".u8")) or os.path.islink(path) or not os.path.isfile(path):
            continue
        with open(path, "rb") as f:
            text += f.read()
    if len(text) < 100_000:
        sys.exit(f"make_text_shards.py: only {len(text)} bytes of text in {src}; is 'fortunes' installed?")
    split = len(text) * 95 // 100
    os.makedirs(out, exist_ok=True)
    write_shard(os.path.join(out, "train.bin"), text[:split])
    write_shard(os.path.join(out, "val.bin"), text[split:])
    print(f"make_text_shards: {split} train and {len(text) - split} val tokens in {out}")


if __name__ == "__main__":
    main()
