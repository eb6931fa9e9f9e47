#!/usr/bin/env bash
# Fidelity of predicted step times on our own executor (issue 10, item 6).
#   1. Calibrate this machine with 2 ranks (parallax calibrate --quick --model M, one per model).
#   2. For 14 layouts of two models (dp, tp, pp 1F1B and interleaved, ZeRO 1-3, recompute
#      selective/full, sequence parallel) simulate each with the measured costs and run it for real
#      under mpirun; the measured step time is the median over the steps after the first.
#   3. Refine each model's database once on the trace of one layout and predict the others again
#      (the refining layout itself is predicted from a database refined on a different layout).
#   4. Print predicted vs measured, before and after refine.
# Usage: scripts/fidelity.sh [build dir] [output dir] [steps per run] [tiny|small|gpu]
#   tiny (default): gpt-tiny (4 x 64, seq 32) and llama-tiny; steps of 2-5 ms, ops of 1-50 us, so
#                   per-op host costs and waits weigh as much as the kernels.
#   small:          the peer benchmark's GPT (4 x 256, seq 128) and a LLaMA-style model of the same
#                   size; steps of 0.1-0.3 s, GEMMs of 0.1-2 ms.
#   gpu:            one GPU (--backend cuda, no launcher, bf16): a 12 x 1024 GPT and a LLaMA-style
#                   model (seq 1024) under micro-batch and recompute layouts, calibrated on the GPU.
# Needs python3 (tables only). Prints a markdown table; writes fidelity.json in the output dir.
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build}"
out="${2:-$build/fidelity}"
steps="${3:-12}"
bin="$PWD/$build/cli/parallax"
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
mpi=(mpirun --oversubscribe -np 2)
backend=()
run_opts=()
base_cluster=()
precision=fp32

size="${4:-tiny}"
case "$size" in
  tiny)
    gpt=gpt-tiny
    # A LLaMA-style second model: RMSNorm, SwiGLU, rotary positions, grouped-query attention, no biases.
    cat > "$out/llama.json" <<'JSON'
{"kind": "model", "version": 1, "name": "llama-tiny", "layers": 4, "hidden": 64, "heads": 4, "kv_heads": 2,
 "ffn_hidden": 128, "vocab": 256, "seq_len": 32, "mlp": "swiglu", "norm": "rmsnorm", "position": "rotary",
 "bias": false, "tie_embeddings": false}
JSON
    ;;
  small)
    gpt="$PWD/bench/peer/model-peer.json"
    cat > "$out/llama.json" <<'JSON'
{"kind": "model", "version": 1, "name": "llama-small", "layers": 4, "hidden": 256, "heads": 4, "kv_heads": 2,
 "ffn_hidden": 704, "vocab": 256, "seq_len": 128, "mlp": "swiglu", "norm": "rmsnorm", "position": "rotary",
 "bias": false, "tie_embeddings": false}
JSON
    ;;
  gpu)
    mpi=()
    backend=(--backend cuda)
    # Ops timed by CUDA events: CUPTI credits some cuBLAS GEMMs to other ops (H100, 2026-11-27).
    run_opts=(--no-cupti)
    base_cluster=(--cluster "${CLUSTER:-dgx-h100}")  # calibrate measures over this preset's figures
    precision=bf16
    gpt="$out/gpt.json"
    cat > "$gpt" <<'JSON'
{"kind": "model", "version": 1, "name": "gpt-12x1024", "layers": 12, "hidden": 1024, "heads": 16,
 "ffn_hidden": 4096, "vocab": 50304, "seq_len": 1024}
JSON
    cat > "$out/llama.json" <<'JSON'
{"kind": "model", "version": 1, "name": "llama-12x1024", "layers": 12, "hidden": 1024, "heads": 16, "kv_heads": 4,
 "ffn_hidden": 2816, "vocab": 32000, "seq_len": 1024, "mlp": "swiglu", "norm": "rmsnorm", "position": "rotary",
 "bias": false, "tie_embeddings": false}
JSON
    ;;
  *) echo "fidelity.sh: size must be tiny, small or gpu, not '$size'" >&2; exit 2 ;;
esac

gpt_layouts=(
  "dp=2,micro_batch=2"
  "tp=2,micro_batch=2"
  "pp=2,micro_batch=1,schedule=1f1b"
  "pp=2,micro_batch=1,schedule=interleaved,virtual_stages=2"
  "dp=2,zero=1,micro_batch=2"
  "dp=2,zero=2,micro_batch=2"
  "dp=2,zero=3,micro_batch=2"
  "dp=2,micro_batch=2,recompute=full"
  "tp=2,micro_batch=2,recompute=selective"
  "tp=2,micro_batch=2,sequence_parallel=1"
)
llama_layouts=(
  "dp=2,micro_batch=2"
  "tp=2,micro_batch=2,sequence_parallel=1"
  "pp=2,micro_batch=1,schedule=1f1b"
  "dp=2,zero=3,micro_batch=2,recompute=full"
)
if [ "$size" = gpu ]; then  # one GPU: the layouts one rank has
  gpt_layouts=(
    "micro_batch=2"
    "micro_batch=1"
    "micro_batch=4"
    "micro_batch=8"
    "micro_batch=2,recompute=selective"
    "micro_batch=2,recompute=full"
    "micro_batch=8,recompute=full"
  )
  llama_layouts=(
    "micro_batch=2"
    "micro_batch=1"
    "micro_batch=4,recompute=full"
    "micro_batch=4,recompute=selective"
  )
fi

results="$out/results.tsv"
: > "$results"
for model in gpt llama; do
  m="$gpt"
  [ "$model" = llama ] && m="$out/llama.json"
  echo "== calibrate (2 ranks, quick) for $model" >&2
  "${mpi[@]}" "$bin" calibrate "${backend[@]}" "${base_cluster[@]}" --quick --no-progress --model "$m" -o "$out/db-$model.json" \
    --cluster-out "$out/cluster.json" >&2
  if [ "$model" = gpt ]; then layouts=("${gpt_layouts[@]}"); else layouts=("${llama_layouts[@]}"); fi
  i=0
  for l in "${layouts[@]}"; do
    pred=$("$bin" simulate --model "$m" --cluster "$out/cluster.json" --costdb "$out/db-$model.json" --plan "$l" \
             --global-batch 8 --precision $precision --json)
    "${mpi[@]}" "$bin" run "${backend[@]}" --model "$m" --cluster "$out/cluster.json" --plan "$l" --global-batch 8 \
      --precision $precision --steps "$steps" --json --trace "$out/trace-$model-$i.json" "${run_opts[@]}" > "$out/run-$model-$i.json"
    printf '%s\t%s\t%s\t%s\t%s\n' "$model" "$l" "$(echo "$pred" | tr -d '\n')" "$out/run-$model-$i.json" \
      "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["model"])' "$out/run-$model-$i.json")" >> "$results"
    i=$((i + 1))
  done
  # One refine pass on layout 0's trace predicts every other layout; layout 0 itself is predicted
  # from a pass on layout 1's trace.
  "$bin" refine --model "$m" --cluster "$out/cluster.json" --plan "${layouts[0]}" --global-batch 8 \
    --trace "$out/trace-$model-0.json" --costdb "$out/db-$model.json" -o "$out/db-$model-refined0.json" >&2
  "$bin" refine --model "$m" --cluster "$out/cluster.json" --plan "${layouts[1]}" --global-batch 8 \
    --trace "$out/trace-$model-1.json" --costdb "$out/db-$model.json" -o "$out/db-$model-refined1.json" >&2
  i=0
  for l in "${layouts[@]}"; do
    db="$out/db-$model-refined0.json"
    [ "$i" = 0 ] && db="$out/db-$model-refined1.json"
    after=$("$bin" simulate --model "$m" --cluster "$out/cluster.json" --costdb "$db" --plan "$l" --global-batch 8 \
              --precision $precision --json)
    echo "$after" | tr -d '\n' > "$out/after-$model-$i.json"
    i=$((i + 1))
  done
done

python3 - "$out" <<'PY'
import json, statistics, sys, os, collections
out = sys.argv[1]
rows, idx = [], collections.Counter()
for line in open(os.path.join(out, "results.tsv")):
    model, layout, pred, run, name = line.rstrip("\n").split("\t")
    i = idx[model]; idx[model] += 1
    p = json.loads(pred)["step_time_s"]
    r = json.load(open(run))
    steps, meas = r["step_times_s"][1:], r["step_time_s"]  # run's step time: median after the first step
    after = json.load(open(os.path.join(out, f"after-{model}-{i}.json")))["step_time_s"]
    rows.append(dict(model=name, layout=layout, predicted_s=p, measured_s=meas, measured_min_s=min(steps),
                     error=(p - meas) / meas, predicted_after_s=after, error_after=(after - meas) / meas))
print("| model | layout | predicted ms | measured ms (median) | error | after refine ms | error | measured min ms | error vs min |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
for r in rows:
    r["error_vs_min"] = (r["predicted_s"] - r["measured_min_s"]) / r["measured_min_s"]
    print(f"| {r['model']} | {r['layout']} | {r['predicted_s']*1e3:.2f} | {r['measured_s']*1e3:.2f} | "
          f"{r['error']*100:+.1f}% | {r['predicted_after_s']*1e3:.2f} | {r['error_after']*100:+.1f}% | "
          f"{r['measured_min_s']*1e3:.2f} | {r['error_vs_min']*100:+.1f}% |")
within = lambda k, t: sum(abs(r[k]) <= t for r in rows)
print(f"\nwithin 10% from calibration alone: {within('error', 0.10)}/{len(rows)}; "
      f"within 5% after one refine pass: {within('error_after', 0.05)}/{len(rows)}")
print(f"within 10% of the fastest measured step: {within('error_vs_min', 0.10)}/{len(rows)}")
print(f"load average while measuring: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
print(f"median |error|: calibration {statistics.median(abs(r['error']) for r in rows)*100:.1f}%, "
      f"after refine {statistics.median(abs(r['error_after']) for r in rows)*100:.1f}%")
json.dump({"rows": rows, "load_average": os.getloadavg()}, open(os.path.join(out, "fidelity.json"), "w"), indent=1)
PY
