#!/usr/bin/env bash
# Starting GPT-2 small (124M parameters) from a Hugging Face checkpoint and exporting
# it again: a safetensors file with GPT-2's names and sizes (random weights, made by
# test/e2e/pretrained/Inputs/hf_gpt2.py; no download), examples/gpt2_124m.dt with
# `init` pointing at it, run with --steps 0 --export on one rank and on two ranks of
# ZeRO-3 (each rank holds half of every parameter). Prints the wall time of each run,
# the bytes each rank read (the banner's "read by this rank"), and, as the peer, the
# time a Python script takes to read the same file whole into NumPy (what a PyTorch
# user's load starts with), then checks that the exports equal the input.
#
#   bench/pretrained_load.sh            (BUILD=build dir, default ./build)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$root/build}
hf="/usr/bin/python3 $root/test/e2e/pretrained/Inputs/hf_gpt2.py"
sizes=(--vocab 50257 --ctx 1024 --width 768 --depth 12 --heads 12)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"

$hf make gpt2 --seed 0 --prefix transformer. "${sizes[@]}"
echo "checkpoint: $(du -h gpt2/model.safetensors | cut -f1)"
init='  init        = nn.safetensors("gpt2", names = {blocks: "h"})'
sed -e "s|^  loss .*|&\n$init|" -e '/^  eval /d' -e '/^  eval_every/d' \
  -e '/^  checkpoint /d' -e '/^  log /d' "$root/examples/gpt2_124m.dt" > one.dt
sed -e 's|^  seed        = 0$|&\n}\nparallel {\n  mesh = (dp = 2)\n  data = dp\n  zero = 3|' \
  one.dt > zero3.dt
"$build/bin/dtc" one.dt -o one
"$build/bin/dtc" zero3.dt -o zero3

seconds() { /usr/bin/time -f %e "$@" 2>&1 >"$out" | tail -n 1; }
out=one.out; t1=$(seconds ./one --steps 0 --export one-out --data "train=$root/data/text/train.bin")
out=zero3.out; t2=$(seconds "$build/bin/dtrun" -n 2 ./zero3 --steps 0 --export zero3-out \
  --data "train=$root/data/text/train.bin")
peer=$(/usr/bin/python3 - <<PY
import sys, time
sys.path.insert(0, "$root/test/e2e/pretrained/Inputs")
import hf_gpt2
t = time.perf_counter(); hf_gpt2.read_dir("gpt2"); print(f"{time.perf_counter() - t:.2f}")
PY
)
echo "one rank:         ${t1} s  ($(grep -o '[0-9.]* [KMG]iB read by this rank' one.out))"
echo "2 ranks, ZeRO-3:  ${t2} s  (rank 0: $(grep -o '[0-9.]* [KMG]iB read by this rank' zero3.out))"
echo "peer, NumPy reads the whole file: ${peer} s"
$hf compare gpt2 one-out
$hf compare gpt2 zero3-out
