#!/usr/bin/env python3
"""no-avx512.py PROGRAM: fails when PROGRAM's code uses AVX-512, which the portable
baseline (x86-64-v3: AVX2, FMA) does not have: zmm registers, mask registers, or the
16 extra xmm/ymm registers only EVEX encodings reach (a native build on an AVX-512
machine uses them even at 256 bits)."""
import re
import subprocess
import sys

AVX512 = re.compile(r"%zmm|%k[0-7]\b|%[xy]mm(1[6-9]|2[0-9]|3[01])\b")

text = subprocess.run(["llvm-objdump-19", "-d", "--no-show-raw-insn", sys.argv[1]],
                      capture_output=True, text=True, check=True).stdout
hits = [line for line in text.splitlines() if AVX512.search(line)]
if hits:
    sys.exit(f"{sys.argv[1]} uses AVX-512 ({len(hits)} instructions), e.g.\n" +
             "\n".join(hits[:5]))
print(f"{sys.argv[1]}: no AVX-512")
