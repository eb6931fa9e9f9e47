#!/usr/bin/env bash
# Makes the pictures in docs/screenshots/ from scratch, offscreen (no display needed), and prints the
# command that made each input and each picture. Regenerate them whenever a view changes.
#   compare.png         a plan predicted from this machine's calibration and refined on one run,
#                       against a second run of the same plan (the peer GPT, 4 x 256, one CPU rank:
#                       on a 2-core machine more ranks mostly measure each other's waits)
#   plans.png           the plan explorer: llama3-70b on 8 DGX H100 nodes, global batch 512
#   timeline.png        a pipelined plan's predicted timeline: llama3-8b, tp 2 x pp 4, 1F1B
#   stats.png           the stats view of that pipelined plan: compute, exposed communication, idle
#   timeline_kineto.png a real PyTorch-profiler trace (tests/data/traces/kineto)
#   report.png          the report scripts/run.sh ends on, as headless Chromium draws it
# Usage: scripts/screenshots.sh [BUILD]   (default: build; needs parallax and parallax-gui built,
# mpirun, and chromium for report.png). Measure on a quiet machine: a busy one shows its noise.
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build}"
bin="$PWD/$build/cli/parallax"
gui="$PWD/$build/gui/parallax-gui"
shots="$PWD/docs/screenshots"
work="$build/screenshots"  # relative: the viewer shows file names in its pictures
for b in "$bin" "$gui"; do
  if [ ! -x "$b" ]; then echo "screenshots: $b is missing: cmake --build $build --target parallax parallax-gui" >&2; exit 2; fi
done
mkdir -p "$work" "$shots"
export QT_QPA_PLATFORM=offscreen OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
say() { echo "+ $*" | sed "s|$PWD/||g"; "$@"; }
shot() { say "$gui" --screenshot "$shots/$1" "${@:2}"; }

echo "== compare.png, report.png: calibrate, plan, run twice, refine on the first run, compare with the second"
model=bench/peer/model-peer.json
say mpirun -np 1 "$bin" calibrate --quick --model "$model" -o "$work/costdb.json" \
  --cluster-out "$work/cluster.json" > "$work/calibrate.log"
say "$bin" plan --model "$model" --cluster "$work/cluster.json" --costdb "$work/costdb.json" --global-batch 8 \
  --precision fp32 --top 5 --candidates "$work/candidates.json" -o "$work/plan.json" > "$work/plan.log"
for r in 1 2; do
  say mpirun -np 1 "$bin" run --plan "$work/plan.json" --steps 6 \
    --trace "$work/measured$r.json" > "$work/run$r.log"
done
say "$bin" refine --plan "$work/plan.json" --trace "$work/measured1.json" --costdb "$work/costdb.json" \
  -o "$work/costdb-refined.json" > "$work/refine.log"
say "$bin" simulate --plan "$work/plan.json" --costdb "$work/costdb.json" --trace "$work/predicted.json" > /dev/null
say "$bin" simulate --plan "$work/plan.json" --costdb "$work/costdb-refined.json" --trace "$work/predicted-refined.json" \
  > /dev/null
shot compare.png --size 1400x800 --compare "$work/predicted-refined.json" "$work/measured2.json"
say "$bin" report --plan "$work/plan.json" --measured "$work/measured2.json" --costdb "$work/costdb.json" \
  --refined-costdb "$work/costdb-refined.json" --candidates "$work/candidates.json" -o "$work/report.html"
if command -v chromium > /dev/null; then
  rm -rf "$work/chromium"
  say chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking \
    --disable-component-update --disable-sync --user-data-dir="$work/chromium" --hide-scrollbars \
    --window-size=1100,1250 --screenshot="$shots/report.png" "file://$PWD/$work/report.html" 2> "$work/chromium.log"
else
  echo "screenshots: chromium is not installed (scripts/setup.sh installs it): report.png not made"
fi

echo "== plans.png: the plan explorer on a realistic model and cluster"
say "$bin" plan --model llama3-70b --cluster dgx-h100 --nodes 8 --global-batch 512 --candidates "$work/cand-70b.json" \
  > /dev/null
shot plans.png --size 1400x800 --view plans "$work/cand-70b.json"

echo "== timeline.png, stats.png: a pipelined plan's predicted timeline and its stats"
say "$bin" simulate --model llama3-8b --cluster dgx-h100 --nodes 1 \
  --plan dp=1,tp=2,pp=4,micro_batch=1,global_batch=8,schedule=1f1b,recompute=selective \
  --trace "$work/pipelined.json" > /dev/null
shot timeline.png --size 1400x1100 --view timeline "$work/pipelined.json"
shot stats.png --size 1400x700 --view stats "$work/pipelined.json"

echo "== timeline_kineto.png: a real PyTorch-profiler trace"
shot timeline_kineto.png --size 1400x700 --view timeline \
  tests/data/traces/kineto/trace_diff__control__control.json.gz

echo
ls -la "$shots"
