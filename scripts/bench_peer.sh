#!/usr/bin/env bash
# Peer benchmark (issue 15): trains the same GPT (bench/peer/model-peer.json: 4 layers x 256 hidden,
# 4 heads, vocab 256, seq 128), from the same initial weights, on the same synthetic tokens, with the
# same AdamW (lr 3e-4, betas 0.9/0.95, weight decay 0.1, clip 1.0) in fp32, in parallax and in PyTorch
# (Debian's python3-torch, installed here if missing; the benchmark only, never CI), side by side:
#   1thread   one process, one thread, micro-batch 8
#   dp2       two processes: parallax DP=2 over MPI vs PyTorch DDP over gloo, 8 sequences per rank
#   allcores  one process, every core (parallax kernel threads / torch intra-op threads), micro-batch 8
# Prints each side's median step time (steps after the warm-up), the speedup (PyTorch time over
# parallax time) and whether the loss curves agree. Also the CPU seconds per step of all the
# case's processes (user + system, from a run of --steps minus a run of 2 steps, so start-up
# cancels): on a machine shared with other jobs that figure moves much less than wall time.
# Usage: scripts/bench_peer.sh [--steps N] [--repeats R] [--cases 1thread,dp2,allcores] [--build DIR]
#                              [--json FILE]
set -euo pipefail
cd "$(dirname "$0")/.."

steps=12
repeats=1
cases="1thread,dp2,allcores"
build=build
json_out=""
while (($#)); do
  case "$1" in
    --steps) steps="$2"; shift 2 ;;
    --repeats) repeats="$2"; shift 2 ;;
    --cases) cases="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    --json) json_out="$2"; shift 2 ;;
    -h|--help) sed -n 2,13p "$0"; exit 0 ;;
    *) echo "bench_peer.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

parallax="${PARALLAX:-$build/cli/parallax}"
if [ ! -x "$parallax" ]; then
  echo "bench_peer.sh: $parallax not found; build it first (cmake --build $build --target parallax)" >&2
  exit 2
fi
# Debian's torch lives in the system interpreter, whatever python3 comes first on PATH.
py=/usr/bin/python3
if ! "$py" -c "import torch" 2>/dev/null; then
  echo "bench_peer.sh: installing Debian's python3-torch (for this benchmark only)"
  sudo_cmd=()
  if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
  "${sudo_cmd[@]}" apt-get update -q
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends python3-torch
fi
if [ "$(id -u)" -eq 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi

model=bench/peer/model-peer.json
seed=7
lr=3e-4
cores=$(nproc)
out=$(mktemp -d "${TMPDIR:-/tmp}/bench_peer.XXXXXX")
trap 'rm -rf "$out"' EXIT

# CPU seconds (user + system) of a command and every child it waited for, into $cpu_file.
timed() {
  local start end
  start=$(awk '{print $14 + $15 + $16 + $17}' /proc/$$/stat)
  "$@"
  end=$(awk '{print $14 + $15 + $16 + $17}' /proc/$$/stat)
  echo "$(( end - start )) $(getconf CLK_TCK)" > "$cpu_file"
}

run_parallax() {  # case threads ranks global_batch file [steps]
  local threads=$2 ranks=$3 gb=$4 file=$5 n=${6:-$steps}
  local cmd=("$parallax" run --plan "dp=$ranks,micro_batch=8" --model "$model" --global-batch "$gb"
             --steps "$n" --seed "$seed" --lr "$lr" --precision fp32 --json)
  cpu_file="$file.cpu"
  if ((ranks > 1)); then
    OPENBLAS_NUM_THREADS=$threads OMP_NUM_THREADS=$threads timed mpirun -np "$ranks" -x OPENBLAS_NUM_THREADS \
      -x OMP_NUM_THREADS "${cmd[@]}" > "$file" 2> "$file.err"
  else
    OPENBLAS_NUM_THREADS=$threads OMP_NUM_THREADS=$threads timed "${cmd[@]}" > "$file" 2> "$file.err"
  fi
}

run_torch() {  # case threads ranks global_batch file [steps]
  local threads=$2 ranks=$3 gb=$4 file=$5 n=${6:-$steps}
  cpu_file="$file.cpu"
  OMP_NUM_THREADS=$threads timed "$py" bench/peer/torch_gpt.py --model "$model" --global-batch "$gb" \
    --steps "$n" --seed "$seed" --lr "$lr" --threads "$threads" --world "$ranks" > "$file" 2> "$file.err"
}

echo "peer benchmark: $(uname -m), $cores cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)), $(date -u +%F)"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
IFS=, read -r -a case_list <<< "$cases"
for c in "${case_list[@]}"; do
  case "$c" in
    1thread) args=(1 1 8) ;;
    dp2) args=(1 2 16) ;;
    allcores) args=("$cores" 1 8) ;;
    *) echo "bench_peer.sh: unknown case $c" >&2; exit 2 ;;
  esac
  # Alternate the two sides so both see the same machine state.
  for ((r = 0; r < repeats; ++r)); do
    run_parallax "$c" "${args[@]}" "$out/$c.parallax.$r.json" || { cat "$out/$c.parallax.$r.json.err" >&2; exit 1; }
    run_torch "$c" "${args[@]}" "$out/$c.torch.$r.json" || { cat "$out/$c.torch.$r.json.err" >&2; exit 1; }
  done
  # Short runs: their CPU time is the start-up (and two steps) to subtract.
  run_parallax "$c" "${args[@]}" "$out/$c.parallax.short.json" 2 || { cat "$out/$c.parallax.short.json.err" >&2; exit 1; }
  run_torch "$c" "${args[@]}" "$out/$c.torch.short.json" 2 || { cat "$out/$c.torch.short.json.err" >&2; exit 1; }
done
"$py" bench/peer/report.py --dir "$out" --cases "$cases" --repeats "$repeats" --threads "$cores" \
  --steps "$steps" ${json_out:+--json "$json_out"}
