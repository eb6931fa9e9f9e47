#!/usr/bin/env bash
# Oversubscription benchmark (issue 15, "threads and ranks"): gpt-tiny at a fixed global batch,
# one rank alone on one CPU against N data-parallel ranks on this machine's CPUs. Each of N ranks
# does 1/N of the work; when N exceeds the CPUs C, each rank gets C/N of a CPU. So the step time
# that is proportional to the oversubscription is
#     t_prop(N) = t_1 / N * max(1, N / C)
# and the script prints the measured median step time, t_prop and their ratio (1.0 = exactly
# proportional; the rest is the gradient all-reduce and the waits). Also the threads each run chose
# (`run --json` "threads").
# Usage: scripts/bench_oversubscription.sh [--ranks "2 4 8"] [--steps N] [--build DIR]
set -euo pipefail
cd "$(dirname "$0")/.."

ranks="2 4 8"
steps=20
build=build
die() { echo "bench_oversubscription.sh: $*" >&2; exit 2; }
while (($#)); do
  case "$1" in
    --ranks) ranks="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    -h|--help) sed -n 2,11p "$0"; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
[[ "$steps" =~ ^[0-9]+$ ]] && ((steps >= 5)) || die "--steps must be an integer >= 5"
for n in $ranks; do [[ "$n" =~ ^[1-9][0-9]*$ ]] || die "--ranks: '$n' is not a positive integer"; done
bin="$build/cli/parallax"
[[ -x "$bin" ]] || die "$bin not found: build the parallax target first (cmake --build $build --target parallax)"
command -v mpirun >/dev/null || die "mpirun not found"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
cpus=$(nproc)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
common=(--model gpt-tiny --global-batch 8 --steps "$steps" --json)

echo "machine: $(nproc) CPUs, $(uname -m), load average $(cut -d' ' -f1-3 /proc/loadavg)"
# The reference: one rank on one CPU, one thread.
taskset -c 0 "$bin" run --plan dp=1 "${common[@]}" --threads 1 > "$tmp/1.json"
for n in $ranks; do
  mpirun --oversubscribe --bind-to none -np "$n" "$bin" run --plan "dp=$n" "${common[@]}" > "$tmp/$n.json"
done
python3 - "$tmp" "$cpus" $ranks <<'PY'
import json, statistics, sys
tmp, cpus, ranks = sys.argv[1], int(sys.argv[2]), [int(r) for r in sys.argv[3:]]
def median_step(n):
    j = json.load(open(f"{tmp}/{n}.json"))
    return statistics.median(j["step_times_s"][2:]), j["threads"]
t1, _ = median_step(1)
print(f"{'ranks':>5} {'step ms':>8} {'proportional ms':>16} {'ratio':>6}  threads/rank  oversubscribed")
print(f"{1:>5} {t1*1e3:8.2f} {t1*1e3:16.2f} {1.0:6.2f}  {1:>12}  no (reference: 1 rank on 1 CPU)")
for n in ranks:
    t, th = median_step(n)
    prop = t1 / n * max(1.0, n / cpus)
    print(f"{n:>5} {t*1e3:8.2f} {prop*1e3:16.2f} {t/prop:6.2f}  {th['intra_op']:>12}  "
          f"{'yes' if th['oversubscribed'] else 'no'}")
PY
