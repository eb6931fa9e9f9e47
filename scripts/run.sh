#!/usr/bin/env bash
# The main job: installs what is missing, builds, and shows what parallax does on a default
# model. Later stages (plan, run) append themselves here as they land.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh default
bin=build/cli/parallax
echo
echo "== parallax model show llama3-8b"
"$bin" model show llama3-8b
