#!/usr/bin/env bash
# The main job: installs what is missing, builds the parallax program (and parallax-gui, for the
# picture, when Qt 6 is there: no tests, fuzzers or benchmarks; scripts/test.sh builds those), then
# walks parallax's loop on this machine:
#   1. describe a model, 2. plan a large model on a large cluster (ranked table),
#   3. calibrate this machine (one rank per core), 4. plan a small model with the measured costs and
#   predict its trace, 5. run that plan for real under mpirun, 6. refine the costs from the measured
#   trace, 7. print predicted vs measured step time, 8. write build/demo/report.html (and
#   build/demo/compare.png from parallax-gui when it was built).
# Outputs land in build/demo/.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build_estimate.sh parallax parallax-gui
scripts/setup.sh default parallax parallax-gui
bin="$PWD/build/cli/parallax"
gui="$PWD/build/gui/parallax-gui"
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
echo "== 3. calibrate this machine: mpirun -np $ranks parallax calibrate --quick --model gpt-tiny"
mpirun --oversubscribe -np "$ranks" "$bin" calibrate --quick --model gpt-tiny -o "$out/costdb.json" \
  --cluster-out "$out/cluster.json"

echo
echo "== 4. plan gpt-tiny for $ranks ranks with the measured costs, predict its trace"
"$bin" plan --model gpt-tiny --cluster "$out/cluster.json" --costdb "$out/costdb.json" --global-batch 16 \
  --precision fp32 --top 3 --candidates "$out/candidates.json" -o "$out/plan.json"
"$bin" simulate --plan "$out/plan.json" --costdb "$out/costdb.json" --all-ranks --trace "$out/predicted.json" \
  --json > "$out/predicted_step.json"

echo
echo "== 5. mpirun -np $ranks parallax run --plan $out/plan.json --steps 20"
mpirun --oversubscribe -np "$ranks" "$bin" run --plan "$out/plan.json" --steps 20 --trace "$out/measured.json" \
  --json > "$out/measured_run.json"

echo
echo "== 6. refine the costs from the measured trace, predict again"
"$bin" refine --plan "$out/plan.json" --trace "$out/measured.json" --costdb "$out/costdb.json" \
  -o "$out/costdb-refined.json" | sed -n "/^samples from/,\$p"
"$bin" simulate --plan "$out/plan.json" --costdb "$out/costdb-refined.json" --all-ranks \
  --trace "$out/predicted-refined.json" --json > "$out/refined_step.json"

echo
echo "== 7. predicted vs measured step time (measured: parallax run's step time, the median of the steps after the first; predicted: the simulator's; the machine's load average: $(cut -d' ' -f1 /proc/loadavg))"
python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
run = json.load(open(f"{out}/measured_run.json"))
meas, fastest = run["step_time_s"], min(run["step_times_s"][1:] or run["step_times_s"])
layout = json.load(open(f"{out}/plan.json"))["layout"]
print("layout: " + ",".join(f"{k}={v}" for k, v in layout.items()))
print(f"{'':32s} {'step ms':>9s} {'vs measured':>12s} {'vs fastest':>11s}")
print(f"{'measured (median / fastest)':32s} {meas*1e3:9.2f} {'':>12s} {fastest*1e3:11.2f}")
for name, f in (("predicted (calibration)", "predicted_step.json"), ("predicted (after refine)", "refined_step.json")):
    p = json.load(open(f"{out}/{f}"))["step_time_s"]
    print(f"{name:32s} {p*1e3:9.2f} {(p-meas)/meas*100:+11.1f}% {(p-fastest)/fastest*100:+10.1f}%")
PY

echo
echo "== 8. the report: ranked plans, predicted vs measured, per-op errors before and after refine"
"$bin" report --plan "$out/plan.json" --measured "$out/measured.json" --costdb "$out/costdb.json" \
  --refined-costdb "$out/costdb-refined.json" --candidates "$out/candidates.json" -o "$out/report.html"
picture=""
if [ -x "$gui" ]; then
  if ! QT_QPA_PLATFORM=offscreen "$gui" --screenshot "$out/compare.png" --size 1600x900 \
      --compare "$out/predicted-refined.json" "$out/measured.json" 2> "$out/gui.log"; then
    cat "$out/gui.log" >&2
    exit 1
  fi
  picture="$out/compare.png"
fi

echo
echo "== where to look"
echo "report:   $out/report.html  (open it in any browser: one file, no server, no network)"
if [ -n "$picture" ]; then
  echo "picture:  $picture  (parallax-gui's compare view: the refined prediction above this run, op by op)"
else
  echo "picture:  none (parallax-gui was not built: Qt 6 is missing; scripts/setup.sh installs it)"
fi
echo "traces:   $out/predicted.json $out/predicted-refined.json $out/measured.json"
echo "          (parallax-gui --compare PREDICTED MEASURED, or ui.perfetto.dev)"
