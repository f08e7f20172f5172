#!/usr/bin/env bash
# How idle a pipeline's ranks are against the bubble its schedule predicts,
# (p - 1) / (v m + p - 1). The contract's gpt_pipeline.dt on its pipeline axis
# alone (pp = 2: one rank per core of a 2-core machine; dp = 2 would
# oversubscribe it), 8 micro-batches of 8 samples, under GPipe, 1F1B and
# interleaved 1F1B (4 stages of 2 blocks), 20 steps each. Prints each run's
# `pipeline:` line: idle per rank (of the pipeline's step), what the schedule
# predicts with the stages' measured times, and how much was waiting for messages.
#
#   bench/pipeline_idle.sh [STEPS]      (BUILD=build dir, default ./build)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$root/build}
steps=${1:-20}
spec=$root/../shared/spec/programs/gpt_pipeline.dt
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

two_stages=(-e 's/mesh     = (dp = 2, pp = 2)/mesh     = (pp = 2)/' -e '/^  data     = dp$/d'
            -e 's/micro_batch = 4/micro_batch = 8/')
sed "${two_stages[@]}" -e 's/"1f1b"/"gpipe"/' "$spec" > "$tmp/gpipe.dt"
sed "${two_stages[@]}" "$spec" > "$tmp/1f1b.dt"
sed "${two_stages[@]}" -e 's/"1f1b"/"interleaved"/' \
  -e 's/stages: \[model.blocks\[0:4\], model.blocks\[4:8\]\]/stages: [model.blocks[0:2], model.blocks[2:4], model.blocks[4:6], model.blocks[6:8]]/' \
  "$spec" > "$tmp/interleaved.dt"

cd "$root"
for schedule in gpipe 1f1b interleaved; do
  "$build/bin/dtc" "$tmp/$schedule.dt" -o "$tmp/$schedule"
  echo "== $schedule"
  "$build/bin/dtrun" -n 2 "$tmp/$schedule" --steps "$steps" --log-every "$steps" \
    --log-dir "$tmp/$schedule-run" --checkpoint-dir "$tmp/$schedule-ck" |
    grep -E "^  pipeline:|^pipeline:|^done:|thread"
done
