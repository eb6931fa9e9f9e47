#!/usr/bin/env bash
# Open time of a 10-million-slice trace in parallax-gui (docs/gui.md "Speed"): writes the trace
# once (1.78 GB of JSON, under /tmp, never committed), then runs `parallax-gui --benchmark` with
# the reader on one thread (--threads 1) and on one per idle core (--threads 0: the cores less the
# load average, so on a busy machine also one), alternating, RUNS times each, and prints every
# run with the load average before it, then the best of each. On a shared machine the wall time
# also counts waiting for a core: load_cpu_s (all threads) is printed beside it.
#   bench/bench_gui_open.sh [BUILD_DIR] [RUNS]
#
# --ours: the trace users open, our own gpt3-175b prediction (docs/traces.md "Measured numbers"):
# `parallax simulate --all-ranks` on 16 DGX A100 nodes (dp=4, tp=8, pp=4, interleaved v=4, full
# recompute, global batch 256): 6.05 M slices, 1.25 GB of JSON, 74 MB as .json.gz, written once
# under /tmp. Opens it plain and gzip, alternating, RUNS times each, with bench_traces'
# BM_OpenTraceFile (ReadChromeTrace as parallax-gui calls it: one scanning thread per idle core) and,
# when it is built, `parallax-gui --benchmark` (which adds the timeline index); prints each run
# with the load average before it, then medians: wall, CPU of all threads, slices per second.
# With PARALLAX_BENCH_CALLGRIND=1 it counts instructions instead (valgrind --tool=callgrind: the
# same on a busy machine) of opening a 1/16 trace of the same shape (global batch 16).
#   bench/bench_gui_open.sh --ours [BUILD_DIR] [RUNS]
set -euo pipefail
if [[ "${1:-}" == "--ours" ]]; then
  shift
  build=${1:-build}
  runs=${2:-5}
  bench="$build/bench/bench_traces"
  [[ -x "$bench" ]] || { echo "no $bench: build the bench_traces target" >&2; exit 1; }
  callgrind=${PARALLAX_BENCH_CALLGRIND:-0}
  batch=256
  ((callgrind)) && batch=16
  dir=${PARALLAX_BENCH_DIR:-/tmp/parallax_bench_gpt3}
  mkdir -p "$dir"
  for ext in json json.gz; do
    trace="$dir/gpt3-175b-b$batch.$ext"
    [[ -s "$trace" ]] && continue
    "${PARALLAX:-$build/cli/parallax}" simulate --model gpt3-175b --cluster dgx-a100 --nodes 16 --all-ranks \
      --plan dp=4,tp=8,pp=4,schedule=interleaved,virtual_stages=4,recompute=full,global_batch=$batch \
      --trace "$trace" >/dev/null
  done
  if ((callgrind)); then
    # The scan on the calling thread alone, then with two scanning threads (the load decides
    # which the GUI uses; counting must not depend on it).
    for threads in 1 2; do
      for ext in json json.gz; do
        ir=$(PARALLAX_BENCH_TRACE="$dir/gpt3-175b-b$batch.$ext" valgrind --tool=callgrind --callgrind-out-file=/dev/null \
               "$bench" --benchmark_filter="OpenTraceFile/$threads/" 2>&1 | sed -n 's/.*Collected : \([0-9]*\).*/\1/p')
        echo "$ext, reader threads $threads: $ir instructions (all threads) to open $(stat -c %s "$dir/gpt3-175b-b$batch.$ext") bytes"
      done
    done
    exit 0
  fi
  out=$(mktemp)
  gui="$build/gui/parallax-gui"
  for ((i = 1; i <= runs; ++i)); do
    for ext in json json.gz; do
      trace="$dir/gpt3-175b-b$batch.$ext"
      load=$(cut -d' ' -f1 /proc/loadavg)
      line=$(PARALLAX_BENCH_TRACE="$trace" "$bench" --benchmark_filter='OpenTraceFile/0/' --benchmark_format=json 2>/dev/null |
        python3 -c 'import json,sys; b=json.load(sys.stdin)["benchmarks"][0]; print("%.3f %.3f %.0f" % (b["real_time"]/1e3, b["cpu_s"], b["slices"]))')
      echo "load average $load: $ext reader: wall $(cut -d' ' -f1 <<<"$line") s, cpu $(cut -d' ' -f2 <<<"$line") s"
      echo "reader $ext $line" >>"$out"
      if [[ -x "$gui" ]]; then
        json=$(QT_QPA_PLATFORM=offscreen "$gui" --benchmark "$trace" 2>/dev/null)
        echo "load average $(cut -d' ' -f1 /proc/loadavg): $ext gui: $json"
        echo "gui $ext $(python3 -c 'import json,sys; r=json.loads(sys.argv[1]); print("%.3f %.3f %d" % (r["load_s"], r["load_cpu_s"], r["slices"]))' "$json")" >>"$out"
      fi
    done
  done
  python3 - "$out" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    what, ext, wall, cpu, slices = line.split()
    rows.setdefault((what, ext), []).append((float(wall), float(cpu), int(slices)))
for (what, ext), r in sorted(rows.items()):
    wall = statistics.median(x[0] for x in r)
    cpu = statistics.median(x[1] for x in r)
    n = r[0][2]
    print("%-6s %-7s median of %d: wall %.2f s (%.2f M slices/s), CPU all threads %.2f s (%.2f M slices per CPU-second)"
          % (what, ext, len(r), wall, n / wall / 1e6, cpu, n / cpu / 1e6))
PY
  rm -f "$out"
  exit 0
fi
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
