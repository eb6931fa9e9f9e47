#!/usr/bin/env bash
# Repeats scripts/fidelity.sh R times (calibration, 14 runs, refine: everything again) and reports
# each layout's error over the repeats: on a shared VM the machine's speed drifts by ~10% over
# minutes, so one pass cannot tell a 5% prediction from a lucky one.
# Usage: scripts/fidelity_repeat.sh [build dir] [output dir] [steps per run] [tiny|small] [repeats]
# Writes <out>/rep-<k>/ (one fidelity.sh output each) and <out>/repeats.json; prints a table.
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build}"
out="${2:-$build/fidelity-repeat}"
steps="${3:-8}"
size="${4:-small}"
repeats="${5:-3}"
case "$repeats" in
  ''|*[!0-9]*|0) echo "fidelity_repeat.sh: repeats must be a positive integer, not '$repeats'" >&2; exit 2 ;;
esac
mkdir -p "$out"
for k in $(seq 1 "$repeats"); do
  echo "== repeat $k of $repeats ($(date -u +%H:%M:%S) UTC)" >&2
  scripts/fidelity.sh "$build" "$out/rep-$k" "$steps" "$size" > "$out/rep-$k.md"
done
python3 - "$out" "$repeats" <<'PY'
import json, os, statistics, sys
out, repeats = sys.argv[1], int(sys.argv[2])
runs = [json.load(open(os.path.join(out, f"rep-{k}", "fidelity.json")))["rows"] for k in range(1, repeats + 1)]
span = lambda v: f"{min(v)*100:+.1f} … {max(v)*100:+.1f}"
print(f"| model | layout | calibration: median error (range over {repeats}) | after refine | measured ms (range) |")
print("|---|---|---:|---:|---:|")
rows = []
for i, r in enumerate(runs[0]):
    e = [run[i]["error"] for run in runs]
    a = [run[i]["error_after"] for run in runs]
    m = [run[i]["measured_s"] * 1e3 for run in runs]
    rows.append({"model": r["model"], "layout": r["layout"], "errors": e, "errors_after": a, "measured_ms": m})
    print(f"| {r['model']} | {r['layout']} | {statistics.median(e)*100:+.1f}% ({span(e)}) | "
          f"{statistics.median(a)*100:+.1f}% ({span(a)}) | {min(m):.1f} … {max(m):.1f} |")
med = lambda key: statistics.median(abs(statistics.median(r[key])) for r in rows)
within = lambda key, t: sum(abs(statistics.median(r[key])) <= t for r in rows)
print(f"\nper-repeat median |error|: calibration "
      + ", ".join(f"{statistics.median(abs(x['error']) for x in run)*100:.1f}%" for run in runs)
      + "; after refine " + ", ".join(f"{statistics.median(abs(x['error_after']) for x in run)*100:.1f}%" for run in runs))
print(f"median over repeats, then over layouts: calibration {med('errors')*100:.1f}% ({within('errors', 0.10)}/{len(rows)} "
      f"within 10%), after refine {med('errors_after')*100:.1f}% ({within('errors_after', 0.05)}/{len(rows)} within 5%, "
      f"{within('errors_after', 0.10)}/{len(rows)} within 10%)")
json.dump({"repeats": repeats, "rows": rows}, open(os.path.join(out, "repeats.json"), "w"), indent=1)
PY
