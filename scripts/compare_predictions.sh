#!/usr/bin/env bash
# Behaviour fingerprint of the planner: `plan` (with every candidate), `simulate` (with predicted
# traces of every rank) and the exports, for a fixed set of models, clusters, profiles and layouts.
# A refactoring that must not change behaviour leaves the folder byte-identical.
#
#   scripts/compare_predictions.sh PARALLAX_BINARY OUT_DIR            write the fingerprint
#   scripts/compare_predictions.sh --diff OLD_DIR NEW_DIR              compare two (exit 1 on change)
#
# Typical use: build the old commit in a worktree, write OLD; build the new one, write NEW; --diff.
# Every case passes an explicit --precision, so a change of the default precision does not show.
set -euo pipefail

if [ "${1:-}" = "--diff" ]; then
  [ $# -eq 3 ] || { echo "usage: $0 --diff OLD_DIR NEW_DIR" >&2; exit 2; }
  if diff -r -q "$2" "$3"; then
    echo "compare_predictions: identical ($(find "$2" -type f | wc -l) files)"
    exit 0
  fi
  echo "compare_predictions: DIFFERENT (first differences below)" >&2
  diff -r "$2" "$3" | head -40 >&2
  exit 1
fi
[ $# -eq 2 ] || { echo "usage: $0 PARALLAX_BINARY OUT_DIR | --diff OLD NEW" >&2; exit 2; }
px=$(realpath "$1")
out=$2
root=$(cd "$(dirname "$0")/.." && pwd)
db="$root/data/calibration/h100-2026-11-27/costdb-gpt-1.3b.json"
mkdir -p "$out"
out=$(realpath "$out")
cd "$out"

n=0
run() {  # run NAME ARGS...: stdout to NAME.out (exit status recorded, stderr kept)
  local name=$1; shift
  n=$((n + 1))
  set +e
  "$px" "$@" >"$name.out" 2>"$name.err"
  echo "exit $?" >>"$name.out"
  set -e
  # The search's own wall time is the one field that differs run to run.
  sed -i -E 's/("search_time_s": )[0-9.e+-]+/\1"(time)"/' "$name.out"
}

# plan: the ranked list, every candidate with its prediction or rejection, and the exports.
run plan_gpt13b_h100 plan --model gpt-1.3b --cluster dgx-h100 --nodes 2 --global-batch 64 --precision bf16 \
  --top 10 --json --threads 1 --candidates plan_gpt13b_h100.candidates.json
run plan_llama8b_h100_mcore plan --model llama3-8b --cluster dgx-h100 --nodes 4 --global-batch 128 --precision bf16 \
  --implementation megatron-core --top 10 --json --threads 1 --candidates plan_llama8b_h100_mcore.candidates.json
run plan_gpt175b_a100_ds plan --model gpt3-175b --cluster dgx-a100 --nodes 16 --global-batch 256 --precision fp16 \
  --implementation deepspeed --top 10 --json --threads 1 --candidates plan_gpt175b_a100_ds.candidates.json
run plan_llama70b_h200_m21 plan --model llama3-70b --cluster dgx-h200 --nodes 8 --global-batch 256 --precision bf16 \
  --implementation megatron-2021 --top 5 --json --threads 1
run plan_gpt13b_costdb plan --model gpt-1.3b --cluster dgx-h100 --nodes 1 --global-batch 16 --precision bf16 \
  --costdb "$db" --top 10 --json --threads 1 --candidates plan_gpt13b_costdb.candidates.json
run plan_tiny_cpu_fp32 plan --model gpt-tiny --cluster local-cpu --global-batch 8 --precision fp32 --top 10 --json --threads 1
run export_megatron plan --model llama3-70b --cluster dgx-h100 --nodes 8 --global-batch 256 --precision bf16 \
  --implementation megatron-core --export megatron --threads 1
run export_deepspeed plan --model gpt-1.3b --cluster dgx-a100 --nodes 2 --global-batch 64 --precision fp16 \
  --implementation deepspeed --export deepspeed --threads 1

# simulate: fixed layouts over the dimensions and profiles, every rank's predicted trace.
sim() {  # sim NAME MODEL CLUSTER NODES PRECISION IMPLEMENTATION PLAN [extra...]
  local name=$1 model=$2 cluster=$3 nodes=$4 precision=$5 impl=$6 plan=$7; shift 7
  run "$name" simulate --model "$model" --cluster "$cluster" --nodes "$nodes" --precision "$precision" \
    --implementation "$impl" --plan "$plan" --json --all-ranks --trace "$name.trace.json" "$@"
}
sim sim_dp8_z0 gpt-1.3b dgx-h100 1 bf16 parallax dp=8,tp=1,pp=1,zero=0,micro_batch=2,global_batch=64
sim sim_dp8_z1 gpt-1.3b dgx-h100 1 bf16 parallax dp=8,tp=1,pp=1,zero=1,micro_batch=2,global_batch=64
sim sim_dp4_z2_tp2 gpt-1.3b dgx-h100 1 bf16 parallax dp=4,tp=2,pp=1,zero=2,micro_batch=1,global_batch=64
sim sim_dp4_z3_tp2 gpt-1.3b dgx-h100 1 bf16 parallax dp=4,tp=2,pp=1,zero=3,micro_batch=1,global_batch=64,recompute=full
sim sim_pp4_1f1b gpt-1.3b dgx-h100 2 bf16 parallax dp=2,tp=2,pp=4,micro_batch=1,global_batch=64,schedule=1f1b
sim sim_pp4_gpipe_sel gpt-1.3b dgx-h100 2 fp16 parallax dp=2,tp=2,pp=4,micro_batch=2,global_batch=64,schedule=gpipe,recompute=selective
sim sim_pp2_interleaved gpt-1.3b dgx-h100 1 bf16 parallax dp=2,tp=2,pp=2,micro_batch=1,global_batch=32,schedule=interleaved,virtual_stages=3,zero=1
sim sim_costdb_tp2_pp2 gpt-1.3b dgx-h100 1 bf16 parallax dp=2,tp=2,pp=2,micro_batch=2,global_batch=32,zero=3 --costdb "$db"
sim sim_gpt13b_mcore_sp gpt-1.3b dgx-h100 2 bf16 megatron-core dp=4,tp=2,pp=2,micro_batch=1,global_batch=64,zero=1,sequence_parallel=true
sim sim_llama70b_mcore llama3-70b dgx-h100 8 bf16 megatron-core dp=2,tp=8,pp=4,micro_batch=1,global_batch=16,zero=1,schedule=interleaved,virtual_stages=5,sequence_parallel=true
sim sim_llama7b_ds llama-7b dgx-a100 2 fp16 deepspeed dp=16,tp=1,pp=1,zero=3,micro_batch=2,global_batch=128
sim sim_gpt175b_m22 gpt3-175b dgx-a100 16 fp16 megatron-2022 dp=4,tp=8,pp=4,micro_batch=1,global_batch=32,schedule=interleaved,virtual_stages=4,recompute=selective,sequence_parallel=true
sim sim_gpt175b_m21 gpt3-175b dgx-a100 8 fp16 megatron-2021 dp=1,tp=8,pp=8,micro_batch=1,global_batch=16,recompute=full
sim sim_tiny_cpu_fp32 gpt-tiny local-cpu 1 fp32 parallax dp=2,tp=1,pp=1,zero=2,micro_batch=2,global_batch=8
sim sim_tiny_cpu_bf16 gpt-tiny local-cpu 1 bf16 parallax dp=1,tp=1,pp=2,micro_batch=1,global_batch=8

echo "compare_predictions: $n cases written to $out"
