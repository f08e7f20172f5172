"""Runs a command and succeeds only if it exits with the given status.

Usage: expect-exit.py STATUS COMMAND [ARGS...]. The command's output passes
through, so a test can both pin dtc's exit status and FileCheck its messages.
"""
import subprocess
import sys

status = int(sys.argv[1])
result = subprocess.run(sys.argv[2:])
if result.returncode != status:
    sys.stderr.write("expect-exit: exit status %d, expected %d\n" % (result.returncode, status))
    sys.exit(1)
