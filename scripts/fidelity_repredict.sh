#!/usr/bin/env bash
# Predicts again, with another build, the layouts a scripts/fidelity.sh output folder measured:
# the same calibration databases, traces and measured steps, so a change to the cost model is
# compared with the measurements it is meant to match and not with another minute of a noisy
# machine (this VM's speed drifts ~10% within minutes). Prints, per layout, the error from
# calibration and after refine for the build given, as fidelity.sh computes them.
# Usage: scripts/fidelity_repredict.sh <fidelity output dir> [build dir]
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${1:?usage: scripts/fidelity_repredict.sh <fidelity output dir> [build dir]}"
build="${2:-build}"
bin="$PWD/$build/cli/parallax"
[ -f "$dir/results.tsv" ] || { echo "fidelity_repredict.sh: $dir/results.tsv not found (a fidelity.sh output folder?)" >&2; exit 2; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
for model in gpt llama; do
  name=$(awk -F'\t' -v md="$model" '$1==md{print $5; exit}' "$dir/results.tsv")
  [ -n "$name" ] || continue
  case "$model:$name" in
    gpt:gpt-tiny) m=gpt-tiny ;;
    gpt:*) m="$PWD/bench/peer/model-peer.json"; [ -f "$dir/gpt.json" ] && m="$dir/gpt.json" ;;  # gpu mode writes its GPT
    llama:*) m="$dir/llama.json" ;;
  esac
  # As the runs trained (fidelity.sh: fp32 on the CPU, bf16 on a GPU).
  precision=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["precision"])' "$dir/run-$model-0.json")
  mapfile -t layouts < <(awk -F'\t' -v md="$model" '$1==md{print $2}' "$dir/results.tsv")
  for k in 0 1; do
    "$bin" refine --model "$m" --cluster "$dir/cluster.json" --plan "${layouts[$k]}" --global-batch 8 \
      --trace "$dir/trace-$model-$k.json" --costdb "$dir/db-$model.json" -o "$work/refined$k-$model.json" > /dev/null
  done
  i=0
  for l in "${layouts[@]}"; do
    db="$work/refined0-$model.json"
    [ "$i" = 0 ] && db="$work/refined1-$model.json"
    pred=$("$bin" simulate --model "$m" --cluster "$dir/cluster.json" --costdb "$dir/db-$model.json" --plan "$l" \
             --global-batch 8 --precision "$precision" --json)
    after=$("$bin" simulate --model "$m" --cluster "$dir/cluster.json" --costdb "$db" --plan "$l" --global-batch 8 \
              --precision "$precision" --json)
    python3 - "$name" "$l" "$dir/run-$model-$i.json" "$pred" "$after" <<'PY'
import json, sys
name, layout, run, pred, after = sys.argv[1:6]
meas = json.load(open(run))["step_time_s"]  # run's step time: median after the first step
p, a = json.loads(pred)["step_time_s"], json.loads(after)["step_time_s"]
print(f"{name}\t{layout}\t{(p - meas) / meas * 100:+.1f}%\t{(a - meas) / meas * 100:+.1f}%")
PY
    i=$((i + 1))
  done
done
