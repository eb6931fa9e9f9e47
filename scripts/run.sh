#!/usr/bin/env bash
# The main job: installs what is missing, builds, then walks parallax's loop on this machine:
#   1. describe a model, 2. plan a large model on a large cluster (ranked table),
#   3. plan a small model for the local CPU, predict its trace, 4. run that plan for real under
#   mpirun (losses, step time, measured trace), 5. diff predicted against measured.
# Outputs land in build/demo/.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh default
bin="$PWD/build/cli/parallax"
out="$PWD/build/demo"
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ranks=$(nproc)  # local-cpu has one device per core of this machine

echo
echo "== 1. parallax model show llama3-8b"
"$bin" model show llama3-8b

echo
echo "== 2. parallax plan --model llama3-70b --cluster dgx-h100 --nodes 8 --global-batch 512 --top 8"
"$bin" plan --model llama3-70b --cluster dgx-h100 --nodes 8 --global-batch 512 --top 8

echo
echo "== 3. plan gpt-tiny for $ranks local CPU ranks and predict its trace"
"$bin" plan --model gpt-tiny --cluster local-cpu --global-batch 16 --precision fp32 --top 3 -o "$out/plan.json"
"$bin" simulate --plan "$out/plan.json" --all-ranks --trace "$out/predicted.json" | tail -n 4

echo
echo "== 4. mpirun -np $ranks parallax run --plan $out/plan.json --steps 10"
mpirun --oversubscribe -np "$ranks" "$bin" run --plan "$out/plan.json" --steps 10 --trace "$out/measured.json"

echo
echo "== 5. parallax trace diff predicted.json measured.json (the cpu device is nominal until calibrated)"
"$bin" trace diff "$out/predicted.json" "$out/measured.json" --top 5 | head -n 24
echo
echo "traces for Perfetto (ui.perfetto.dev): $out/predicted.json $out/measured.json"
