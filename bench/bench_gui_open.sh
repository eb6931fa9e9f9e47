#!/usr/bin/env bash
# Open time of a 10-million-slice trace in parallax-gui (docs/gui.md "Speed"): writes the trace
# once (1.78 GB of JSON, under /tmp, never committed), then runs `parallax-gui --benchmark` with
# the reader on one thread and on one per core, alternating, RUNS times each, and prints every
# run with the load average before it, then the best of each. On a shared machine the wall time
# also counts waiting for a core: load_cpu_s (all threads) is printed beside it.
#   bench/bench_gui_open.sh [BUILD_DIR] [RUNS]
set -euo pipefail
build=${1:-build}
runs=${2:-3}
trace=${PARALLAX_BENCH_TRACE:-/tmp/parallax_10m.json}
gui="$build/gui/parallax-gui"
[[ -x "$gui" ]] || { echo "no $gui: build the parallax-gui target" >&2; exit 1; }
if [[ ! -s "$trace" ]]; then
  "$build/bench/bench_gui" --write-trace "$trace"
fi
export QT_QPA_PLATFORM=offscreen
out=$(mktemp)
for ((i = 1; i <= runs; ++i)); do
  for threads in 1 0; do
    load=$(cut -d' ' -f1 /proc/loadavg)
    json=$("$gui" --benchmark "$trace" --threads "$threads" 2>/dev/null)
    echo "load average $load: $json"
    echo "$threads $json" >>"$out"
  done
done
for threads in 1 0; do
  # Best of the runs by wall time; its CPU time beside it.
  grep "^$threads " "$out" | sed 's/^[0-9]* //' |
    python3 -c '
import json, sys
runs = [json.loads(l) for l in sys.stdin]
best = min(runs, key=lambda r: r["load_s"])
print("threads %d: best load_s %.3f (load_cpu_s %.3f), min load_cpu_s %.3f, %.1f bytes/slice, frame p99 %.2f ms"
      % (best["threads"], best["load_s"], best["load_cpu_s"], min(r["load_cpu_s"] for r in runs),
         best["bytes_per_slice"], max(r["frame_ms_p99"] for r in runs)))'
done
rm -f "$out"
