#!/bin/sh
# GPT-1.3B, seq 2048, bf16, one GPU: parallax's CUDA backend and PyTorch in one run, one JSON line
# each (tokens/s, MFU, peak memory). Usage: bench/gpu/side_by_side.sh BUILD_DIR [MICRO_BATCH]
set -e
build="${1:-build}"
mb="${2:-2}"
here=$(dirname "$0")
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
date -u +%Y-%m-%dT%H:%MZ
"$build/bench/bench_cuda" --benchmark_filter="Gpt13bTraining/${mb}/0" | grep '^{'
python3 "$here/torch_gpt13b.py" --micro-batch "$mb"
