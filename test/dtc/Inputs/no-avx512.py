#!/usr/bin/env python3
"""no-avx512.py PROGRAM: fails when PROGRAM's code uses AVX-512 (zmm registers),
which the portable baseline (x86-64-v3: AVX2, FMA) does not have."""
import subprocess
import sys

text = subprocess.run(["llvm-objdump-19", "-d", "--no-show-raw-insn", sys.argv[1]],
                      capture_output=True, text=True, check=True).stdout
hits = [line for line in text.splitlines() if "%zmm" in line]
if hits:
    sys.exit(f"{sys.argv[1]} uses AVX-512 ({len(hits)} instructions), e.g.\n" +
             "\n".join(hits[:5]))
print(f"{sys.argv[1]}: no AVX-512")
