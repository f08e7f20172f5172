#!/usr/bin/env python3
"""Checks that a file is a PNG of at least the given size (Chromium's screenshot).

    check_png.py FILE MIN_WIDTH MIN_HEIGHT
"""
import struct
import sys

path, min_w, min_h = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with open(path, "rb") as f:
    head = f.read(24)
if head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
    sys.exit(f"FAIL: {path} is not a PNG")
width, height = struct.unpack(">II", head[16:24])
if width < min_w or height < min_h:
    sys.exit(f"FAIL: {path} is {width}x{height}")
print(f"PNG {width}x{height}")
