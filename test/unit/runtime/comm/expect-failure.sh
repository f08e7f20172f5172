#!/usr/bin/env bash
# expect-failure.sh SECONDS PATTERN COMMAND...: runs COMMAND and passes when it
# exits non-zero within SECONDS and its output matches PATTERN (grep -E). The
# communicator's failure tests use it: a lost or hung rank must end the job with
# a message, never hang it.
set -uo pipefail
limit=$1 pattern=$2; shift 2
start=$(date +%s)
output=$(timeout -k 5 "$((limit + 30))" "$@" 2>&1); rc=$?
elapsed=$(( $(date +%s) - start ))
printf '%s\n' "$output"
echo "expect-failure: exit $rc after ${elapsed} s"
if [ "$rc" -eq 0 ]; then echo "expect-failure: the command succeeded"; exit 1; fi
if [ "$rc" -eq 124 ] || [ "$elapsed" -ge "$((limit + 30))" ]; then echo "expect-failure: the command hung"; exit 1; fi
if [ "$elapsed" -gt "$limit" ]; then echo "expect-failure: took over ${limit} s"; exit 1; fi
if ! grep -Eq -e "$pattern" <<<"$output"; then echo "expect-failure: no line matches '$pattern'"; exit 1; fi
