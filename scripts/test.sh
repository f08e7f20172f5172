#!/usr/bin/env bash
# Runs every test of dt: sets the machine up first if needed (scripts/setup.sh is
# idempotent and quick when nothing is missing), builds, then runs ctest: GoogleTest units,
# lit (dialect, passes, dtc, end-to-end trainings) and a bounded fuzz run of the front end.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cd build
ctest --output-on-failure -j 2 "$@"
