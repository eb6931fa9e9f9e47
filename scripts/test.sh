#!/usr/bin/env bash
# The test command: installs what is missing, builds, and runs every test that this machine
# can run (labels fast, mpi, gui; gpu tests run only where a GPU is present: scripts/test.sh gpu).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh default
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
export QT_QPA_PLATFORM=offscreen
if [ "${1:-}" = "gpu" ]; then
  ctest --test-dir build -L gpu --output-on-failure
else
  ctest --preset default -j "$(nproc)"
fi
