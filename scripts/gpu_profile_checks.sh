#!/usr/bin/env bash
# The GPU checks of the CUPTI profiler and GPU calibration, on one GPU:
#   1. parallax calibrate --backend cuda: a measured cost database and cluster file for this GPU
#      (or, with COSTDB and CLUSTER set, those files of an earlier calibration);
#   2. CUPTI overhead: the same run untraced, traced with CUDA events (--no-cupti), traced by CUPTI;
#   3. alignment: the CUPTI-measured trace against the planner's prediction (trace diff);
#   4. the H100 validation table without and with the measured database.
# Run on the GPU machine from the repository root with the carried release build (docs/cuda.md,
# "Running on a GPU machine"). Usage: scripts/gpu_profile_checks.sh [build dir] [output dir]
set -euo pipefail
b=${1:-build-release}
out=${2:-gpu-results}
px=$b/cli/parallax
mkdir -p "$out"
model=${MODEL:-gpt-1.3b}
steps=${STEPS:-12}
layout="micro_batch=1"
gb=8

{
  date -u +%Y-%m-%dT%H:%MZ
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  "$px" --version 2>/dev/null || true
} | tee "$out/device.txt"

if [ -n "${COSTDB:-}" ] && [ -f "$COSTDB" ] && [ -n "${CLUSTER:-}" ] && [ -f "$CLUSTER" ]; then
  echo "== 1. calibrate: taken from $COSTDB and $CLUSTER"
  cp "$COSTDB" "$out/costdb.json"
  cp "$CLUSTER" "$out/cluster.json"
else
  echo "== 1. calibrate --backend cuda"
  cmd=("$px" calibrate --backend cuda --cluster "${CLUSTER_PRESET:-dgx-h100}" --model "$model" -o "$out/costdb.json" --cluster-out "$out/cluster.json")
  echo "${cmd[*]}" > "$out/calibrate.command"
  "${cmd[@]}" 2> >(tee "$out/calibrate.stderr" >&2)
fi

echo "== 2. CUPTI overhead (mean step time after the first step, $model, $steps steps)"
run() {  # name, extra args...
  local name=$1; shift
  "$px" run --backend cuda --cluster "$out/cluster.json" --plan "$layout" --model "$model" --global-batch $gb --steps "$steps" --precision bf16 \
    --json "$@" > "$out/run_$name.json"
}
for rep in 1 2; do
  run "none_$rep"
  run "events_$rep" --trace "$out/measured_events.json" --no-cupti
  run "cupti_$rep" --trace "$out/measured_cupti.json"
done
python3 - "$out" <<'PY'
import json, statistics, sys
out = sys.argv[1]
def mean_step(name):
    vals = []
    for rep in (1, 2):
        j = json.load(open(f"{out}/run_{name}_{rep}.json"))
        t = j["step_times_s"][1:]
        vals.append(sum(t) / len(t))
    return min(vals), j
base, _ = mean_step("none")
for name in ("events", "cupti"):
    m, j = mean_step(name)
    print(f"{name:7s} {m*1e3:9.2f} ms/step  overhead {100*(m/base-1):+6.2f}%  profiling {json.dumps(j.get('profiling'))}")
print(f"untraced {base*1e3:8.2f} ms/step")
PY

echo "== 3. alignment with the prediction"
"$px" simulate --model "$model" --cluster "$out/cluster.json" --costdb "$out/costdb.json" \
  --plan "$layout,global_batch=$gb" --precision bf16 --trace "$out/predicted.json"
"$px" trace diff "$out/predicted.json" "$out/measured_cupti.json" | tee "$out/diff_cupti.txt"
"$px" trace diff "$out/predicted.json" "$out/measured_events.json" | tee "$out/diff_events.txt"

echo "== 4. H100 validation without / with the measured database"
"$b/tests/planner/planner_validation_test" --gtest_filter='MegatronCoreH100Validation.*' | tee "$out/validation_roofline.txt" || true
PARALLAX_VALIDATION_COSTDB_H100=$out/costdb.json "$b/tests/planner/planner_validation_test" \
  --gtest_filter='MegatronCoreH100Validation.*' | tee "$out/validation_measured.txt" || true
echo "results in $out/"
