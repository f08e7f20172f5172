#!/usr/bin/env python3
"""arena_bytes.py CPU.mlir GPU.mlir: the planned arenas (dt.arena_bytes) of a
program compiled for the CPU alone and with GPU code, and how much larger the
second is."""
import re
import sys

cpu, gpu = (int(re.search(r"dt\.arena_bytes = (\d+)", open(f).read()).group(1))
            for f in sys.argv[1:3])
print(f"arena: {cpu >> 20} MiB for the CPU, {gpu >> 20} MiB with GPU code, "
      f"{100 * (gpu - cpu) / cpu:.1f}% more")
