#!/usr/bin/env bash
# How far two calibrations of this machine disagree point by point, for each `--rounds` setting:
# runs K quick calibrations (mpirun -np 2, --model gpt-tiny) per setting, interleaved in time
# (setting a, b, c, a, b, c, ...), then for every pair of databases of one setting the standard
# deviation over the points above 20 us of log(time in one / time in the other), and prints the
# median and quartiles of that over the pairs. A level shift between two calibrations (the whole
# machine faster) does not count; points moving against each other do.
# Usage: scripts/calibrate_scatter.sh [build dir] [output dir] [K] [rounds settings...]
#   e.g. scripts/calibrate_scatter.sh build /tmp/scatter 13 1 3 9   (docs/profiler.md, "Rounds")
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build}"
out="${2:-$build/calibrate-scatter}"
k="${3:-5}"
shift $(( $# < 3 ? $# : 3 ))
settings=("$@")
((${#settings[@]})) || settings=(1 3)
bin="$build/cli/parallax"
[[ -x "$bin" ]] || { echo "calibrate_scatter.sh: no $bin (build first)" >&2; exit 2; }
mpi=(mpirun --oversubscribe -np 2)
[[ $(id -u) == 0 ]] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p "$out"
for i in $(seq 1 "$k"); do
  for r in "${settings[@]}"; do
    echo "== calibration $i of $k, --rounds $r ($(date -u +%H:%M:%S) UTC)" >&2
    "${mpi[@]}" "$bin" calibrate --backend cpu --quick --no-progress --rounds "$r" --model gpt-tiny \
      -o "$out/r${r}_$i.json" > /dev/null
  done
done
python3 - "$out" "$k" "${settings[@]}" <<'PY'
import itertools, json, math, os, statistics, sys
out, k, settings = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
def points(path):
    db = json.load(open(path))
    p = {("gemm", g["m"], g["n"], g["k"], g.get("batch", 1), g["dtype"]): g["time_s"] for g in db["gemm"]}
    p.update({("kernel", x["op"], x["bytes"]): x["time_s"] for x in db["kernels"]})
    return p
print("| --rounds | calibrations | points | median sd(log ratio) over pairs | quartiles |")
print("|---:|---:|---:|---:|---|")
for r in settings:
    dbs = [points(os.path.join(out, f"r{r}_{i}.json")) for i in range(1, k + 1)]
    keys = set(dbs[0]).intersection(*dbs[1:])
    keys = [key for key in keys if all(d[key] > 2e-5 for d in dbs)]
    sds = sorted(statistics.pstdev([math.log(b[key] / a[key]) for key in keys])
                 for a, b in itertools.combinations(dbs, 2))
    q = statistics.quantiles(sds, n=4) if len(sds) > 1 else [sds[0]] * 3
    print(f"| {r} | {k} | {len(keys)} | {statistics.median(sds):.3f} | {q[0]:.3f}-{q[2]:.3f} |")
PY
