#!/usr/bin/env bash
# The test command: installs what is missing, builds, and runs every test this machine can run
# (labels fast, mpi, gui). Other suites by name:
#   scripts/test.sh gpu         tests that need a GPU (label gpu)
#   scripts/test.sh validation  predictions vs published measurements (label validation)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh default
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
export QT_QPA_PLATFORM=offscreen
case "${1:-}" in
  gpu|validation) ctest --test-dir build -L "$1" --output-on-failure ;;
  "") ctest --preset default -j "$(nproc)" ;;
  *) echo "usage: scripts/test.sh [gpu|validation]" >&2; exit 2 ;;
esac
