#!/usr/bin/env bash
# Issue 40, item 6: learn PyTorch's own GPU costs from one profiled run and predict its other layouts.
#   1. The GPU's calibrated cost database and cluster (COSTDB, CLUSTER: scripts/gpu_checks.sh's
#      calibrate step writes them; without them, a quick calibration here).
#   2. Train GPT-1.3B in PyTorch (bench/gpu/torch_gpt13b.py: bf16 autocast, SDPA, fused AdamW) at
#      micro-batch 1 with torch.profiler on for 3 steps (CPU + CUDA activities, a schedule), and
#      write the Kineto trace.
#   3. parallax refine --implementation pytorch from that trace.
#   4. For micro-batch 1, 2, 4 and micro-batch 1 with full recompute, predict the step with the
#      calibrated database alone and with the refined one (simulate --implementation pytorch), run
#      each in PyTorch, and print predicted against measured. Goal (issue 40): within 5% after refine.
# Usage: scripts/pytorch_gpu_proof.sh [build dir] [output dir]
# On the GPU machine from the repository root (docs/cuda.md, "Running on a GPU machine"); needs
# PyTorch with CUDA. Writes proof.json in the output dir; prints a markdown table.
set -euo pipefail
cd "$(dirname "$0")/.."
b="${1:-build-release}"
out="${2:-gpu-results/pytorch-proof}"
px="$b/cli/parallax"
py="${PYTHON:-python3}"
mkdir -p "$out"
gb=8

if [[ -n "${COSTDB:-}" && -f "$COSTDB" && -n "${CLUSTER:-}" && -f "$CLUSTER" ]]; then
  cp "$COSTDB" "$out/db.json"
  cp "$CLUSTER" "$out/cluster.json"
else
  "$px" calibrate --backend cuda --quick --model gpt-1.3b --no-progress -o "$out/db.json" \
    --cluster-out "$out/cluster.json" > "$out/calibrate.log" 2>&1
fi

"$py" bench/gpu/torch_gpt13b.py --micro-batch 1 --global-batch $gb --steps 4 --profile "$out/torch-mb1.json" \
  --profile-steps 3 > "$out/profiled-mb1.json"
"$px" refine --model gpt-1.3b --cluster "$out/cluster.json" --plan "dp=1,micro_batch=1,global_batch=$gb" \
  --precision bf16 --implementation pytorch --trace "$out/torch-mb1.json" --costdb "$out/db.json" \
  -o "$out/refined.json" --json > "$out/refine.json"

# Cases: micro-batch, recompute.
: > "$out/cases.txt"
for c in "1 none" "2 none" "4 none" "1 full"; do
  read -r mb rc <<< "$c"
  plan="dp=1,micro_batch=$mb,global_batch=$gb,recompute=$rc"
  for db in db refined; do
    "$px" simulate --model gpt-1.3b --cluster "$out/cluster.json" --plan "$plan" --precision bf16 \
      --implementation pytorch --costdb "$out/$db.json" --json > "$out/pred-$db-$mb-$rc.json"
  done
  "$py" bench/gpu/torch_gpt13b.py --micro-batch "$mb" --global-batch $gb --steps 6 --recompute "$rc" \
    > "$out/run-$mb-$rc.json"
  echo "$mb $rc" >> "$out/cases.txt"
done

"$py" - "$out" <<'PY'
import json, os, sys
out = sys.argv[1]
rows = []
for line in open(os.path.join(out, "cases.txt")):
    mb, rc = line.split()
    measured = json.loads(open(os.path.join(out, f"run-{mb}-{rc}.json")).read().strip().splitlines()[-1])["step_s"]
    pred = {db: json.load(open(os.path.join(out, f"pred-{db}-{mb}-{rc}.json")))["step_time_s"] for db in ("db", "refined")}
    rows.append({"micro_batch": int(mb), "recompute": rc, "measured_s": measured, "calibrated_s": pred["db"],
                 "refined_s": pred["refined"]})
json.dump({"rows": rows}, open(os.path.join(out, "proof.json"), "w"), indent=1)
print("| micro-batch | recompute | measured ms | calibrated only ms | error | refined ms | error |")
print("|---|---|---|---|---|---|---|")
for r in rows:
    m = r["measured_s"]
    print(f"| {r['micro_batch']} | {r['recompute']} | {m * 1e3:.1f} | {r['calibrated_s'] * 1e3:.1f} | "
          f"{(r['calibrated_s'] / m - 1) * 100:+.1f}% | {r['refined_s'] * 1e3:.1f} | {(r['refined_s'] / m - 1) * 100:+.1f}% |")
within = sum(abs(r["refined_s"] / r["measured_s"] - 1) <= 0.05 for r in rows)
print(f"{within} of {len(rows)} cases within 5% after refine")
PY
